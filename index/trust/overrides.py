"""Correcting what a server claims about its tools: annotation overrides and ``confirm`` lists.

A servers-file entry may carry::

    "annotations": {"excel_read_sheet": {"readOnlyHint": true, "destructiveHint": false},
                    "*": {"openWorldHint": false}},
    "confirm": ["excel_write_to_sheet", "delete_*"]

Keys of ``annotations`` are tool names or globs (``*`` for every tool of the server); an exact
name wins over a glob, and a glob's values apply to every key it does not set. ``confirm``
lists tools (names or globs) that always need the user's confirmation, whatever they declare.
The child's own annotations are kept as its pinned definition (``index.trust.definition``);
overrides apply on top of them wherever a policy decides or a model reads them (``route``).
"""

from __future__ import annotations

import fnmatch
from collections.abc import Mapping
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, StrictBool, model_validator

#: The MCP ``ToolAnnotations`` hints an override may set.
HINTS = ("readOnlyHint", "destructiveHint", "idempotentHint", "openWorldHint")


class AnnotationOverride(BaseModel):
    """Hints to force for one tool (or a glob of tools); unset hints keep the child's value."""

    model_config = ConfigDict(extra="forbid", populate_by_name=True)

    read_only_hint: StrictBool | None = Field(default=None, alias="readOnlyHint")
    destructive_hint: StrictBool | None = Field(default=None, alias="destructiveHint")
    idempotent_hint: StrictBool | None = Field(default=None, alias="idempotentHint")
    open_world_hint: StrictBool | None = Field(default=None, alias="openWorldHint")

    @model_validator(mode="before")
    @classmethod
    def _known_hints(cls, value: Any) -> Any:
        if not isinstance(value, Mapping):
            raise ValueError(f"expected an object of hints such as {{\"readOnlyHint\": true}}, got {type(value).__name__}")
        unknown = [str(key) for key in value if key not in HINTS]
        if unknown:
            raise ValueError(f"unknown hint(s) {', '.join(map(repr, unknown))}; use {', '.join(HINTS)} (true or false)")
        return value

    def hints(self) -> dict[str, bool]:
        return {key: value for key, value in self.model_dump(by_alias=True).items() if value is not None}


def override_for(overrides: Mapping[str, AnnotationOverride], tool: str) -> dict[str, bool]:
    """The forced hints for ``tool``: glob entries first (in file order), the exact name last (it wins)."""
    hints: dict[str, bool] = {}
    for pattern, override in overrides.items():
        if pattern != tool and any(c in pattern for c in "*?[") and fnmatch.fnmatchcase(tool, pattern):
            hints.update(override.hints())
    exact = overrides.get(tool)
    if exact is not None:
        hints.update(exact.hints())
    return hints


def effective_annotations(
    annotations: Mapping[str, Any] | None, overrides: Mapping[str, AnnotationOverride], tool: str
) -> dict[str, Any] | None:
    """The child's annotations with the servers file's overrides applied (``None`` when both are empty)."""
    forced = override_for(overrides, tool)
    if not forced:
        return dict(annotations) if annotations else None
    merged = dict(annotations or {})
    for key, value in forced.items():
        merged.pop("".join(f"_{c.lower()}" if c.isupper() else c for c in key), None)  # a snake_case twin
        merged[key] = value
    return merged


def needs_confirmation(confirm: list[str], tool: str) -> bool:
    return any(fnmatch.fnmatchcase(tool, pattern) for pattern in confirm)


def unknown_override_names(overrides: Mapping[str, AnnotationOverride], tools: list[str]) -> list[str]:
    """Exact (non-glob) override keys that name no tool of the server: probably a typo."""
    known = set(tools)
    return [name for name in overrides if not any(c in name for c in "*?[") and name not in known]
