"""Reading copilot JSONL logs and LiveMCPBench trajectory files into one model."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from evaluation.tasks import TaskError, canonical_category, load_human_labels, load_tasks, split_numbered
from evaluation.trajectories import load_trajectories
from server.trajectory import WorkspaceFile
from tests.evaluation.judge_helpers import (
    ALL_ANNOTATIONS,
    SAMPLE_TRAJECTORIES,
    livemcpbench_entry,
    write_copilot_log,
)

pytestmark = pytest.mark.timeout(30)


def test_copilot_log_becomes_a_trajectory(tmp_path: Path) -> None:
    write_copilot_log(
        tmp_path / "t1.jsonl",
        "t1",
        "Make a file",
        category="daily",
        routes=[("write a file", [("fs", "read"), ("fs", "write_file")])],
        executes=[
            {"server": "fs", "tool": "write_file", "params": {"path": "a.txt"}, "text": "wrote 3 bytes"},
            {
                "server": "slow",
                "tool": "go",
                "is_error": True,
                "error": "timed out after 30 s",
                "error_kind": "timeout",
            },
            {"server": "fs", "tool": "write_file", "is_error": True, "text": "disk full"},
        ],
        usage=[(100, 10, 0.01), (200, 20, 0.02)],
        workspace=[WorkspaceFile(path="a.txt", change="created", size=3, preview="abc")],
        answer="I wrote a.txt",
    )
    result = load_trajectories([tmp_path])
    assert result.problems == []
    trajectory = result.trajectories["t1"]
    assert trajectory.question == "Make a file"
    assert trajectory.category == "Lifestyle"
    assert [call.kind for call in trajectory.calls] == ["route", "execute", "execute", "execute"]
    assert [call.index for call in trajectory.calls] == [1, 2, 3, 4]
    assert trajectory.calls[0].hits == [("fs", "read"), ("fs", "write_file")]
    assert trajectory.calls[1].output == "wrote 3 bytes"
    assert json.loads(trajectory.calls[1].arguments) == {
        "server_name": "fs",
        "tool_name": "write_file",
        "params": {"path": "a.txt"},
    }
    assert trajectory.calls[2].error_kind == "timeout" and "timed out" in trajectory.calls[2].output
    assert trajectory.calls[3].error_kind == "tool_error"
    assert trajectory.tool_errors == 2 and trajectory.distinct_tools == 2
    assert trajectory.final_answer == "I wrote a.txt"
    assert trajectory.usage is not None
    assert (trajectory.usage.input_tokens, trajectory.usage.output_tokens) == (300, 30)
    assert trajectory.usage.cost == pytest.approx(0.03)
    assert trajectory.turns == 2  # one usage event per model call
    assert trajectory.workspace[0].path == "a.txt"
    assert trajectory.complete


def test_sessions_of_one_task_merge_in_time_order_and_a_crash_is_kept(tmp_path: Path) -> None:
    write_copilot_log(
        tmp_path / "b.jsonl",
        "t1",
        "Q",
        session_id="late",
        start_ts="2025-01-02T00:00:00.000Z",
        executes=[{"server": "s", "tool": "second"}],
        answer="final",
        end=False,
    )
    write_copilot_log(
        tmp_path / "a.jsonl",
        "t1",
        "Q",
        session_id="early",
        start_ts="2025-01-01T00:00:00.000Z",
        executes=[{"server": "s", "tool": "first"}],
        answer="draft",
    )
    trajectory = load_trajectories([tmp_path]).trajectories["t1"]
    assert [call.tool for call in trajectory.calls] == ["first", "second"]
    assert [call.index for call in trajectory.calls] == [1, 2]
    assert trajectory.sessions == 2
    assert trajectory.final_answer == "final"
    assert not trajectory.complete  # the last session never ended


def test_malformed_lines_are_skipped_and_reported_with_file_and_line(tmp_path: Path) -> None:
    log = write_copilot_log(tmp_path / "t1.jsonl", "t1", "Q", executes=[{"server": "s", "tool": "x"}])
    lines = log.read_text().splitlines()
    lines.insert(1, "{not json")
    lines.insert(3, json.dumps({"event": "execute", "ts": "x"}))  # missing required fields
    log.write_text("\n".join(lines) + "\n")
    result = load_trajectories([tmp_path])
    assert result.malformed_lines == 2
    assert {(Path(p.file).name, p.line) for p in result.problems} == {("t1.jsonl", 2), ("t1.jsonl", 4)}
    assert "invalid event" in str(result.problems[1]) and ":4:" in str(result.problems[1])
    assert len(result.trajectories["t1"].execute_calls) == 1


def test_foreign_files_and_excluded_dirs_are_not_read_as_trajectories(tmp_path: Path) -> None:
    write_copilot_log(tmp_path / "t1.jsonl", "t1", "Q")
    (tmp_path / "notes.jsonl").write_text(json.dumps({"task_id": "t1", "verdict": "success"}) + "\n")
    (tmp_path / "config.json").write_text(json.dumps({"mcpServers": {}}))
    out = tmp_path / "judge"
    out.mkdir()
    write_copilot_log(out / "t2.jsonl", "t2", "Q2")
    result = load_trajectories([tmp_path], exclude=[out])
    assert set(result.trajectories) == {"t1"}
    assert [p.kind for p in result.problems] == ["skipped_file"]


def test_session_without_task_id_takes_the_file_name_of_a_known_task(tmp_path: Path) -> None:
    write_copilot_log(tmp_path / "task-9.jsonl", None, None)
    assert set(load_trajectories([tmp_path], known_tasks={"task-9"}).trajectories) == {"task-9"}
    assert set(load_trajectories([tmp_path]).trajectories) == {"s1"}  # unknown: the session id


def test_livemcpbench_file_is_read_with_routes_calls_and_aliases(tmp_path: Path) -> None:
    entries = [
        livemcpbench_entry("a", "Where is X?", "travel", route_hits=[("maps", "search"), ("maps", "geocode")]),
        livemcpbench_entry("b", "Play Y", "entertainment", tool_output="Tool call timed out."),
    ]
    path = tmp_path / "run.json"
    path.write_text(json.dumps(entries))
    result = load_trajectories([path])
    a, b = result.trajectories["a"], result.trajectories["b"]
    assert a.format == "livemcpbench" and a.category == "Travel" and b.category == "Leisure"
    assert a.route_calls[0].hits == [("maps", "search"), ("maps", "geocode")]
    assert a.execute_calls[0].server == "maps" and a.execute_calls[0].params == {"q": "x"}
    assert a.final_answer == "Here is the answer."
    assert a.turns == 3 and a.steps == ["find it"] and a.gold_tools == ["geocode"]
    assert b.execute_calls[0].is_error and b.execute_calls[0].error_kind == "timeout"


def test_a_task_list_passed_as_trajectories_is_explained(tmp_path: Path) -> None:
    path = tmp_path / "tasks.json"
    path.write_text(json.dumps([{"task_id": "a", "Question": "q"}]))
    result = load_trajectories([path])
    assert not result.trajectories
    assert "pass it with --tasks" in result.problems[0].message


def test_broken_json_file_names_the_line(tmp_path: Path) -> None:
    path = tmp_path / "run.json"
    path.write_text('[\n{"task_id": "a",\n oops}\n]')
    problem = load_trajectories([path]).problems[0]
    assert problem.kind == "malformed_line" and problem.line == 3


@pytest.mark.skipif(
    not SAMPLE_TRAJECTORIES.is_file(), reason=f"LiveMCPBench sample not present at {SAMPLE_TRAJECTORIES}"
)
def test_real_livemcpbench_sample() -> None:
    result = load_trajectories([SAMPLE_TRAJECTORIES])
    assert result.problems == []
    by_category = {t.category for t in result.trajectories.values()}
    assert by_category == {"Finance", "Travel", "Leisure"}
    audio = next(t for t in result.trajectories.values() if t.category == "Leisure")
    assert sum(1 for call in audio.execute_calls if call.error_kind == "timeout") == 5
    finance = next(t for t in result.trajectories.values() if t.category == "Finance")
    assert finance.route_calls[0].hits[0] == ("yahoo-finance", "get_historical_stock_prices")


@pytest.mark.skipif(not ALL_ANNOTATIONS.is_file(), reason=f"LiveMCPBench task list not present at {ALL_ANNOTATIONS}")
def test_real_task_list_has_95_tasks_in_six_categories() -> None:
    tasks = load_tasks(ALL_ANNOTATIONS)
    assert len(tasks) == 95
    assert {task.category for task in tasks.values()} == {
        "Office",
        "Lifestyle",
        "Leisure",
        "Finance",
        "Travel",
        "Shopping",
    }
    assert all(task.steps for task in tasks.values())


def test_categories_and_numbered_lists() -> None:
    assert [
        canonical_category(n) for n in ("work", "Daily", "entertainment", "financing", "travel", "SHOPPING", "", "Misc")
    ] == [
        "Office",
        "Lifestyle",
        "Leisure",
        "Finance",
        "Travel",
        "Shopping",
        "Other",
        "Misc",
    ]
    assert split_numbered("1. a\n2) b\n   continued\n\n3. c ") == ["a", "b continued", "c"]


def test_task_and_label_files_fail_clearly(tmp_path: Path) -> None:
    bad = tmp_path / "bad.json"
    bad.write_text("[\n{,\n]")
    with pytest.raises(TaskError, match=r"bad.json:2: task list is not valid JSON"):
        load_tasks(bad)
    with pytest.raises(TaskError, match="not found"):
        load_tasks(tmp_path / "missing.json")
    labels = tmp_path / "labels.json"
    labels.write_text(
        json.dumps([{"task_id": "a", "task_success": "Success"}, {"task_id": "b", "task_success": "failure"}])
    )
    assert load_human_labels(labels) == {"a": True, "b": False}
    labels.write_text(json.dumps([{"task_id": "a", "task_success": "maybe"}]))
    with pytest.raises(TaskError, match='expected "success" or "failure"'):
        load_human_labels(labels)
