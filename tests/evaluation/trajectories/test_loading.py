"""Finding the trajectories under the judge's paths (``evaluation/trajectories/loading.py``)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from evaluation.judge.lock import output_lock
from evaluation.judge.outputs import DAMAGED_VERDICTS_FILE, VERDICTS_FILE, is_judge_output_dir
from evaluation.judge.verdict_log import VerdictLog
from evaluation.trajectories import load_trajectories
from tests.evaluation.judge_helpers import write_copilot_log

pytestmark = pytest.mark.timeout(30)


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


def test_a_run_directory_reads_only_its_top_level_logs(tmp_path: Path) -> None:
    run = tmp_path / "run"
    run.mkdir()
    write_copilot_log(run / "t1.jsonl", "t1", "Q")
    (run / "summary.json").write_text("{}")
    workspace = run / "workspaces" / "t1"
    workspace.mkdir(parents=True)
    write_copilot_log(workspace / "made-by-the-agent.jsonl", "t9", "not a log of this run")
    result = load_trajectories([run])
    assert set(result.trajectories) == {"t1"} and result.problems == []


def test_repeats_and_missing_paths_are_reported_not_read(tmp_path: Path) -> None:
    repeated = tmp_path / "repeated"
    (repeated / "repeat-1").mkdir(parents=True)
    write_copilot_log(repeated / "repeat-1" / "t1.jsonl", "t1", "Q")
    (repeated / "repeats.json").write_text("{}")
    result = load_trajectories([repeated, tmp_path / "nope"])
    assert not result.trajectories
    assert [(p.kind, Path(p.file).name) for p in result.problems] == [
        ("skipped_file", "repeated"),
        ("unreadable_file", "nope"),
    ]
    assert "judge it on its own" in result.problems[0].message


def test_a_copied_log_is_read_once_and_logs_of_two_runs_are_flagged(tmp_path: Path) -> None:
    run_a, run_b = tmp_path / "a", tmp_path / "b"
    run_a.mkdir()
    run_b.mkdir()
    write_copilot_log(run_a / "t1.jsonl", "t1", "Q", executes=[{"server": "s", "tool": "x"}], session_id="one")
    (run_a / "t1-copy.jsonl").write_bytes((run_a / "t1.jsonl").read_bytes())
    result = load_trajectories([run_a])
    assert len(result.trajectories["t1"].execute_calls) == 1  # not counted twice
    [problem] = result.problems
    files = {Path(problem.file).name, Path(problem.message.split(" is also in ")[1].split(" (")[0]).name}
    assert problem.kind == "duplicate_session" and files == {"t1.jsonl", "t1-copy.jsonl"} and "read once" in problem.message

    write_copilot_log(run_b / "t1.jsonl", "t1", "Q", session_id="two", start_ts="2025-01-02T00:00:00.000Z")
    result = load_trajectories([run_a, run_b])
    assert [p.kind for p in result.problems] == ["duplicate_session", "mixed_runs"]
    assert "judge each on its own" in result.problems[1].message and str(run_b) in result.problems[1].message


def test_an_excluded_directory_that_is_a_symlink_loop_is_no_traceback(tmp_path: Path) -> None:
    """``--out``/``--cache-dir`` given as a symlink loop: Path.resolve() raised RuntimeError."""
    logs = tmp_path / "logs"
    logs.mkdir()
    write_copilot_log(logs / "t1.jsonl", "t1", "Q")
    (tmp_path / "loop-a").symlink_to(tmp_path / "loop-b")
    (tmp_path / "loop-b").symlink_to(tmp_path / "loop-a")
    result = load_trajectories([logs], exclude=[tmp_path / "loop-a"])
    assert set(result.trajectories) == {"t1"}


def _judge_output(directory: Path, *, lock: bool = True, report: bool = True) -> Path:
    """What a judge leaves in its ``--out``: verdicts (one cut short, set aside), report, lock."""
    directory.mkdir(parents=True, exist_ok=True)
    (directory / "verdicts.jsonl").write_text(json.dumps({"task_id": "t1", "verdict": "success"}) + "\n")
    (directory / "verdicts.damaged.jsonl").write_text('{"task_id": "t1", "verd\n')
    if report:
        (directory / "report.json").write_text(json.dumps({"n_tasks": 1, "tasks": []}))
    if lock:
        (directory / ".judge.lock").write_text("pid 1, since 2025-01-01T00:00:00Z")
    return directory


def test_earlier_judge_outputs_under_the_input_are_not_read_as_trajectories(tmp_path: Path) -> None:
    """Judging a run again into a new ``--out``: the earlier ``judge/`` (and a jury's
    ``judge-jury/``, a repeat's ``repeat-1/judge/``, an older judge's without a lock) were read as
    logs and reported: "verdicts.jsonl: not a trajectory log (no 'event' field)"."""
    run = tmp_path / "run"
    run.mkdir()
    write_copilot_log(run / "t1.jsonl", "t1", "Q")
    _judge_output(run / "judge")
    _judge_output(run / "judge-jury")
    _judge_output(run / "repeat-1" / "judge")
    _judge_output(run / "old-judge", lock=False)  # before the output lock: verdicts.jsonl + report.json
    result = load_trajectories([run], exclude=[tmp_path / "new-out"])
    assert set(result.trajectories) == {"t1"}
    assert result.problems == []
    assert result.files_read == 1


def test_only_the_judges_own_files_are_skipped_never_a_log_beside_them(tmp_path: Path) -> None:
    """Recognised by the judge's markers, not by a directory named ``judge``: a log in a directory
    of that name is read, and so is one the judge's outputs share a directory with; a foreign
    ``verdicts.jsonl`` without the judge's markers is still reported, and a file named on the
    command line is read whatever its directory holds."""
    logs = tmp_path / "logs"
    write_copilot_log(_mkdir(logs / "judge") / "t1.jsonl", "t1", "Q1")  # an agent's logs, no judge outputs
    write_copilot_log(_judge_output(logs / "out") / "t2.jsonl", "t2", "Q2")  # --out was the logs' directory
    _judge_output(logs / "notes", lock=False, report=False)  # only a verdicts.jsonl: not the judge's
    result = load_trajectories([logs])
    assert set(result.trajectories) == {"t1", "t2"}
    assert sorted((p.kind, Path(p.file).relative_to(logs).as_posix()) for p in result.problems) == [
        ("malformed_line", "notes/verdicts.damaged.jsonl"),
        ("skipped_file", "notes/verdicts.jsonl"),
    ]
    explicit = load_trajectories([logs / "out" / "verdicts.jsonl"])
    assert [(p.kind, Path(p.file).name) for p in explicit.problems] == [("skipped_file", "verdicts.jsonl")]


def test_the_judge_output_names_are_the_ones_the_judge_writes(tmp_path: Path) -> None:
    assert VerdictLog(tmp_path / VERDICTS_FILE).damaged_path.name == DAMAGED_VERDICTS_FILE
    with output_lock(tmp_path):
        pass
    assert is_judge_output_dir(tmp_path)  # the lock stays: the marker of every judge run


def _mkdir(path: Path) -> Path:
    path.mkdir(parents=True)
    return path
