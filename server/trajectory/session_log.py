"""One JSONL trajectory per MCP session (the README's "Trajectory log format"), flushed per event.

The format is :mod:`server.trajectory.records`'s; this module only decides which file each session
writes to and when ``session_start`` / ``session_end`` happen:

- ``COPILOT_LOG_FILE`` (``--log-file``): every session appends to that exact file -- benchmark
  runs give each task's copilot ``<run>/<task_id>.jsonl``;
- otherwise ``COPILOT_LOG_DIR/<UTC time>-<task id or "session">-<session id>.jsonl``.

A session's log is opened at its first request (so ``session_start`` carries the client's name
and version from ``initialize`` and is stamped with that time); the line itself is written
before the session's first tool call, when the index's tool count is known without delaying
``initialize`` -- or at the end for sessions that never call a tool. ``session_end`` is written
when the client disconnects or the copilot shuts down.
"""

from __future__ import annotations

import itertools
import logging
import re
import threading
import time
import uuid
from collections.abc import Callable, Hashable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from index.search.session_prior import RecentServers
from server.bounded import cap_for_log
from server.settings import ServerSettings
from server.trajectory.records import (
    ExecuteEvent,
    ExecuteResult,
    RouteEvent,
    RouteHit,
    SessionEnd,
    SessionStart,
    TrajectoryWriter,
)

logger = logging.getLogger(__name__)

_UNSAFE = re.compile(r"[^A-Za-z0-9._-]+")


class SessionLog:
    """The trajectory of one MCP session."""

    def __init__(
        self,
        writer: TrajectoryWriter,
        start: SessionStart,
        *,
        owns_writer: bool,
        field_chars: int = 100_000,
        event_chars: int = 1_000_000,
        private: bool = True,
    ) -> None:
        self.writer = writer
        self._field_chars = field_chars
        self._event_chars = event_chars
        self.session_id = start.session_id
        self._start = start
        self._owns_writer = owns_writer
        self._calls = itertools.count(1)
        self._lock = threading.Lock()
        self.started = False
        self.ended = False
        #: monotonic time of the session's last message (see ``server.app.session_middleware``).
        self.last_activity = time.monotonic()
        # The servers this session ran a tool of without error, which ``route`` lifts
        # (index.search.session_prior); none when the log is shared by clients that are not one
        # conversation (session-less requests over HTTP), whose calls say nothing of each other's.
        self._recent_servers = RecentServers() if private else None
        #: While writes fail: the error (errno) last reported and the events lost since.
        self._failing: int | None = None
        self._lost = 0

    def note_used(self, server: str) -> None:
        """``server`` ran a tool of this session's without error."""
        if self._recent_servers is not None:
            self._recent_servers.note(server)

    def used_servers(self) -> tuple[str, ...]:
        """The servers ``route`` lifts for this session, most recent first (none for a shared log)."""
        return self._recent_servers.servers() if self._recent_servers is not None else ()

    def begin(self, index: dict[str, Any] | None) -> None:
        """Write ``session_start`` (once), with the index's model and tool count."""
        with self._lock:
            if self.started:
                return
            self.started = True
        start = self._start
        # What the client and the environment say of themselves is bounded like every other event.
        bounded = self._bounded(
            client=start.client, question=start.question, task_id=start.task_id, category=start.category,
            transport_session_id=start.transport_session_id,
        )
        self._write(start.model_copy(update={"index": index, **bounded}))

    @property
    def path(self) -> Path:
        return self.writer.path

    def next_call_id(self) -> str:
        return f"{self.session_id[:8]}-{next(self._calls)}"

    def _bounded(self, **fields: Any) -> dict[str, Any]:
        """``fields`` cut to the log's per-field and per-event budgets, with a ``log_cut`` note if cut."""
        capped, note = cap_for_log(fields, field_chars=self._field_chars, total_chars=self._event_chars)
        if note is not None:
            capped["log_cut"] = note
        return capped

    def route(
        self,
        call_id: str,
        query: str,
        results: list[RouteHit],
        latency_ms: float,
        error: str | None = None,
        ranking: str | None = None,
        session_servers: list[str] | None = None,
    ) -> None:
        bounded = self._bounded(query=query, error=error)
        self._write(
            RouteEvent(
                call_id=call_id, results=results, latency_ms=latency_ms, ranking=ranking,
                session_servers=session_servers or None, **bounded,
            )
        )

    def execute(
        self,
        call_id: str,
        server: str,
        tool: str,
        params: dict[str, Any] | None,
        result: ExecuteResult | None,
        latency_ms: float,
        error: str | None = None,
        error_kind: str | None = None,
        flags: list[dict[str, Any]] | None = None,
    ) -> None:
        bounded = self._bounded(
            server=server,
            tool=tool,
            params=params,
            result=result.model_dump(mode="json") if result is not None else None,
            error=error,
        )
        self._write(
            ExecuteEvent(call_id=call_id, latency_ms=latency_ms, error_kind=error_kind, flags=flags, **bounded)
        )

    def end(self, reason: str, index: dict[str, Any] | None = None) -> None:
        if self.ended:
            return
        self.ended = True
        self.begin(index)
        self._write(SessionEnd(reason=reason))
        if self._failing is not None:
            # Still failing at the end: no later write says how many were lost, so this does.
            logger.warning(
                "trajectory log %s ended unwritable; %d event(s) were lost, session_end included",
                self.writer.path, self._lost,
            )
        if self._owns_writer:
            self.writer.close()

    def _write(self, event: Any) -> None:
        try:
            self.writer.write(event)
        except OSError as error:
            # A full disk must not break the user's tool call; the loss is logged, once per kind of
            # failure (a traceback for every event flooded stderr), and counted.
            self._lost += 1
            code = error.errno if error.errno is not None else -1
            if code != self._failing:
                self._failing = code
                logger.warning(
                    "could not write to trajectory log %s (%s); its events are lost until it can be written again",
                    self.writer.path, error.strerror or error,
                )
            return
        if self._failing is not None:
            logger.warning("trajectory log %s is written again; %d event(s) were lost", self.writer.path, self._lost)
            self._failing, self._lost = None, 0


def _transport_note(start: SessionStart) -> str:
    """`` (mcp-session-id <id>)`` when the transport named the session (HTTP): the id hosts show."""
    return f" (mcp-session-id {start.transport_session_id})" if start.transport_session_id else ""


class SessionLogs:
    """Creates, finds and ends the trajectory of each MCP session (thread-safe)."""

    def __init__(
        self,
        settings: ServerSettings,
        *,
        copilot_version: str,
        index_info: Callable[[], dict[str, Any] | None],
        # ^ must not block: it is called from the event loop when sessions end
    ) -> None:
        self._settings = settings
        self._copilot_version = copilot_version
        self._index_info = index_info
        self._sessions: dict[Hashable, SessionLog] = {}
        self._lock = threading.Lock()
        self._shared_writer: TrajectoryWriter | None = None

    def get(self, key: Hashable) -> SessionLog | None:
        with self._lock:
            return self._sessions.get(key)

    def open(
        self,
        key: Hashable,
        client: dict[str, Any] | None,
        *,
        transport_session_id: str | None = None,
        private: bool = True,
    ) -> SessionLog:
        """The session's log; a new one is stamped now and written by :meth:`SessionLog.begin`.

        ``transport_session_id`` is the transport's own id of the session (an HTTP session's
        ``mcp-session-id``): recorded in ``session_start`` and in the log line naming the file.
        ``private`` is false for a log that clients with nothing in common share (see
        :meth:`SessionLog.used_servers`).
        """
        with self._lock:
            existing = self._sessions.get(key)
            if existing is not None:
                return existing
            settings = self._settings
            start = SessionStart(
                session_id=uuid.uuid4().hex,
                transport_session_id=transport_session_id,
                task_id=settings.task_id,
                question=settings.question,
                category=settings.category,
                client=client,
                copilot_version=self._copilot_version,
            )
            writer, owns = self._writer_for(start.session_id)
            log = self._sessions[key] = SessionLog(
                writer,
                start,
                owns_writer=owns,
                field_chars=settings.log_max_field_chars,
                event_chars=settings.log_max_event_chars,
                private=private,
            )
        logger.info("session %s%s: trajectory in %s", start.session_id[:8], _transport_note(start), log.path)
        return log

    def end(self, key: Hashable, reason: str) -> None:
        with self._lock:
            log = self._sessions.pop(key, None)
        if log is not None:
            log.end(reason, self._index_info())

    def end_all(self, reason: str) -> None:
        with self._lock:
            logs = list(self._sessions.values())
            self._sessions.clear()
        for log in logs:
            log.end(reason, self._index_info())
        if self._shared_writer is not None:
            self._shared_writer.close()

    def _writer_for(self, session_id: str) -> tuple[TrajectoryWriter, bool]:
        settings = self._settings
        if settings.log_file is not None:
            if self._shared_writer is None:
                self._shared_writer = TrajectoryWriter(settings.log_file)
            return self._shared_writer, False
        stamp = datetime.now(UTC).strftime("%Y%m%dT%H%M%SZ")
        label = _UNSAFE.sub("_", settings.task_id or "session")[:60]
        return TrajectoryWriter(settings.logs_dir / f"{stamp}-{label}-{session_id[:8]}.jsonl"), True
