"""The copilot's JSONL trajectory logs (format: ``server.trajectory.records``).

A task may span several files or sessions (a retried run); they are merged by task id in time
order. A file without ``session_end`` (the agent crashed) is still read. A malformed line, or
one that is not UTF-8, is skipped and reported as ``file:line``, never fatal.
"""

from __future__ import annotations

import codecs
import json
import math
import re
from datetime import datetime
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from index.json_text import parse_json_object
from evaluation.tasks import canonical_category
from evaluation.trajectories.model import CONFIRMATION_REQUIRED, Confirmation, LoadResult, Problem, ToolCall, Trajectory, UsageTotals
from server.trajectory.records import (
    ConfirmationEvent,
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

_TIMEOUT_TEXT = re.compile(r"\btimed?\s*out\b|\btimeout\b", re.IGNORECASE)


def infer_error_kind(is_error: bool, text: str, declared: str | None) -> str | None:
    if declared:
        return declared
    if not is_error:
        return None
    return "timeout" if _TIMEOUT_TEXT.search(text) else "tool_error"


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


@dataclass
class Session:
    file: str
    first_ts: str = ""
    #: Time of the session's last event (its ``session_end`` when it has one).
    last_ts: str = ""
    start: SessionStart | None = None
    events: list[Any] = field(default_factory=list)
    ended: bool = False
    end: SessionEnd | None = None


def read_jsonl(path: Path, result: LoadResult) -> list[Session]:
    """The sessions of one JSONL log; its bad lines go to ``result.problems`` with their numbers.

    A file is foreign (another tool's JSONL, e.g. ``verdicts.jsonl``) only when none of its lines
    is an event and some are JSON objects without ``event``: deciding on the first line alone
    dropped a whole trajectory whose first line had lost its ``event``.
    """
    sessions: list[Session] = []
    current: Session | None = None
    saw_event = False
    foreign = False
    #: Line problems, kept aside until the file is known to be a trajectory log.
    problems: list[Problem] = []
    try:
        handle = path.open("rb")
    except OSError as error:
        result.problems.append(Problem(kind="unreadable_file", file=str(path), message=f"cannot read ({error.strerror})"))
        return []
    with handle:
        for number, raw in enumerate(handle, 1):
            if number == 1:
                # A log saved by a Windows editor starts with a BOM: its first event is still an event.
                raw = raw.removeprefix(codecs.BOM_UTF8)
            if not raw.strip():
                continue
            try:
                line = raw.decode("utf-8")
            except UnicodeDecodeError as error:
                problems.append(
                    Problem(
                        kind="malformed_line",
                        file=str(path),
                        line=number,
                        message=f"not UTF-8 text ({error.reason} at byte {error.start}); skipped",
                    )
                )
                continue
            try:
                event = parse_event(line)
            except (ValueError, ValidationError) as error:
                message = _short_error(error)
                if _is_foreign_json(line):
                    foreign, message = True, "a JSON object without an 'event' field (not an event); skipped"
                problems.append(Problem(kind="malformed_line", file=str(path), line=number, message=message))
                continue
            saw_event = True
            if isinstance(event, SessionStart) or current is None:
                current = Session(file=str(path), first_ts=event.ts)
                sessions.append(current)
            current.last_ts = event.ts or current.last_ts
            if isinstance(event, SessionStart):
                current.start = event
            elif isinstance(event, SessionEnd):
                current.ended = True
                current.end = event
            else:
                current.events.append(event)
    if foreign and not saw_event:
        result.problems.append(Problem(kind="skipped_file", file=str(path), message="not a trajectory log (no 'event' field)"))
        return []
    result.problems.extend(problems)
    return sessions


def _is_foreign_json(line: str) -> bool:
    data = parse_json_object(line)
    return data is not None and "event" not in data


def _short_error(error: Exception) -> str:
    if isinstance(error, ValidationError):
        first = error.errors()[0]
        if first["type"] == "json_invalid":
            return f"not JSON ({first['msg']})"
        where = ".".join(str(part) for part in first["loc"])
        return f"invalid event ({where}: {first['msg']})" if where else f"invalid event ({first['msg']})"
    return f"not JSON ({str(error).splitlines()[0][:120]})"


def session_task_id(session: Session, known_tasks: set[str]) -> str | None:
    if session.start and session.start.task_id:
        return session.start.task_id
    stem = Path(session.file).stem
    if stem in known_tasks:
        return stem
    if session.start:
        return session.start.session_id
    return None


def _route_call(index: int, event: RouteEvent) -> ToolCall:
    return ToolCall(
        index=index,
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


def _execute_call(index: int, event: ExecuteEvent) -> ToolCall:
    text = _result_text(event)
    is_error = event.error is not None or bool(event.result and event.result.is_error)
    return ToolCall(
        index=index,
        kind="execute",
        call_id=event.call_id,
        ts=event.ts,
        server=event.server,
        tool=event.tool,
        params=event.params,
        arguments=json.dumps(
            {"server_name": event.server, "tool_name": event.tool, "params": event.params or {}}, ensure_ascii=False
        ),
        output=text,
        is_error=is_error,
        error=event.error,
        error_kind=infer_error_kind(is_error, text, event.error_kind),
        latency_ms=event.latency_ms,
    )


class _Totals:
    """Usage and turns summed over a task's ``usage`` events."""

    def __init__(self) -> None:
        self.usage: UsageTotals | None = None
        self.turns: int | None = None

    def add(self, event: Usage) -> None:
        usage = self.usage = self.usage or UsageTotals()
        usage.input_tokens += event.input_tokens
        usage.output_tokens += event.output_tokens
        if event.cost is not None:
            usage.cost = (usage.cost or 0.0) + event.cost
        usage.model = event.model or usage.model
        extra = event.model_extra or {}
        if isinstance(extra.get("turn"), int):
            # The built-in agent logs one usage event per model call ("turn": n).
            self.turns = (self.turns or 0) + 1
            return
        for key in ("turns", "llm_calls", "requests"):
            if isinstance(extra.get(key), int):
                self.turns = (self.turns or 0) + extra[key]
                return


def _apply_start(trajectory: Trajectory, start: SessionStart) -> None:
    extra = start.model_extra or {}
    trajectory.question = start.question or trajectory.question
    if isinstance(extra.get("original_question"), str):
        trajectory.original_question = extra["original_question"]
    if start.category:
        trajectory.category = canonical_category(start.category)
    trajectory.agent = start.agent or trajectory.agent
    trajectory.model = start.model or trajectory.model
    if isinstance(extra.get("confirm"), str):
        trajectory.confirm_policy = extra["confirm"]


def _apply_end(trajectory: Trajectory, end: SessionEnd) -> None:
    extra = end.model_extra or {}
    if isinstance(extra.get("status"), str):  # the runner's end of the task, not a copilot session's
        trajectory.end_status = extra["status"]
        trajectory.end_error_kind = extra.get("error_kind") if isinstance(extra.get("error_kind"), str) else None
        trajectory.end_reason = end.reason


def merge_sessions(task_id: str, sessions: list[Session]) -> Trajectory:
    sessions.sort(key=lambda session: session.first_ts)
    trajectory = Trajectory(task_id=task_id, format="copilot", sessions=len(sessions), started=sessions[0].first_ts or None)
    totals = _Totals()
    workspace: dict[str, WorkspaceFile] = {}
    for session in sessions:
        if session.start:
            _apply_start(trajectory, session.start)
        for event in session.events:
            index = len(trajectory.calls) + 1
            if isinstance(event, RouteEvent):
                trajectory.calls.append(_route_call(index, event))
            elif isinstance(event, ExecuteEvent):
                call = _execute_call(index, event)
                trajectory.calls.append(call)
                if call.error_kind == CONFIRMATION_REQUIRED:
                    trajectory.confirmations.append(
                        Confirmation(server=call.server, tool=call.tool, answer="token", ts=call.ts)
                    )
            elif isinstance(event, ConfirmationEvent):
                trajectory.confirmations.append(
                    Confirmation(server=event.server, tool=event.tool, answer=event.answer, ts=event.ts)
                )
            elif isinstance(event, FinalAnswer):
                if event.text.strip():
                    trajectory.final_answer = event.text
            elif isinstance(event, Usage):
                totals.add(event)
            elif isinstance(event, WorkspaceChanges):
                for changed in event.files:
                    workspace[changed.path] = changed
        if session.end is not None:
            _apply_end(trajectory, session.end)
        if session.file not in trajectory.sources:
            trajectory.sources.append(session.file)
    trajectory.usage = totals.usage
    trajectory.turns = totals.turns
    trajectory.workspace = list(workspace.values())
    trajectory.complete = sessions[-1].ended
    trajectory.seconds = _seconds(sessions)
    latencies = [call.latency_ms for call in trajectory.execute_calls if call.latency_ms is not None]
    trajectory.tool_seconds = round(math.fsum(latencies) / 1000, 3) if latencies else None
    return trajectory


def _seconds(sessions: list[Session]) -> float | None:
    """Wall-clock seconds the task's sessions lasted, first event to last, summed (the time between
    two sessions of one task is not the agent's); ``None`` when a time is missing or unreadable."""
    total = 0.0
    for session in sessions:
        try:
            first = datetime.fromisoformat(session.first_ts)
            last = datetime.fromisoformat(session.last_ts)
        except (TypeError, ValueError):
            return None
        if (first.tzinfo is None) != (last.tzinfo is None):
            return None
        total += max(0.0, (last - first).total_seconds())
    return round(total, 3)
