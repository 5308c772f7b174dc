"""One copilot's telemetry: metrics, spans, recent errors and its status file, fed from one place.

The copilot's ``route`` and ``execute`` are wrapped by :func:`instrumented` (a span that is
current while the call runs, then metrics); inside, ``execute`` reports what it learned with
:meth:`Telemetry.outcome`. The child pool reports starts and stops through the
:class:`~server.pool.interfaces.PoolObserver` methods. A background task keeps the status file fresh.
"""

from __future__ import annotations

import functools
import logging
import os
import time
from collections import deque
from collections.abc import Awaitable, Callable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, TypeVar

import anyio

from index.catalog.servers import ServerConfig
from server.bounded import shown_name
from server.telemetry import tracing
from server.telemetry.metrics import CopilotMetrics
from server.telemetry.status import (
    ChildStatus,
    CopilotStatus,
    RecentError,
    process_created,
    remove_status,
    status_path,
    write_status,
)

logger = logging.getLogger(__name__)

RECENT_ERRORS = 20
STATUS_INTERVAL = 2.0
_MESSAGE_CHARS = 300

T = TypeVar("T")


def _now() -> str:
    return datetime.now(UTC).isoformat(timespec="seconds")


@dataclass
class CallOutcome:
    """What one route/execute call turned out to be (filled in by the call itself)."""

    server: str | None = None
    tool: str | None = None
    kind: str | None = None
    error: str | None = None
    tool_error: bool = False
    results: int | None = None
    flagged: int = 0


_OUTCOME: ContextVar[CallOutcome | None] = ContextVar("copilot_call_outcome", default=None)


class Telemetry:
    """Metrics, traces, recent errors and the status file of one copilot."""

    def __init__(self, *, known_servers: Callable[[], Any] | None = None) -> None:
        self.metrics = CopilotMetrics(known_servers)
        self.bind_servers = self.metrics.bind_servers
        self.recent_errors: deque[RecentError] = deque(maxlen=RECENT_ERRORS)
        self.counts = {"route": 0, "execute": 0, "execute_errors": 0, "execute_fast": 0}
        self._changed = True

    # -- calls --------------------------------------------------------------------------------
    @contextmanager
    def call(self, method: str, attributes: dict[str, Any] | None = None) -> Iterator[CallOutcome]:
        outcome = CallOutcome()
        token = _OUTCOME.set(outcome)
        started = time.perf_counter()
        try:
            with tracing.span(f"copilot.{method}", attributes) as span:
                try:
                    yield outcome
                finally:
                    seconds = time.perf_counter() - started
                    self._finish(method, outcome, seconds, span)
        finally:
            _OUTCOME.reset(token)

    def fast_call(self) -> None:
        """An ``execute`` was served on the stdio fast path (``server.stdio.fast``)."""
        self.counts["execute_fast"] += 1

    def outcome(self, **values: Any) -> None:
        """Record what the current call learned (server, tool, kind, error, tool_error, results, flagged)."""
        current = _OUTCOME.get()
        if current is not None:
            for key, value in values.items():
                setattr(current, key, value)

    def _finish(self, method: str, outcome: CallOutcome, seconds: float, span: Any) -> None:
        self._changed = True
        self.counts[method] = self.counts.get(method, 0) + 1
        attributes: dict[str, Any] = {"copilot.latency_ms": round(seconds * 1000, 3)}
        if method == "route":
            self.metrics.route(seconds, outcome.error is not None)
            if outcome.results is not None:
                attributes["copilot.route.results"] = outcome.results
        else:
            server, tool = outcome.server or "", outcome.tool or ""
            self.metrics.execute(server, seconds, outcome.kind, outcome.tool_error)
            # Names a client sent: repeated in spans and in the status file, so shortened like in messages.
            server, tool = shown_name(server), shown_name(tool)
            if outcome.flagged:
                self.metrics.flagged(server)
                attributes["copilot.result.flagged"] = outcome.flagged
            attributes.update({"copilot.server": server, "copilot.tool": tool, "gen_ai.tool.name": tool})
            if server and tool:
                span.update_name(f"copilot.execute {server}/{tool}")
            if outcome.kind:
                self.counts["execute_errors"] += 1
                attributes["copilot.error.kind"] = outcome.kind
                self.recent_errors.append(
                    RecentError(
                        at=_now(), server=server, tool=tool, kind=outcome.kind,
                        message=(outcome.error or "")[:_MESSAGE_CHARS],
                    )
                )
        span.set_attributes(attributes)
        if outcome.kind or (method == "route" and outcome.error):
            tracing.mark_outcome(span, "error", outcome.error or outcome.kind)
        else:
            tracing.mark_outcome(span, "tool_error" if outcome.tool_error else "ok")

    # -- the pool's observer ------------------------------------------------------------------
    def child_started(
        self,
        server: str,
        config: ServerConfig,
        pid: int | None,
        seconds: float,
        error: BaseException | None,
        restart: bool = False,
    ) -> None:
        self._changed = True
        self.metrics.child_started(server, error is None, restart)
        end = time.time_ns()
        attributes = {"copilot.server": server, "copilot.transport": config.transport, "copilot.outcome": "failed" if error else "ok"}
        if pid is not None:
            attributes["copilot.child.pid"] = pid
        tracing.record_interval(
            f"copilot.child.start {server}", end - int(seconds * 1e9), end, attributes,
            error=str(error)[:_MESSAGE_CHARS] if error is not None else None,
        )

    def child_stopped(self, server: str, reason: str, uptime: float) -> None:
        self._changed = True
        self.metrics.child_stopped(server, reason)
        now = time.time_ns()
        tracing.record_interval(
            f"copilot.child.stop {server}", now, now,
            {"copilot.server": server, "copilot.child.stop_reason": reason, "copilot.child.uptime_s": round(uptime, 3)},
        )

    # -- status -------------------------------------------------------------------------------
    def status(self, copilot: Any) -> CopilotStatus:
        pool_status = copilot.pool.status() if hasattr(copilot.pool, "status") else {}
        children = [
            ChildStatus(server=name, **{k: v for k, v in info.items() if k in ChildStatus.model_fields})
            for name, info in pool_status.items()
            if info.get("state") in ("running", "starting", "failed") or info.get("calls")
        ]
        indexing = copilot.indexer.status().model_dump(mode="json")
        try:
            held = [verdict.id for verdict in copilot.guard.reviewer.held()] if copilot.guard is not None else []
        except Exception:  # noqa: BLE001 -- a damaged trust store is shown, not fatal here
            held = ["(trust store unreadable)"]
        return CopilotStatus(
            pid=os.getpid(),
            process_created=process_created(),
            transport=copilot.transport,
            started_at=copilot.started_at,
            updated_at=_now(),
            version=copilot.version,
            servers_file=str(copilot.servers_path) if copilot.servers_path else None,
            servers_enabled=sum(1 for config in copilot.servers.values() if config.is_enabled),
            http_url=copilot.http_url,
            index={**(copilot.index_info() or {}), **_model_state(copilot)},
            indexing=indexing,
            children=children,
            recent_errors=list(self.recent_errors),
            held_back=held,
            calls=dict(self.counts),
        )

    async def keep_status(self, copilot: Any, home: Path) -> None:
        """Rewrite the status file while the copilot runs; remove it when the copilot stops."""
        path = status_path(home)
        last_written = 0.0
        last_model: dict[str, Any] = {}
        try:
            while True:
                now = time.monotonic()
                # The model coming in changes how route ranks: shown at once, not at the next 30 s.
                model = _model_state(copilot)
                if model != last_model:
                    self._changed = True
                    last_model = model
                if self._changed or now - last_written > 30:
                    self._changed = False
                    try:
                        status = self.status(copilot)
                        await anyio.to_thread.run_sync(write_status, path, status)
                    except Exception:  # noqa: BLE001 -- status is informational
                        logger.debug("could not write %s", path, exc_info=True)
                    last_written = now
                await anyio.sleep(STATUS_INTERVAL)
        finally:
            remove_status(path)


def instrumented(method: str) -> Callable[[Callable[..., Awaitable[T]]], Callable[..., Awaitable[T]]]:
    """Wrap a Copilot coroutine method in :meth:`Telemetry.call` (uses ``self.telemetry``)."""

    def wrap(function: Callable[..., Awaitable[T]]) -> Callable[..., Awaitable[T]]:
        @functools.wraps(function)
        async def inner(self: Any, *args: Any, **kwargs: Any) -> T:
            telemetry: Telemetry | None = getattr(self, "telemetry", None)
            if telemetry is None:
                return await function(self, *args, **kwargs)
            with telemetry.call(method):
                return await function(self, *args, **kwargs)

        return inner

    return wrap


def _model_state(copilot: Any) -> dict[str, Any]:
    """``{"model_state": …}`` of the copilot's index (its retry countdown left out, so it compares
    equal while nothing changes), or nothing for an index that does not say."""
    state = getattr(copilot.index, "model_state", None)
    if state is None:
        return {}
    try:
        shown = state()
    except Exception:  # noqa: BLE001 -- status is informational
        logger.debug("model state unavailable", exc_info=True)
        return {}
    return {"model_state": {key: value for key, value in shown.items() if key != "retry_in_s"}}
