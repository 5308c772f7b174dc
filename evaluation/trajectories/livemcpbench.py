"""LiveMCPBench's published trajectory files: a JSON list of tasks with OpenAI-style ``messages``.

Each entry is checked before it is read; a malformed one (``messages`` that is not a list, a
``null`` tool call, ``Annotator Metadata`` that is not an object …) is skipped and reported as
``file: entry N: what is wrong``, and the others are read. A file that is not UTF-8 or not JSON
is reported as a whole.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

from evaluation.json_files import decode_text
from index.json_text import parse_json
from evaluation.tasks import canonical_category, split_numbered
from evaluation.trajectories.copilot import infer_error_kind
from evaluation.trajectories.model import LoadResult, Problem, ToolCall, Trajectory

# A LiveMCPBench tool message that is a failure notice rather than an MCP result.
_LIVEMCP_FAILURE = re.compile(r"^\s*(?:tool call timed out|timeout|error\b)", re.IGNORECASE)
# LiveMCPBench route results are YAML-ish text: "- server_name: X\n  tool_name: Y".
_ROUTE_HIT = re.compile(r"server_name:\s*['\"]?([^\s'\"\\]+)['\"]?\s*(?:\\n|\n)\s*tool_name:\s*['\"]?([^\s'\"\\]+)")
_EXECUTE_NAMES = frozenset({"execute-tool", "execute_tool", "execute"})


def looks_like_livemcpbench(data: Any) -> bool:
    """A JSON list in which some entry is an object with ``messages``."""
    return isinstance(data, list) and any(isinstance(entry, dict) and "messages" in entry for entry in data)


def json_type(value: Any) -> str:
    """The JSON name of a value's type, for messages that say what was found."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, (int, float)):
        return "a number"
    if isinstance(value, str):
        return "a string"
    if isinstance(value, list):
        return "a list"
    return "an object"


def _message_problem(number: int, message: Any) -> str | None:
    where = f"messages[{number}]"
    if not isinstance(message, dict):
        return f"{where} is {json_type(message)}, expected a message object"
    if not isinstance(message.get("role"), str):
        return f"{where}.role is {json_type(message.get('role'))}, expected a string"
    tool_calls = message.get("tool_calls")
    if tool_calls is None:
        return None
    if not isinstance(tool_calls, list):
        return f"{where}.tool_calls is {json_type(tool_calls)}, expected a list"
    for position, call in enumerate(tool_calls):
        if not isinstance(call, dict):
            return f"{where}.tool_calls[{position}] is {json_type(call)}, expected a tool call object"
        function = call.get("function")
        if not isinstance(function, dict):
            return f"{where}.tool_calls[{position}].function is {json_type(function)}, expected an object"
        if not isinstance(function.get("name"), str):
            return f"{where}.tool_calls[{position}].function.name is {json_type(function.get('name'))}, expected a string"
    return None


def entry_problem(entry: Any) -> str | None:
    """What is wrong with one entry of a trajectory file, or ``None`` when it can be read."""
    if not isinstance(entry, dict):
        return f"is {json_type(entry)}, expected an object with task_id and messages"
    task_id = entry.get("task_id")
    if not isinstance(task_id, (str, int)) or isinstance(task_id, bool) or not str(task_id).strip():
        return "has no task_id"
    for key in ("Question", "question", "response"):
        if entry.get(key) is not None and not isinstance(entry[key], str):
            return f"{key} is {json_type(entry[key])}, expected a string"
    meta = entry.get("Annotator Metadata")
    if meta is not None:
        if not isinstance(meta, dict):
            return f"'Annotator Metadata' is {json_type(meta)}, expected an object"
        for key in ("Steps", "Tools"):
            if meta.get(key) is not None and not isinstance(meta[key], str):
                return f"'Annotator Metadata'.{key} is {json_type(meta[key])}, expected numbered lines of text"
    messages = entry.get("messages")
    if not isinstance(messages, list):
        return f"messages is {json_type(messages)}, expected a list of messages"
    for number, message in enumerate(messages):
        problem = _message_problem(number, message)
        if problem:
            return problem
    return None


def _json_args(text: Any) -> dict[str, Any]:
    if isinstance(text, dict):
        return text
    try:
        value = parse_json(text or "{}")
    except (TypeError, ValueError):
        return {}
    return value if isinstance(value, dict) else {}


def _as_text(value: Any) -> str:
    if isinstance(value, str):
        return value
    return json.dumps(value, ensure_ascii=False) if value else ""


def _tool_call(index: int, tool_call: dict[str, Any], outputs: dict[Any, Any]) -> ToolCall | None:
    function = tool_call["function"]
    name = function["name"]
    raw_args = function.get("arguments")
    arguments = raw_args if isinstance(raw_args, str) else json.dumps(raw_args, ensure_ascii=False)
    args = _json_args(raw_args)
    output = outputs.get(tool_call.get("id"))
    output_text = _as_text(output)
    call_id = str(tool_call.get("id", ""))
    if name == "route":
        return ToolCall(
            index=index,
            kind="route",
            call_id=call_id,
            query=str(args.get("query", "")),
            hits=[(server, tool) for server, tool in _ROUTE_HIT.findall(output_text)],
            arguments=arguments,
            output=output_text,
        )
    if name not in _EXECUTE_NAMES:
        return None
    is_error = "isError=True" in output_text or bool(_LIVEMCP_FAILURE.match(output_text))
    if output is None:
        is_error, output_text = True, "(no tool result in the trajectory)"
    server, tool = args.get("server_name"), args.get("tool_name")
    return ToolCall(
        index=index,
        kind="execute",
        call_id=call_id,
        server=server if isinstance(server, str) else None,
        tool=tool if isinstance(tool, str) else None,
        params=args.get("params"),
        arguments=arguments,
        output=output_text,
        is_error=is_error,
        error_kind=infer_error_kind(is_error, output_text, None),
    )


def livemcpbench_trajectory(entry: dict[str, Any], source: str) -> Trajectory:
    """One entry of a LiveMCPBench trajectory file (checked with :func:`entry_problem` first)."""
    meta = entry.get("Annotator Metadata") or {}
    messages: list[dict[str, Any]] = entry["messages"]
    outputs = {m.get("tool_call_id"): m.get("content") for m in messages if m["role"] == "tool"}
    calls: list[ToolCall] = []
    final_answer: str | None = None
    turns = 0
    for message in messages:
        if message["role"] != "assistant":
            continue
        turns += 1
        tool_calls = message.get("tool_calls") or []
        content = message.get("content")
        if content and not tool_calls and not message.get("function_call"):
            final_answer = _as_text(content)
        for tool_call in tool_calls:
            call = _tool_call(len(calls) + 1, tool_call, outputs)
            if call is not None:
                calls.append(call)
    if final_answer is None and entry.get("response"):
        final_answer = str(entry["response"])
    human = entry.get("task_success")
    return Trajectory(
        task_id=str(entry["task_id"]),
        format="livemcpbench",
        question=entry.get("Question") or entry.get("question"),
        category=canonical_category(str(entry["category"])) if entry.get("category") else None,
        steps=split_numbered(meta.get("Steps")),
        gold_tools=split_numbered(meta.get("Tools")),
        final_answer=final_answer,
        calls=calls,
        turns=turns,
        human_success=(str(human).strip().lower() == "success") if human is not None else None,
        sources=[source],
    )


def read_livemcpbench(path: Path, result: LoadResult, explicit: bool) -> list[Trajectory]:
    try:
        raw = path.read_bytes()
    except OSError as error:
        result.problems.append(Problem(kind="unreadable_file", file=str(path), message=f"cannot read ({error.strerror})"))
        return []
    try:
        data = parse_json(decode_text(raw))
    except UnicodeDecodeError as error:
        result.problems.append(
            Problem(kind="unreadable_file", file=str(path), message=f"not UTF-8 text ({error.reason} at byte {error.start}); skipped")
        )
        return []
    except json.JSONDecodeError as error:
        result.problems.append(
            Problem(kind="malformed_line", file=str(path), line=error.lineno, message=f"not valid JSON ({error.msg})")
        )
        return []
    if not looks_like_livemcpbench(data):
        if explicit:
            hint = (
                " (this looks like a task list: pass it with --tasks)"
                if isinstance(data, list) and data and isinstance(data[0], dict) and "task_id" in data[0]
                else ""
            )
            result.problems.append(
                Problem(
                    kind="skipped_file",
                    file=str(path),
                    message=f"not a LiveMCPBench trajectory file (a JSON list of tasks with 'messages'){hint}",
                )
            )
        return []
    trajectories: dict[str, Trajectory] = {}
    entry_of: dict[str, int] = {}
    for number, entry in enumerate(data, 1):
        problem = entry_problem(entry)
        if problem is None:
            try:
                trajectory = livemcpbench_trajectory(entry, str(path))
                if trajectory.task_id in trajectories:
                    result.problems.append(
                        Problem(
                            kind="duplicate_task",
                            file=str(path),
                            entry=entry_of[trajectory.task_id],
                            message=f"task_id {trajectory.task_id!r} again at entry {number}; this earlier entry is "
                            "skipped (the later one is judged)",
                        )
                    )
                trajectories[trajectory.task_id] = trajectory
                entry_of[trajectory.task_id] = number
                continue
            except (TypeError, ValueError, KeyError, AttributeError) as error:  # a shape entry_problem does not foresee
                problem = f"cannot be read ({type(error).__name__}: {error})"
        result.problems.append(Problem(kind="malformed_entry", file=str(path), entry=number, message=f"{problem}; skipped"))
    return list(trajectories.values())
