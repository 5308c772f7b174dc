"""``server.aggregate.pages``: every item exactly once across pages, also when the list changes
between pages; bad cursors are -32602."""

from __future__ import annotations

import pytest
from mcp.shared.exceptions import MCPError

from server.aggregate.pages import page


def _all_pages(items: list[str], size: int, change: list[str] | None = None) -> list[str]:
    """Page through ``items``; after the first page the list becomes ``change`` (when given)."""
    seen: list[str] = []
    cursor = None
    for number in range(20):
        current = change if change is not None and number > 0 else items
        chunk, cursor = page(current, cursor, size, str)
        seen += chunk
        if cursor is None:
            return seen
    raise AssertionError("paging did not end")


def test_pages_cover_every_item_once() -> None:
    assert _all_pages([f"p{i}" for i in range(7)], 3) == [f"p{i}" for i in range(7)]


def test_a_short_list_has_no_next_cursor() -> None:
    assert page(["a", "b"], None, 5, str) == (["a", "b"], None)
    assert page([], None, 5, str) == ([], None)


def test_items_dropped_before_the_cursor_do_not_make_the_next_page_skip_any() -> None:
    # A bare offset skipped p04-p06: the child dropped p00-p02 after the first page of 4.
    items = [f"p{i:02d}" for i in range(10)]
    assert _all_pages(items, 4, change=items[3:]) == items
    # Added before it: nothing seen twice, nothing after it skipped.
    assert _all_pages(items, 4, change=["a0", "a1", *items]) == items


def test_a_cursor_whose_last_item_is_gone_says_to_start_again() -> None:
    items = [f"p{i}" for i in range(10)]
    _, cursor = page(items, None, 4, str)
    with pytest.raises(MCPError, match="the list changed since the previous page .*list again from the start") as caught:
        page([item for item in items if item != "p3"], cursor, 4, str)
    assert caught.value.code == -32602


@pytest.mark.parametrize("cursor", ["garbage!", "b2Zmc2V0Oi0x", "eHl6OjM", "eyJhZnRlciI6ICJ4IiwgIm9mZnNldCI6IC0xfQ"])
def test_bad_cursors_are_invalid_params(cursor: str) -> None:
    with pytest.raises(MCPError) as caught:
        page(["1", "2", "3"], cursor, 2, str)
    assert caught.value.code == -32602
    assert "nextCursor" in caught.value.message
