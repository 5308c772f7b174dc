"""The relay benchmark's reading of its target at the issue's machine speed."""

from __future__ import annotations

import argparse

import pytest

from bench.proxy.relay import _report, at_issue_speed


def test_an_overhead_is_scaled_by_how_much_slower_the_direct_call_ran_than_the_issues() -> None:
    words = at_issue_speed(0.0015, 0.0021)  # 1.5 ms added where the direct call took 2.1 ms (1.5x the issue's 1.4 ms)
    assert "took 2.100 ms (the issue's: 1.4 ms)" in words
    assert words.endswith("the copilot would add 1.000 ms")


@pytest.mark.parametrize("direct", [0.0007, 0.0014, 0.0028])
def test_at_the_issues_own_speed_nothing_is_scaled(direct: float) -> None:
    added = 0.0012 * direct / 0.0014
    assert at_issue_speed(added, direct).endswith("would add 1.200 ms")


def _report_of(added_ms: float) -> int:
    """The report's exit code for runs where the copilot adds ``added_ms`` to every direct call."""
    direct = [0.0014] * 5
    samples = {
        "echo": {
            "direct": direct,
            "copilot": [d + added_ms / 1000 for d in direct],
            "sdk-proxy": [d + 0.002 for d in direct],
            "raw-hop": [d + 0.0005 for d in direct],
        }
    }
    cpu = {"echo": {"copilot": 0.001}}
    return _report(argparse.Namespace(iterations=5), samples, cpu, dict.fromkeys(samples["echo"], 0))


def test_a_missed_overhead_target_is_exit_1_like_the_other_benchmarks_with_targets(capsys: pytest.CaptureFixture[str]) -> None:
    assert _report_of(1.0) == 0
    assert "target <= 1.5 ms: met" in capsys.readouterr().out
    assert _report_of(2.0) == 1
    assert "target <= 1.5 ms: NOT met" in capsys.readouterr().out
