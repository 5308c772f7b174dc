"""Cursor pagination of the lists the copilot serves (opaque cursors, stable sorted lists)."""

from __future__ import annotations

import base64
import binascii
from collections.abc import Sequence
from typing import TypeVar

from mcp.shared.exceptions import MCPError
from mcp_types import INVALID_PARAMS

T = TypeVar("T")


def _encode(offset: int) -> str:
    return base64.urlsafe_b64encode(f"offset:{offset}".encode()).decode().rstrip("=")


def _decode(cursor: str) -> int:
    try:
        text = base64.urlsafe_b64decode(cursor + "=" * (-len(cursor) % 4)).decode()
        kind, _, value = text.partition(":")
        offset = int(value)
        if kind != "offset" or offset < 0:
            raise ValueError(text)
        return offset
    except (ValueError, binascii.Error, UnicodeDecodeError):
        raise MCPError(
            INVALID_PARAMS, f"Invalid cursor {cursor!r}: pass the nextCursor of the previous page unchanged."
        ) from None


def page(items: Sequence[T], cursor: str | None, size: int) -> tuple[list[T], str | None]:
    """The page of ``items`` starting at ``cursor`` and the cursor of the next page (or ``None``)."""
    start = _decode(cursor) if cursor else 0
    if start > len(items):
        raise MCPError(INVALID_PARAMS, f"Invalid cursor {cursor!r}: the list is shorter now; list again from the start.")
    end = start + size
    return list(items[start:end]), (_encode(end) if end < len(items) else None)
