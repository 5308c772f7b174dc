"""What the query sets carry (bench.retrieval.sets): the real agent's sessions, read from a
trajectory file of the sample's shape (LiveMCPBench's own is not needed)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from bench.retrieval.sets import Query, QuerySet, agent_step_set, real_agent_set, route_queries, route_sessions


def _call(call_id: str, name: str, **arguments: Any) -> dict[str, Any]:
    return {"id": call_id, "function": {"name": name, "arguments": json.dumps(arguments)}}


def _result(call_id: str, content: str) -> dict[str, Any]:
    return {"role": "tool", "tool_call_id": call_id, "content": content}


def _printed(is_error: bool) -> str:
    """A result as the sample's agent logged it: the child's JSON inside the printed result."""
    inner = json.dumps({"content": [{"type": "text", "text": "ok"}], "isError": is_error}, indent=2)
    return f"meta=None content=[TextContent(type='text', text='{inner}', annotations=None)] isError=False"


def _trajectories(path: Path) -> Path:
    messages = [
        {"role": "assistant", "tool_calls": [_call("r1", "route", query="find a map tool")]},
        _result("r1", "success: true"),
        {"role": "assistant", "tool_calls": [
            _call("e1", "execute-tool", server_name="maps", tool_name="geocode", params={}),
            _call("e2", "execute-tool", server_name="files", tool_name="write", params={}),
            _call("e3", "execute-tool", server_name="music", tool_name="load", params={}),
        ]},
        _result("e1", _printed(False)),
        _result("e2", _printed(True)),  # the child's error result: not counted
        _result("e3", "Tool call timed out."),  # no result: not counted
        {"role": "assistant", "tool_calls": [_call("r2", "route", query="write a file"), _call("r3", "route", query="")]},
        {"role": "assistant", "tool_calls": [{"id": "bad", "function": {"name": "route", "arguments": "{not json"}}]},
        {"role": "assistant", "tool_calls": [_call("e4", "execute-tool", server_name="files", tool_name="write", params={})]},
        _result("e4", _printed(False)),
        {"role": "assistant", "tool_calls": [_call("r4", "route", query="save the map")]},
    ]
    path.write_text(json.dumps([{"task_id": "t1", "messages": messages}, {"task_id": "t2", "messages": []}]))
    return path


def test_each_route_carries_the_servers_its_session_ran_without_error_most_recent_first(tmp_path: Path) -> None:
    path = _trajectories(tmp_path / "trajectories.json")
    assert route_sessions(path) == [
        ("t1", "find a map tool", ()),
        ("t1", "write a file", ("maps",)),
        ("t1", "save the map", ("files", "maps")),
    ]
    assert route_queries(path) == [("t1", "find a map tool"), ("t1", "write a file"), ("t1", "save the map")]
    assert route_sessions(tmp_path / "missing.json") == []


def test_the_real_agent_set_keeps_each_query_s_session(tmp_path: Path) -> None:
    questions = QuerySet("questions", [Query("a task", frozenset({"geocode"}), "t1", "Travel", "question")])
    real = real_agent_set(_trajectories(tmp_path / "trajectories.json"), questions)
    assert [(q.text, q.session, q.relevant) for q in real.queries] == [
        ("find a map tool", (), frozenset({"geocode"})),
        ("write a file", ("maps",), frozenset({"geocode"})),
        ("save the map", ("files", "maps"), frozenset({"geocode"})),
    ]


def test_a_dev_set_query_keeps_its_step(tmp_path: Path) -> None:
    lines = [
        {"id": f"t1-s{step}-plain", "task_id": "t1", "category": "Office", "step": step, "form": "plain",
         "query": f"step {step}", "relevant": relevant}
        for step, relevant in ((1, ["read_file"]), (2, ["unknown_tool"]), (3, ["write_file"]))
    ]
    path = tmp_path / "agent_queries.jsonl"
    path.write_text("".join(json.dumps(line) + "\n" for line in lines))
    steps = agent_step_set({"read_file", "write_file"}, path)
    assert [(q.text, q.step) for q in steps.queries] == [("step 1", 1), ("step 3", 3)] and steps.skipped == 1


def test_input_files_of_the_wrong_kind_name_the_file_and_entry(tmp_path: Path) -> None:
    # Before: an AttributeError or JSONDecodeError traceback (bench retrieval, bench speed after
    # its index build), where the README promises one error line.
    import pytest  # noqa: PLC0415

    from bench.retrieval.sets import read_annotations  # noqa: PLC0415
    from index.errors import ConfigError  # noqa: PLC0415

    wrong = tmp_path / "wrong.json"
    for data, message in (
        ({"cases": []}, "expected LiveMCPBench's annotation list"),
        ([{"Question": "q"}], 'entry 1 has no "Question" and "task_id" text'),
        ([{"Question": "q", "task_id": "t", "Annotator Metadata": "x"}], 'entry 1: "Annotator Metadata" must be an object'),
        (
            [{"Question": "q", "task_id": "t", "Annotator Metadata": {"Steps": "1. x", "Tools": 7}}],
            r'entry 1: "Annotator Metadata"\."Tools" must be text \(numbered lines\), got int',
        ),
    ):
        wrong.write_text(json.dumps(data))
        with pytest.raises(ConfigError, match=message):
            read_annotations(wrong)
    for data, message in (
        ({"cases": []}, "expected LiveMCPBench's trajectories"),
        (["x"], "entry 1 is not a trajectory"),
        ([{"messages": []}, {"Question": "q", "task_id": "t"}], "entry 2 is not a trajectory"),  # the annotations instead
        ([{"messages": [{"role": "assistant", "tool_calls": ["x"]}]}], "entry 1, message 1: not a chat message"),
    ):
        wrong.write_text(json.dumps(data))
        with pytest.raises(ConfigError, match=message):
            route_sessions(wrong)
    wrong.write_text('{"query": 1}\n{"query": 2}\n')
    with pytest.raises(ConfigError, match=r"wrong.json:2: .*not valid JSON"):
        read_annotations(wrong)
