"""What is scanned: every text of a tool definition a model may read, and what a tool is compared
with (the tool names of other servers)."""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any

from index.catalog.records import ToolRecord


@dataclass(frozen=True)
class ScanContext:
    """What a tool is compared with: tool names of *other* servers (shadowing, homoglyphs)."""

    other_tools: Mapping[str, str] = field(default_factory=dict)  # tool name -> a server that has it
    own_tools: frozenset[str] = frozenset()

    @classmethod
    def from_records(cls, records: Iterable[ToolRecord], server: str) -> ScanContext:
        other: dict[str, str] = {}
        own: set[str] = set()
        for record in records:
            if record.server == server:
                own.add(record.name)
            else:
                other.setdefault(record.name, record.server)
        return cls(other_tools=other, own_tools=frozenset(own))

    @cached_property
    def own_by_case(self) -> dict[str, list[str]]:
        """The server's own tool names by their case-folded form (case twins share one)."""
        folded: dict[str, list[str]] = {}
        for name in sorted(self.own_tools):
            folded.setdefault(name.casefold(), []).append(name)
        return folded

    @cached_property
    def digest(self) -> str:
        """Identifies what a scan compares against (part of a remembered scan result's key)."""
        shape = [sorted(self.own_tools), sorted(self.other_tools.items())]
        return hashlib.sha256(json.dumps(shape, ensure_ascii=False).encode()).hexdigest()[:16]


#: Schema keywords whose value is a name or a reference, not scanned as prose when it looks like one
#: -- but a model reads them all the same, so a value with spaces in it (prose) is scanned, and
#: one without is read as the words of a name (:data:`AS_NAME`).
_KEYWORD_VALUES = frozenset({"$schema", "$id", "$ref", "type", "format"})
_TOKEN = re.compile(r"[\x21-\x7e]{1,200}")  # printable ASCII without spaces
#: Marks an identifier of a schema (a key, a ``format`` or ``$ref`` value): only read as words, for
#: what quarantines (an ordinary identifier is no prose, and the weaker rules would fire on it).
AS_NAME = "(a name)"


def _schema_texts(value: Any, path: str) -> Iterator[tuple[str, str]]:
    if isinstance(value, str):
        yield path, value
    elif isinstance(value, Mapping):
        for key, inner in value.items():
            key = str(key)
            if key in _KEYWORD_VALUES and isinstance(inner, str) and _TOKEN.fullmatch(inner):
                yield f"{path}.{key} {AS_NAME}", inner  # "format": "IgnoreAllPreviousInstructions"
                continue
            if key == "properties" and isinstance(inner, Mapping):
                for name, prop in inner.items():
                    yield f"{path}.properties", str(name)
                    yield from _schema_texts(prop, f"{path}.properties.{name}")
                continue
            if not _TOKEN.fullmatch(key):  # a key that is prose ($defs names, unknown keywords)
                yield f"{path} (a key)", key
            else:  # a $defs name or an x- keyword a model reads as words: "ignore_all_previous_instructions"
                yield f"{path} {AS_NAME}", key
            yield from _schema_texts(inner, f"{path}.{key}")  # additionalProperties, $defs: schemas too
    elif isinstance(value, list):
        for position, inner in enumerate(value):
            yield from _schema_texts(inner, f"{path}[{position}]")


def tool_texts(record: ToolRecord) -> Iterator[tuple[str, str]]:
    """(field, text) of everything a model may read in ``record``."""
    yield "name", record.name
    if record.title:
        yield "title", record.title
    yield "description", record.description
    yield from _schema_texts(record.input_schema, "inputSchema")
    if record.output_schema:
        yield from _schema_texts(record.output_schema, "outputSchema")
    if record.annotations and isinstance(record.annotations.get("title"), str):
        yield "annotations.title", record.annotations["title"]
