"""The child session pool: one persistent MCP client session per child server.

A child is started lazily on its first call (or :meth:`ChildPool.warm`, which only ever takes a
free slot), kept across calls so stateful servers keep their state, stopped after ``idle_timeout``
and evicted when ``max_live_children`` are running (never while it has calls in flight; children
that never served a call first, ``stateful`` ones last). Calls to different servers run
concurrently; each server has a concurrency limit; every call has a timeout. When a child that
served calls is gone (idle, evicted, crashed, timed out), the first result of its successor says
the server was restarted and its state lost.

MCP client sessions are context managers bound to the task that entered them, so each child
lives in its own *runner* task in the pool's task group: the runner opens
:func:`index.children.connect.open_session`, signals ``ready``, and waits until it is asked to stop or the
child's transport ends; leaving ``open_session`` kills the child's whole process tree. Callers
only borrow the session. A child that crashes or times out is marked broken; the next call starts
a fresh one. Nothing a child does can raise out of the pool except the ``server.errors`` below.

Changes in a child: ``notifications/tools/list_changed`` drops the child's cached tool list and
re-lists it in the background through :meth:`ChildPool.list_tools` (at most once a second: a
storm of them costs one listing per second), and a
restarted child is listed again at once; every listing takes the one path ``_list``, where the
``guard`` reviews it against the pinned definitions (held-back tools are refused by
:meth:`ChildPool.call_tool`). A tool whose definition is broken is left out of every listing
(``index.children.tool_listing``, as the crawl leaves it out of the catalog) and a call to it is
refused, saying why; so is a call to a tool past the first 1,000 of a child that lists more
(each tool left out, and the cut, logged once per change). A listing that differs from the
server's previous one -- also one made by an earlier process, so a restart that lists other tools
counts -- then goes to every
:class:`PoolListener` with the held-back names, whose definitions must not be used. Prompts and
resources ``list_changed`` and ``resources/updated`` notifications go to the listeners as they are
(telling one is cheap: the live index re-lists at most once a second, and the resource
subscriptions deliver one resource's updates at most once a second, ``server.aggregate.coalesce``).

Errors: :class:`UnknownServerError` (not configured), :class:`ServerUnavailableError` (disabled,
missing command, failed start -- with the reason and the last stderr lines),
:class:`ChildCrashedError` (exited during the call), :class:`ChildTimeoutError` (the call took too
long; the child is killed because it may be wedged, and calls in flight on it say so). A JSON-RPC
error answered by the child -- or made up by the copilot for a reply it could not read -- is
returned as a ``CallToolResult`` with ``is_error`` set, so the model sees what went wrong.
"""

from __future__ import annotations

import atexit
import hashlib
import json
import logging
import time
import traceback
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator, Mapping
from contextlib import asynccontextmanager, contextmanager
from datetime import UTC, datetime
from typing import Any, Literal, TypeVar

import anyio
import anyio.abc
import mcp.types as types
from mcp.client.session import ClientSession
from mcp.shared.exceptions import MCPError
from pydantic import ValidationError

from index.children.containment.guard import child_guard
from index.children.connect import (
    ChildConnection,
    ChildProcess,
    ChildStartError,
    ClientCallbacks,
    open_session,
)
from index.children.errors import connection_lost, error_summary
from index.children.direct import typed_result
from index.children.process import HURRIED_GRACE, HURRIED_KILL_GRACE, LOG_CHECK_INTERVAL
from index.children.tool_listing import list_all_tools, skipped_words
from index.children.wire import COPILOT_ORIGIN
from index.catalog.servers import ServerConfig
from server.bounded import shown_name
from server.errors import (
    ChildCrashedError,
    ChildTimeoutError,
    ServerUnavailableError,
    ToolBlockedError,
    ToolPastCapError,
    UnknownServerError,
    skipped_tool_error,
)
from server.pool.child import (
    Child,
    ServerState,
    StillStartingError,
    answering,
    bad_reply,
    counting_errors,
    end_reason,
    exit_words,
    how_it_ended,
    host_request,
    redact_error,
    stderr_tail_text,
)
from server.pool.interfaces import RESTART_AFTER, ChildLink, ListingGuard, PoolListener, PoolObserver
from server.pool.settings import PoolSettings, package_runner
from server.telemetry.tracing import sdk_tracing_on
from server.execute.result_errors import describe_result_error
from server.execute.results import text_result
from server.execute.validation import did_you_mean, suggest

__all__ = ["ChildPool", "PoolSettings"]

logger = logging.getLogger(__name__)

#: Seconds to wait for a crashed child's exit code before reporting without it.
_EXIT_CODE_WAIT = 2.0
#: Characters of one child log message written to its log file.
_LOG_LINE_CHARS = 2000
#: When the copilot exits, children get this long to exit after their stdin closes (at most
#: ``shutdown_grace``), then this long after SIGTERM before SIGKILL, all in parallel: the whole
#: stop fits in the 2 s a host waits after closing the copilot's stdin before it sends SIGTERM.
EXIT_GRACE = HURRIED_GRACE
EXIT_KILL_GRACE = HURRIED_KILL_GRACE
#: Most children started by warm() and not called yet at once.
MAX_WARM_UNUSED = 2
#: Seconds between two re-listings of one server's changed tools (a flood of list_changed costs one per interval).
RELIST_INTERVAL = 1.0

_T = TypeVar("_T")


def _tools_digest(tools: list[types.Tool], held_back: frozenset[str], skipped: Mapping[str, str]) -> str:
    # The skipped tools count: a tool that breaks (or is fixed) changes what the index must say of it.
    payload = [tool.model_dump(mode="json", by_alias=True, exclude_none=True) for tool in tools]
    return hashlib.sha256(json.dumps([payload, sorted(held_back), dict(skipped)], sort_keys=True).encode()).hexdigest()


async def _wait_either(first: anyio.Event, second: anyio.Event) -> None:
    async with anyio.create_task_group() as group:

        async def wait(event: anyio.Event) -> None:
            await event.wait()
            group.cancel_scope.cancel()

        group.start_soon(wait, first)
        group.start_soon(wait, second)


def _take_free(slots: anyio.Semaphore) -> bool:
    try:
        slots.acquire_nowait()
    except anyio.WouldBlock:
        return False
    return True


#: Characters of a failed start's reason shown beside each of the server's tools in a route answer.
_START_FAILURE_CHARS = 300


class ChildPool:
    """Persistent MCP client sessions to the configured child servers; see the module docstring."""

    def __init__(
        self,
        servers: Mapping[str, ServerConfig],
        settings: PoolSettings | None = None,
        *,
        guard: ListingGuard | None = None,
        observer: PoolObserver | None = None,
        link: ChildLink | None = None,
    ) -> None:
        self.settings = settings if settings is not None else PoolSettings()
        #: Checks every tool listing against the pinned definitions (``server.guard``).
        self.guard = guard
        #: Told when children start and stop (metrics, traces).
        self.observer = observer
        #: Answers what children ask and log on their own (``server.relay``).
        self.link = link
        self._servers: dict[str, ServerConfig] = dict(servers)
        self._children: dict[str, Child] = {}  # the current child of each server
        self._alive: set[Child] = set()  # every child whose runner has not finished
        self._states: dict[str, ServerState] = {}
        self._task_group: anyio.abc.TaskGroup | None = None
        self._closing = False
        self._listeners: list[PoolListener] = []

    # -- lifecycle --------------------------------------------------------------------------

    async def __aenter__(self) -> ChildPool:
        self._closing = False
        self._task_group = anyio.create_task_group()
        await self._task_group.__aenter__()
        self._task_group.start_soon(self._stop_idle_children, name="child pool idle reaper")
        self._task_group.start_soon(self._rotate_child_logs, name="child pool log rotation")
        atexit.register(self.kill_all)
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        """Stop every child (process groups included), also when the owner is being cancelled."""
        self._closing = True
        group, self._task_group = self._task_group, None
        try:
            if group is not None:
                for child in list(self._alive):
                    # In parallel, within a host's budget: hosts SIGTERM the copilot 2 s after closing
                    # its stdin and SIGKILL it 2 s later (the parent-death guard covers the rest).
                    child.stop_reason = child.stop_reason or "shutdown"
                    child.cut_off_because = child.cut_off_because or "the copilot is shutting down"
                    if child.process is not None:
                        child.process.hurry(min(self.settings.shutdown_grace, EXIT_GRACE), EXIT_KILL_GRACE)
                    child.stop.set()
                # Each runner's open_session shuts its child down shielded and bounded; cancelling
                # the group only hurries runners still starting. The group's own scope is shielded
                # (a new scope would break LIFO exit) so an outer cancellation cannot cut this short.
                group.cancel_scope.cancel()
                group.cancel_scope.shield = True
                await group.__aexit__(None, None, None)
        finally:
            self.kill_all()  # last resort for anything that outlived its runner
            self._children.clear()
            atexit.unregister(self.kill_all)

    def kill_all(self) -> None:
        """SIGKILL every child's process group now. Synchronous: for signal handlers and atexit."""
        for child in list(self._alive):
            if child.process is not None:
                child.process.kill()

    # -- public API -------------------------------------------------------------------------

    async def call_tool(
        self,
        server: str,
        tool: str,
        arguments: dict[str, Any] | None,
        *,
        timeout: float | None = None,
        relay: Any = None,
    ) -> types.CallToolResult:
        """Call ``tool`` on ``server``'s child (starting it if needed) and return its result unchanged.

        ``relay`` (a ``server.relay.call.CallRelay``) receives what the child sends during the call:
        its ``progress`` callback goes on the request, its ``timeout_scope`` is set to the call's
        timeout, and the pool's ``link`` gets it among the child's calls in flight. While the call
        waits for the child to start or for a call slot, its ``waiting`` hears why every
        ``wait_progress_every`` seconds.
        """
        self._state(server).calls += 1
        async with self._borrow(server, timeout, relay) as (child, limit):
            if self.guard is not None:
                await self._check_definition(child, tool, limit)
            if (unusable := self.unusable_tool(server, tool)) is not None:
                raise unusable
            result = await self._call(child, tool, arguments, limit, relay)
        return self._served(child, result)

    async def request(
        self,
        server: str,
        doing: str,
        operation: Callable[[ClientSession], Awaitable[_T]],
        *,
        timeout: float | None = None,
        for_host: bool = False,
        relay: Any = None,
    ) -> _T:
        """Run ``operation`` on ``server``'s session (starting it if needed), like a tool call.

        ``for_host``: the request is a host's (not the copilot's own listing), so what the child
        asks or logs meanwhile may belong to it rather than to a tool call in flight. With the host
        request's ``relay`` it is in flight as a tool call is (see :meth:`call_tool`): what the child
        asks or logs goes to that host, and the wait for the child is reported to it.

        For the other MCP requests a proxy forwards (prompts, resources, completion): the same
        slots, timeout and crash handling as :meth:`call_tool`. ``doing`` names the request in
        errors ("resources/read"). A JSON-RPC error the child answers is raised unchanged
        (:class:`MCPError`), so its code can be passed on; a reply that breaks the MCP schema is a
        :class:`ServerUnavailableError` saying where (the SDK would answer the host's request as
        if its own parameters were invalid).
        """
        async with self._borrow(server, timeout, relay) as (child, limit):
            assert child.connection is not None
            connection = child.connection
            session = connection.session
            with (
                anyio.move_on_after(limit) as scope,
                answering(child, doing),
                self._in_flight(child, relay, scope) if relay is not None else host_request(child, for_host),
            ):
                try:
                    return await operation(session)
                except MCPError as error:
                    if connection_lost(error, connection.closed):
                        raise await self._crashed(child, doing) from None
                    shown = child.config.redact(error.message)
                    if shown == error.message:
                        raise
                    # The child's own words may quote what its entry hands it (an upstream "invalid key …").
                    raise MCPError(code=error.code, message=shown, data=error.data) from None
                except (anyio.BrokenResourceError, anyio.ClosedResourceError):
                    raise await self._crashed(child, doing) from None
                except ValidationError as error:
                    raise bad_reply(child, doing, error) from None
            assert scope.cancelled_caught
            raise self._timed_out(child, doing, limit)

    def capabilities(self, server: str) -> types.ServerCapabilities | None:
        """What ``server``'s running child declared at ``initialize`` (``None`` when not running)."""
        connection = self.connection(server)
        return connection.initialize_result.capabilities if connection is not None else None

    async def list_tools(self, server: str, *, use: bool = True, relay: Any = None) -> list[types.Tool]:
        """The tools of ``server``'s live session (listed once per child process, and again after
        the child says they changed); held-back definitions are listed but refused by ``call_tool``.

        ``use=False``: the listing is no use of the child (a re-listing the child's own announcement
        asked for), so it does not keep the child from its idle stop. ``relay``: the tool call this
        listing checks, told as progress why it waits while the child starts (see :meth:`call_tool`).
        """
        config = self._config(server)
        running = self._children.get(server)
        if running is not None and running.running and running.tools is not None:
            if use:
                self._touch(running)  # a use like any other: keeps it from being idle or evicted first
            return list(running.tools)  # listed by this process already: nothing to start or wait for
        state = self._state(server)
        limit = config.timeout or self.settings.call_timeout
        with counting_errors(state, config):
            child = await self._acquire(server, config, relay)
            try:
                if child.tools is None:
                    child.tools = await self._list(child, limit)
                return list(child.tools)
            finally:
                self._release(child, touch=use)

    def unusable_tool(self, server: str, tool: str) -> ServerUnavailableError | ToolPastCapError | None:
        """The error for a call to a tool of ``server`` that the last listing left out -- for a broken
        definition, or past the cap when it cut the listing (the crawl leaves them out of the catalog
        alike) -- else None."""
        state = self._states.get(server)
        if state is None or not state.skipped_tools:
            return None
        return skipped_tool_error(server, tool, state.skipped_tools, state.listed_names)

    def skipped_tools(self, server: str) -> dict[str, str] | None:
        """Tools of ``server`` its last listing left out for a broken definition (name -> why), with
        its cut at the cap if there was one (``LISTING_CUT``), or None when no child of it has
        listed its tools in this pool yet."""
        state = self._states.get(server)
        return dict(state.skipped_tools) if state is not None and state.skipped_tools is not None else None

    def subscribe(self, listener: PoolListener) -> None:
        """Tell ``listener`` about changed tool listings and prompts/resources changes."""
        self._listeners.append(listener)

    def _announce_listing(self, child: Child, tools: list[types.Tool]) -> None:
        """Tell the listeners when ``child``'s server lists other tools (or held back others) than before."""
        state = self._state(child.name)
        held_back = frozenset(child.blocked)
        digest = _tools_digest(tools, held_back, state.skipped_tools or {})
        if digest != state.listed_digest:
            state.listed_digest = digest
            self._tell("tools_listed", child.name, list(tools), held_back)

    async def _on_child_message(self, child: Child, message: Any) -> None:
        """A child's notification (on its session's reader: hand work off, never await the session)."""
        if isinstance(message, types.ToolListChangedNotification):
            child.tools = None
            if not child.relist_pending and self._task_group is not None and not self._closing:
                # Logged per re-list, not per notification: a child may send thousands a second.
                logger.info("server '%s' says its tools changed; listing them again", child.name)
                child.relist_pending = True
                self._task_group.start_soon(self._relist, child, name=f"re-list tools of {child.name}")
            return
        if isinstance(message, types.ResourceUpdatedNotification):
            self._tell("resource_updated", child.name, str(message.params.uri))
            return
        kind: Literal["prompts", "resources"] | None = None
        if isinstance(message, types.PromptListChangedNotification):
            kind = "prompts"
        elif isinstance(message, types.ResourceListChangedNotification):
            kind = "resources"
        if kind is None:
            return
        # Told at once, every time (an answer must not overtake its announcement; the live index
        # re-lists at most once a second), but logged at most once a second: a child may send
        # thousands a second.
        state = self._state(child.name)
        now = time.monotonic()
        if now - state.lists_logged_at.get(kind, float("-inf")) >= RELIST_INTERVAL:
            state.lists_logged_at[kind] = now
            logger.info("server '%s' says its %s changed", child.name, kind)
        self._tell("list_changed", child.name, kind)

    def _tell(self, method: str, *args: Any) -> None:
        for listener in list(self._listeners):
            try:
                getattr(listener, method)(*args)
            except Exception:  # noqa: BLE001 -- a listener's bug must not break the pool
                logger.exception("pool listener failed in %s%r", method, args)

    async def _relist(self, child: Child) -> None:
        # A child announcing changes nonstop gets listed at most once per interval.
        state = self._state(child.name)
        wait = state.relisted_at + RELIST_INTERVAL - time.monotonic()
        if wait > 0:
            await anyio.sleep(wait)
        child.relist_pending = False
        state.relisted_at = time.monotonic()
        if self._children.get(child.name) is not child or not child.running:
            return  # stopped meanwhile: its next process is listed when it is used
        try:
            # Not a use: a child announcing changes nonstop must still go idle when nobody calls it.
            await self.list_tools(child.name, use=False)
        except Exception as error:  # noqa: BLE001 -- reported in status(); the next call lists again
            logger.warning("could not list the changed tools of '%s': %s", child.name, error)

    @asynccontextmanager
    async def _borrow(
        self, server: str, timeout: float | None, relay: Any = None
    ) -> AsyncIterator[tuple[Child, float]]:
        """A slot and the running child of ``server`` for one request, and the request's time limit.

        A tool call's ``relay`` hears every ``wait_progress_every`` seconds why the call still waits.
        """
        config = self._config(server)
        state = self._state(server)
        limit = timeout if timeout is not None else (config.timeout or self.settings.call_timeout)
        if state.slots is None:
            state.slots = anyio.Semaphore(self.settings.per_server_concurrency)
        if not _take_free(state.slots):  # a free slot (most calls) costs no timed wait
            # Up to the call timeout for a slot, then the call timeout for the call: a call that
            # waited long is not given a short leash that would stop the child under the others.
            began = time.monotonic()

            def busy() -> str:
                return (
                    f"Server '{shown_name(server)}' is busy: this call waits for one of its "
                    f"{self.settings.per_server_concurrency} call slot(s) ({time.monotonic() - began:.0f} s so far, "
                    f"up to {limit:g} s)."
                )

            with anyio.move_on_after(limit) as queue_scope:
                await self._wait_noting(state.slots.acquire, relay, busy)
            if queue_scope.cancelled_caught:
                # Not the child's failure (not counted in its errors); slots may have come free and
                # gone to calls that waited longer, so "none finished" was not always true.
                raise ChildTimeoutError(
                    f"server '{server}' is busy: none of its {self.settings.per_server_concurrency} call slot(s) came "
                    f"free for this call within {limit:g}s (other calls held them). Try again later or call another "
                    "server."
                )
        try:
            with counting_errors(state, config):
                child = await self._acquire(server, config, relay)
                try:
                    yield child, limit
                finally:
                    self._release(child)
        finally:
            state.slots.release()

    def warm(self, server: str) -> bool:
        """Start ``server``'s child in the background, if that costs no other child; never raises.

        Warming is a guess, so it is cheap to be wrong about: it only takes a free slot (or the slot
        of another warmed child nobody called yet), keeps at most :data:`MAX_WARM_UNUSED` such
        children, and skips servers whose last start took longer than ``warm_max_start``. It never
        evicts a child that served a call. Returns whether a start began.
        """
        child = self._children.get(server)
        if child is not None and child.usable:
            return False
        try:
            config = self._config(server)
        except Exception:  # noqa: BLE001 -- warming is a hint; the next call reports the problem
            return False
        state = self._state(server)
        if state.start_seconds is not None and state.start_seconds > self.settings.warm_max_start:
            logger.debug("not warming '%s': its last start took %.1fs", server, state.start_seconds)
            return False
        if state.start_error is not None and time.monotonic() - state.failed_at < self.settings.restart_backoff:
            return False
        unused = sorted((c for c in self._live() if c.warmed and c.in_flight == 0), key=lambda c: c.last_used)
        # A warmed child still installing its package is not given up for another guess: killed
        # mid-install, its next start would have to download everything again.
        retirable = [c for c in unused if c.installs is None or c.ready.is_set()]
        needs_room = len(self._live()) >= self.settings.max_live_children
        if needs_room or len(unused) >= MAX_WARM_UNUSED:
            if not retirable:
                return False  # every slot holds a child that is or was in use, or installs
            never_called = "it was started speculatively for a search result and never called"
            self._retire(retirable[0], "unused", never_called)
        try:
            self._start(server, config, evict=False).warmed = True
        except Exception as error:  # noqa: BLE001
            logger.info("not warming server '%s': %s", server, error)
            return False
        return True

    def expect_start_times(self, seconds: Mapping[str, float]) -> None:
        """Start times measured elsewhere (the catalog's crawl), used until the pool times a start itself."""
        for name, value in seconds.items():
            state = self._state(name)
            if state.start_seconds is None:
                state.start_seconds = value

    async def notify_roots_changed(self) -> None:
        """Tell every running child that the roots changed (it may ask ``roots/list`` again)."""
        for child in list(self._children.values()):
            if child.running and child.connection is not None:
                with anyio.move_on_after(5):
                    try:
                        await child.connection.session.send_roots_list_changed()  # pyright: ignore[reportDeprecated]
                    except (MCPError, anyio.BrokenResourceError, anyio.ClosedResourceError):
                        pass

    def is_running(self, server: str) -> bool:
        child = self._children.get(server)
        return child is not None and child.running

    def start_failures(self) -> dict[str, str]:
        """Why each server whose last start failed did (the first line of the error), for those with
        no start under way and none succeeded since: route ranks their tools after the others'."""
        failures: dict[str, str] = {}
        for name, state in self._states.items():
            child = self._children.get(name)
            if state.start_error is None or (child is not None and child.usable):
                continue
            reason = error_summary(str(state.start_error), name)
            if len(reason) > _START_FAILURE_CHARS:  # a long command line: the outcome is at the end
                reason = f"{reason[:100]}…{reason[-(_START_FAILURE_CHARS - 101):]}"
            failures[name] = reason
        return failures

    def started_without_root(self, server: str) -> bool:
        """``server`` works in the user's roots but its child started before any root was known."""
        child = self._children.get(server)
        return child is not None and child.usable and child.config.works_in == "roots" and child.root is None

    def restart_in_root(self, server: str) -> None:
        """Retire a child that started before the user's root was known, once one is: the next call
        starts it there (its calls in flight finish first)."""
        if self.started_without_root(server) and self.link is not None and self.link.user_root() is not None:
            child = self._children[server]
            logger.info("server '%s' started before the user's root was known; restarting it there", server)
            self._retire(child, "replaced", "it was restarted in the user's root, which was not known when it started")

    def connection(self, server: str) -> ChildConnection | None:
        """The live connection of ``server``'s child, if it is running (for diagnostics and benchmarks)."""
        child = self._children.get(server)
        return child.connection if child is not None and child.running else None

    def update_servers(self, servers: Mapping[str, ServerConfig]) -> None:
        """Adopt a new server list: children of removed or relaunched servers are stopped."""
        new = dict(servers)
        for name, child in list(self._children.items()):
            config = new.get(name)
            if config is None or not config.is_enabled or config.launch_hash() != child.config.launch_hash():
                what = "removed from" if config is None else "changed in"
                logger.info("server '%s' was %s the servers file; stopping its child", name, what)
                kind = "removed" if config is None else "reconfigured"
                self._retire(child, kind, f"its entry was {what} the servers file")
        for name, state in self._states.items():
            old, config = self._servers.get(name), new.get(name)
            if old is not None and config is not None and old.launch_hash() != config.launch_hash():
                state.start_error = None  # a fixed launch config deserves an immediate retry
        self._servers = new

    def status(self) -> dict[str, Any]:
        """Per configured server: running, pid, calls, errors, last_used, restarts (starts after its
        process crashed or timed out), idle_stops (children stopped for idleness) and more."""
        report: dict[str, Any] = {}
        for name, config in self._servers.items():
            child = self._children.get(name)
            state = self._states.get(name, ServerState())
            if child is not None and child.running:
                phase = "running"
            elif child is not None and child.usable:
                phase = "starting"
            elif state.start_error is not None:
                phase = "failed"
            else:
                phase = "stopped" if config.is_enabled else "disabled"
            report[name] = {
                "running": phase == "running",
                "state": phase,
                "pid": child.pid if child is not None and child.usable else None,
                "transport": config.transport,
                "calls": state.calls,
                "errors": state.errors,
                "in_flight": child.in_flight if child is not None else 0,
                "last_used": (
                    datetime.fromtimestamp(state.last_used, UTC).isoformat(timespec="seconds")
                    if state.last_used is not None
                    else None
                ),
                "restarts": state.restarts,
                "idle_stops": state.idle_stops,
                "last_error": state.last_error,
                "stderr_log": str(self.settings.server_log(name)) if config.transport == "stdio" else None,
                # In a Landlock domain of its own (index.children.containment.guardian); None: remote.
                "isolated": (
                    config.isolated and child_guard().isolation_available() if config.transport == "stdio" else None
                ),
            }
        return report

    # -- starting and stopping children -------------------------------------------------------

    def _config(self, server: str) -> ServerConfig:
        config = self._servers.get(server)
        if config is None:
            hint = did_you_mean(suggest(server, self._servers))
            raise UnknownServerError(
                f"unknown server '{shown_name(server)}'.{hint} Use route to find servers and tools."
            )
        if not config.is_enabled:
            reason = f": {config.reason}" if config.reason else ""
            raise ServerUnavailableError(f"server '{server}' is disabled{reason}. Use another server's tool.")
        return config

    def _state(self, server: str) -> ServerState:
        state = self._states.get(server)
        if state is None:
            state = self._states[server] = ServerState()
        return state

    def _start(self, server: str, config: ServerConfig, *, evict: bool = True) -> Child:
        if self._task_group is None or self._closing:
            raise ServerUnavailableError(
                f"server '{server}' cannot start: the child pool is not running (the copilot is shutting down)."
            )
        state = self._state(server)
        if state.start_error is not None:
            since = time.monotonic() - state.failed_at
            if since < self.settings.restart_backoff:
                raise ServerUnavailableError(
                    f"server '{server}' failed to start {since:.0f}s ago (a failed start is retried after "
                    f"{self.settings.restart_backoff:g}s): {state.start_error}"
                )
        self._end_last_child(state)
        previous = self._children.get(server)
        if previous is not None:
            self._retire(previous, "replaced", "it was replaced by a new process")
        child = Child(server, config, root=self.link.user_root() if self.link is not None else None)
        child.restart_note, state.lost_state = state.lost_state, None
        child.restart = state.restart_due
        child.start_limit = self.settings.start_timeout(config)
        runner = package_runner(config)
        if runner is not None and not state.started_once and self.settings.install_timeout > child.start_limit:
            # Its first start downloads and installs the package: killed at init_timeout, it was
            # killed mid-install at every call and never became usable.
            child.start_limit, child.installs = self.settings.install_timeout, runner
        self._children[server] = child
        self._alive.add(child)
        state.starts += 1
        state.last_child = child
        if evict:
            self._evict_over_cap(keep=child)
        self._task_group.start_soon(self._run_child, child, name=f"mcp child {server}")
        return child

    def _end_last_child(self, state: ServerState) -> None:
        """Before a new process of a server starts: settle how the last one ended.

        Whether the new start is a restart (the last process that ran failed), and the
        observer's ``child_stopped`` for it now if its runner has not said it yet, so a
        ``child_started`` never comes before the stop of the process it replaces.
        """
        last = state.last_child
        if last is None or last.started_at is None:
            return  # none yet, or it never started: the verdict on the one before stands
        if last.stop_reason is None and not last.usable:
            last.stop_reason = "crashed"  # it ended on its own; its runner may not have noticed yet
        state.restart_due = end_reason(last) in RESTART_AFTER
        self._report_stopped(last)

    def _report_stopped(self, child: Child) -> None:
        if child.started_at is not None and not child.stop_reported:
            child.stop_reported = True
            self._notify("child_stopped", child, None)

    async def _run_child(self, child: Child) -> None:
        """Own one child's session for its whole life; never raises (the pool outlives children)."""
        state = self._state(child.name)
        settings = self.settings

        def spawned(process: ChildProcess) -> None:
            child.process = process

        async def on_message(message: Any) -> None:
            await self._on_child_message(child, message)

        try:
            async with open_session(
                child.config,
                workdir=settings.server_workdir(child.name),
                stderr_path=settings.server_log(child.name),
                init_timeout=child.start_limit,
                max_message_bytes=settings.max_message_bytes,
                shutdown_grace=settings.shutdown_grace,
                on_spawn=spawned,
                message_handler=on_message,
                callbacks=self._callbacks(child),
                root=child.root,
                timeout_advice=self._timeout_advice(child),
            ) as connection:
                child.connection = connection
                child.last_used = child.started_at = time.monotonic()
                state.start_error = None
                state.started_once = True
                if child.restart:
                    state.restarts += 1
                    state.restart_due = False
                state.start_seconds = child.started_at - child.created_at
                child.ready.set()
                self._notify("child_started", child, None)
                logger.info("server '%s' started (pid %s) in %.1fs", child.name, child.pid, state.start_seconds)
                self._tell("child_started", child.name, state.starts > 1)
                if state.listed_digest is not None and self._task_group is not None:
                    # A restart: the new process may list other tools than the last one did.
                    child.relist_pending = True
                    self._task_group.start_soon(self._relist, child, name=f"list tools of restarted {child.name}")
                await _wait_either(child.stop, connection.closed)
                if not child.stop.is_set():
                    child.broken = True
                    code = await connection.wait_exit(_EXIT_CODE_WAIT)
                    child.stopped_because = child.stopped_because or exit_words(child, connection, code)
                    logger.warning(
                        "server '%s' stopped: %s; it will be restarted on the next call", child.name, child.stopped_because
                    )
        except ChildStartError as error:
            redact_error(error, child.config)  # before it is stored, logged, counted or told to anyone
            child.start_error = error
            self._notify("child_started", child, error)
            state.start_error, state.failed_at = error, time.monotonic()
            state.last_error = str(error)
            logger.warning("server '%s' failed to start: %s", child.name, error)
        except Exception as error:  # a bug or an unexpected transport failure must not kill the pool
            child.start_error = redact_error(error, child.config)
            shown = child.config.redact("".join(traceback.format_exception(error)))
            logger.error("server '%s': unexpected error in its session\n%s", child.name, shown.rstrip())
        finally:
            self._report_stopped(child)
            child.broken = True
            child.ready.set()
            child.done.set()
            self._alive.discard(child)
            if self._children.get(child.name) is child:
                del self._children[child.name]
            self._note_lost_state(child, state)

    def _timeout_advice(self, child: Child) -> str:
        """What to raise when ``child``'s start exceeds its deadline (ends the initialize-timeout message)."""
        settings = self.settings
        if child.installs is not None:
            return (
                f"its first start through {child.installs} downloads and installs its package; if that is only "
                f"slow, raise COPILOT_INSTALL_TIMEOUT ({settings.install_timeout:g}s) or the server's 'timeout' "
                "in the servers file, or install the package beforehand"
            )
        advice = (
            f"if it is only slow, raise COPILOT_INIT_TIMEOUT ({settings.init_timeout:g}s) "
            "or the server's 'timeout' in the servers file"
        )
        runner = package_runner(child.config)
        if runner is not None and not self._state(child.name).started_once:
            advice += f" (and COPILOT_INSTALL_TIMEOUT, which its first start through {runner} gets to install its package)"
        return advice

    def _note_lost_state(self, child: Child, state: ServerState) -> None:
        """A child that served calls is gone: the next child's first result must say its state is lost."""
        if self._closing or not child.config.stateful:
            return
        if child.served == 0:
            # It never answered, so it had no state of its own; a note it was carrying moves on.
            lost = child.restart_note
        else:
            lost = (
                f"[copilot] Server '{child.name}' was restarted since its last call: "
                f"{child.stopped_because or 'its process ended'}. Any state it kept from earlier calls "
                "(open documents, sessions, a game in progress, counters) is lost."
            )
        if lost is None:
            return
        successor = self._children.get(child.name)
        if successor is not None and successor.served == 0:
            successor.restart_note = lost
        else:
            state.lost_state = lost

    def _served(self, child: Child, result: types.CallToolResult) -> types.CallToolResult:
        """Count a call the child answered; its first result after a restart carries the restart note."""
        child.served += 1
        note, child.restart_note = child.restart_note, None
        if note is None:
            return result
        # First, so the model reads it before the result, and a size cap that cuts the end keeps it.
        return result.model_copy(update={"content": [types.TextContent(type="text", text=note), *result.content]})

    def _callbacks(self, child: Child) -> ClientCallbacks | None:
        """The child session's answers to the child's own requests, relayed through ``link``."""
        link = self.link
        if link is None:
            return None

        def others() -> int:
            # Not the copilot's own requests (tools/list, its prompt and resource listings): a host's.
            return child.host_requests

        async def answer(request: types.InputRequest) -> types.InputResponse | types.ErrorData:
            return await link.answer(child.name, list(child.calls), request, others=others())

        async def sampling(context: Any, params: types.CreateMessageRequestParams) -> Any:
            return await answer(types.CreateMessageRequest(params=params))

        async def elicitation(context: Any, params: types.ElicitRequestParams) -> Any:
            return await answer(types.ElicitRequest(params=params))

        async def list_roots(context: Any) -> Any:
            return await answer(types.ListRootsRequest())

        async def log(params: types.LoggingMessageNotificationParams) -> None:
            text = params.data if isinstance(params.data, str) else repr(params.data)
            line = f"log {params.level}{f' {params.logger}' if params.logger else ''}: {text[:_LOG_LINE_CHARS]}"
            if child.process is not None:
                child.process.note(line)
            else:
                logger.info("server '%s' %s", child.name, line)
            await link.log(child.name, list(child.calls), params, others=others())

        return ClientCallbacks(sampling=sampling, elicitation=elicitation, list_roots=list_roots, logging=log)

    async def _acquire(self, server: str, config: ServerConfig, relay: Any = None) -> Child:
        """The server's running child, started if needed, with this call counted as in flight."""
        child = self._children.get(server)
        if child is None or not child.usable:
            child = self._start(server, config)
        child.in_flight += 1
        child.warmed = False
        try:
            if not child.ready.is_set() and child.installs is not None:
                # A first start that installs its package may take install_timeout: no call waits that
                # long. The start goes on in the pool's task group; the next call joins it.
                with anyio.move_on_after(self.settings.start_timeout(config)):
                    await self._wait_noting(child.ready.wait, relay, lambda: self._start_note(child))
                if not child.ready.is_set():
                    raise StillStartingError(
                        f"server '{server}' is still starting after {time.monotonic() - child.created_at:.0f} s: its "
                        f"first start through {child.installs} downloads and installs its package, which goes on in "
                        f"the background (up to {child.start_limit:g} s, COPILOT_INSTALL_TIMEOUT). Call again in a minute."
                    )
            if not child.ready.is_set():
                # open_session bounds the start by start_limit; this only guards against a bug.
                with anyio.fail_after(child.start_limit + 30):
                    await self._wait_noting(child.ready.wait, relay, lambda: self._start_note(child))
            if child.start_error is not None:
                error = child.start_error
                if isinstance(error, ChildStartError):
                    raise ServerUnavailableError(f"{error}") from None
                raise ServerUnavailableError(
                    f"server '{server}' could not be started ({type(error).__name__}: {config.redact(str(error))})."
                ) from None
            if child.connection is None or child.connection.closed.is_set():
                tail = child.connection.stderr_tail(8) if child.connection is not None else []
                raise ServerUnavailableError(f"server '{server}' exited right after starting.{stderr_tail_text(tail)}")
        except BaseException:
            self._release(child)
            raise
        return child

    def _start_note(self, child: Child) -> str:
        """Why a call waits for ``child``: its start, how long so far, and how long it may take."""
        so_far = f"{time.monotonic() - child.created_at:.0f} s so far"
        if child.installs is None:
            return f"Server '{shown_name(child.name)}' is starting ({so_far}, up to {child.start_limit:g} s)."
        return (
            f"Server '{shown_name(child.name)}' is starting: its first start through {child.installs} downloads and "
            f"installs its package ({so_far}; this call waits up to {self.settings.start_timeout(child.config):g} s "
            f"of it, the install may take up to {child.start_limit:g} s)."
        )

    async def _wait_noting(self, wait: Callable[[], Awaitable[object]], relay: Any, why: Callable[[], str]) -> None:
        """``wait()`` (its caller bounds it); meanwhile the call's ``relay`` gets ``why()`` as progress
        every ``wait_progress_every`` seconds, so a host that resets its timeout on progress (a first
        ``npx`` start takes minutes) keeps waiting. A wait shorter than that sends nothing."""
        if relay is None:
            await wait()
            return

        async def keep_noting() -> None:
            while True:
                await anyio.sleep(self.settings.wait_progress_every)
                await relay.waiting(why())

        # Beside the wait, not by timing it out: a call slot's queue is first come, first served, and
        # a waiter that left it to send a note would queue again at its end.
        async with anyio.create_task_group() as notes:
            notes.start_soon(keep_noting, name="progress while a call waits")
            await wait()
            notes.cancel_scope.cancel()

    def _touch(self, child: Child) -> None:
        child.last_used = time.monotonic()
        state = self._states.get(child.name)
        if state is not None:
            state.last_used = time.time()

    def _release(self, child: Child, *, touch: bool = True) -> None:
        child.in_flight -= 1
        if touch:
            self._touch(child)
        if child.in_flight == 0 and child.retired:
            child.stop.set()
        if child.process is not None:
            child.process.rotate_log_if_over(self.settings.child_log_max_bytes)
        self._evict_over_cap()

    def _notify(self, event: str, child: Child, error: BaseException | None) -> None:
        if self.observer is None:
            return
        try:
            if event == "child_started":
                seconds = (child.started_at or time.monotonic()) - child.created_at
                self.observer.child_started(child.name, child.config, child.pid, seconds, error, restart=child.restart)
            else:
                uptime = time.monotonic() - child.started_at if child.started_at is not None else 0.0
                self.observer.child_stopped(child.name, end_reason(child), uptime)
        except Exception:  # noqa: BLE001 -- telemetry must never break the pool
            logger.exception("pool observer failed on %s", event)

    def _retire(self, child: Child, reason: str = "retired", because: str | None = None) -> None:
        """Take ``child`` out of service; it stops now, or after its last in-flight call.

        ``reason`` is the kind the observer counts; ``because`` says it in words, for the note on
        the next child's first result.
        """
        child.stop_reason = child.stop_reason or reason
        child.retired = True
        child.stopped_because = child.stopped_because or because
        if self._children.get(child.name) is child:
            del self._children[child.name]
        if child.in_flight == 0:
            child.stop.set()

    def _break(self, child: Child, reason: str, *, kill: bool = True, kind: str = "crashed") -> None:
        """Take a misbehaving child out of service right away (its in-flight calls fail, saying ``reason``)."""
        child.stop_reason = child.stop_reason or kind
        if not child.broken:
            logger.warning("stopping server '%s': %s", child.name, reason)
        child.broken = True
        child.stopped_because = child.stopped_because or reason
        if self._children.get(child.name) is child:
            del self._children[child.name]
        if kill and child.connection is not None:
            child.connection.kill()
        child.stop.set()

    def _live(self) -> list[Child]:
        return [child for child in self._alive if not child.stop.is_set()]

    def _evict_over_cap(self, keep: Child | None = None) -> None:
        """Over ``max_live_children``: stop idle children, those that never served a call first, then
        the least recently used ones that keep no state, and ``stateful`` ones last."""
        live = self._live()
        excess = len(live) - self.settings.max_live_children
        if excess <= 0:
            return
        idle = sorted(
            (child for child in live if child.in_flight == 0 and child is not keep and child.ready.is_set()),
            key=lambda child: (child.served > 0, child.config.stateful, child.last_used),
        )
        cap = self.settings.max_live_children
        for child in idle[:excess]:
            logger.info("stopping server '%s' to make room (COPILOT_MAX_LIVE_CHILDREN=%d reached)", child.name, cap)
            because = f"it was stopped to make room for another server (COPILOT_MAX_LIVE_CHILDREN={cap})"
            self._retire(child, "evicted", because)
        if len(idle) < excess:
            logger.info("%d children running, over max_live_children: the busy ones stop when idle", len(live))

    async def _stop_idle_children(self) -> None:
        idle_timeout = self.settings.idle_timeout
        interval = min(max(idle_timeout / 4, 0.05), 30.0)
        while True:
            await anyio.sleep(interval)
            now = time.monotonic()
            for child in list(self._children.values()):
                if child.in_flight == 0 and child.running and now - child.last_used >= idle_timeout:
                    if any(listener.keeps_alive(child.name) for listener in self._listeners):
                        continue
                    logger.info("stopping server '%s': idle for %.0fs", child.name, now - child.last_used)
                    self._state(child.name).idle_stops += 1
                    self._retire(child, "idle", f"it was idle for {idle_timeout:g}s (COPILOT_IDLE_TIMEOUT)")

    async def _rotate_child_logs(self) -> None:
        """Keep every running child's stderr log bounded, also for children that flood it between calls."""
        while True:
            await anyio.sleep(LOG_CHECK_INTERVAL)
            for child in list(self._alive):
                if child.process is not None:
                    child.process.rotate_log_if_over(self.settings.child_log_max_bytes)

    # -- calls ------------------------------------------------------------------------------

    async def _crashed(self, child: Child, doing: str) -> ChildCrashedError:
        connection = child.connection
        if child.cut_off_because is not None:
            # Not this call's fault: the copilot stopped the child for another reason.
            self._break(child, child.cut_off_because)
            return ChildCrashedError(
                f"server '{child.name}' was stopped during {doing} because {child.cut_off_because}; this call was "
                "cut off with it. It will be restarted on the next call; any state it kept is lost. Retry the call."
            )
        # Out of service now, killed only after its exit code is known (a kill would mask it).
        child.broken = True
        if self._children.get(child.name) is child:
            del self._children[child.name]
        if connection is None or connection.process is None:
            self._break(child, exit_words(child, connection, None))
            return ChildCrashedError(
                f"the connection to server '{child.name}' closed during {doing}. "
                "It will be reconnected on the next call."
            )
        code = await connection.wait_exit(_EXIT_CODE_WAIT)
        self._break(child, exit_words(child, connection, code))
        return ChildCrashedError(
            f"server '{child.name}' crashed during {doing} ({how_it_ended(code)}). It will be restarted on the next call; "
            f"any state it kept is lost.{stderr_tail_text(connection.stderr_tail(8))}"
        )

    def _timed_out(self, child: Child, doing: str, limit: float) -> ChildTimeoutError:
        reason = f"{doing} did not finish within {limit:g}s, so it was killed"
        cut_off = f"another call to it ({doing}) did not finish within {limit:g}s"
        child.cut_off_because = child.cut_off_because or cut_off
        # Read before the process is stopped: an answer written without its newline is never read.
        # A paused reader left a line half read: then the pause is the whole story.
        unended = (
            child.process.paused_output() or child.config.redact(child.process.unterminated_stdout())
            if child.process is not None
            else ""
        )
        self._break(child, reason, kind="timeout")
        return ChildTimeoutError(
            f"server '{child.name}' did not finish {doing} within {limit:g}s.{unended} The server was stopped (it "
            "may be stuck) and will be restarted on the next call; any state it kept is lost. Retry with "
            "smaller inputs or use another tool."
        )

    async def _call(
        self, child: Child, tool: str, arguments: dict[str, Any] | None, limit: float, relay: Any = None
    ) -> types.CallToolResult:
        assert child.connection is not None
        connection = child.connection
        session = connection.session
        doing = f"the call to '{tool}'"
        with anyio.move_on_after(limit) as scope, answering(child, doing), self._in_flight(child, relay, scope):
            try:
                # Not session.call_tool: the copilot passes the child's result on as it is, without
                # checking its structured content against the tool's output schema (the host may).
                progress = relay.progress if relay is not None else None
                direct = connection.direct
                if direct is not None and not sdk_tracing_on():
                    # Beside the session (index.children.direct): same checks, far less framing.
                    params: dict[str, Any] = {"name": tool} if arguments is None else {"name": tool, "arguments": arguments}
                    raw = await direct.request("tools/call", params, on_progress=progress)
                    return typed_result(session.protocol_version, "tools/call", raw, types.CallToolResult)
                request = types.CallToolRequest(params=types.CallToolRequestParams(name=tool, arguments=arguments))
                return await session.send_request(request, types.CallToolResult, progress_callback=progress)
            except MCPError as error:
                if connection_lost(error, connection.closed):
                    raise await self._crashed(child, doing) from None
                said = child.config.redact(error.message)  # it may quote the keys its entry hands it
                if error.data == COPILOT_ORIGIN:  # the child's reply was unreadable; the message says why
                    return text_result(f"{said} (calling '{tool}')", is_error=True)
                return text_result(f"server '{child.name}' answered '{tool}' with error {error.code}: {said}", is_error=True)
            except (anyio.BrokenResourceError, anyio.ClosedResourceError):
                raise await self._crashed(child, doing) from None
            except (ValidationError, RuntimeError, ValueError) as error:
                # A malformed or unsupported result: the child is alive, the model should hear why
                # (not pydantic's dump: eleven errors and links for one block of an unknown type).
                trace = child.config.redact("".join(traceback.format_exception(error)))
                logger.warning("server '%s': unreadable result for '%s'\n%s", child.name, tool, trace.rstrip())
                why = describe_result_error(error) if isinstance(error, ValidationError) else shown_name(str(error), 500)
                why = child.config.redact(why)
                return text_result(f"server '{child.name}' returned a result for '{tool}' that could not be read: {why}", is_error=True)
        assert scope.cancelled_caught
        raise self._timed_out(child, doing, limit)

    @staticmethod
    @contextmanager
    def _in_flight(child: Child, relay: Any, scope: anyio.CancelScope) -> Iterator[None]:
        if relay is None:
            yield
            return
        relay.timeout_scope = scope
        child.calls.append(relay)
        try:
            yield
        finally:
            child.calls.remove(relay)
            relay.close()

    async def _check_definition(self, child: Child, tool: str, limit: float) -> None:
        """Refuse a call to a tool whose live definition is held back (listing the child first if needed)."""
        if child.tools is None:
            child.tools = await self._list(child, limit)
        verdict = child.blocked.get(tool)
        if verdict is not None and self.guard is not None and self.guard.blocked(child.name, tool) is None:
            del child.blocked[tool]  # approved since this child listed it
            verdict = None
        if verdict is not None:
            raise ToolBlockedError(verdict.message())

    async def _reviewed(self, child: Child, tools: list[types.Tool]) -> list[types.Tool]:
        """Every listing passes the guard: held-back tools are remembered and refused by ``call_tool``;
        then the listeners hear of it (with the held-back names, whose definitions they must not use)."""
        if self.guard is not None:
            child.blocked = dict(await self.guard.review_listing(child.name, child.config, tools))
        self._announce_listing(child, tools)
        return tools

    async def _list(self, child: Child, limit: float) -> list[types.Tool]:
        # The guard's review runs after the child's time limit: the copilot's own work (the pins
        # file, its lock, the poisoning scan) must not count against the child, or be cut by it.
        return await self._reviewed(child, await self._listing(child, limit))

    def _note_skipped(self, child: Child, tools: list[types.Tool], skipped: dict[str, str]) -> None:
        """What the listing left out (broken definitions, the cap's cut), in the copilot's log and the
        child's: each entry once per change of it, not again with every re-listing or restart."""
        state = self._state(child.name)
        before = state.skipped_tools or {}
        for name, problem in skipped.items():
            if before.get(name) != problem:
                self._report_listing(child, skipped_words(name, problem))
        state.skipped_tools = skipped
        state.listed_names = dict.fromkeys(tool.name for tool in tools)

    def _note_listing_warnings(self, child: Child, warnings: list[str]) -> None:
        """What the listing cut (pages, tools over the limit, names listed twice): logged once per change."""
        state = self._state(child.name)
        if warnings and warnings != state.listing_warnings:
            for warning in warnings:
                self._report_listing(child, warning)
        state.listing_warnings = warnings

    @staticmethod
    def _report_listing(child: Child, text: str) -> None:
        """A problem of the child's listing, for the copilot's log and the child's (where its author looks)."""
        logger.warning("server '%s': %s", child.name, text)
        if child.process is not None:
            child.process.note(text)

    async def _listing(self, child: Child, limit: float) -> list[types.Tool]:
        """Every page of the child's ``tools/list``, within ``limit`` seconds."""
        assert child.connection is not None
        connection = child.connection
        skipped: dict[str, str] = {}
        warnings: list[str] = []
        with anyio.move_on_after(limit) as scope, answering(child, "tools/list"):
            try:
                # Bounded whatever the child sends: pages, tools, definition sizes (as the crawl's).
                tools = await list_all_tools(connection, warnings, skipped)
                self._note_skipped(child, tools, skipped)
                self._note_listing_warnings(child, warnings)
                return tools
            except ValidationError as error:  # broken beyond single tools (those are skipped)
                raise bad_reply(child, "tools/list", error) from None
            except MCPError as error:
                if connection_lost(error, connection.closed):
                    raise await self._crashed(child, "tools/list") from None
                if error.data == COPILOT_ORIGIN:
                    raise ServerUnavailableError(f"{error.message} (listing its tools)") from None
                raise ServerUnavailableError(
                    f"server '{child.name}' failed to list its tools: error {error.code}: {error.message}"
                ) from None
            except (anyio.BrokenResourceError, anyio.ClosedResourceError):
                raise await self._crashed(child, "tools/list") from None
        assert scope.cancelled_caught
        raise self._timed_out(child, "tools/list", limit)
