"""Every benchmark refuses a bad argument at once, with argparse's one line (exit 2), before any
work: zero iterations or rounds, a path typed that does not exist, a baseline that is no checkout."""

from __future__ import annotations

import importlib
from pathlib import Path

import pytest

from bench.__main__ import BENCHMARKS


@pytest.mark.parametrize(
    ("name", "argv", "said"),
    [
        ("relay", ["--iterations", "0"], "argument --iterations: must be at least 1, got 0"),
        ("relay", ["--baseline", "{tmp}"], "not a checkout of this project (no server/__init__.py)"),
        ("pool", ["--servers", "0"], "argument --servers: must be at least 1, got 0"),
        ("pool", ["--spawn-iterations", "-3"], "argument --spawn-iterations: must be at least 1, got -3"),
        ("speed", ["--rounds", "0"], "argument --rounds: must be at least 1, got 0"),
        ("speed", ["--scale", "-5"], "argument --scale: must be at least 1, got -5"),
        ("speed", ["--tools-json", "{tmp}/none.json"], "argument --tools-json: {tmp}/none.json: no such file"),
        ("startup", ["--rounds", "0"], "argument --rounds: must be at least 1, got 0"),
        ("faults", ["--sessions", "0"], "argument --sessions: must be at least 1, got 0"),
        ("judge", ["--concurrency", "0"], "argument --concurrency: must be at least 1, got 0"),
        ("judge", ["--delay", "-1"], "argument --delay: must be a finite number of at least 0, got -1"),
        ("exposure", ["--routes", "-1"], "argument --routes: must be at least 1, got -1"),
        ("trust", ["--json", "{tmp}/missing/x.json"], "argument --json: {tmp}/missing: no such directory to write x.json in"),
        ("retrieval", ["--annotations", "{tmp}/none.json"], "argument --annotations: {tmp}/none.json: no such file"),
        ("taxonomy", ["--bogus-flag"], "unrecognized arguments: --bogus-flag"),
    ],
)
def test_a_bad_argument_is_refused_before_any_work(
    name: str, argv: list[str], said: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    module = importlib.import_module(BENCHMARKS[name])
    with pytest.raises(SystemExit) as stopped:
        module.main([arg.format(tmp=tmp_path) for arg in argv])
    assert stopped.value.code == 2
    err = " ".join(capsys.readouterr().err.split())
    assert said.format(tmp=tmp_path) in err and "Traceback" not in err


def test_an_unknown_benchmark_name_suggests_the_nearest(capsys: pytest.CaptureFixture[str]) -> None:
    from bench.__main__ import main

    assert main(["retreival", "--rounds", "1"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("unknown benchmark 'retreival'. Did you mean 'retrieval'? Choose from: ")
    assert err.count("\n") == 1


@pytest.mark.parametrize(
    ("name", "option", "content", "said"),
    [
        ("trust", "--corpus", "not json", "error: {file}:1: poisoning corpus is not valid JSON (Expecting value)."),
        ("trust", "--corpus", '[{"task_id": "t"}]', 'error: {file}: expected a poisoning corpus, a JSON object with a "cases" list'),
        ("trust", "--corpus", '{"cases": [{"tool": {"name": 5}, "other_tools": {}}]}', "error: {file}: case 1: tool."),
        ("trust", "--corpus", '{"cases": [{"tool": {"name": "t"}, "other_tools": []}]}', 'error: {file}: case 1 needs a "tool" object and an "other_tools" object'),
        ("speed", "--annotations", "not json", "error: {file}:1: task list is not valid JSON (Expecting value)."),
        ("speed", "--annotations", '[{"task_id": "t"}]', 'error: {file}: entry 1 has no "Question" and "task_id" text'),
        ("exposure", "--annotations", '{"cases": []}', "error: {file}: expected LiveMCPBench's annotation list"),
    ],
)
def test_an_input_file_of_the_wrong_kind_is_one_line_before_any_work(
    name: str, option: str, content: str, said: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # Each gave a traceback (JSONDecodeError, KeyError, TypeError) before.
    given = tmp_path / "input.json"
    given.write_text(content, encoding="utf-8")
    module = importlib.import_module(BENCHMARKS[name])
    extra = ["--skip-build", "--rounds", "1"] if name == "speed" else []
    assert module.main([option, str(given), *extra]) == 2
    err = capsys.readouterr().err
    assert said.format(file=given) in err and "Traceback" not in err


def test_speed_says_what_it_measures_without_livemcpbench_data(tmp_path: Path) -> None:
    from bench.speed import data_note

    present = tmp_path / "present.json"
    present.write_text("[]", encoding="utf-8")
    assert data_note(present, present, present) == ""
    note = data_note(tmp_path / "all_annotations.json", present, tmp_path / "sample_trajectories.json")
    assert note.startswith(f"LiveMCPBench data not found ({tmp_path / 'all_annotations.json'}, {tmp_path / 'sample_trajectories.json'}): ")
    assert "10 built-in questions for the task questions; no agent-query rows (set COPILOT_LIVEMCPBENCH_DIR" in note
