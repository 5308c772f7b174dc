"""Learning the usage prior from trajectories written by the copilot's own writer."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from index.errors import ConfigError
from index.cli.args import main
from index.usage.learning import learn_usage, successful_tasks
from server.trajectory.records import ExecuteEvent, ExecuteResult, RouteEvent, SessionEnd, SessionStart, TrajectoryWriter


def _ok(server: str, tool: str) -> ExecuteEvent:
    return ExecuteEvent(call_id="s-1", server=server, tool=tool, result=ExecuteResult(content=[{"type": "text", "text": "done"}]))


def _trajectory(path: Path, *events: object, task_id: str | None = None) -> Path:
    writer = TrajectoryWriter(path)
    writer.write(SessionStart(session_id="s", task_id=task_id))
    writer.write(RouteEvent(call_id="s-0", query="write a file"))
    for event in events:
        writer.write(event)  # type: ignore[arg-type]
    writer.write(SessionEnd())
    return path


def test_a_tool_counts_once_per_trajectory_that_ran_it_without_error(tmp_path: Path) -> None:
    _trajectory(tmp_path / "a.jsonl", _ok("fs", "write_file"), _ok("fs", "write_file"), _ok("time", "now"))
    _trajectory(
        tmp_path / "b.jsonl",
        _ok("fs", "write_file"),
        # the tool's own failure, and a call the copilot refused, are no use of the tool
        ExecuteEvent(call_id="s-2", server="fs", tool="read_file", result=ExecuteResult(is_error=True)),
        ExecuteEvent(call_id="s-3", server="fs", tool="move_file", error="Unknown tool", error_kind="unknown_tool"),
    )
    learned = learn_usage([tmp_path])
    assert learned.prior.tools == {"fs": {"write_file": 2}, "time": {"now": 1}}
    assert learned.prior.trajectories == learned.files == 2
    assert (learned.executes, learned.counted, learned.problems) == (6, 3, [])


def test_what_cannot_be_read_is_reported_and_the_rest_is_learned(tmp_path: Path) -> None:
    log = _trajectory(tmp_path / "logs" / "a.jsonl", _ok("fs", "write_file"))
    with log.open("a", encoding="utf-8") as handle:
        handle.write('{"event": "execute", "server": "fs", "tool": "cut off\n')  # a line a killed process left
    (tmp_path / "logs" / "misses.jsonl").write_text(json.dumps({"query": "x", "rank": 3}) + "\n")
    learned = learn_usage([tmp_path / "logs", tmp_path / "absent"])
    assert learned.prior.tools == {"fs": {"write_file": 1}} and learned.files == 1
    assert learned.problems[0] == f"{tmp_path / 'absent'}: no such file or directory"
    assert learned.problems[1].startswith(f"{log}:5: not JSON (line 5)")
    assert learned.problems[2].startswith(f"{tmp_path / 'logs' / 'misses.jsonl'}: no trajectory event")


def test_execute_calls_of_a_skipped_file_are_not_counted(tmp_path: Path) -> None:
    # Another program's JSONL with 100 "execute" lines made "1 trajectory (101 execute calls)".
    _trajectory(tmp_path / "a.jsonl", _ok("fs", "write_file"))
    (tmp_path / "other.jsonl").write_text("".join(json.dumps({"event": "execute"}) + "\n" for _ in range(100)))
    learned = learn_usage([tmp_path])
    assert (learned.files, learned.executes) == (1, 1)
    assert learned.problems == [f"{tmp_path / 'other.jsonl'}: no trajectory event (not a copilot log?); skipped"]


def test_a_log_and_verdicts_saved_with_a_byte_order_mark_are_read(tmp_path: Path) -> None:
    log = _trajectory(tmp_path / "t1.jsonl", _ok("fs", "write_file"), task_id="t1")
    log.write_bytes(b"\xef\xbb\xbf" + log.read_bytes())
    judge = tmp_path / "judge"
    judge.mkdir()
    (judge / "verdicts.jsonl").write_bytes(b"\xef\xbb\xbf" + json.dumps({"task_id": "t1", "verdict": "success"}).encode() + b"\n")
    verdicts, problems = successful_tasks(judge)
    assert (verdicts.successful, problems) == ({"t1"}, [])
    learned = learn_usage([log], verdicts=verdicts)
    assert learned.prior.tools == {"fs": {"write_file": 1}} and learned.problems == []


def test_a_benchmark_run_is_read_at_its_top_level_only(tmp_path: Path) -> None:
    run = tmp_path / "run"
    (run / "summary.json").parent.mkdir()
    (run / "summary.json").write_text("{}")
    _trajectory(run / "task-1.jsonl", _ok("fs", "write_file"), task_id="task-1")
    # an agent's output in the task's workspace is not a log, even when it looks like one
    _trajectory(run / "task-1" / "workspace" / "out.jsonl", _ok("evil", "boost_me"))
    # the same file named twice counts once
    learned = learn_usage([run, run / "task-1.jsonl"])
    assert learned.prior.tools == {"fs": {"write_file": 1}} and learned.files == 1


def test_only_tasks_judged_a_success_count_when_verdicts_are_given(tmp_path: Path) -> None:
    _trajectory(tmp_path / "t1.jsonl", _ok("fs", "write_file"), task_id="t1")
    _trajectory(tmp_path / "t2.jsonl", _ok("fs", "read_file"), task_id="t2")
    _trajectory(tmp_path / "t3.jsonl", _ok("time", "now"))  # no task id: the file's name is the task
    judge = tmp_path / "judge"
    judge.mkdir()
    lines = [
        {"task_id": "t1", "verdict": "failure"},
        {"task_id": "t1", "verdict": "success"},  # judged again: the last verdict wins
        {"task_id": "t2", "verdict": "success"},
        {"task_id": "t2", "verdict": "abstain"},
        {"task_id": "t3", "verdict": "success"},
    ]
    (judge / "verdicts.jsonl").write_text("\n".join(json.dumps(line) for line in lines) + "\nnot json\n")
    verdicts, problems = successful_tasks(judge)
    assert (verdicts.successful, verdicts.judged) == ({"t1", "t3"}, {"t1", "t2", "t3"})
    assert problems == [f"{judge / 'verdicts.jsonl'}:6: not a verdict (task_id and verdict); skipped"]
    _trajectory(tmp_path / "t4.jsonl", _ok("fs", "delete"), task_id="t4")  # a task these verdicts never judged
    learned = learn_usage([tmp_path / f"t{n}.jsonl" for n in (1, 2, 3, 4)], verdicts=verdicts)
    assert learned.prior.tools == {"fs": {"write_file": 1}, "time": {"now": 1}}
    assert (learned.files, learned.unsuccessful, learned.unjudged) == (2, 1, 1)


def test_verdicts_that_are_none_or_another_runs_are_said_so(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    # Before: both read "left out: not judged a success", as if this run's tasks had failed.
    _trajectory(tmp_path / "logs" / "t1.jsonl", _ok("fs", "write_file"), task_id="t1")
    other = tmp_path / "other.jsonl"
    other.write_text(json.dumps({"task_id": "x9", "verdict": "success"}) + "\n")
    none = tmp_path / "none.jsonl"
    none.write_text(json.dumps({"event": "route"}) + "\n")
    with pytest.raises(ConfigError, match=r"none.jsonl: no verdict in it \(1 line\(s\) that are none\); pass the verdicts.jsonl"):
        successful_tasks(none)
    assert main(["usage", str(tmp_path / "logs"), "--successful", str(other)]) == 2
    err = capsys.readouterr().err
    assert f"(left out: 1 trajectory of tasks with no verdict in {other} (is it another run's verdicts?))" in err


def test_missing_verdicts_say_what_to_pass(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match=r"verdicts.jsonl: cannot read the judge's verdicts .*\(python -m evaluation.judge"):
        successful_tasks(tmp_path)
