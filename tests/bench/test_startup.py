"""``bench startup``'s table cells: a range over rounds reads as one number and one unit."""

from __future__ import annotations

import pytest

from bench.startup import span


@pytest.mark.parametrize(
    ("values", "fmt", "cell"),
    [
        ([3.2, 2.7], "{:.1f} s", "2.7-3.2 s"),  # before: "2.7 s-3.2"
        ([1.0, 1.04], "{:.1f} s", "1.0 s"),  # equal as shown: one number
        ([204, 200], "{:.0f}", "200-204"),
        ([], "{:.1f} s", "-"),
    ],
)
def test_a_range_over_rounds_is_one_cell(values: list[float], fmt: str, cell: str) -> None:
    assert span(values, fmt) == cell
