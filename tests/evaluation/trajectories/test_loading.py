"""Finding the trajectories under the judge's paths (``evaluation/trajectories/loading.py``)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

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
