"""The error taxonomy on hand-made trajectories, one or more per class, with the real capability
check (the bundled embedding model comparing queries with the annotated tools' descriptions)."""

from __future__ import annotations

from pathlib import Path

import pytest

from evaluation.taxonomy.capability import IndexCapabilityCheck
from evaluation.taxonomy.classify import classify
from evaluation.trajectories import Trajectory, load_trajectories
from tests.evaluation.judge_helpers import write_copilot_log

DESCRIPTIONS = {
    ("fx", "add"): "Add two integers and return the sum.",
    ("fx", "echo"): "Echo the given text back unchanged.",
    ("weather", "forecast"): "Get the weather forecast for a city for the next days.",
    ("ppt", "save_presentation"): "Save a PowerPoint presentation to a file.",
}


@pytest.fixture(scope="module")
def check() -> IndexCapabilityCheck:
    from index.models.embedding import get_embedder  # noqa: PLC0415

    return IndexCapabilityCheck(None, DESCRIPTIONS, get_embedder())


def trajectory(tmp_path: Path, **log) -> Trajectory:
    path = write_copilot_log(tmp_path / "t.jsonl", "t", "Add 2 and 3.", **log)
    return load_trajectories([path]).trajectories["t"]


def test_a_run_that_broke_is_other_with_the_runner_s_reason(tmp_path, check) -> None:
    found = classify(trajectory(tmp_path, run_end=("failed", "max_turns"), answer=None), ["add"], check)
    assert (found.label, found.cause) == ("other", "max_turns")
    assert "session_end" in found.evidence[0].note


def test_an_unavailable_server_is_other_with_the_failed_calls(tmp_path, check) -> None:
    calls = [{"server": "fx", "tool": "add", "params": {"a": 2, "b": 3}, "is_error": True, "text": "down",
              "error": "fx is unavailable", "error_kind": "server_unavailable"}] * 2
    found = classify(trajectory(tmp_path, routes=[("add numbers", [("fx", "add")])], executes=calls), ["add"], check)
    assert (found.label, found.cause) == ("other", "server_unavailable")
    assert [e.call for e in found.evidence[:2]] == ["#2 (e2)", "#3 (e3)"]


def test_wrong_parameters_are_a_tool_error(tmp_path, check) -> None:
    calls = [{"server": "fx", "tool": "add", "params": {"a": "two"}, "is_error": True, "text": "bad",
              "error": "params.a: 'two' is not of type 'integer'", "error_kind": "invalid_params"}]
    found = classify(trajectory(tmp_path, routes=[("add numbers", [("fx", "add")])], executes=calls), ["add"], check)
    assert (found.label, found.cause) == ("tool", "invalid_params")
    assert found.evidence[0].call == "#2 (e2)" and "not of type 'integer'" in found.evidence[0].note


def test_a_result_that_reports_an_error_is_a_tool_error(tmp_path, check) -> None:
    calls = [{"server": "ppt", "tool": "save_presentation", "params": {"presentation_id": "x"},
              "text": '{\n  "error": "No presentation is currently loaded or the specified ID is invalid"\n}'}]
    log = trajectory(tmp_path, routes=[("save a presentation", [("ppt", "save_presentation")])], executes=calls)
    found = classify(log, ["save_presentation"], check)
    assert (found.label, found.cause) == ("tool", "error_in_result")


def test_a_returned_tool_never_called_is_a_tool_error(tmp_path, check) -> None:
    calls = [{"server": "fx", "tool": "echo", "params": {"text": "5"}}]
    log = trajectory(tmp_path, routes=[("add numbers", [("fx", "echo"), ("fx", "add")])], executes=calls)
    found = classify(log, ["add"], check)
    assert (found.label, found.cause) == ("tool", "not_called")
    assert "rank 2" in found.reason and found.evidence[0].call == "#1 (r1)"


def test_the_right_query_without_the_tool_coming_back_is_a_retrieve_error(tmp_path, check) -> None:
    query = "<tool_assistant>\nserver: math\ntool: add two integers and return their sum\n</tool_assistant>"
    found = classify(trajectory(tmp_path, routes=[(query, [("fx", "echo")])]), ["add"], check)
    assert (found.label, found.cause) == ("retrieve", "not_returned")
    assert found.evidence[0].call == "#1 (r1)" and "similarity" in found.evidence[0].note


def test_queries_about_something_else_are_a_query_error(tmp_path, check) -> None:
    query = "<tool_assistant>\nserver: weather\ntool: weather forecast for Paris tomorrow\n</tool_assistant>"
    found = classify(trajectory(tmp_path, routes=[(query, [("weather", "forecast")])]), ["add"], check)
    assert (found.label, found.cause) == ("query", "off_target")
    assert "similarity" in found.evidence[0].note and "<" in found.evidence[0].note


def test_never_calling_route_is_a_query_error(tmp_path, check) -> None:
    found = classify(trajectory(tmp_path), ["add"], check)
    assert (found.label, found.cause) == ("query", "no_route")


def test_tools_that_all_worked_leave_the_answer_as_the_cause(tmp_path, check) -> None:
    calls = [{"server": "fx", "tool": "add", "params": {"a": 2, "b": 3}, "text": "5"}]
    found = classify(trajectory(tmp_path, routes=[("add", [("fx", "add")])], executes=calls), ["add"], check)
    assert (found.label, found.cause) == ("other", "answer")


def test_a_gold_tool_nobody_describes_is_undecided_not_guessed(tmp_path, check) -> None:
    found = classify(trajectory(tmp_path, routes=[("something", [("fx", "echo")])]), ["teleport"], check)
    assert (found.label, found.cause) == ("undecided", "no_capability_check")


def test_gold_tools_alike_cite_each_call_once_and_are_named(tmp_path, check) -> None:
    # Before: two undecided gold tools cited the same two route queries twice each, and the reason
    # said "also 1 more gold tool(s) alike" without naming it.
    routes = [("something", [("fx", "echo")]), ("anything else", [("fx", "echo")])]
    found = classify(trajectory(tmp_path, routes=routes), ["teleport", "levitate"], check)
    assert (found.label, found.cause) == ("undecided", "no_capability_check")
    assert [e.note for e in found.evidence] == ["query 'something'", "query 'anything else'"]
    assert found.reason.endswith("(also 1 more gold tool(s) alike: levitate)")


def test_without_annotated_tools_validation_errors_still_make_a_tool_error(tmp_path, check) -> None:
    calls = [{"server": "fx", "tool": "ad", "is_error": True, "text": "x", "error": "Unknown tool 'ad'",
              "error_kind": "unknown_tool"}]
    found = classify(trajectory(tmp_path, routes=[("add", [("fx", "add")])], executes=calls), [], check)
    assert (found.label, found.cause) == ("tool", "unknown_tool")


def test_the_first_class_in_pipeline_order_decides(tmp_path, check) -> None:
    # 'add' was called with wrong params (Tool); 'forecast' was never asked for (Query): Tool decides.
    calls = [{"server": "fx", "tool": "add", "params": {}, "is_error": True, "text": "x", "error": "missing a",
              "error_kind": "invalid_params"}]
    found = classify(trajectory(tmp_path, routes=[("add", [("fx", "add")])], executes=calls), ["forecast", "add"], check)
    assert found.label == "tool"
    assert any("forecast" in e.note for e in found.evidence)
