"""``python -m index usage``: what it learns from, says, writes and refuses."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from index.cli.args import main
from index.usage.prior import UsagePrior, read_usage_prior, write_usage_prior
from server.trajectory.records import ExecuteEvent, ExecuteResult, SessionStart, TrajectoryWriter


@pytest.fixture
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    for name in ("COPILOT_LOG_DIR", "COPILOT_USAGE_PRIOR", "COPILOT_USAGE_PRIOR_WEIGHT"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("COPILOT_HOME", str(tmp_path / "home"))
    return tmp_path / "home"


def _log(path: Path, task_id: str, *tools: tuple[str, str]) -> None:
    writer = TrajectoryWriter(path)
    writer.write(SessionStart(session_id=task_id, task_id=task_id))
    for number, (server, tool) in enumerate(tools):
        writer.write(ExecuteEvent(call_id=f"{task_id}-{number}", server=server, tool=tool, result=ExecuteResult()))


def test_learns_from_the_copilot_s_log_directory_by_default(home: Path, capsys: pytest.CaptureFixture[str]) -> None:
    _log(home / "logs" / "a.jsonl", "a", ("fs", "write_file"), ("time", "now"))
    _log(home / "logs" / "b.jsonl", "b", ("fs", "write_file"))
    assert main(["usage", "--show", "1"]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out == [
        "learned from 2 trajectories (3 execute calls): 2 tools of 2 servers ran without error",
        "most used: fs/write_file 2",
        f"wrote {home / 'usage-prior.json'}: route adds 0.5 x log(1 + trajectories) to a tool's score "
        "(COPILOT_USAGE_PRIOR_WEIGHT; 0 turns it off)",
    ]
    prior = read_usage_prior(home / "usage-prior.json")
    assert prior is not None and prior.tools == {"fs": {"write_file": 2}, "time": {"now": 1}}


def test_names_no_utf8_stream_can_write_are_shown_as_escapes(home: Path, capsys: pytest.CaptureFixture[str]) -> None:
    # JSON's "\ud800" reads into a lone surrogate: printing "most used:" raised UnicodeEncodeError.
    log = home / "logs" / "a.jsonl"
    _log(log, "a", ("fs", "write_file"))
    log.write_text(log.read_text().replace('"fs"', '"\\ud800fs"').replace('"write_file"', '"wr\\u001bite"'))
    assert main(["usage"]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[1] == r"most used: \ud800fs/wr\x1bite 1"


def test_counts_only_successful_tasks_and_warns_of_what_it_could_not_read(
    home: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    run = tmp_path / "run"
    _log(run / "t1.jsonl", "t1", ("fs", "write_file"))
    _log(run / "t2.jsonl", "t2", ("fs", "read_file"))
    (run / "t3.jsonl").write_text("{oops\n")
    (run / "verdicts.jsonl").write_text(json.dumps({"task_id": "t1", "verdict": "success"}) + "\n")
    monkeypatch.setenv("COPILOT_USAGE_PRIOR_WEIGHT", "0")
    out_file = tmp_path / "prior.json"
    assert main(["usage", str(run), "--successful", str(run / "verdicts.jsonl"), "--out", str(out_file)]) == 1
    captured = capsys.readouterr()
    assert captured.err.splitlines() == [
        f"warning: {run / 't3.jsonl'}:1: not JSON (line 1); the other lines were read",
        f"warning: {run / 't3.jsonl'}: no trajectory event (not a copilot log?); skipped",
        f"warning: {run / 'verdicts.jsonl'}: no trajectory event (not a copilot log?); skipped",
    ]
    assert captured.out.splitlines()[0] == (
        f"learned from 1 trajectory (2 execute calls; left out: 1 trajectory of tasks with no verdict in "
        f"{run / 'verdicts.jsonl'}): 1 tool of 1 server ran without error"
    )
    assert captured.out.splitlines()[-1] == (
        f"wrote {out_file}: COPILOT_USAGE_PRIOR_WEIGHT is 0, so route does not use it until that is set; route reads "
        f"{home / 'usage-prior.json'}, so set COPILOT_USAGE_PRIOR={out_file} to use this one"
    )
    prior = read_usage_prior(out_file)
    assert prior is not None and prior.tools == {"fs": {"write_file": 1}}


def test_nothing_to_learn_from_leaves_the_prior_in_place(home: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    kept = UsagePrior(trajectories=3, tools={"fs": {"write_file": 3}})
    write_usage_prior(kept, home / "usage-prior.json")
    (tmp_path / "empty").mkdir()
    assert main(["usage", str(tmp_path / "empty")]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"error: no trajectory to learn from under {tmp_path / 'empty'}; nothing written.")
    assert read_usage_prior(home / "usage-prior.json") == kept


def test_a_negative_show_is_refused(home: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["usage", "--show", "-1"]) == 2
    assert capsys.readouterr().err == "error: --show must be 0 or more (got -1).\n"
