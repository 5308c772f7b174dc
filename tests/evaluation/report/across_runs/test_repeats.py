"""``repeats.json``/``.md``: pass@k, its interval and efficiency across repeats, built from
reports made straight from verdicts (the judge end to end is in ``tests/evaluation/judge/test_cli.py``)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from evaluation.report.across_runs.repeats import build_repeats_report
from evaluation.report.across_runs.repeats_render import tables, write_repeats_reports
from tests.evaluation.report.support import built, record, trajectory


def test_efficiency_is_a_mean_per_task_over_every_repeat() -> None:
    # Before: the mean of each repeat's means, so the one task of repeat 2 weighed as much as the
    # four of repeat 1: 6.0 execute calls and 5000 tokens per task instead of 3.6 and 2600.
    universe = {f"t{i}": "Office" for i in range(4)}
    first = built(
        universe, [trajectory(f"t{i}", executes=2, tokens=(900, 100), cost=0.01) for i in range(4)],
        [record(f"t{i}", "success") for i in range(4)],
    )
    second = built(universe, [trajectory("t0", executes=10, tokens=(8000, 1000), cost=0.09)], [record("t0", "success")])
    # A third repeat whose one task logged no usage: in the calls, not in tokens or cost.
    third = built(universe, [trajectory("t1", executes=6)], [record("t1", "failure")])
    report = build_repeats_report([first, second, third], ["r1", "r2", "r3"], [Path("r1"), Path("r2"), Path("r3")])
    efficiency = report.efficiency
    assert efficiency.n == 6
    assert efficiency.execute_calls == pytest.approx((4 * 2 + 10 + 6) / 6, abs=1e-3)
    assert efficiency.tokens == pytest.approx((4 * 1000 + 9000) / 5)
    assert efficiency.cost == pytest.approx((4 * 0.01 + 0.09) / 5)
    assert report.total_cost == pytest.approx(0.13)


def test_pass_at_1_without_a_judged_attempt_has_no_interval(tmp_path: Path) -> None:
    # Before: "pass@1 n/a (95% CI 0.0%-0.0%)" in repeats.md, and [0.0, 0.0] in repeats.json.
    universe = {"t0": "Office"}
    repeats = [built(universe, [trajectory("t0")], []) for _ in range(2)]
    report = build_repeats_report(repeats, ["a", "b"], [Path("a"), Path("b")])
    assert (report.pass_at_1, report.pass_at_1_ci95, report.within_task_variance, report.tasks_at_k) == (None, None, None, {})
    assert tables(report)[0].note.startswith("pass@1 n/a; sd between repeats n/a; mean within-task variance n/a;")
    write_repeats_reports(report, tmp_path, formats=("json", "md"))
    data = json.loads((tmp_path / "repeats.json").read_text())
    assert (data["pass_at_1"], data["pass_at_1_ci95"], data["within_task_variance"]) == (None, None, None)
    assert "0.0%-0.0%" not in (tmp_path / "repeats.md").read_text()


def test_within_task_variance_rests_on_tasks_with_two_attempts_or_more() -> None:
    universe = {"t0": "Office", "t1": "Office"}
    once = built(universe, [trajectory("t0"), trajectory("t1")], [record("t0", "success"), record("t1", "failure")])
    report = build_repeats_report([once, once], ["a", "b"], [Path("a"), Path("b")])
    assert report.within_task_variance == 0.0  # both always the same
    single = built(universe, [trajectory("t0"), trajectory("t1")], [record("t0", "success")])
    unjudged = built(universe, [trajectory("t0"), trajectory("t1")], [])
    alone = build_repeats_report([single, unjudged], ["a", "b"], [Path("a"), Path("b")])
    assert alone.within_task_variance is None  # one judged attempt of t0, none of t1: no spread to estimate


def test_pass_at_k_says_how_many_tasks_it_rests_on() -> None:
    # pass@3 is over the tasks with 3 judged attempts only: here 1 of 2 (t1's third verdict is missing).
    universe = {"t0": "Office", "t1": "Office"}
    repeats = [
        built(universe, [trajectory("t0"), trajectory("t1")], [record("t0", "success"), record("t1", "failure")]),
        built(universe, [trajectory("t0"), trajectory("t1")], [record("t0", "failure"), record("t1", "success")]),
        built(universe, [trajectory("t0"), trajectory("t1")], [record("t0", "success")]),
    ]
    report = build_repeats_report(repeats, ["a", "b", "c"], [Path("a"), Path("b"), Path("c")])
    assert report.tasks_at_k == {1: 2, 2: 2, 3: 1}
    # Unbiased, c(n-c)/(n(n-1)): t0 2 of 3 -> 1/3, t1 1 of 2 -> 1/2 (the plug-in p(1-p) said 2/9 and 1/4).
    assert report.within_task_variance == pytest.approx((1 / 3 + 1 / 2) / 2)
    assert report.pass_at_k[3] == 1.0 and report.by_category["Office"].tasks_at_n == 1
    overall, _, categories, _ = tables(report)
    assert overall.rows[-1] == ["tasks", "2", "2", "1"]
    # Two tasks: about the whole range (Student's t with 1 degree of freedom; 42.0%-74.7% before,
    # a normal interval around two tasks' mean).
    assert overall.note.startswith("pass@1 58.3% (95% CI 1.0%-99.5%), tasks as units; ")
    assert categories.header[-1] == "tasks with 3 attempts" and categories.rows == [["Office", "2", "58.3%", "1.0%-99.5%", "100.0%", "0.0%", "1"]]
