"""The nearest served method for a misspelt one (server.unknown_method)."""

from __future__ import annotations

import pytest

from server.unknown_method import nearest_method

SERVED = ["tools/list", "tools/call", "prompts/list", "prompts/get", "resources/list", "resources/read", "ping"]


@pytest.mark.parametrize(
    ("asked", "meant"),
    [("tools/lst", "tools/list"), ("Tools/List", "tools/list"), ("prompt/get", "prompts/get"),
     ("resources/reed", "resources/read"), ("pnig", "ping"), ("tools/frobnicate", None), ("x/unknown", None)],
)
def test_a_misspelt_method_is_matched_to_the_one_meant(asked: str, meant: str | None) -> None:
    assert nearest_method(asked, SERVED) == meant
