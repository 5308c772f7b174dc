"""Reading the copilot's JSONL logs (``evaluation/trajectories/copilot.py``): events to calls,
sessions of one task merged, malformed lines reported with file and line."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from evaluation.trajectories import load_trajectories
from server.trajectory.records import WorkspaceFile
from tests.evaluation.judge_helpers import write_copilot_log

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
    assert "not JSON" in str(result.problems[0]) and "(:" not in str(result.problems[0])
    assert len(result.trajectories["t1"].execute_calls) == 1


@pytest.mark.parametrize(
    ("cost", "said"),
    [("Infinity", "usage.cost: Input should be a finite number"), ("NaN", "usage.cost: Input should be a finite number"),
     ("1e308", "usage.cost: Input should be less than or equal to"), ("-0.5", "usage.cost: Input should be greater than")],
)
def test_a_usage_number_no_report_can_sum_is_an_input_problem_at_its_line(tmp_path: Path, cost: str, said: str) -> None:
    # Infinity and 1e308 ended the judge's report step in a traceback; NaN put "nan" in its tables.
    log = write_copilot_log(tmp_path / "t1.jsonl", "t1", "Q", usage=[(100, 10, 0.5)])
    log.write_text(log.read_text().replace('"cost":0.5', f'"cost":{cost}'))
    result = load_trajectories([tmp_path])
    [problem] = result.problems
    assert Path(problem.file or "").name == "t1.jsonl" and said in str(problem)
    assert result.trajectories["t1"].usage is None  # the task is still there, without that usage


@pytest.mark.parametrize(
    ("ts", "said"),
    [(None, "no 'ts'"), ("yesterday", "not an ISO 8601 time")],
)
def test_an_event_without_a_readable_time_is_reported_not_dated_today(tmp_path: Path, ts: str | None, said: str) -> None:
    log = write_copilot_log(tmp_path / "t1.jsonl", "t1", "Q")
    start, *rest = log.read_text().splitlines()
    event = json.loads(start)
    event.pop("ts")
    if ts is not None:
        event["ts"] = ts
    log.write_text("\n".join([json.dumps(event), *rest]) + "\n")
    result = load_trajectories([tmp_path])
    problem = result.problems[0]
    assert (problem.kind, problem.line) == ("malformed_line", 1) and said in problem.message


def test_session_without_task_id_takes_the_file_name_of_a_known_task(tmp_path: Path) -> None:
    write_copilot_log(tmp_path / "task-9.jsonl", None, None)
    assert set(load_trajectories([tmp_path], known_tasks={"task-9"}).trajectories) == {"task-9"}
    assert set(load_trajectories([tmp_path]).trajectories) == {"s1"}  # unknown: the session id


def test_a_log_saved_with_a_bom_keeps_its_first_event(tmp_path: Path) -> None:
    # Before: the BOM made session_start "not JSON" and the whole task was dropped.
    log = write_copilot_log(tmp_path / "t1.jsonl", "t1", "question t1", answer="the answer")
    log.write_bytes(b"\xef\xbb\xbf" + log.read_bytes())
    result = load_trajectories([tmp_path])
    assert result.problems == [] and result.malformed_lines == 0
    assert (result.trajectories["t1"].question, result.trajectories["t1"].final_answer) == ("question t1", "the answer")


def test_a_first_line_without_event_loses_that_line_not_the_log(tmp_path: Path) -> None:
    # Its first line decided: the whole trajectory was skipped as "not a trajectory log".
    log = write_copilot_log(tmp_path / "t1.jsonl", "t1", "Q", executes=[{"server": "s", "tool": "x"}], answer="the answer")
    start, *rest = log.read_text().splitlines()
    lost = json.loads(start)
    lost.pop("event")
    log.write_text("\n".join([json.dumps(lost), *rest]) + "\n")
    result = load_trajectories([tmp_path], known_tasks={"t1"})
    [problem] = result.problems
    assert (problem.kind, Path(problem.file or "").name, problem.line) == ("malformed_line", "t1.jsonl", 1)
    assert "without an 'event' field" in problem.message
    trajectory = result.trajectories["t1"]
    assert trajectory.final_answer == "the answer" and len(trajectory.execute_calls) == 1


def test_a_file_with_no_event_on_any_line_is_still_skipped_whole(tmp_path: Path) -> None:
    lines = [json.dumps({"task_id": "t1", "verdict": "success"}), "{cut off", json.dumps({"task_id": "t2"})]
    (tmp_path / "verdicts.jsonl").write_text("\n".join(lines) + "\n")
    result = load_trajectories([tmp_path])
    assert not result.trajectories
    assert [(p.kind, p.line) for p in result.problems] == [("skipped_file", None)]


def _timed(log: Path, start: str, seconds: list[float], latencies_ms: list[float] | None = None) -> None:
    """Rewrite ``log``'s event times: ``start`` plus each line's offset; execute latencies too."""
    from datetime import datetime, timedelta  # noqa: PLC0415

    base = datetime.fromisoformat(start)
    lines = log.read_text(encoding="utf-8").splitlines()
    assert len(lines) == len(seconds)
    latencies = iter(latencies_ms or [])
    events = []
    for line, offset in zip(lines, seconds, strict=True):
        event = json.loads(line)
        event["ts"] = (base + timedelta(seconds=offset)).isoformat(timespec="milliseconds").replace("+00:00", "Z")
        if event["event"] == "execute" and latencies_ms is not None:
            event["latency_ms"] = next(latencies)
        events.append(json.dumps(event))
    log.write_text("\n".join(events) + "\n", encoding="utf-8")


def test_a_task_is_timed_over_its_sessions_and_its_tool_calls(tmp_path: Path) -> None:
    # Researchers asked how long tasks take: no report said (summary.json had it, no table used it).
    early = write_copilot_log(tmp_path / "a.jsonl", "t1", "Q", session_id="early", executes=[{"server": "s", "tool": "x"}])
    late = write_copilot_log(tmp_path / "b.jsonl", "t1", "Q", session_id="late", executes=[{"server": "s", "tool": "y"}])
    lines = len(early.read_text().splitlines())
    _timed(early, "2025-01-01T10:00:00+00:00", [0.0] * (lines - 1) + [30.0], [1500.0])
    _timed(late, "2025-01-01T11:00:00+00:00", [0.0] * (lines - 2) + [2.0, 12.5], [250.0])
    trajectory = load_trajectories([tmp_path]).trajectories["t1"]
    # The hour between the sessions is not the agent's: 30 s + 12.5 s.
    assert trajectory.seconds == 42.5
    assert trajectory.tool_seconds == 1.75
    # A log without latencies has no tool time (not 0 s).
    write_copilot_log(tmp_path / "c.jsonl", "t2", "Q")
    assert load_trajectories([tmp_path / "c.jsonl"]).trajectories["t2"].tool_seconds is None
