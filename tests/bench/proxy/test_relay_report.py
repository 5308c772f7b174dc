"""The relay benchmark's reading of its target at the issue's machine speed."""

from __future__ import annotations

import pytest

from bench.proxy.relay import at_issue_speed


def test_an_overhead_is_scaled_by_how_much_slower_the_direct_call_ran_than_the_issues() -> None:
    words = at_issue_speed(0.0015, 0.0021)  # 1.5 ms added where the direct call took 2.1 ms (1.5x the issue's 1.4 ms)
    assert "took 2.100 ms (the issue's: 1.4 ms)" in words
    assert words.endswith("the copilot would add 1.000 ms")


@pytest.mark.parametrize("direct", [0.0007, 0.0014, 0.0028])
def test_at_the_issues_own_speed_nothing_is_scaled(direct: float) -> None:
    added = 0.0012 * direct / 0.0014
    assert at_issue_speed(added, direct).endswith("would add 1.200 ms")
