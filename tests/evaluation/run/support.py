"""Shared helpers of the runner tests: a scripted tool-calling model and small task sets."""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

from tests.support.scripted_openai import Reply, ToolCall

Params = dict[str, Any] | Callable[[str], dict[str, Any]]


def question_of(request: dict[str, Any]) -> str:
    """The task question: the first user message of the conversation."""
    for message in request.get("messages", []):
        if message.get("role") == "user":
            return str(message.get("content") or "")
    return ""


def tool_results(request: dict[str, Any]) -> list[str]:
    return [str(m.get("content") or "") for m in request.get("messages", []) if m.get("role") == "tool"]


def route_execute_answer(
    server: str,
    tool: str,
    params: Params,
    answer: str | Callable[[dict[str, Any]], str] = "done",
    query: str = "<tool_assistant>\nserver: test\ntool: echo text\n</tool_assistant>",
    execute_name: str = "execute",
) -> Callable[[dict[str, Any]], Reply]:
    """A model that calls route, then execute, then answers -- like the paper's agent does."""

    def handler(request: dict[str, Any]) -> Reply:
        done = len(tool_results(request))
        if done == 0:
            return Reply(content="Let me find a tool.", tool_calls=[ToolCall("route", {"query": query})])
        if done == 1:
            arguments = params(question_of(request)) if callable(params) else params
            return Reply(
                tool_calls=[ToolCall(execute_name, {"server_name": server, "tool_name": tool, "params": arguments})]
            )
        return Reply(content=answer(request) if callable(answer) else answer, prompt_tokens=100, completion_tokens=20)

    return handler


def path_in(question: str, suffix: str) -> str:
    """The absolute path ending in ``suffix`` that the (workspace-mapped) question names."""
    match = re.search(r"(/\S*" + re.escape(suffix) + r")", question)
    assert match, f"no path ending in {suffix!r} in {question!r}"
    return match.group(1)


def write_tasks(path: Path, tasks: list[dict[str, Any]]) -> Path:
    entries = []
    for task in tasks:
        entry = {
            "task_id": task["task_id"],
            "Question": task["question"],
            "answers": task.get("answers", ""),
            "category": task.get("category", "Office"),
            "file_name": task.get("file_name", ""),
            "Annotator Metadata": {"Steps": task.get("steps", "1. do it"), "Tools": task.get("tools", "1. echo")},
        }
        entries.append(entry)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(entries, indent=1), encoding="utf-8")
    return path


def read_events(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]
