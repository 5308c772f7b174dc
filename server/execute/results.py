"""Tool results on their way back to the host: the size caps, error results, log form.

A child's result passes through unchanged -- content blocks, structured content, ``isError``,
``_meta`` -- unless it is over one of the caps (:class:`ResultLimits`):

- *text*: the characters of text blocks and embedded text resources, shared in order: the block
  that crosses the cap is cut, later ones are dropped;
- *binary*: the base64 data of images, audio and embedded blob resources, shared in order: a
  block that does not fit is replaced, in place, by a text block saying what it was;
- *blocks*: content blocks beyond this many are dropped, and counted by kind;
- *structured content*: its JSON is shortened where it is long -- long strings cut, long arrays
  and objects keep their first entries -- so it stays valid JSON with every key the tool's
  output schema requires in small objects; only when that cannot fit is it dropped;
- *a block's other fields* (:data:`FIELD_CHARS`): a name, title or description is cut, a block's
  ``_meta``, annotations or icons are dropped, and a block whose URI or MIME type is that long is
  replaced by a text block saying what it was (no host can use it);
- *the result's* ``_meta``: dropped when its JSON is over the text cap (or :data:`FIELD_CHARS`,
  when that is more).

Whatever was cut is said in a final text block (for the model) and in the result's ``_meta``
under :data:`CUT_META_KEY` (for programs), so a host never mistakes a cut result for the whole.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from mcp_types import (
    AudioContent,
    BlobResourceContents,
    CallToolResult,
    EmbeddedResource,
    ImageContent,
    TextContent,
    TextResourceContents,
)

from pydantic import BaseModel
from pydantic_core import to_json

from index.json_text import shown_os_text
from server.trajectory.records import ExecuteResult

#: ``_meta`` key of a result the copilot cut: what was cut, machine-readable.
CUT_META_KEY = "mcp-copilot/cut"
#: Strings shorter than this are never cut (names, ids, dates and enum values stay intact).
_MIN_CUT_STRING = 64
_ELLIPSIS = "…"
#: Characters a content block's field besides its payload may take (a name, a description, a URI,
#: its ``_meta``): far beyond any honest one, and a cap the text cap does not see otherwise.
FIELD_CHARS = 8_000
#: Fields cut where they are long (the rest of a block still works).
_CUT_FIELDS = ("name", "title", "description")
#: Fields without which a block means nothing: one that long makes the block unusable.
_VITAL_FIELDS = ("uri", "mime_type")
_VITAL_LABELS = {"uri": "URI", "mime_type": "MIME type"}
#: Fields dropped where they are long (only hosts read them).
_DROPPED_FIELDS = ("meta", "annotations", "icons")


@dataclass(frozen=True)
class ResultLimits:
    """The caps on one tool result (``COPILOT_MAX_RESULT_CHARS`` / ``_BLOCKS`` / ``_BYTES``)."""

    chars: int = 100_000
    blocks: int = 100
    binary_bytes: int = 5_000_000


def utf8_text(text: str) -> str:
    """``text`` as UTF-8 can carry it: a lone surrogate (an OS path or argument Python read under a
    locale that is not UTF-8, a chained error quoting one) made the whole answer JSON that MCP
    hosts reject ("lone leading surrogate in hex escape"), so the host saw a protocol error instead
    of the message. Escaped bytes of UTF-8 text become that text; any other lone surrogate a
    ``\\udcNN`` escape. Text that encodes (nearly all) is returned as it is, after one encode."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return shown_os_text(text)
    return text


def text_result(text: str, *, is_error: bool = False, structured: dict[str, Any] | None = None) -> CallToolResult:
    """A result of one text block: every ``route``/``execute`` answer the copilot writes itself (its
    rendered search results and its error messages) is made here, so its text is :func:`utf8_text`."""
    return CallToolResult(
        content=[TextContent(type="text", text=utf8_text(text))], structured_content=structured, is_error=is_error
    )


def _block_text(block: Any) -> str | None:
    if isinstance(block, TextContent):
        return block.text
    if isinstance(block, EmbeddedResource) and isinstance(block.resource, TextResourceContents):
        return block.resource.text
    return None


def _block_binary(block: Any) -> int:
    """Bytes of base64 data a block carries (0 for text and links)."""
    if isinstance(block, ImageContent | AudioContent):
        return len(block.data)
    if isinstance(block, EmbeddedResource) and isinstance(block.resource, BlobResourceContents):
        return len(block.resource.blob)
    return 0


def _with_text(block: Any, text: str) -> Any:
    if isinstance(block, TextContent):
        return block.model_copy(update={"text": text})
    resource = block.resource.model_copy(update={"text": text})
    return block.model_copy(update={"resource": resource})


def _json_chars(value: Any) -> int:
    return len(to_json(value, by_alias=True)) if value is not None else 0


def _field_chars(value: Any) -> int:
    return len(value) if isinstance(value, str) else _json_chars(value)


def _parts(block: Any) -> list[BaseModel]:
    """The block and its embedded resource: the models whose own fields the field cap reads."""
    resource = getattr(block, "resource", None)
    return [block, resource] if isinstance(resource, BaseModel) else [block]


def _over_field_cap(block: Any) -> bool:
    fields = _CUT_FIELDS + _VITAL_FIELDS + _DROPPED_FIELDS
    return any(_field_chars(getattr(part, name, None)) > FIELD_CHARS for part in _parts(block) for name in fields)


def _kind(block: Any) -> str:
    if isinstance(block, EmbeddedResource):
        return "embedded resource"
    return str(getattr(block, "type", "block")).replace("_", " ")


def _size(value: Any) -> int:
    return len(json.dumps(value, ensure_ascii=False, separators=(",", ":"), default=str))


def _mb(size: int) -> str:
    return f"{size / 1_000_000:.1f} MB" if size >= 100_000 else f"{size:,} bytes"


@dataclass(frozen=True)
class Wording:
    """How the notes name what was cut and say how to get the rest (a tool result by default)."""

    noun: str = "result"
    fewer: str = "Ask the tool for fewer items if you need the rest."
    less: str = "If you need the rest, call the tool again asking for less (a filter, a page, a smaller range)."
    smaller: str = "Ask the tool for a smaller or lower-resolution version, or for a file path."


@dataclass
class _Cuts:
    """What a cap removed, for the note and ``_meta``."""

    wording: Wording = field(default_factory=Wording)
    notes: list[str] = field(default_factory=list)
    meta: dict[str, Any] = field(default_factory=dict)


def cap_result(result: CallToolResult, limits: ResultLimits | int, wording: Wording = Wording()) -> CallToolResult:
    """``result`` within ``limits`` (a bare ``int`` caps text characters only), with notes on what was cut
    (in ``wording``: a prompt or resource passes through here as content blocks too)."""
    if isinstance(limits, int):
        limits = ResultLimits(chars=limits, blocks=1 << 30, binary_bytes=1 << 62)
    content = result.content
    text_total = 0
    binary_total = 0
    for block in content:
        text = _block_text(block)
        if text is not None:
            text_total += len(text)
        else:
            binary_total += _block_binary(block)
    structured = result.structured_content
    structured_size = _size(structured) if structured is not None else 0
    meta_size = _json_chars(result.meta)
    meta_cap = max(limits.chars, FIELD_CHARS)
    fields_over = any(map(_over_field_cap, content[: limits.blocks]))
    if (
        text_total <= limits.chars
        and binary_total <= limits.binary_bytes
        and len(content) <= limits.blocks
        and structured_size <= limits.chars
        and meta_size <= meta_cap
        and not fields_over
    ):
        return result

    cuts = _Cuts(wording)
    blocks = list(content)
    if len(blocks) > limits.blocks:
        blocks = _cap_blocks(blocks, limits.blocks, cuts)
    if fields_over:
        blocks = _cap_fields(blocks, cuts)
    # Text before binary: the notes that stand in for dropped binary blocks are the copilot's own
    # text, never counted against (or cut by) the text cap.
    if text_total > limits.chars:
        blocks = _cap_text(blocks, limits.chars, cuts)
    # Blocks the block cap dropped are no longer counted: what they carried was reported there.
    if binary_total > limits.binary_bytes and sum(map(_block_binary, blocks)) > limits.binary_bytes:
        blocks = _cap_binary(blocks, limits.binary_bytes, cuts)
    if structured_size > limits.chars:
        structured = _cap_structured(structured, structured_size, limits.chars, cuts)
    meta = dict(result.meta or {})
    if meta_size > meta_cap:
        cuts.notes.append(
            f"[copilot: the {cuts.wording.noun}'s _meta ({meta_size:,} characters of JSON, over the "
            f"{meta_cap:,}-character cap) was dropped.]"
        )
        cuts.meta["meta"] = {"total_chars": meta_size, "dropped": True}
        meta = {}
    blocks.append(TextContent(type="text", text="\n".join(cuts.notes)))
    meta[CUT_META_KEY] = cuts.meta
    return result.model_copy(update={"content": blocks, "structured_content": structured, "meta": meta})


def _cap_blocks(blocks: list[Any], limit: int, cuts: _Cuts) -> list[Any]:
    dropped: dict[str, int] = {}
    for block in blocks[limit:]:
        dropped[_kind(block)] = dropped.get(_kind(block), 0) + 1
    kinds = ", ".join(f"{count:,} {kind}" for kind, count in dropped.items())
    cuts.notes.append(
        f"[copilot: the {cuts.wording.noun} had {len(blocks):,} content blocks; only the first {limit:,} are shown "
        f"({kinds} dropped; COPILOT_MAX_RESULT_BLOCKS). {cuts.wording.fewer}]"
    )
    cuts.meta["blocks"] = {"total": len(blocks), "kept": limit, "dropped": dropped}
    return blocks[:limit]


def _cap_fields(blocks: list[Any], cuts: _Cuts) -> list[Any]:
    """Blocks whose fields besides their payload fit :data:`FIELD_CHARS` each (see the module docstring)."""
    kept: list[Any] = []
    found: list[str] = []
    for index, block in enumerate(blocks):
        if not _over_field_cap(block):
            kept.append(block)
            continue
        vital = [
            f"{_VITAL_LABELS[name]} of {_field_chars(getattr(part, name, None)):,} characters"
            for part in _parts(block)
            for name in _VITAL_FIELDS
            if _field_chars(getattr(part, name, None)) > FIELD_CHARS
        ]
        if vital:
            kind = _kind(block)
            article = "an" if kind[0] in "aeiou" else "a"
            found.append(f"block {index + 1} ({kind}) replaced: its {', '.join(vital)}")
            kept.append(TextContent(type="text", text=f"[copilot: {article} {kind} with a {vital[0]} dropped here]"))
            continue
        parts = [_fit_fields(part, f"block {index + 1}", found) for part in _parts(block)]
        if len(parts) == 2:
            parts[0] = parts[0].model_copy(update={"resource": parts[1]})
        kept.append(parts[0])
    cuts.notes.append(
        f"[copilot: fields of content blocks over {FIELD_CHARS:,} characters were cut: {'; '.join(found)}.]"
    )
    cuts.meta["fields"] = {"max_chars": FIELD_CHARS, "cut": found}
    return kept


def _fit_fields(part: BaseModel, where: str, found: list[str]) -> BaseModel:
    update: dict[str, Any] = {}
    for name in _CUT_FIELDS + _DROPPED_FIELDS:
        value = getattr(part, name, None)
        size = _field_chars(value)
        if size <= FIELD_CHARS:
            continue
        label = "_meta" if name == "meta" else name
        if name in _CUT_FIELDS:
            update[name] = value[:FIELD_CHARS] + _ELLIPSIS
            found.append(f"{where} {label} cut to {FIELD_CHARS:,} of {size:,} characters")
        else:
            update[name] = None
            found.append(f"{where} {label} ({size:,} characters) dropped")
    return part.model_copy(update=update)


def _cap_binary(blocks: list[Any], limit: int, cuts: _Cuts) -> list[Any]:
    budget = limit
    kept: list[Any] = []
    dropped: list[dict[str, Any]] = []
    for block in blocks:
        size = _block_binary(block)
        if size == 0 or size <= budget:
            kept.append(block)
            budget -= size
            continue
        mime = getattr(block, "mime_type", None) or getattr(getattr(block, "resource", None), "mime_type", None)
        what = f"{_kind(block)}{f' ({mime})' if mime else ''}"
        dropped.append({"kind": _kind(block), "mime_type": mime, "bytes": size})
        kept.append(TextContent(type="text", text=f"[copilot: {what} of {_mb(size)} dropped here: over the cap]"))
    total = sum(item["bytes"] for item in dropped)
    cuts.notes.append(
        f"[copilot: {len(dropped)} binary block(s) ({_mb(total)} of base64 data) dropped: a {cuts.wording.noun} may "
        f"carry at most {_mb(limit)} of images, audio and binary resources "
        f"(COPILOT_MAX_RESULT_BYTES). {cuts.wording.smaller}]"
    )
    cuts.meta["binary"] = {"dropped": dropped}
    return kept


def _cap_text(blocks: list[Any], max_chars: int, cuts: _Cuts) -> list[Any]:
    total = sum(len(text) for text in map(_block_text, blocks) if text is not None)
    if total <= max_chars:
        return blocks
    budget = max_chars
    kept: list[Any] = []
    dropped_blocks = 0
    for block in blocks:
        text = _block_text(block)
        if text is None:
            kept.append(block)
        elif budget <= 0:
            dropped_blocks += 1
        elif len(text) <= budget:
            kept.append(block)
            budget -= len(text)
        else:
            kept.append(_with_text(block, text[:budget]))
            budget = 0
    cut = total - max_chars
    note = f"[copilot: {cuts.wording.noun} cut to the first {max_chars:,} of {total:,} characters of text ({cut:,} characters cut"
    if dropped_blocks:
        note += f", {dropped_blocks} later text block(s) dropped"
    note += f"). {cuts.wording.less}]"
    cuts.notes.append(note)
    cuts.meta["text"] = {"total_chars": total, "kept_chars": max_chars, "dropped_blocks": dropped_blocks}
    return kept


# -- structured content ---------------------------------------------------------------------------


def _cap_structured(value: Any, size: int, budget: int, cuts: _Cuts) -> Any:
    found: list[str] = []
    shrunk = _fit(value, budget, "$", found)
    new_size = _size(shrunk)
    if new_size > budget:
        cuts.notes.append(
            f"[copilot: structured content of {size:,} characters dropped (over the {budget:,}-character cap "
            "even after shortening it); the text above carries the result.]"
        )
        cuts.meta["structured"] = {"total_chars": size, "dropped": True}
        return None
    listed = "; ".join(found[:10]) + (f"; and {len(found) - 10} more" if len(found) > 10 else "")
    cuts.notes.append(
        f"[copilot: structured content shortened from {size:,} to {new_size:,} characters to fit the "
        f"{budget:,}-character cap; it is still valid JSON, only shortened: {listed}.]"
    )
    cuts.meta["structured"] = {"total_chars": size, "kept_chars": new_size, "cut": found}
    return shrunk


def _fit(value: Any, budget: int, path: str, found: list[str]) -> Any:
    """``value`` shortened until its JSON is at most ``budget`` characters (when it can be)."""
    size = _size(value)
    if size <= budget:
        return value
    if isinstance(value, str):
        return _fit_string(value, budget, path, found)
    if isinstance(value, list):
        return _fit_list(value, budget, path, found)
    if isinstance(value, dict):
        return _fit_dict(value, size, budget, path, found)
    return value  # a number, boolean or null cannot be shortened


def _fit_string(value: str, budget: int, path: str, found: list[str]) -> str:
    if len(value) < _MIN_CUT_STRING:
        return value
    keep = max(_MIN_CUT_STRING // 2, budget - 3)
    while keep > 0 and _size(value[:keep] + _ELLIPSIS) > budget and keep > _MIN_CUT_STRING // 2:
        keep = keep * 3 // 4  # escapes (quotes, control characters) make JSON longer than the text
    found.append(f"{path} cut to {keep:,} of {len(value):,} characters")
    return value[:keep] + _ELLIPSIS


def _fit_list(value: list[Any], budget: int, path: str, found: list[str]) -> list[Any]:
    kept: list[Any] = []
    used = 2  # []
    for index, item in enumerate(value):
        item_size = _size(item) + (1 if kept else 0)
        if used + item_size <= budget:
            kept.append(item)
            used += item_size
            continue
        room = budget - used - (1 if kept else 0)
        if room >= _MIN_CUT_STRING and isinstance(item, str | list | dict):
            kept.append(_fit(item, room, f"{path}[{index}]", found))
        break
    found.append(f"{path} kept {len(kept):,} of {len(value):,} items")
    return kept


def _shrinkable(item: Any) -> bool:
    if isinstance(item, str):
        return len(item) >= _MIN_CUT_STRING
    return isinstance(item, list | dict) and bool(item)


def _fit_dict(value: dict[str, Any], size: int, budget: int, path: str, found: list[str]) -> dict[str, Any]:
    """Long values share the room left by keys and short values, in proportion to their size."""
    sizes = {key: _size(item) for key, item in value.items()}
    overhead = 2 + sum(_size(key) + 1 for key in value) + max(len(value) - 1, 0)
    long_keys = [key for key, item in value.items() if _shrinkable(item)]
    room = budget - overhead - sum(size for key, size in sizes.items() if key not in long_keys)
    out = dict(value)
    total = sum(sizes[key] for key in long_keys)
    if room > 0 and total > 0:
        for key in long_keys:
            share = sizes[key] * room // total
            if sizes[key] > share:
                out[key] = _fit(value[key], max(2, share), f"{path}.{key}", found)
    if _size(out) > budget and len(out) > 1:
        # Only the number of keys is left to cut (a map of many small entries): keep the first ones.
        kept: dict[str, Any] = {}
        used = 2
        for key, item in out.items():
            entry = _size(key) + 1 + _size(item) + (1 if kept else 0)
            if used + entry > budget:
                break
            kept[key] = item
            used += entry
        found.append(f"{path} kept {len(kept):,} of {len(out):,} keys")
        out = kept
    return out


def to_log_result(result: CallToolResult) -> ExecuteResult:
    """The trajectory's form of a result (wire field names inside content blocks)."""
    return ExecuteResult(
        content=[block.model_dump(mode="json", by_alias=True, exclude_none=True) for block in result.content],
        structured_content=result.structured_content,
        is_error=bool(result.is_error),
    )
