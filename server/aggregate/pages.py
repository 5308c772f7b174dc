"""Cursor pagination of the lists the copilot serves (opaque cursors).

A cursor names the last item of the page it follows (and its position, as a check), not only an
offset: a child's list may change while a host pages through the aggregate (``list_changed``
comes on its own time), and an offset then slid the window over items the host never saw. The
next page starts after that item wherever it now is; when it is gone, the host is told to list
again from the start rather than given a page that may skip some.
"""

from __future__ import annotations

import base64
import binascii
import json
from collections.abc import Callable, Sequence
from typing import TypeVar

from mcp.shared.exceptions import MCPError
from mcp_types import INVALID_PARAMS

T = TypeVar("T")


def _encode(after: str, offset: int) -> str:
    text = json.dumps({"after": after, "offset": offset}, ensure_ascii=True, separators=(",", ":"))
    return base64.urlsafe_b64encode(text.encode()).decode().rstrip("=")


def _invalid(cursor: str) -> MCPError:
    return MCPError(INVALID_PARAMS, f"Invalid cursor {cursor[:80]!r}: pass the nextCursor of the previous page unchanged.")


def _decode(cursor: str) -> tuple[str, int]:
    try:
        data = json.loads(base64.urlsafe_b64decode(cursor + "=" * (-len(cursor) % 4)).decode())
    except (ValueError, binascii.Error, UnicodeDecodeError, RecursionError):
        raise _invalid(cursor) from None
    if not isinstance(data, dict) or not isinstance(data.get("after"), str):
        raise _invalid(cursor)
    offset = data.get("offset")
    if not isinstance(offset, int) or isinstance(offset, bool) or offset < 0:
        raise _invalid(cursor)
    return data["after"], offset


def page(items: Sequence[T], cursor: str | None, size: int, key: Callable[[T], str]) -> tuple[list[T], str | None]:
    """The page of ``items`` after ``cursor`` and the cursor of the next page (or ``None``);
    ``key`` names an item uniquely (a tool's or prompt's name, a resource's URI)."""
    start = 0
    if cursor:
        after, offset = _decode(cursor)
        if offset < len(items) and key(items[offset]) == after:  # the list did not move: no search
            start = offset + 1
        else:
            found = next((number for number, item in enumerate(items) if key(item) == after), None)
            if found is None:
                raise MCPError(
                    INVALID_PARAMS,
                    f"Invalid cursor {cursor[:80]!r}: the list changed since the previous page (its last item is gone); "
                    "list again from the start.",
                )
            start = found + 1
    chunk = list(items[start : start + size])
    end = start + len(chunk)
    return chunk, (_encode(key(chunk[-1]), end - 1) if chunk and end < len(items) else None)
