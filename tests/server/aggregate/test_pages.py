"""``server.aggregate.pages``: every item exactly once across pages; bad cursors are -32602."""

from __future__ import annotations

import pytest
from mcp.shared.exceptions import MCPError

from server.aggregate.pages import page


def test_pages_cover_every_item_once() -> None:
    items = list(range(7))
    seen, cursor = [], None
    for _ in range(10):
        chunk, cursor = page(items, cursor, 3)
        seen += chunk
        if cursor is None:
            break
    assert seen == items


def test_a_short_list_has_no_next_cursor() -> None:
    assert page([1, 2], None, 5) == ([1, 2], None)
    assert page([], None, 5) == ([], None)


@pytest.mark.parametrize("cursor", ["garbage!", "b2Zmc2V0Oi0x", "eHl6OjM"])
def test_bad_cursors_are_invalid_params(cursor: str) -> None:
    with pytest.raises(MCPError) as caught:
        page([1, 2, 3], cursor, 2)
    assert caught.value.code == -32602
    assert "nextCursor" in caught.value.message or "start" in caught.value.message


def test_a_cursor_past_a_shrunken_list_says_to_start_again() -> None:
    _, cursor = page(list(range(10)), None, 8)
    with pytest.raises(MCPError, match="list again from the start"):
        page([1, 2], cursor, 8)
