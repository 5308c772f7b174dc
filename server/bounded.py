"""Bounds on what the copilot writes and echoes: no caller can make a log line or a message huge.

A model (or a hostile client) can send a 10 MB parameter, a 1 MB query or a 1 MB server name.
The call itself is the child's business, but what the copilot *records* and *repeats* is its
own: trajectory events are cut to a per-field and per-event budget, saying how much was cut, and
names repeated in error messages are shortened.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Any

#: Longest name (server, tool, parameter) repeated verbatim in a message.
MAX_SHOWN_NAME = 120
#: Most entries of one list or object kept in a log event.
MAX_LOGGED_ITEMS = 1000
#: Deepest nesting kept in a log event (deeper values are replaced by a note).
MAX_LOGGED_DEPTH = 32


def shown_name(name: str, limit: int = MAX_SHOWN_NAME) -> str:
    """``name`` as it may be repeated in a message: long ones are shortened, with their length."""
    if len(name) <= limit:
        return name
    return f"{name[:limit].rstrip()}… ({len(name):,} characters)"


def _cut_note(kept: int, total: int) -> str:
    return f"…[log: {total - kept:,} of {total:,} characters cut]"


@dataclass
class _Budget:
    field_chars: int
    remaining: int
    cut_chars: int = 0
    cut_items: int = 0


def _cap(value: Any, budget: _Budget, depth: int) -> Any:
    if isinstance(value, str):
        limit = min(budget.field_chars, max(budget.remaining, 0))
        if len(value) <= limit:
            budget.remaining -= len(value) + 2  # its quotes: an empty string is not free either
            return value
        budget.remaining -= limit
        budget.cut_chars += len(value) - limit
        return value[:limit] + _cut_note(limit, len(value))
    if value is None or isinstance(value, bool | int | float):
        budget.remaining -= 8
        return value
    if depth >= MAX_LOGGED_DEPTH:
        budget.cut_items += 1
        return f"…[log: value nested deeper than {MAX_LOGGED_DEPTH} levels cut]"
    if isinstance(value, dict | list | tuple):
        # Its brackets: empty containers cost nothing before, and a 1,000 x 1,000 nest of empty
        # lists (4 MB of JSON) passed a 10,000-character cap whole, with no note.
        budget.remaining -= 2
    if isinstance(value, dict):
        out: dict[str, Any] = {}
        for position, (key, item) in enumerate(value.items()):
            if position >= MAX_LOGGED_ITEMS or budget.remaining <= 0:
                budget.cut_items += len(value) - position
                out["…"] = f"[log: {len(value) - position:,} of {len(value):,} entries cut]"
                break
            out[str(_cap(str(key), budget, depth + 1))] = _cap(item, budget, depth + 1)
        return out
    if isinstance(value, list | tuple):
        items: list[Any] = []
        for position, item in enumerate(value):
            if position >= MAX_LOGGED_ITEMS or budget.remaining <= 0:
                budget.cut_items += len(value) - position
                items.append(f"…[log: {len(value) - position:,} of {len(value):,} items cut]")
                break
            items.append(_cap(item, budget, depth + 1))
        return items
    return _cap(str(value), budget, depth)


def cap_for_log(value: Any, *, field_chars: int, total_chars: int) -> tuple[Any, str | None]:
    """``value`` (JSON-like) cut to at most ``field_chars`` per string and ~``total_chars`` in all.

    Returns the capped value and a note of what was cut (``None`` when nothing was).
    """
    budget = _Budget(field_chars=field_chars, remaining=total_chars)
    capped = _cap(value, budget, 0)
    if not budget.cut_chars and not budget.cut_items:
        return value, None
    parts = []
    if budget.cut_chars:
        parts.append(f"{budget.cut_chars:,} characters")
    if budget.cut_items:
        parts.append(f"{budget.cut_items:,} entries")
    return capped, "cut from the log: " + " and ".join(parts)


class RepeatedLogLines(logging.Filter):
    """A logger's records of one message, at most ``limit`` of them (with a traceback for the first
    ``with_traceback``), the last saying that the rest are not logged.

    For a third-party logger that logs each bad message a child sends (the SDK's client logs a
    traceback for every notification it cannot validate: 5,000 of them were 5.8 MB of stderr and
    12.7 s of CPU in one call).
    """

    def __init__(self, limit: int = 20, with_traceback: int = 3) -> None:
        super().__init__()
        self.limit = limit
        self.with_traceback = with_traceback
        self._seen: dict[tuple[str, str], int] = {}

    def filter(self, record: logging.LogRecord) -> bool:
        key = (record.name, str(record.msg))
        count = self._seen[key] = self._seen.get(key, 0) + 1
        if count > self.limit:
            return False
        if count > self.with_traceback:
            record.exc_info = record.exc_text = None
        if count == self.limit:
            record.msg = f"{record.msg} (repeated {self.limit} times; further such lines are not logged)"
        return True


def cut_text(text: str, limit: int) -> str:
    """``text`` a child sent, at most ``limit`` characters of it, saying how many were cut (progress
    messages, questions to the user, error messages passed on to the host)."""
    if len(text) <= limit:
        return text
    return f"{text[:limit]}…[{len(text) - limit:,} characters cut by MCP Copilot]"
