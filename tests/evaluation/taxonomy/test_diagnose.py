"""The taxonomy inside a judge run: every unsuccessful task labelled, counts per class and
category in the report, and the cached LLM second opinion for what the log cannot decide."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from evaluation.judge.pipeline import judge_paths
from tests.evaluation.judge_helpers import options, status_by_question, task_entry, write_copilot_log, write_tasks
from tests.support.scripted_openai import ScriptedOpenAI, last_user_text

pytestmark = pytest.mark.timeout(120)


def tools_file(path: Path) -> Path:
    """A tool list in LiveMCPBench's tools.json form."""
    path.write_text(json.dumps([{"tools": {"fx": {"server_name": "fx", "tools": [
        {"name": "add", "description": "Add two integers and return the sum."},
        {"name": "echo", "description": "Echo the given text back unchanged."},
    ]}}}]))
    return path


async def test_unsuccessful_tasks_get_classes_counts_and_a_second_opinion(
    llm: ScriptedOpenAI, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("COPILOT_HOME", str(tmp_path / "no-index"))  # descriptions only: deterministic
    logs = tmp_path / "logs"
    logs.mkdir()
    write_copilot_log(logs / "ok.jsonl", "ok", "q ok", executes=[{"server": "fx", "tool": "add", "text": "5"}])
    write_copilot_log(
        logs / "tool.jsonl", "tool", "q tool", routes=[("add", [("fx", "add")])],
        executes=[{"server": "fx", "tool": "add", "is_error": True, "error": "bad a", "error_kind": "invalid_params"}],
    )
    write_copilot_log(logs / "query.jsonl", "query", "q query", answer="no idea")
    write_copilot_log(logs / "odd.jsonl", "odd", "q odd", routes=[("teleport me", [("fx", "echo")])])
    tasks = write_tasks(tmp_path / "tasks.json", [
        task_entry("ok", "q ok", "work", tools="1. add"),
        task_entry("tool", "q tool", "work", tools="1. add"),
        task_entry("query", "q query", "travel", tools="1. add"),
        task_entry("odd", "q odd", "travel", tools="1. teleport"),
    ])
    judge = status_by_question({"q ok": "Status: success"}, default="Status: failure")

    def handler(request: dict):
        if "diagnose why an AI agent failed" in request["messages"][0]["content"]:
            assert "teleport" in last_user_text(request)
            from tests.support.scripted_openai import Reply  # noqa: PLC0415

            return Reply(content="Reason: it asked for teleporting but nothing like it exists.\nClass: retrieve")
        return judge(request)

    llm.handler = handler
    opts = options(llm, tmp_path, tasks_file=tasks, tools_file=tools_file(tmp_path / "tools.json"), taxonomy_llm=True)
    await judge_paths([logs], opts)
    report = json.loads((tmp_path / "out" / "report.json").read_text())
    rows = {row["task_id"]: row for row in report["tasks"]}
    assert rows["ok"]["diagnosis"] is None
    assert (rows["tool"]["diagnosis"]["label"], rows["tool"]["diagnosis"]["cause"]) == ("tool", "invalid_params")
    assert rows["tool"]["diagnosis"]["evidence"][0]["call"] == "#2 (e2)"
    assert (rows["query"]["diagnosis"]["label"], rows["query"]["diagnosis"]["cause"]) == ("query", "no_route")
    odd = rows["odd"]["diagnosis"]
    assert (odd["label"], odd["source"]) == ("retrieve", "llm") and "teleporting" in odd["reason"]
    taxonomy = report["taxonomy"]
    assert taxonomy["counts"] == {"tool": 1, "query": 1, "retrieve": 1} and taxonomy["unsuccessful"] == 3
    assert taxonomy["by_category"] == {"Office": {"tool": 1}, "Travel": {"query": 1, "retrieve": 1}}
    assert taxonomy["llm_second_opinions"] == 1

    # A rerun asks nothing again: verdicts are resumed and the second opinion comes from the cache.
    before = len(llm.requests)
    await judge_paths([logs], opts)
    assert len(llm.requests) == before


@pytest.mark.parametrize(("answer", "said"), [("Class: planning", "no class"), ("Class: query/retrieve", "several classes")])
async def test_a_second_opinion_naming_no_one_class_leaves_the_task_undecided_and_says_so(
    llm: ScriptedOpenAI, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture,
    answer: str, said: str,
) -> None:
    # "planning" was dropped without a word; "query/retrieve" was taken as "query".
    monkeypatch.setenv("COPILOT_HOME", str(tmp_path / "no-index"))
    logs = tmp_path / "logs"
    logs.mkdir()
    write_copilot_log(logs / "odd.jsonl", "odd", "q odd", routes=[("teleport me", [("fx", "echo")])])
    tasks = write_tasks(tmp_path / "tasks.json", [task_entry("odd", "q odd", "travel", tools="1. teleport")])
    judge = status_by_question({}, default="Status: failure")

    def handler(request: dict):
        if "diagnose why an AI agent failed" in request["messages"][0]["content"]:
            from tests.support.scripted_openai import Reply  # noqa: PLC0415

            return Reply(content=f"Reason: unclear.\n{answer}")
        return judge(request)

    llm.handler = handler
    opts = options(llm, tmp_path, tasks_file=tasks, tools_file=tools_file(tmp_path / "tools.json"), taxonomy_llm=True)
    with caplog.at_level("WARNING", logger="evaluation.taxonomy.second_opinion"):
        await judge_paths([logs], opts)
    report = json.loads((tmp_path / "out" / "report.json").read_text())
    diagnosis = report["tasks"][0]["diagnosis"]
    assert diagnosis["source"] != "llm" and report["taxonomy"]["llm_second_opinions"] == 0
    shown = answer.removeprefix("Class: ")
    assert f"named {said}, not one of query, retrieve, tool, other ({shown!r}); the task stays undecided" in caplog.text
