"""Reading trajectories -- the copilot's JSONL logs and LiveMCPBench's published JSON files --
into one typed :class:`Trajectory` per task.

Copilot logs use the one format definition in ``server.trajectory``. A task may span several
files (several sessions, e.g. a retried run); they are merged by task id in time order. A file
without ``session_end`` (the agent crashed) is still read. Malformed lines are skipped and
reported as ``file:line`` problems, never fatal.
"""

from __future__ import annotations

import hashlib
import json
import logging
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, Field, ValidationError

from evaluation.tasks import canonical_category, split_numbered
from server.trajectory import (
    ExecuteEvent,
    FinalAnswer,
    RouteEvent,
    SessionEnd,
    SessionStart,
    Usage,
    WorkspaceChanges,
    WorkspaceFile,
    parse_event,
)

logger = logging.getLogger(__name__)

#: Execute error kinds that mean the server itself could not serve the call.
UNAVAILABLE_KINDS = frozenset({"server_unavailable", "child_crashed", "timeout"})
_TIMEOUT_TEXT = re.compile(r"\btimed?\s*out\b|\btimeout\b", re.IGNORECASE)
# A LiveMCPBench tool message that is a failure notice rather than an MCP result.
_LIVEMCP_FAILURE = re.compile(r"^\s*(?:tool call timed out|timeout|error\b)", re.IGNORECASE)
# LiveMCPBench route results are YAML-ish text: "- server_name: X\n  tool_name: Y".
_ROUTE_HIT = re.compile(r"server_name:\s*['\"]?([^\s'\"\\]+)['\"]?\s*(?:\\n|\n)\s*tool_name:\s*['\"]?([^\s'\"\\]+)")


class ToolCall(BaseModel):
    """One ``route`` or ``execute`` call, numbered in trajectory order (``#index``)."""

    index: int
    kind: Literal["route", "execute"]
    call_id: str = ""
    ts: str | None = None
    query: str | None = None
    #: Ranked ``(server, tool)`` results of a route call.
    hits: list[tuple[str | None, str]] = Field(default_factory=list)
    server: str | None = None
    tool: str | None = None
    params: Any = None
    #: The call's arguments as the agent sent them (what the paper's judge is shown).
    arguments: str = ""
    output: str = ""
    is_error: bool = False
    error: str | None = None
    error_kind: str | None = None
    latency_ms: float | None = None


class UsageTotals(BaseModel):
    input_tokens: int = 0
    output_tokens: int = 0
    cost: float | None = None
    model: str | None = None


class Trajectory(BaseModel):
    task_id: str
    format: Literal["copilot", "livemcpbench"]
    question: str | None = None
    category: str | None = None
    steps: list[str] = Field(default_factory=list)
    gold_tools: list[str] = Field(default_factory=list)
    final_answer: str | None = None
    calls: list[ToolCall] = Field(default_factory=list)
    usage: UsageTotals | None = None
    workspace: list[WorkspaceFile] = Field(default_factory=list)
    #: LLM turns of the agent; ``None`` when the log does not say.
    turns: int | None = None
    sessions: int = 1
    #: ``False`` when the last session has no ``session_end`` (the agent crashed or was killed).
    complete: bool = True
    human_success: bool | None = None
    sources: list[str] = Field(default_factory=list)

    @property
    def route_calls(self) -> list[ToolCall]:
        return [call for call in self.calls if call.kind == "route"]

    @property
    def execute_calls(self) -> list[ToolCall]:
        return [call for call in self.calls if call.kind == "execute"]

    @property
    def distinct_tools(self) -> int:
        return len({(call.server, call.tool) for call in self.execute_calls})

    @property
    def tool_errors(self) -> int:
        return sum(1 for call in self.execute_calls if call.is_error)

    @property
    def estimated_turns(self) -> int:
        """Known turns, else an upper bound: one turn per call plus the answer."""
        if self.turns is not None:
            return self.turns
        return len(self.calls) + (1 if self.final_answer else 0)

    def content_hash(self) -> str:
        """Identifies what the judge sees; a changed trajectory is judged again on resume."""
        payload = self.model_dump(mode="json", exclude={"sources"})
        return hashlib.sha256(json.dumps(payload, sort_keys=True, ensure_ascii=False).encode()).hexdigest()[:16]


class Problem(BaseModel):
    """Something in the input that was skipped; ``line`` is 1-based."""

    kind: Literal["malformed_line", "skipped_file", "unreadable_file", "no_task"]
    file: str
    line: int | None = None
    message: str

    def __str__(self) -> str:
        where = f"{self.file}:{self.line}" if self.line else self.file
        return f"{where}: {self.message}"


class LoadResult(BaseModel):
    trajectories: dict[str, Trajectory] = Field(default_factory=dict)
    problems: list[Problem] = Field(default_factory=list)
    files_read: int = 0

    @property
    def malformed_lines(self) -> int:
        return sum(1 for problem in self.problems if problem.kind == "malformed_line")


# ---------------------------------------------------------------------------------------------
# helpers


def _result_text(event: ExecuteEvent) -> str:
    parts: list[str] = []
    result = event.result
    if result is not None:
        for block in result.content:
            kind = block.get("type")
            if kind == "text":
                parts.append(str(block.get("text", "")))
            elif kind in ("image", "audio"):
                size = len(str(block.get("data", ""))) * 3 // 4
                parts.append(f"[{kind}: {block.get('mimeType') or block.get('mime_type') or '?'}, ~{size} bytes]")
            elif kind in ("resource", "resource_link", "embedded_resource"):
                resource = block.get("resource") or block
                text = resource.get("text")
                parts.append(f"[resource {resource.get('uri', '')}]" + (f"\n{text}" if text else ""))
            else:
                parts.append(json.dumps(block, ensure_ascii=False))
        if not parts and result.structured_content is not None:
            parts.append(json.dumps(result.structured_content, ensure_ascii=False))
    if event.error:
        parts.append(f"ERROR: {event.error}")
    return "\n".join(parts)


def _infer_error_kind(is_error: bool, text: str, declared: str | None) -> str | None:
    if declared:
        return declared
    if not is_error:
        return None
    return "timeout" if _TIMEOUT_TEXT.search(text) else "tool_error"


# ---------------------------------------------------------------------------------------------
# copilot JSONL


@dataclass
class _Session:
    file: str
    first_ts: str = ""
    start: SessionStart | None = None
    events: list[Any] = field(default_factory=list)
    ended: bool = False


def _read_jsonl(path: Path, result: LoadResult) -> list[_Session]:
    sessions: list[_Session] = []
    current: _Session | None = None
    saw_event = False
    try:
        handle = path.open(encoding="utf-8", errors="replace")
    except OSError as error:
        result.problems.append(
            Problem(kind="unreadable_file", file=str(path), message=f"cannot read ({error.strerror})")
        )
        return []
    with handle:
        for number, line in enumerate(handle, 1):
            if not line.strip():
                continue
            try:
                event = parse_event(line)
            except (ValueError, ValidationError) as error:
                if not saw_event and _is_foreign_json(line):
                    # e.g. verdicts.jsonl or another tool's JSONL: not a trajectory at all.
                    result.problems.append(
                        Problem(kind="skipped_file", file=str(path), message="not a trajectory log (no 'event' field)")
                    )
                    return []
                result.problems.append(
                    Problem(kind="malformed_line", file=str(path), line=number, message=_short_error(error))
                )
                continue
            saw_event = True
            if isinstance(event, SessionStart) or current is None:
                current = _Session(file=str(path), first_ts=event.ts)
                sessions.append(current)
            if isinstance(event, SessionStart):
                current.start = event
            elif isinstance(event, SessionEnd):
                current.ended = True
            else:
                current.events.append(event)
    return sessions


def _is_foreign_json(line: str) -> bool:
    try:
        data = json.loads(line)
    except ValueError:
        return False
    return isinstance(data, dict) and "event" not in data


def _short_error(error: Exception) -> str:
    if isinstance(error, ValidationError):
        first = error.errors()[0]
        where = ".".join(str(part) for part in first["loc"])
        return f"invalid event ({where}: {first['msg']})"
    return f"not JSON ({str(error).splitlines()[0][:120]})"


def _session_task_id(session: _Session, known_tasks: set[str]) -> str | None:
    if session.start and session.start.task_id:
        return session.start.task_id
    stem = Path(session.file).stem
    if stem in known_tasks:
        return stem
    if session.start:
        return session.start.session_id
    return None


def _merge_sessions(task_id: str, sessions: list[_Session]) -> Trajectory:
    sessions.sort(key=lambda session: session.first_ts)
    trajectory = Trajectory(task_id=task_id, format="copilot", sessions=len(sessions))
    usage: UsageTotals | None = None
    turns: int | None = None
    workspace: dict[str, WorkspaceFile] = {}
    for session in sessions:
        if session.start:
            trajectory.question = session.start.question or trajectory.question
            trajectory.category = (
                canonical_category(session.start.category) if session.start.category else trajectory.category
            )
        for event in session.events:
            if isinstance(event, RouteEvent):
                trajectory.calls.append(
                    ToolCall(
                        index=len(trajectory.calls) + 1,
                        kind="route",
                        call_id=event.call_id,
                        ts=event.ts,
                        query=event.query,
                        hits=[(hit.server, hit.tool) for hit in event.results],
                        arguments=json.dumps({"query": event.query}, ensure_ascii=False),
                        output="\n".join(f"{hit.server}/{hit.tool}" for hit in event.results),
                        is_error=event.error is not None,
                        error=event.error,
                        latency_ms=event.latency_ms,
                    )
                )
            elif isinstance(event, ExecuteEvent):
                text = _result_text(event)
                is_error = event.error is not None or bool(event.result and event.result.is_error)
                trajectory.calls.append(
                    ToolCall(
                        index=len(trajectory.calls) + 1,
                        kind="execute",
                        call_id=event.call_id,
                        ts=event.ts,
                        server=event.server,
                        tool=event.tool,
                        params=event.params,
                        arguments=json.dumps(
                            {"server_name": event.server, "tool_name": event.tool, "params": event.params or {}},
                            ensure_ascii=False,
                        ),
                        output=text,
                        is_error=is_error,
                        error=event.error,
                        error_kind=_infer_error_kind(is_error, text, event.error_kind),
                        latency_ms=event.latency_ms,
                    )
                )
            elif isinstance(event, FinalAnswer):
                if event.text.strip():
                    trajectory.final_answer = event.text
            elif isinstance(event, Usage):
                usage = usage or UsageTotals()
                usage.input_tokens += event.input_tokens
                usage.output_tokens += event.output_tokens
                if event.cost is not None:
                    usage.cost = (usage.cost or 0.0) + event.cost
                usage.model = event.model or usage.model
                extra = event.model_extra or {}
                if isinstance(extra.get("turn"), int):
                    # The built-in agent logs one usage event per model call ("turn": n).
                    turns = (turns or 0) + 1
                else:
                    for key in ("turns", "llm_calls", "requests"):
                        if isinstance(extra.get(key), int):
                            turns = (turns or 0) + extra[key]
                            break
            elif isinstance(event, WorkspaceChanges):
                for changed in event.files:
                    workspace[changed.path] = changed
        if session.file not in trajectory.sources:
            trajectory.sources.append(session.file)
    trajectory.usage = usage
    trajectory.turns = turns
    trajectory.workspace = list(workspace.values())
    trajectory.complete = sessions[-1].ended
    return trajectory


# ---------------------------------------------------------------------------------------------
# LiveMCPBench JSON


def looks_like_livemcpbench(data: Any) -> bool:
    return isinstance(data, list) and bool(data) and isinstance(data[0], dict) and "messages" in data[0]


def _json_args(text: Any) -> dict[str, Any]:
    if isinstance(text, dict):
        return text
    try:
        value = json.loads(text or "{}")
    except (TypeError, ValueError):
        return {}
    return value if isinstance(value, dict) else {}


def livemcpbench_trajectory(entry: dict[str, Any], source: str) -> Trajectory:
    """One entry of a LiveMCPBench trajectory file (OpenAI-style messages)."""
    meta = entry.get("Annotator Metadata") or {}
    messages = entry.get("messages") or []
    outputs = {m.get("tool_call_id"): m.get("content") for m in messages if m.get("role") == "tool"}
    calls: list[ToolCall] = []
    final_answer: str | None = None
    turns = 0
    for message in messages:
        if message.get("role") != "assistant":
            continue
        turns += 1
        tool_calls = message.get("tool_calls") or []
        content = message.get("content")
        if content and not tool_calls and not message.get("function_call"):
            final_answer = content if isinstance(content, str) else json.dumps(content, ensure_ascii=False)
        for tool_call in tool_calls:
            function = tool_call.get("function") or {}
            name = function.get("name")
            raw_args = function.get("arguments")
            arguments = raw_args if isinstance(raw_args, str) else json.dumps(raw_args, ensure_ascii=False)
            args = _json_args(raw_args)
            output = outputs.get(tool_call.get("id"))
            output_text = (
                output if isinstance(output, str) else json.dumps(output, ensure_ascii=False) if output else ""
            )
            if name == "route":
                calls.append(
                    ToolCall(
                        index=len(calls) + 1,
                        kind="route",
                        call_id=str(tool_call.get("id", "")),
                        query=str(args.get("query", "")),
                        hits=[(server, tool) for server, tool in _ROUTE_HIT.findall(output_text)],
                        arguments=arguments,
                        output=output_text,
                    )
                )
            elif name in ("execute-tool", "execute_tool", "execute"):
                is_error = "isError=True" in output_text or bool(_LIVEMCP_FAILURE.match(output_text))
                if output is None:
                    is_error, output_text = True, "(no tool result in the trajectory)"
                calls.append(
                    ToolCall(
                        index=len(calls) + 1,
                        kind="execute",
                        call_id=str(tool_call.get("id", "")),
                        server=args.get("server_name"),
                        tool=args.get("tool_name"),
                        params=args.get("params"),
                        arguments=arguments,
                        output=output_text,
                        is_error=is_error,
                        error_kind=_infer_error_kind(is_error, output_text, None),
                    )
                )
    if final_answer is None and entry.get("response"):
        final_answer = str(entry["response"])
    human = entry.get("task_success")
    return Trajectory(
        task_id=str(entry["task_id"]),
        format="livemcpbench",
        question=entry.get("Question") or entry.get("question"),
        category=canonical_category(entry.get("category")) if entry.get("category") else None,
        steps=split_numbered(meta.get("Steps")),
        gold_tools=split_numbered(meta.get("Tools")),
        final_answer=final_answer,
        calls=calls,
        turns=turns,
        human_success=(str(human).strip().lower() == "success") if human is not None else None,
        sources=[source],
    )


def _read_livemcpbench(path: Path, result: LoadResult, explicit: bool) -> list[Trajectory]:
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as error:
        result.problems.append(
            Problem(kind="unreadable_file", file=str(path), message=f"cannot read ({error.strerror})")
        )
        return []
    try:
        data = json.loads(text)
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
    trajectories = []
    for number, entry in enumerate(data, 1):
        if not isinstance(entry, dict) or not entry.get("task_id"):
            result.problems.append(
                Problem(kind="malformed_line", file=str(path), message=f"entry {number} has no task_id; skipped")
            )
            continue
        trajectories.append(livemcpbench_trajectory(entry, str(path)))
    return trajectories


# ---------------------------------------------------------------------------------------------
# entry point


def _candidate_files(paths: Sequence[Path], exclude: Sequence[Path], result: LoadResult) -> list[tuple[Path, bool]]:
    excluded = [path.resolve() for path in exclude]

    def is_excluded(path: Path) -> bool:
        resolved = path.resolve()
        return any(resolved == ex or ex in resolved.parents for ex in excluded)

    files: list[tuple[Path, bool]] = []
    for path in paths:
        if path.is_dir():
            for found in sorted(path.rglob("*")):
                if found.suffix in (".jsonl", ".json") and found.is_file() and not is_excluded(found):
                    files.append((found, False))
        elif path.is_file():
            files.append((path, True))
        else:
            result.problems.append(Problem(kind="unreadable_file", file=str(path), message="no such file or directory"))
    return files


def load_trajectories(
    paths: Iterable[str | Path], *, known_tasks: Iterable[str] = (), exclude: Sequence[Path] = ()
) -> LoadResult:
    """Read every trajectory under ``paths`` (files or directories, recursively).

    ``known_tasks`` lets a session without ``task_id`` be matched by its file name
    (``<run>/<task_id>.jsonl``); ``exclude`` skips the judge's own output directory.
    """
    result = LoadResult()
    known = set(known_tasks)
    sessions_by_task: dict[str, list[_Session]] = {}
    livemcpbench: list[Trajectory] = []
    for path, explicit in _candidate_files([Path(p) for p in paths], exclude, result):
        if path.suffix == ".jsonl" or (explicit and path.suffix != ".json"):
            sessions = _read_jsonl(path, result)
            if sessions:
                result.files_read += 1
            for session in sessions:
                task_id = _session_task_id(session, known)
                if task_id is None:
                    result.problems.append(
                        Problem(
                            kind="no_task",
                            file=session.file,
                            message="events without session_start or task id; skipped",
                        )
                    )
                    continue
                sessions_by_task.setdefault(task_id, []).append(session)
        else:
            found = _read_livemcpbench(path, result, explicit)
            if found:
                result.files_read += 1
            livemcpbench.extend(found)
    for task_id, sessions in sessions_by_task.items():
        result.trajectories[task_id] = _merge_sessions(task_id, sessions)
    for trajectory in livemcpbench:
        if trajectory.task_id in result.trajectories:
            logger.warning(
                "task %s appears in %s and %s; keeping the later one",
                trajectory.task_id,
                result.trajectories[trajectory.task_id].sources[0],
                trajectory.sources[0],
            )
        result.trajectories[trajectory.task_id] = trajectory
    return result
