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
