"""The conformance benchmark's verdict: what passed, what was expected to fail, what did not run."""

from __future__ import annotations

import pytest

from bench.proxy.conformance import Scenario, report


def test_a_run_where_no_scenario_ran_says_so_and_fails(capsys: pytest.CaptureFixture[str]) -> None:
    assert report({}, ["bogus"]) == 1
    out, err = capsys.readouterr()
    assert "0 of 0" not in out + err
    assert "no result for scenario(s) bogus" in err
    assert "suite.log" in err
    assert "no scenario ran, so none passed" in err


def test_passes_are_exit_0_an_unexpected_failure_exit_1(capsys: pytest.CaptureFixture[str]) -> None:
    passed = Scenario(name="ping", passed=True, failures=[])
    assert report({"ping": passed}, []) == 0
    assert "1 of 1 scenarios passed; 0 unexpected failure(s)" in capsys.readouterr().out
    broken = Scenario(name="tools-call", passed=False, failures=["tools-call: wrong result"])
    assert report({"ping": passed, "tools-call": broken}, ["ping", "tools-call"]) == 1
    assert "FAILED: tools-call: wrong result" in capsys.readouterr().out
