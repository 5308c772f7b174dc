"""Trajectory log records (the README's "Trajectory log format") and the writer.

One JSON object per line, appended and flushed per event. The copilot writes ``session_start``,
``route``, ``execute`` and ``session_end``; agents and the benchmark runner add
``final_answer``, ``usage`` and ``workspace``. ``evaluation`` reads the same models, so the
format has exactly one definition.
"""

from __future__ import annotations

import json
import logging
import os
import threading
from datetime import UTC, datetime
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, TypeAdapter
from pydantic_core import PydanticSerializationError

logger = logging.getLogger(__name__)


def utc_now() -> str:
    return datetime.now(UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


class _Event(BaseModel):
    # Readers must accept logs written by newer versions: unknown fields are kept, not rejected.
    model_config = ConfigDict(extra="allow")

    ts: str = Field(default_factory=utc_now)


class SessionStart(_Event):
    event: Literal["session_start"] = "session_start"
    session_id: str
    #: The transport's id of the session: an HTTP session's ``mcp-session-id`` header (none on stdio
    #: and for session-less 2026-07-28 requests), what a host's errors and the copilot's log name.
    transport_session_id: str | None = None
    task_id: str | None = None
    question: str | None = None
    category: str | None = None
    client: dict[str, Any] | None = None
    copilot_version: str | None = None
    index: dict[str, Any] | None = None
    agent: str | None = None
    model: str | None = None
    catalog_hash: str | None = None


class RouteHit(BaseModel):
    model_config = ConfigDict(extra="allow")

    server: str
    tool: str
    score: float | None = None


class RouteEvent(_Event):
    event: Literal["route"] = "route"
    call_id: str
    query: str
    results: list[RouteHit] = Field(default_factory=list)
    latency_ms: float | None = None
    error: str | None = None
    #: How the results were ranked: ``hybrid``, or keyword-only while the model was loading
    #: (``lexical-startup``) or after it failed to load (``lexical-fallback``). ``None`` in older logs.
    ranking: str | None = None
    #: The session's servers whose tools the ranking lifted (``index.search.session_prior``);
    #: ``None`` when none were, and in older logs.
    session_servers: list[str] | None = None


class ExecuteResult(BaseModel):
    model_config = ConfigDict(extra="allow")

    content: list[dict[str, Any]] = Field(default_factory=list)
    structured_content: Any = None
    is_error: bool = False


class ExecuteEvent(_Event):
    event: Literal["execute"] = "execute"
    call_id: str
    server: str
    tool: str
    params: dict[str, Any] | None = None
    result: ExecuteResult | None = None
    latency_ms: float | None = None
    error: str | None = None
    #: Machine-readable error class, e.g. unknown_server, unknown_tool, invalid_params,
    #: timeout, child_crashed, policy_denied -- used by the report's health tables.
    error_kind: str | None = None
    #: Injection markers found in the result (``index.trust.scan`` findings); the result itself is unchanged.
    flags: list[dict[str, Any]] | None = None


class FinalAnswer(_Event):
    event: Literal["final_answer"] = "final_answer"
    text: str


#: Bounds of what one usage event may report: beyond them a number is a logging bug, and summing
#: such numbers overflowed the report (an ``Infinity`` or ``1e308`` cost was a traceback, a ``NaN``
#: a ``nan`` in the tables).
MAX_TOKENS = 10**15
MAX_COST = 1e12


class Usage(_Event):
    event: Literal["usage"] = "usage"
    model: str | None = None
    input_tokens: int = Field(default=0, ge=0, le=MAX_TOKENS)
    output_tokens: int = Field(default=0, ge=0, le=MAX_TOKENS)
    cost: float | None = Field(default=None, ge=0, le=MAX_COST, allow_inf_nan=False)


class WorkspaceFile(BaseModel):
    path: str
    change: Literal["created", "modified", "deleted"]
    size: int | None = None
    preview: str | None = None


class WorkspaceChanges(_Event):
    event: Literal["workspace"] = "workspace"
    root: str | None = None
    files: list[WorkspaceFile] = Field(default_factory=list)


class ConfirmationEvent(_Event):
    """A confirmation the copilot asked the user for through elicitation, and the answer.

    Written by the benchmark runner, whose MCP client answers for the user by its ``--confirm``
    policy (the copilot's own ``execute`` event follows with the call's outcome).
    """

    event: Literal["confirmation"] = "confirmation"
    message: str
    answer: Literal["approved", "declined", "cancelled"]
    policy: str | None = None
    server: str | None = None
    tool: str | None = None


class SessionEnd(_Event):
    event: Literal["session_end"] = "session_end"
    reason: str = "closed"


TrajectoryEvent = Annotated[
    SessionStart | RouteEvent | ExecuteEvent | FinalAnswer | Usage | WorkspaceChanges | ConfirmationEvent | SessionEnd,
    Field(discriminator="event"),
]
EVENT_ADAPTER: TypeAdapter[TrajectoryEvent] = TypeAdapter(TrajectoryEvent)


def parse_event(line: str) -> TrajectoryEvent:
    """Parse one log line; raises ``ValueError``/``ValidationError`` on a malformed one.

    A line must carry its own ``ts`` as an ISO 8601 time: the model's default (now) is for
    writing, and read back it would date an old log today and misorder merged sessions.
    """
    event = EVENT_ADAPTER.validate_json(line)
    if "ts" not in event.model_fields_set:
        raise ValueError("no 'ts' (the event's ISO 8601 time)")
    try:
        datetime.fromisoformat(event.ts)
    except ValueError:
        raise ValueError(f"'ts' is not an ISO 8601 time: {event.ts[:40]!r}") from None
    return event


_APPEND_FLAGS = os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_CLOEXEC
_FILE_MODE = 0o600


class TrajectoryWriter:
    """Appends events to one JSONL file, flushed per event; safe to share between threads.

    The file is opened for each event and closed again, so a session that is never closed (an HTTP
    client that leaves without DELETE) holds no file descriptor: open files do not grow with the
    number of sessions. Appends of one line are atomic, so several writers may share a file.

    Trajectories hold tool arguments and results: the file is private to its user (0600, its
    directory 0700 when made here) whatever the umask. A directory or file that cannot be made
    now fails the first :meth:`write` instead, which the session's log counts as a lost event
    (it was a traceback on every request). A write cut short (a full disk) is taken back out of
    the file, so the next event does not land on the end of half a line.
    """

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)
        self._lock = threading.Lock()
        self._closed = False
        self._file = os.fspath(self.path)
        #: A write cut short could not be taken back: the next line must start on a line of its own.
        self._torn = False
        try:
            self.path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
            os.close(os.open(self._file, _APPEND_FLAGS, _FILE_MODE))
        except OSError as error:
            logger.debug("trajectory log %s cannot be made yet: %s", self.path, error)

    def write(self, event: _Event) -> None:
        # Serialized and appended without Python's text layer: this runs on every tool call.
        try:
            line = event.model_dump_json(exclude_none=True).encode() + b"\n"
        except (PydanticSerializationError, UnicodeError):
            # A lone UTF-16 surrogate (a caller's text) has no UTF-8 form: it is replaced.
            data = event.model_dump(mode="json", exclude_none=True)
            text = json.dumps(data, ensure_ascii=False, separators=(",", ":"))  # as compact as pydantic's
            line = text.encode("utf-8", "replace") + b"\n"
        with self._lock:
            if self._closed:
                return
            if self._torn:
                line = b"\n" + line
            fd = os.open(self._file, _APPEND_FLAGS, _FILE_MODE)
            written = 0
            try:
                view = memoryview(line)
                while view:
                    count = os.write(fd, view)
                    written += count
                    view = view[count:]
                self._torn = False
            except OSError:
                if written:
                    self._take_back(fd, written)
                raise
            finally:
                os.close(fd)

    def _take_back(self, fd: int, written: int) -> None:
        """Remove the ``written`` bytes of a line whose write failed from the end of the file --
        only while they are still its end: a writer in another process sharing the file
        (``COPILOT_LOG_FILE``) may have appended a whole line since, which cutting would break.
        Otherwise the next line starts on a line of its own."""
        try:
            ours_end = os.lseek(fd, 0, os.SEEK_CUR)  # O_APPEND: where our bytes ended
            if os.fstat(fd).st_size == ours_end:
                os.ftruncate(fd, ours_end - written)
                return
        except OSError:
            pass
        self._torn = True

    def close(self) -> None:
        with self._lock:
            self._closed = True

    def __enter__(self) -> TrajectoryWriter:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
