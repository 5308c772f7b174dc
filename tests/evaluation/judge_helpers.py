"""Builders for the judge tests: copilot logs, LiveMCPBench files, task lists, scripted judges."""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

from evaluation.judge.options import JudgeOptions
from evaluation.llm import LLMSettings
from index.settings import livemcpbench_dir
from server.trajectory.records import (
    ConfirmationEvent,
    ExecuteEvent,
    ExecuteResult,
    FinalAnswer,
    RouteEvent,
    RouteHit,
    SessionEnd,
    SessionStart,
    TrajectoryWriter,
    Usage,
    WorkspaceChanges,
    WorkspaceFile,
)
from tests.support.scripted_openai import Reply, ScriptedOpenAI, last_user_text

SAMPLE_TRAJECTORIES = livemcpbench_dir() / "sample_trajectories.json"
ALL_ANNOTATIONS = livemcpbench_dir() / "annotated_data/all_annotations.json"


def options(llm: ScriptedOpenAI, tmp_path: Path, **overrides: Any) -> JudgeOptions:
    """Judge options against the scripted endpoint, isolated cache and out dir in ``tmp_path``."""
    models = overrides.pop("models", ["judge-a"])
    llm_settings = LLMSettings(
        base_url=llm.base_url,
        api_key="test",
        models=models,
        timeout=overrides.pop("timeout", 10.0),
        max_retries=overrides.pop("max_retries", 2),
    )
    values: dict[str, Any] = {
        "llm": llm_settings,
        "out_dir": tmp_path / "out",
        "cache_dir": tmp_path / "cache",
        "show_progress": False,
        "write_reports": False,
        "tools_file": None,
    }
    values.update(overrides)
    return JudgeOptions.model_validate(values)


def task_entry(
    task_id: str, question: str, category: str = "work", steps: str = "1. do it", tools: str = "1. echo"
) -> dict:
    return {
        "task_id": task_id,
        "Question": question,
        "answers": "",
        "category": category,
        "file_name": "",
        "Annotator Metadata": {"Steps": steps, "Number of steps": "1", "Tools": tools, "Number of tools": "1"},
    }


def write_tasks(path: Path, entries: list[dict]) -> Path:
    path.write_text(json.dumps(entries), encoding="utf-8")
    return path


def write_copilot_log(
    path: Path,
    task_id: str | None,
    question: str | None = None,
    *,
    category: str | None = None,
    answer: str | None = "done",
    routes: list[tuple[str, list[tuple[str, str]]]] = (),  # type: ignore[assignment]
    executes: list[dict[str, Any]] = (),  # type: ignore[assignment]
    usage: list[tuple[int, int, float | None]] = (),  # type: ignore[assignment]
    workspace: list[WorkspaceFile] = (),  # type: ignore[assignment]
    end: bool = True,
    session_id: str = "s1",
    start_ts: str = "2025-01-01T00:00:00.000Z",
    run_end: tuple[str, str | None] | None = None,
    confirmations: list[ConfirmationEvent] = (),  # type: ignore[assignment]
    agent: str | None = None,
    model: str | None = None,
    original_question: str | None = None,
    confirm: str | None = None,
) -> Path:
    """One session of copilot events, the way the server and the runner write them.

    ``run_end`` (status, error kind) ends it as the runner does; ``confirmations`` are logged
    before the calls, as the runner's client answers them.
    """
    extra: dict[str, Any] = {}
    if original_question is not None:
        extra["original_question"] = original_question
    if confirm is not None:
        extra["confirm"] = confirm
    with TrajectoryWriter(path) as writer:
        writer.write(
            SessionStart(
                ts=start_ts, session_id=session_id, task_id=task_id, question=question, category=category,
                agent=agent, model=model, **extra,
            )
        )
        for confirmation in confirmations:
            writer.write(confirmation)
        number = 0
        for query, hits in routes:
            number += 1
            writer.write(
                RouteEvent(
                    call_id=f"r{number}", query=query, results=[RouteHit(server=s, tool=t, score=1.0) for s, t in hits]
                )
            )
        for spec in executes:
            number += 1
            writer.write(
                ExecuteEvent(
                    call_id=f"e{number}",
                    server=spec["server"],
                    tool=spec["tool"],
                    params=spec.get("params", {}),
                    result=ExecuteResult(
                        content=[{"type": "text", "text": spec.get("text", "ok")}], is_error=spec.get("is_error", False)
                    ),
                    error=spec.get("error"),
                    error_kind=spec.get("error_kind"),
                    latency_ms=spec.get("latency_ms", 5.0),
                )
            )
        for turn, (tokens_in, tokens_out, cost) in enumerate(usage, 1):
            writer.write(Usage(model="agent", input_tokens=tokens_in, output_tokens=tokens_out, cost=cost, turn=turn))
        if workspace:
            writer.write(WorkspaceChanges(root="/w", files=list(workspace)))
        if answer is not None:
            writer.write(FinalAnswer(text=answer))
        if run_end is not None:
            status, kind = run_end
            writer.write(SessionEnd(reason=f"task {status} ({kind}): scripted", status=status, error_kind=kind))
        elif end:
            writer.write(SessionEnd(reason="done"))
    return path


def livemcpbench_entry(
    task_id: str,
    question: str,
    category: str = "travel",
    *,
    answer: str = "Here is the answer.",
    steps: str = "1. find it",
    tools: str = "1. geocode",
    route_hits: list[tuple[str, str]] = (("maps", "search"), ("maps", "geocode")),  # type: ignore[assignment]
    tool_output: str = "meta=None content=[TextContent(type='text', text='lat 1, lon 2')] isError=False",
) -> dict:
    """A LiveMCPBench-style trajectory: system, user, route, execute-tool, final answer."""
    route_text = (
        "meta=None content=[TextContent(type='text', text='success: true\\nmatched_tools:\\n"
        + "".join(
            f"- server_name: {server}\\n  tool_name: {tool}\\n  tool_description: x\\n" for server, tool in route_hits
        )
        + "', annotations=None)] isError=False"
    )
    return {
        **task_entry(task_id, question, category, steps, tools),
        "response": answer,
        "messages": [
            {"role": "system", "content": "You are an agent."},
            {"role": "user", "content": question},
            {
                "role": "assistant",
                "content": "Let me search.",
                "tool_calls": [
                    {
                        "id": "c1",
                        "type": "function",
                        "function": {"name": "route", "arguments": json.dumps({"query": "find a place"})},
                    }
                ],
            },
            {"role": "tool", "tool_call_id": "c1", "content": route_text},
            {
                "role": "assistant",
                "content": "",
                "tool_calls": [
                    {
                        "id": "c2",
                        "type": "function",
                        "function": {
                            "name": "execute-tool",
                            "arguments": json.dumps(
                                {"server_name": "maps", "tool_name": "geocode", "params": {"q": "x"}}
                            ),
                        },
                    }
                ],
            },
            {"role": "tool", "tool_call_id": "c2", "content": tool_output},
            {"role": "assistant", "content": answer},
        ],
    }


def status_by_question(
    table: dict[str, str], default: str = "Thoughts: fine\nStatus: success"
) -> Callable[[dict], Reply]:
    """A handler answering each judge request by which question its prompt contains."""

    def handler(request: dict) -> Reply:
        text = last_user_text(request)
        for needle, reply in table.items():
            if needle in text:
                return Reply(content=reply)
        return Reply(content=default)

    return handler


def question_of(request: dict) -> str:
    """The task line of a judge or key-point prompt."""
    text = last_user_text(request)
    match = re.search(r"User Task: \n(.*)\n", text) or re.search(r"Task: (.*)", text)
    return match.group(1).strip() if match else ""


def verdict_lines(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]
