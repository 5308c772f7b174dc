"""A tool's definition as pinned: what is hashed, approved, and compared when a child lists tools.

The definition is everything a model reads or a policy acts on, as the *child* states it:
name, title, description, input and output schema, annotations. Its SHA-256 over canonical
JSON is the pin; people name one definition by the pin's first :data:`SHORT_HASH` hex digits
(``python -m index approve notes/read_notes@<short hash>``). Prompts and resource templates are
pinned the same way (:func:`item_definition`: what a host lists of them). Annotation overrides
from the servers file are not part of it: they are the user's own statement, applied on top
when a policy decides (``index.trust.overrides``), while a child that changes its own
annotations -- even ones an override masks -- changes its pin. Two renderings of a change
exist: :func:`change_summary` names *what* changed without repeating the new text (it goes to
the model, and the new text may be the attack), :func:`change_diff` shows the full difference
to a person reviewing it (``python -m index trust``).
"""

from __future__ import annotations

import difflib
import hashlib
import json
import re
from collections.abc import Mapping
from typing import Any

from index.catalog.records import ToolRecord

#: The keys of a definition, in the order changes are reported (a prompt's or resource
#: template's own keys last).
FIELDS = (
    "name", "title", "description", "inputSchema", "outputSchema", "annotations", "kind", "arguments", "uri", "mimeType"
)  # fmt: skip
#: Hex digits of a pin that name a definition to people: 64 bits, so a child cannot craft another
#: definition that shows the same short hash (a second preimage of 64 bits is out of reach).
SHORT_HASH = 16
#: Record kinds pinned besides tools. Concrete resources are not: their lists are data (files,
#: rows) that change as the data does, and nothing in them runs or takes arguments.
PINNED_ITEM_KINDS = ("prompt", "resource_template")

_SAFE_NAME = re.compile(r"[^A-Za-z0-9_.:/ -]")


def tool_definition(record: ToolRecord) -> dict[str, Any]:
    """The pinned form of ``record``."""
    return {
        "name": record.name,
        "title": record.title,
        "description": record.description,
        "inputSchema": record.input_schema,
        "outputSchema": record.output_schema,
        "annotations": record.annotations or {},
    }


def item_definition(record: ToolRecord) -> dict[str, Any]:
    """The pinned form of a prompt or resource template: everything a host lists of it.

    A template's variables come from its URI, so its ``input_schema`` adds nothing.
    """
    definition: dict[str, Any] = {
        "kind": record.kind,
        "name": record.name,
        "title": record.title,
        "description": record.description,
        "annotations": record.annotations or {},
    }
    if record.kind == "prompt":
        definition["arguments"] = record.input_schema
    else:
        definition.update(uri=record.uri, mimeType=record.mime_type)
    return definition


def definition_record(
    kind: str, server: str, definition: Mapping[str, Any], *, server_description: str = "", category: str = ""
) -> ToolRecord:
    """The record a pinned definition describes (the inverse of :func:`tool_definition` and
    :func:`item_definition`: pinning it again gives the same hash): what an approval puts in the index."""
    common: dict[str, Any] = {
        "server": server,
        "name": str(definition.get("name") or ""),
        "title": definition.get("title"),
        "description": str(definition.get("description") or ""),
        "annotations": dict(definition.get("annotations") or {}) or None,
        "server_description": server_description,
        "category": category,
    }
    if kind == "tool":
        output = definition.get("outputSchema")
        return ToolRecord(
            input_schema=dict(definition.get("inputSchema") or {}), output_schema=dict(output) if output else None, **common
        )
    if kind == "prompt":
        return ToolRecord(kind="prompt", input_schema=dict(definition.get("arguments") or {}), **common)
    from index.catalog.kinds import template_input_schema  # the MCP SDK's URI templates: only loaded here

    uri = str(definition.get("uri") or "")
    return ToolRecord(
        kind="resource_template",
        uri=uri,
        mime_type=definition.get("mimeType"),
        input_schema=template_input_schema(uri),
        **common,
    )


def definition_hash(definition: Mapping[str, Any]) -> str:
    canonical = json.dumps(definition, sort_keys=True, ensure_ascii=False, separators=(",", ":"), default=str)
    return hashlib.sha256(canonical.encode()).hexdigest()


def short_hash(digest: str) -> str:
    return digest[:SHORT_HASH]


def safe_label(value: Any, limit: int = 40) -> str:
    """A child-chosen name made harmless to show a model: visible ASCII only, bounded."""
    text = _SAFE_NAME.sub("?", str(value))
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _properties(schema: Any) -> dict[str, Any]:
    if isinstance(schema, Mapping) and isinstance(schema.get("properties"), Mapping):
        return dict(schema["properties"])
    return {}


def _required(schema: Any) -> set[str]:
    if isinstance(schema, Mapping) and isinstance(schema.get("required"), list):
        return {str(name) for name in schema["required"]}
    return set()


def _names(names: set[str]) -> str:
    shown = sorted(safe_label(name) for name in names)
    listed = ", ".join(shown[:8]) + (f" and {len(shown) - 8} more" if len(shown) > 8 else "")
    return listed


def _schema_summary(label: str, old: Any, new: Any) -> list[str]:
    if old == new:
        return []
    before, after = _properties(old), _properties(new)
    parts = []
    if added := set(after) - set(before):
        parts.append(f"parameter(s) added: {_names(added)}")
    if removed := set(before) - set(after):
        parts.append(f"parameter(s) removed: {_names(removed)}")
    if changed := {name for name in set(before) & set(after) if before[name] != after[name]}:
        parts.append(f"parameter(s) changed: {_names(changed)}")
    if _required(old) != _required(new):
        parts.append("required parameters changed")
    if not parts:
        parts.append("changed")
    return [f"{label}: {'; '.join(parts)}"]


def _value(value: Any) -> str:
    if value is None:
        return "(unset)"
    if isinstance(value, bool):
        return "true" if value else "false"
    return "(text)"


def _annotation_summary(label: str, old: Any, new: Any) -> list[str]:
    old = old if isinstance(old, Mapping) else {}
    new = new if isinstance(new, Mapping) else {}
    changes = [
        f"{safe_label(key)} {_value(old.get(key))} -> {_value(new.get(key))}"
        for key in sorted(set(old) | set(new))
        if old.get(key) != new.get(key)
    ]
    return [f"{label}: {', '.join(changes)}"] if changes else []


def change_summary(old: Mapping[str, Any], new: Mapping[str, Any]) -> list[str]:
    """What changed, one phrase per field, never quoting the new text (safe to show a model)."""
    summary: list[str] = []
    if old.get("name") != new.get("name"):
        summary.append("name changed")
    if old.get("mimeType") != new.get("mimeType"):
        summary.append("MIME type changed")
    if old.get("title") != new.get("title"):
        summary.append("title changed")
    if old.get("description") != new.get("description"):
        before, after = str(old.get("description") or ""), str(new.get("description") or "")
        summary.append(f"description changed ({len(before):,} -> {len(after):,} characters)")
    summary += _schema_summary("input schema", old.get("inputSchema"), new.get("inputSchema"))
    summary += _schema_summary("output schema", old.get("outputSchema"), new.get("outputSchema"))
    summary += _schema_summary("arguments", old.get("arguments"), new.get("arguments"))
    summary += _annotation_summary("annotations", old.get("annotations"), new.get("annotations"))
    return summary


def _lines(value: Any) -> list[str]:
    if isinstance(value, str):
        return value.splitlines() or [""]
    return json.dumps(value, indent=2, sort_keys=True, ensure_ascii=True, default=str).splitlines()


def change_diff(old: Mapping[str, Any] | None, new: Mapping[str, Any]) -> list[str]:
    """A unified diff per changed field, for people (``old`` None: everything is new).

    Non-ASCII text is shown escaped in JSON fields and invisible characters are made visible
    by the caller's renderer (see :func:`index.trust.scan.visible`).
    """
    lines: list[str] = []
    for field in FIELDS:
        if field not in new and (old is None or field not in old):
            continue  # a tool has no URI, a prompt no output schema
        before = old.get(field) if old is not None else None
        after = new.get(field)
        if old is not None and before == after:
            continue
        diff = difflib.unified_diff(
            _lines(before) if old is not None else [],
            _lines(after),
            fromfile=f"approved {field}",
            tofile=f"current {field}",
            lineterm="",
            n=2,
        )
        lines.extend(diff)
    return lines
