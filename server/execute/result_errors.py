"""Why a child's ``tools/call`` result is not valid MCP, in words a model (or the server's author) can act on.

pydantic reports a content block of the wrong shape once per kind of block it could have been
(eleven errors for a block of ``type: "video"``, ending in links to its docs): the model heard
all of them. Here a block is described by what its ``type`` names: an unknown type is said as
such, a known one with what that kind of block lacks.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from pydantic import ValidationError

from server.bounded import shown_name

#: Problems named; the rest are counted.
SHOWN_PROBLEMS = 3


def describe_result_error(error: ValidationError) -> str:
    """``content[0]: unknown content type 'video' (MCP has 'text', 'image', …)``, or the first
    problems of another kind with where they are."""
    generic: list[str] = []
    unions: dict[str, _Union] = {}
    for item in error.errors():
        location = item["loc"]
        tag = next((i for i, part in enumerate(location) if _is_member(part)), None)
        if tag is None:
            generic.append(f"{_where(location)}: {_message(item)}".lstrip(": "))
            continue
        union = unions.setdefault(_where(location[:tag]), _Union())
        member, rest = str(location[tag]), location[tag + 1 :]
        union.members.setdefault(member, [])
        if tuple(rest) == ("type",) and item["type"] == "literal_error":
            union.wrong_type.add(member)
            union.types.append(str((item.get("ctx") or {}).get("expected", "")))
            union.got = item.get("input")
        else:
            union.members[member].append(f"{_where(rest)}: {_message(item)}")
    problems = [union.describe(where) for where, union in unions.items()] + generic
    more = len(problems) - SHOWN_PROBLEMS
    return "; ".join(problems[:SHOWN_PROBLEMS]) + (f" (and {more} more)" if more > 0 else "")


class _Union:
    """What pydantic said about one value that could be any of several kinds (a content block)."""

    def __init__(self) -> None:
        self.members: dict[str, list[str]] = {}
        self.wrong_type: set[str] = set()
        self.types: list[str] = []
        self.got: Any = None

    def describe(self, where: str) -> str:
        matching = [member for member in self.members if member not in self.wrong_type]
        if len(matching) == 1:
            return f"{where} ({matching[0]}): " + "; ".join(self.members[matching[0]][:SHOWN_PROBLEMS])
        if self.got is None and not self.types:
            return f"{where}: it has no 'type' (MCP content blocks say which kind they are)"
        if not matching:
            known = ", ".join(self.types)
            return f"{where}: unknown content type {_shown(self.got)} (MCP has {known})"
        return f"{where}: does not match any kind of block it could be ({', '.join(matching)})"


def _is_member(part: object) -> bool:
    """A union member's name in a location (pydantic tags them by class: ``TextContent``)."""
    return isinstance(part, str) and part[:1].isupper()


def _where(location: Sequence[int | str]) -> str:
    text = ""
    for part in location:
        if _is_member(part):
            continue  # a nested union's member: its fields read as the block's own
        text += f"[{part}]" if isinstance(part, int) else (f".{part}" if text else str(part))
    return text


def _message(item: Any) -> str:
    message = str(item["msg"]).replace("Input should", "should", 1)
    shown = item.get("input")
    if item["type"] != "missing" and isinstance(shown, str | int | float | bool):
        message += f" (got {_shown(shown)})"
    return message


def _shown(value: object) -> str:
    return repr(shown_name(value)) if isinstance(value, str) else repr(value)
