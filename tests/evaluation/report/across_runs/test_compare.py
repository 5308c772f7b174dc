"""``python -m evaluation.compare``: paired comparison of two judged runs."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from evaluation.report.across_runs.compare import main
from evaluation.judge.pipeline import JudgeSummary, judge_paths
from tests.evaluation.judge_helpers import (
    options,
    question_of,
    task_entry,
    write_copilot_log,
    write_tasks,
)
from tests.support.scripted_openai import Reply, ScriptedOpenAI

pytestmark = pytest.mark.timeout(60)


async def _judge(
    llm: ScriptedOpenAI,
    tmp_path: Path,
    name: str,
    successes: set[str],
    categories: dict[str, str],
    unjudged: frozenset[str] | set[str] = frozenset(),
) -> JudgeSummary:
    """Run ``name``'s tasks judged: ``successes`` succeed, the judge's requests fail on ``unjudged``."""
    logs = tmp_path / name
    logs.mkdir()
    for task_id in categories:
        write_copilot_log(logs / f"{task_id}.jsonl", task_id, f"question {task_id}")
    tasks = write_tasks(tmp_path / f"tasks-{name}.json", [task_entry(t, f"question {t}", c) for t, c in categories.items()])
    llm.handler = lambda request: (
        Reply(status=500)
        if question_of(request).split()[-1] in unjudged
        else Reply(content="Status: success" if question_of(request).split()[-1] in successes else "Status: failure")
    )
    return await judge_paths(
        [logs],
        options(
            llm, tmp_path, tasks_file=tasks, out_dir=logs / "judge", cache_dir=tmp_path / f"cache-{name}", max_retries=0
        ),
    )


async def _judge_dir(llm: ScriptedOpenAI, tmp_path: Path, name: str, *args: Any, **kwargs: Any) -> Path:
    """Where :func:`_judge` wrote ``name``'s verdicts (what ``compare`` reads)."""
    return (await _judge(llm, tmp_path, name, *args, **kwargs)).out_dir


async def test_a_clear_difference_is_significant(
    llm: ScriptedOpenAI, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    categories = {f"t{i:02d}": ("work" if i < 6 else "travel") for i in range(12)}
    a = await _judge_dir(llm, tmp_path, "a", {f"t{i:02d}" for i in range(11)}, categories)
    b = await _judge_dir(llm, tmp_path, "b", {"t10"}, categories)
    assert main([str(a), str(b), "--json", str(tmp_path / "cmp.json")]) == 0
    out = capsys.readouterr().out
    assert f"A = {a}: 11/12 = 91.7%" in out and f"B = {b}: 1/12 = 8.3%" in out
    assert f"{a} is better: 10 vs 0 tasks solved by only one run; exact McNemar p = 0.00195 < 0.05." in out
    # Rates to 0.1%, as the A/B lines above (the table rounded 83.3% to 83% before).
    assert "| Office | 6 | 6 (100.0%) | 0 (0.0%) | -100.0 pt | 6 | 0 | 0.0312 | 0.0625 |" in out
    assert "| Travel | 6 | 5 (83.3%) | 1 (16.7%) | -66.7 pt | 4 | 0 | 0.125 | 0.125 |" in out
    assert "| **all** | 12 | 11 (91.7%) | 1 (8.3%) | -83.3 pt | 10 | 0 | 0.00195 | |" in out
    # The paired difference (0 - 10) / 12 = -83.3 pt with Newcombe's hybrid score interval (Wald's,
    # -100.0 to -62.2, had its low end clipped and was too narrow this close to the bound).
    assert "B - A = -83.3 pt (95% CI -93.0 to -45.1 pt, paired, on the 12 common tasks)" in out
    assert "per-category p-values are 2 tests: read the Holm-adjusted column" in out
    assert "| t00 | Office | success | failure | question t00 |" in out
    data = json.loads((tmp_path / "cmp.json").read_text())
    assert data["significant"] is True and data["mcnemar"] == {
        "only_a": 10,
        "only_b": 0,
        "p_value": pytest.approx(2 * 0.5**10),
    }


async def test_a_small_difference_is_called_noise(
    llm: ScriptedOpenAI, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    categories = {f"t{i}": "work" for i in range(6)}
    a = await _judge_dir(llm, tmp_path, "a", {"t0", "t1", "t5"}, categories)
    b = await _judge_dir(llm, tmp_path, "b", {"t2", "t5"}, categories)
    # The log directory works too: its judge/ subdirectory is found.
    assert main([str(a.parent), str(b)]) == 0
    out = capsys.readouterr().out
    assert "The difference is within noise: 2 tasks solved only by" in out and "p = 1 >= 0.05" in out


async def test_a_run_compared_with_itself_is_said_to_be_one(llm: ScriptedOpenAI, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    # Before: "The runs succeed on exactly the same tasks: no difference.", and nothing more.
    a = await _judge_dir(llm, tmp_path, "a", {"t0"}, {"t0": "work", "t1": "work"})
    assert main([str(a), str(a.parent)]) == 0
    assert capsys.readouterr().out.startswith(f"WARNING: SAME REPORT: both runs are {a / 'report.json'}; nothing is compared.")


def test_missing_report_is_a_clear_error(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main([str(tmp_path), str(tmp_path)]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: ") and "no report.json" in err and "python -m evaluation.judge" in err


@pytest.mark.parametrize("alpha", ["1.5", "0", "nan"])
def test_an_alpha_that_is_no_significance_level_is_one_error_before_any_run_is_read(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], alpha: str
) -> None:
    assert main([str(tmp_path), str(tmp_path), "--alpha", alpha]) == 2
    assert capsys.readouterr().err == f"error: --alpha must be between 0 and 1 (got {float(alpha)}).\n"


@pytest.mark.parametrize("where", [".", "judge"])
def test_a_repeated_run_is_pointed_to_the_leaderboard(tmp_path: Path, capsys: pytest.CaptureFixture[str], where: str) -> None:
    # Before: "no report.json ...; judge the run first", said of a run judged repeat by repeat.
    (tmp_path / where).mkdir(exist_ok=True)
    (tmp_path / where / "repeats.json").write_text("{}", encoding="utf-8")
    assert main([str(tmp_path), str(tmp_path)]) == 2
    err = capsys.readouterr().err
    assert "a repeated run (repeats.json)" in err and "python -m evaluation.leaderboard RUN_A RUN_B" in err
    assert "judge the run first" not in err


async def test_only_common_tasks_are_paired_and_low_overlap_is_flagged(
    llm: ScriptedOpenAI, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # A holds t0..t5, B holds t4..t9: only t4 and t5 are in both runs.
    a = await _judge_dir(llm, tmp_path, "a", {f"t{i}" for i in range(6)}, {f"t{i}": "work" for i in range(6)})
    b = await _judge_dir(llm, tmp_path, "b", set(), {f"t{i}": "work" for i in range(4, 10)})
    assert main([str(a), str(b), "--json", str(tmp_path / "cmp.json")]) == 0
    out = capsys.readouterr().out
    assert out.startswith("WARNING: ONLY 2 of 10 tasks (20%) are in both runs")
    assert f"A = {a}: 2/2 = 100.0%" in out and f"B = {b}: 0/2 = 0.0%" in out
    assert "(over each run's own task list: A 6/6 = 100.0%, B 0/6 = 0.0%)" in out
    data = json.loads((tmp_path / "cmp.json").read_text())
    assert data["n_tasks"] == 2 and data["mcnemar"]["only_a"] == 2 and data["overlap"] == pytest.approx(0.2)
    assert data["missing_in_b"] == ["t0", "t1", "t2", "t3"] and data["missing_in_a"] == ["t6", "t7", "t8", "t9"]


async def test_runs_without_common_tasks_are_refused(
    llm: ScriptedOpenAI, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # Before: missing tasks counted as failures made these "significant, p = 0.0312".
    a = await _judge_dir(llm, tmp_path, "a", {f"a{i}" for i in range(5)}, {f"a{i}": "work" for i in range(5)})
    b = await _judge_dir(llm, tmp_path, "b", set(), {f"b{i}": "work" for i in range(5)})
    assert main([str(a), str(b)]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: ") and "have no task in common (5 and 5 tasks)" in err


async def test_tasks_the_judge_never_decided_are_called_out_first(
    llm: ScriptedOpenAI, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # Their "not_judged" counted as failures: B "won" tasks A's judge never saw, with no warning.
    categories = {f"t{i}": "work" for i in range(6)}
    summary = await _judge(llm, tmp_path, "a", set(categories), categories, unjudged={"t0", "t1"})
    assert sorted(f.task_id for f in summary.errors) == ["t0", "t1"]
    b = await _judge_dir(llm, tmp_path, "b", set(categories), categories)
    assert main([str(summary.out_dir), str(b), "--json", str(tmp_path / "cmp.json")]) == 0
    out = capsys.readouterr().out
    assert out.startswith(
        f"WARNING: UNJUDGED: 2 tasks both runs hold were never judged in {summary.out_dir} (t0, t1) and are left "
        "out of the paired comparison; rerun the judge on that run"
    )
    # Left out of the pairs, not counted as failures: B "won" nothing A's judge never saw.
    assert f"A = {summary.out_dir}: 4/4 = 100.0%" in out and f"B = {b}: 4/4 = 100.0%" in out
    assert "on the 4 common tasks judged in both runs" in out
    assert "(left out of the pairs, never judged: 2 tasks -- in A: t0, t1; in B: none)" in out
    assert "The runs succeed on exactly the same tasks: no difference." in out
    data = json.loads((tmp_path / "cmp.json").read_text())
    assert data["n_tasks"] == 4 and data["mcnemar"]["only_b"] == 0
    assert data["unjudged_in_a"] == ["t0", "t1"] and data["unjudged_in_b"] == []
    assert not any(w.startswith("UNJUDGED") and str(b) in w for w in data["warnings"])


async def test_runs_with_no_task_judged_in_both_are_refused(
    llm: ScriptedOpenAI, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    categories = {f"t{i}": "work" for i in range(3)}
    summary = await _judge(llm, tmp_path, "a", set(), categories, unjudged=set(categories))
    b = await _judge_dir(llm, tmp_path, "b", set(), categories)
    assert main([str(summary.out_dir), str(b)]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: none of the 3 tasks") and "judged in both runs (3 never judged in" in err
    assert "Traceback" not in err


async def test_questions_with_pipes_and_line_breaks_keep_the_outcome_table_whole(
    llm: ScriptedOpenAI, tmp_path: Path
) -> None:
    # Before: the question went into the table as written: a "|" added columns, a line break
    # ended the row in the middle of the question.
    from evaluation.report.across_runs.compare import _load, compare_reports, render  # noqa: PLC0415

    categories = {"t1": "work", "t2": "work"}
    _, a = _load(await _judge_dir(llm, tmp_path, "a", {"t1", "t2"}, categories))
    _, b = _load(await _judge_dir(llm, tmp_path, "b", set(), categories))
    a.tasks[0].question = "Compare A | B\nand list\r| items"
    a.tasks[1].question = "One\r\ntwo\u2028three"
    text = render(compare_reports(a, b, "A", "B"), a, b)
    rows = text.split("Tasks with different outcomes:")[1].strip().splitlines()
    assert rows[2:] == [
        "| t1 | Office | success | failure | Compare A \\| B and list \\| items |",
        "| t2 | Office | success | failure | One two three |",
    ]


async def test_an_unreadable_report_says_what_is_wrong_and_where(
    llm: ScriptedOpenAI, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # Before: "report.json is unreadable (1 validation error for Report)": no field, no line.
    run_a = await _judge_dir(llm, tmp_path, "a", {"t1"}, {"t1": "work"})
    run_b = await _judge_dir(llm, tmp_path, "b", set(), {"t1": "work"})
    report = json.loads((run_b / "report.json").read_text())
    del report["n_tasks"]
    (run_b / "report.json").write_text(json.dumps(report), encoding="utf-8")
    assert main([str(run_a), str(run_b)]) == 2
    err = capsys.readouterr().err
    assert f"error: {run_b / 'report.json'}: report.json is unreadable (field n_tasks is missing)" in err
    (run_b / "report.json").write_text('{\n "n_tasks": 1,\n}', encoding="utf-8")
    assert main([str(run_a), str(run_b)]) == 2
    assert "unreadable (not valid JSON: Expecting property name enclosed in double quotes at line 3 column 1)" in (
        capsys.readouterr().err
    )
    # Saved by a Windows editor (a BOM): still a report.
    (run_a / "report.json").write_bytes(b"\xef\xbb\xbf" + (run_a / "report.json").read_bytes())
    assert main([str(run_a), str(run_a)]) == 0


async def test_a_task_listed_twice_or_in_two_categories_is_said_not_silently_resolved(
    llm: ScriptedOpenAI, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    run_a = await _judge_dir(llm, tmp_path, "a", {"t1"}, {"t1": "work", "t2": "travel"})
    run_b = await _judge_dir(llm, tmp_path, "b", {"t2"}, {"t1": "travel", "t2": "travel"})
    # Categories that disagree: the per-category table silently took A's, so it changed with the order.
    assert main([str(run_a), str(run_b)]) == 0
    assert (
        f"1 task(s) are in different categories in the two runs (t1: Office in {run_a}, Travel in {run_b}): the "
        f"per-category table uses {run_a}'s" in " ".join(capsys.readouterr().out.split())
    )
    # A task twice in one report: the last row silently won.
    report = json.loads((run_b / "report.json").read_text())
    report["tasks"].append({**report["tasks"][0], "verdict": "failure"})
    (run_b / "report.json").write_text(json.dumps(report), encoding="utf-8")
    assert main([str(run_a), str(run_b)]) == 2
    assert (
        f"error: {run_b / 'report.json'}: report.json is unreadable (field tasks: task 't1' is listed twice (tasks[0] "
        "and tasks[2]); each task has one row)"
    ) in capsys.readouterr().err
