"""The copilot's work behind the MCP tools: searching (``route``) and calling (``execute``).

:class:`Copilot` holds the long-lived parts -- servers file, search index, child pool,
policies, confirm tokens, background indexer, session logs -- and is what the MCP server's
lifespan yields. It knows nothing about MCP framing beyond ``CallToolResult``; ``server.app``
adapts it to tool calls.
"""

from __future__ import annotations

import json
import logging
import math
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass
from datetime import UTC, datetime
from importlib import metadata
from pathlib import Path
from typing import Any

import anyio
from mcp.shared.exceptions import MCPError
from mcp_types import INVALID_PARAMS, CallToolResult, ErrorData, InputRequiredResult, InputResponses

from index.errors import CopilotError, IndexNotBuiltError, QueryError
from index.catalog.records import ToolRecord
from index.search.query import MAX_QUERY_CHARS, MAX_TOP_K
from index.catalog.servers import ServerConfig, ServersFile, load_servers
from index.storage.pool_cache import KeptServer, keep_pool, kept_pool, pool_of_records, pool_path
from server.bounded import shown_name
from server.errors import (
    CallCancelledError,
    ConfirmationRequiredError,
    ExecuteError,
    InputExpiredError,
    InvalidParamsError,
    PolicyDeniedError,
    ServerUnavailableError,
    ToolPastCapError,
    UnknownServerError,
    UnknownToolError,
    skipped_tool_error,
)
from index.search.model_loading import LEXICAL_MODES
from server.route.answer import RouteAnswer, RoutedTool, echo_query, render_route
from server.guard import DefinitionGuard, flags_for_log, result_findings, warning_block
from server.route.arguments import route_query, route_server, route_top_k
from server.route.approvals import APPROVAL_SYNC_WAIT, ApprovedDefinitions
from server.route.indexing import BackgroundIndexer
from server.route.kinds import ROUTE_KINDS, missing_kind_note, route_kind, unknown_kind_message
from server.policy import ConfirmationStore, Policy, Risk
from server.relay.call import CallRelay
from server.relay.confirm import approved, confirmation_request, confirmation_round
from server.relay.disconnect import unless_client_gone
from server.relay.host import HostLink
from server.relay.hub import Relay
from server.relay.suspended import Finished, SuspendedCall, decode_state
from server.execute.results import ResultLimits, cap_result, text_result, to_log_result
from server.route.description import PoolServer, describe_pool_from_config, server_label
from server.trajectory.session_log import SessionLog, SessionLogs
from server.settings import ServerSettings
from server.telemetry import Telemetry, instrumented
from server.trajectory.records import RouteHit
from server.execute.validation import check_params, coerce_params, did_you_mean, json_type_name, suggest

logger = logging.getLogger(__name__)

#: How many distinct servers of route's best hits are started in the background.
WARM_TOP_SERVERS = 2
#: Seconds between checks of the servers file for changes.
SERVERS_FILE_CHECK_INTERVAL = 1.0
#: Seconds between the background checks of the pins file for approvals (route and execute check
#: it themselves before answering; this brings hosts' lists along when neither is called).
APPROVALS_CHECK_INTERVAL = 1.0
_LISTED_NAMES = 25
_UNREAD = object()


def _pool_servers(servers: Mapping[str, KeptServer]) -> dict[str, PoolServer]:
    return {name: PoolServer(name, kept.description, kept.category, list(kept.tools)) for name, kept in servers.items()}


def copilot_version() -> str:
    try:
        return metadata.version("mcp-copilot")
    except metadata.PackageNotFoundError:
        return "0+unknown"


@dataclass(frozen=True)
class ToolInfo:
    name: str
    description: str
    input_schema: dict[str, Any]
    annotations: dict[str, Any] | None


@dataclass(frozen=True)
class PreparedCall:
    """A call that passed every check but confirmation: known server and tool, valid params."""

    server: str
    tool: str
    params: dict[str, Any]
    info: ToolInfo
    risk: Risk


@dataclass
class Shutdown:
    """Why the copilot is stopping: set by signal handlers, else ``default`` (what ending the
    transport means: stdin closed for stdio, server stopped for HTTP); read when sessions end."""

    reason: str | None = None
    default: str = "shutdown"
    #: Called once every child is stopped and every log closed (the process may exit then).
    on_stopped: Callable[[], None] | None = None


@dataclass
class Confirmation:
    """How the user answered an elicited confirmation (``None`` when not asked)."""

    approved: bool
    #: Why no decision came from a host that was asked (no answer in time, an error, an answer
    #: that is none): the call is refused, never turned into a token the agent could redeem itself.
    unanswered: str | None = None


def _no_decision(answer: object) -> str:
    """Why an elicitation ``answer`` holds no decision, for the refusal that follows."""
    if isinstance(answer, ErrorData):
        return f"the host answered with an error ({answer.code}: {shown_name(answer.message)})"
    return "the host's answer holds no decision"


def _logged_query(query: Any) -> str:
    """A route query that is no text, as the trajectory shows it: none at all (a misspelt argument,
    ``qeury``) is an empty query, not the string "None"."""
    return "" if query is None else str(query)


def _hidden_note(note: str | None, held: list[str], refused_read_only: int) -> str | None:
    """Say why matching tools are missing: held back by trust checks, or not read-only."""
    parts = [note] if note else []
    if held:
        parts.append(f"{len(held)} match(es) are hidden: " + " ".join(held[:3]))
    if refused_read_only:
        parts.append(
            f"{refused_read_only} matching tool(s) are hidden because the copilot runs in read-only mode and they do "
            "not declare readOnlyHint: true."
        )
    return " ".join(parts) or None


def relay_for(settings: ServerSettings) -> Relay:
    return Relay(roots=settings.roots, input_timeout=settings.input_timeout, log_level=settings.child_log_level)


def _error_result(error: Exception) -> CallToolResult:
    return text_result(str(error), is_error=True)


class _ExecuteRecord:
    """The trajectory entry of one ``execute`` call: written once, when the call ends (in any round)."""

    def __init__(self, log: SessionLog | None, server: Any, tool: Any, params: Any, telemetry: Telemetry) -> None:
        self.log = log
        self.telemetry = telemetry
        self.start = time.perf_counter()
        self.call_id = log.next_call_id() if log else ""
        self.server = str(server)
        self.tool = str(tool)
        self.params = params if isinstance(params, dict) else ({"_raw": params} if params is not None else None)
        self.written = False

    def write_error(self, error: ExecuteError) -> None:
        """The entry of a call that ended with ``error`` (its result is the error's)."""
        self.write(_error_result(error), str(error), error.kind)

    def resolved(self, call: PreparedCall) -> None:
        self.server, self.tool, self.params = call.server, call.tool, call.params

    def write(
        self, result: CallToolResult, error: str | None = None, kind: str | None = None, flags: list[Any] | None = None
    ) -> None:
        if self.written:
            return
        self.written = True
        if error is None and not result.is_error and self.log is not None:
            self.log.note_used(self.server)
        self.telemetry.outcome(
            server=self.server, tool=self.tool, kind=kind, error=error, tool_error=bool(result.is_error),
            flagged=len(flags or []),
        )
        if self.log is not None:
            self.log.execute(
                self.call_id, self.server, self.tool, self.params, to_log_result(result), _ms(self.start),
                error=error, error_kind=kind, flags=flags_for_log(flags or []) or None,
            )


def _item_record(hit: Any) -> ToolRecord:
    """A prompt or resource ``route`` found, as the record the trust guard reads (all of what is
    pinned of it, so an approved definition is recognised)."""
    return ToolRecord(
        server=hit.server, name=hit.tool, kind=hit.kind, uri=getattr(hit, "uri", None), title=hit.title,
        description=hit.description or "", input_schema=dict(hit.input_schema or {}),
        mime_type=getattr(hit, "mime_type", None), annotations=getattr(hit, "annotations", None),
    )


def _not_a_token(confirm: Any) -> str:
    """Why a ``confirm`` that is not a token string (``true``, a blank string) confirmed nothing."""
    if confirm is None or confirm == "":
        return ""
    got = "a blank string" if isinstance(confirm, str) else json.dumps(confirm, default=str, ensure_ascii=False)[:40]
    return f" The confirm you gave ({got}) is not a token: confirm takes only the token string this answer gives."


def _ms(start: float) -> float:
    return round((time.perf_counter() - start) * 1000, 3)


def _name(value: Any, what: str, error: type[ExecuteError]) -> str:
    if isinstance(value, str) and value.strip():
        return value.strip()
    if value is None or value == "":
        raise error(f"'{what}' is required: pass the {what.split('_')[0]} name exactly as route returned it.")
    raise error(f"'{what}' must be a string (the name as route returned it), got {json_type_name(value)}.")


class Copilot:
    """Route and execute over one servers file, one index and one child pool."""

    def __init__(
        self,
        settings: ServerSettings,
        servers_file: ServersFile,
        index: Any,
        pool: Any,
        shutdown: Shutdown | None = None,
        relay: Relay | None = None,
        *,
        guard: DefinitionGuard | None = None,
        telemetry: Telemetry | None = None,
    ) -> None:
        self.settings = settings
        self.shutdown = shutdown or Shutdown()
        self.index = index
        self.pool = pool
        self.relay = relay if relay is not None else relay_for(settings)
        self.limits = ResultLimits(
            chars=settings.max_result_chars, blocks=settings.max_result_blocks, binary_bytes=settings.max_result_bytes
        )
        #: Pins and quarantine (``server.guard``); ``None`` only in tests that build a bare Copilot.
        self.guard = guard
        self.telemetry = telemetry or Telemetry()
        self.telemetry.bind_servers(lambda: self.servers)
        self.transport = "stdio"
        self.http_url: str | None = None
        self.version = copilot_version()
        self.started_at = datetime.now(UTC).isoformat(timespec="seconds")
        self._servers_file = servers_file
        self._servers_mtime = self._mtime(servers_file.path)
        self._servers_checked = time.monotonic()
        self.policy = Policy(
            allow=settings.allow,
            deny=settings.deny,
            read_only=settings.read_only,
            untrusted=settings.untrusted,
            servers=servers_file.servers,
            confirm=settings.confirm,
            read_only_allow=settings.read_only_allow,
        )
        self.confirmations = ConfirmationStore(ttl=settings.confirm_ttl)
        self.indexer = BackgroundIndexer(
            settings, index, getattr(pool, "settings", None), reviewer=guard.reviewer if guard is not None else None
        )
        self.started = anyio.Event()
        self.sessions = SessionLogs(settings, copilot_version=copilot_version(), index_info=self.index_info)
        self._task_group: anyio.abc.TaskGroup | None = None
        #: The start-up work (indexing included) is scheduled and not over: a route that finds no
        #: index meanwhile is told to wait for it, not to build the index by hand.
        self._startup_indexing = False
        self._tool_count: int | None = None
        self._usage_prior: dict[str, Any] | None = None
        #: The children's prompts, resources and exposed tools (``server.aggregate``), set by ``server.app``.
        self.aggregation: Any = None
        self._indexed_pool: dict[str, PoolServer] = {}
        #: (index build, its servers and tools) as last read from the index (``_UNREAD``: not yet).
        self._pool_read: tuple[object, dict[str, PoolServer]] = (_UNREAD, {})
        #: The index build whose pool the last start kept (``index.storage.pool_cache``); ``_UNREAD``: not looked.
        self._kept_build: object = _UNREAD
        self._route_description: str | None = None
        self._describing = anyio.Lock()
        #: Awaited with the new text whenever route's description changes.
        self.route_description_listeners: list[Callable[[str], Awaitable[None]]] = []
        #: Awaited with (server, kinds changed) when the copilot itself rewrote records of the index
        #: (approved definitions); the aggregation tells hosts. Without one, route's description follows.
        self.index_change_listeners: list[Callable[[str, set[str]], Awaitable[None]]] = []
        #: Approved definitions into the index (``None`` without a trust guard).
        self.approvals = (
            ApprovedDefinitions(guard.reviewer.store, index, lambda: self.servers, self._approvals_indexed)
            if guard is not None
            else None
        )

    # -- lifecycle ----------------------------------------------------------------------------
    @classmethod
    @asynccontextmanager
    async def running(
        cls,
        settings: ServerSettings,
        servers_file: ServersFile,
        *,
        start_now: bool = False,
        shutdown: Shutdown | None = None,
        index: Any = None,
        pool_settings: Any = None,
        telemetry: Telemetry | None = None,
    ) -> AsyncIterator[Copilot]:
        """Start the copilot: nothing heavy happens until :meth:`mark_started` (or ``start_now``).

        On exit every child is stopped (the pool's own shutdown, then ``kill_all`` as the last
        resort) and every open session log gets its ``session_end``.
        """
        from index.children.containment.guard import child_guard
        from index.search.tool_index import ToolIndex  # heavy dependencies load lazily, not at import
        from index.trust.settings import TrustSettings
        from server.pool.sessions import ChildPool
        from server.pool.settings import PoolSettings

        index = index if index is not None else ToolIndex.open(settings)
        relay = relay_for(settings)
        # The pool's and trust settings come from the environment, but their home follows the copilot's.
        pool_settings = pool_settings or PoolSettings.load(home=settings.home)
        guard = DefinitionGuard(TrustSettings.load(home=settings.home).reviewer(), pool_settings)
        await anyio.to_thread.run_sync(guard.note_servers, list(servers_file.servers))
        telemetry = telemetry or Telemetry()
        pool = ChildPool(servers_file.enabled(), pool_settings, guard=guard, observer=telemetry, link=relay)
        relay.on_roots_changed = pool.notify_roots_changed
        copilot = cls(settings, servers_file, index, pool, shutdown, relay, guard=guard, telemetry=telemetry)
        copilot.telemetry.metrics.gauge(
            "copilot_live_children", "child servers running now", lambda: sum(pool.is_running(n) for n in copilot.servers)
        )
        copilot.telemetry.metrics.gauge("copilot_index_tools", "tools in the search index", lambda: copilot._tool_count)
        copilot.telemetry.metrics.gauge(
            "copilot_tools_held_back",
            "tools held back by pins, quarantine or the scan",
            lambda: sum(1 for verdict in guard.reviewer.held() if verdict.kind == "tool"),
        )
        try:
            async with pool, anyio.create_task_group() as task_group:
                copilot._task_group = task_group
                relay.task_group = task_group
                # Only when there is something to index (with no server, nothing will build the index).
                copilot._startup_indexing = settings.auto_index and any(c.is_enabled for c in servers_file.servers.values())
                task_group.start_soon(copilot._background)
                task_group.start_soon(copilot._watch_approvals, name="approved definitions watch")
                task_group.start_soon(copilot.telemetry.keep_status, copilot, settings.home)
                if start_now:
                    copilot.mark_started()
                try:
                    yield copilot
                finally:
                    copilot.sessions.end_all(copilot.shutdown_reason or copilot.shutdown.default)
                    task_group.cancel_scope.cancel()
        finally:
            pool.kill_all()
            child_guard().close()  # the watchdog sweeps (nothing left by now) and exits with us
            if copilot.shutdown.on_stopped is not None:
                copilot.shutdown.on_stopped()

    @property
    def shutdown_reason(self) -> str | None:
        return self.shutdown.reason

    def mark_started(self) -> None:
        """The first request was answered: background work may start now (keeps ``initialize`` fast)."""
        if not self.started.is_set():
            self.started.set()

    async def _background(self) -> None:
        await self.started.wait()
        await anyio.to_thread.run_sync(self._learn_start_times, abandon_on_cancel=True)
        # Warming the index runs on its own (routes answer lexically meanwhile, so nothing waits for
        # the model); refreshing route's description and indexing new or changed servers follow.
        if self._task_group is not None and self.settings.warm_index:
            self._task_group.start_soon(self._warm_in_background)
        try:
            await self.refresh_route_description(reload_index=True)
            if self.settings.auto_index:
                await self._index_servers(self.servers)
        finally:
            self._startup_indexing = False
        # Operators (and tests) read this line as "start-up work is over; what is open now stays open".
        logger.info("start-up work done%s", "" if self.settings.warm_index else " (index warming is off)")

    async def follow_approvals(self, wait: float = APPROVAL_SYNC_WAIT) -> None:
        """Definitions a person approved since the last look reach the index (waiting at most ``wait`` s)."""
        if self.approvals is not None:
            await self.approvals.follow(self._task_group, wait)

    async def _watch_approvals(self) -> None:
        if self.approvals is None:
            return
        await self.started.wait()
        while True:
            await anyio.sleep(APPROVALS_CHECK_INTERVAL)
            await self.follow_approvals(math.inf)

    async def _approvals_indexed(self, changes: dict[str, set[str]]) -> None:
        if not self.index_change_listeners:
            await self.refresh_route_description(reload_index=True)
        for server, kinds in changes.items():
            for listener in list(self.index_change_listeners):
                try:
                    await listener(server, kinds)
                except Exception:  # noqa: BLE001 -- a failing listener must not stop the others
                    logger.exception("index change listener failed")

    async def _warm_in_background(self) -> None:
        try:
            await anyio.to_thread.run_sync(self._warm_index, abandon_on_cancel=True)
        except IndexNotBuiltError as error:
            logger.info("%s", error)
        except Exception as error:
            if self.index.model_loader.failure is not None:
                # The model loader has logged this failure, with its retry plan (route reports it too).
                logger.debug("index warm-up stopped: the embedding model did not load: %s", error)
            elif isinstance(error, CopilotError):
                logger.warning("search index not ready: %s", error)
            else:
                logger.exception("loading the search index failed")

    async def _index_servers(self, servers: Mapping[str, ServerConfig]) -> None:
        await self.indexer.run(servers)
        await anyio.to_thread.run_sync(lambda: self.index_info(load=True), abandon_on_cancel=True)
        await self.refresh_route_description(reload_index=True)

    def _learn_start_times(self) -> None:
        """Tell the pool how long each server took to start in the catalog's crawl (same launch only),
        so ``route`` does not warm slow starters before the pool has timed a start of its own."""
        from index.catalog.records import load_catalog

        try:
            catalog = load_catalog(self.settings.catalog_file())
        except CopilotError as error:
            logger.debug("no start times from the catalog: %s", error)
            return
        times = {
            name: entry.start_seconds
            for name, entry in catalog.servers.items()
            if entry.start_seconds is not None
            and name in self.servers
            and entry.launch_hash in (None, self.servers[name].launch_hash())
        }
        self.pool.expect_start_times(times)

    def _warm_index(self) -> None:
        # warm() loads the in-memory index before the model: routes meanwhile are answered
        # lexically (ToolIndex.route with wait_for_model=False) instead of waiting. The tool count
        # is read first (it loads that index): status said "? tools" while the model loaded, and
        # for good when it failed to load.
        self.index_info(load=True)
        try:
            self.index.warm()
        finally:
            self.index_info(load=True)

    # -- route's description --------------------------------------------------------------------
    def route_description(self) -> str:
        """route's tool description for the routable servers (see :mod:`server.route.description`),
        as the last refresh made it (made now if none has)."""
        if self._route_description is not None:
            return self._route_description
        return self._describe(self._routable_configs(), self._indexed_pool)

    def _routable_configs(self) -> dict[str, ServerConfig]:
        return {name: self.servers[name] for name in self.routable_servers()}

    @staticmethod
    def _describe(routable: Mapping[str, ServerConfig], indexed: Mapping[str, PoolServer]) -> str:
        return describe_pool_from_config(routable, indexed)

    async def refresh_route_description(self, *, reload_index: bool = False) -> None:
        """Regenerate route's description; when it changed, tell the listeners (the app updates the
        tool and sends ``notifications/tools/list_changed``). One refresh at a time, so a slower
        earlier one cannot overwrite a later one's text."""
        async with self._describing:
            await self._refresh_route_description(reload_index)

    async def _refresh_route_description(self, reload_index: bool) -> None:
        if reload_index:
            try:
                self._indexed_pool = await anyio.to_thread.run_sync(self._pool_from_index, abandon_on_cancel=True)
            except Exception:  # noqa: BLE001 -- the description falls back to the servers file
                logger.debug("index not readable for the route description", exc_info=True)
        elif self._kept_build is _UNREAD and self._pool_read[0] is _UNREAD:
            # Before the index is read (in the background, after initialize): the pool the last run kept.
            kept = await anyio.to_thread.run_sync(kept_pool, pool_path(self.settings.index_dir))
            self._kept_build = kept.build if kept is not None else None
            if kept is not None and self._pool_read[0] is _UNREAD:
                self._indexed_pool = _pool_servers(kept.servers)
        # Off the event loop: a pool of 100,000 tool names takes most of a second to describe.
        description = await anyio.to_thread.run_sync(self._describe, self._routable_configs(), self._indexed_pool)
        if description == self._route_description:
            return
        changed = self._route_description is not None
        self._route_description = description
        if changed:
            for listener in list(self.route_description_listeners):
                try:
                    await listener(description)
                except Exception:  # noqa: BLE001 -- a failing listener must not stop the others
                    logger.exception("route description listener failed")

    def _pool_from_index(self) -> dict[str, PoolServer]:
        # Read once per index build: listeners refresh once per server a change touched (an approval
        # sync, say, touching several), and reading every record of a large index is not free.
        state = self.index.state()
        build = state.build_id if state is not None else None
        read_build, pool = self._pool_read
        if build == read_build:
            return pool
        servers = pool_of_records(self.index.records().values())
        pool = _pool_servers(servers)
        self._pool_read = (build, pool)
        if build is not None and build != self._kept_build:
            keep_pool(pool_path(self.settings.index_dir), servers, build)
            self._kept_build = build
        return pool

    def index_info(self, *, load: bool = False) -> dict[str, Any] | None:
        """Model and tool count of the index, and the usage prior ``route`` adds, if any.

        ``load`` reads the count (which may load the index: call it from a worker thread) and the
        prior's file; otherwise the last ones read are used, so this never blocks the event loop.
        """
        info: dict[str, Any] = {"model": getattr(self.index, "model_name", self.settings.embedding_model)}
        if load:
            try:
                self._tool_count = self.index.tool_count
            except Exception:  # noqa: BLE001 -- informational only
                logger.debug("tool count unavailable", exc_info=True)
        if self._tool_count is not None:
            info["tool_count"] = self._tool_count
        usage_prior = getattr(self.index, "usage_prior_info", None)
        if load and usage_prior is not None:
            self._usage_prior = usage_prior()  # reads the file: only from a worker thread
        if self._usage_prior is not None:
            info["usage_prior"] = self._usage_prior  # the rankings of the session depend on it
        return info

    async def begin_session(self, log: SessionLog | None) -> None:
        """Write the session's ``session_start`` before its first tool call is logged."""
        if log is not None and not log.started:
            try:
                info = await anyio.to_thread.run_sync(lambda: self.index_info(load=True), abandon_on_cancel=True)
            except anyio.get_cancelled_exc_class():
                # The call waiting for it is cancelled, and still logs its entry: after its session's
                # start, without the index's details.
                log.begin(None)
                raise
            log.begin(info)

    # -- servers ------------------------------------------------------------------------------
    @property
    def servers(self) -> dict[str, ServerConfig]:
        return self._servers_file.servers

    @property
    def servers_path(self) -> Path | None:
        return self._servers_file.path

    @staticmethod
    def _mtime(path: Path | None) -> float | None:
        try:
            return path.stat().st_mtime if path is not None else None
        except OSError:
            return None

    def refresh_servers(self) -> None:
        """Pick up edits of the servers file (added servers get indexed, removed ones vanish)."""
        now = time.monotonic()
        if now - self._servers_checked < SERVERS_FILE_CHECK_INTERVAL or self._servers_file.path is None:
            return
        self._servers_checked = now
        mtime = self._mtime(self._servers_file.path)
        if mtime == self._servers_mtime:
            return
        self._servers_mtime = mtime
        try:
            reloaded = load_servers(self._servers_file.path)
        except CopilotError as error:
            logger.warning("servers file changed but cannot be loaded, keeping the previous one: %s", error)
            return
        logger.info("servers file changed: %d server(s)", len(reloaded.servers))
        self._servers_file = reloaded
        if self.guard is not None:
            self.guard.note_servers(list(reloaded.servers))
        self.policy.update_servers(reloaded.servers)
        self.pool.update_servers(reloaded.enabled())
        if self._task_group is not None:
            # route's description follows the file at once; new servers' tools join it once indexed.
            self._task_group.start_soon(self.refresh_route_description)
            if self.settings.auto_index:
                self._task_group.start_soon(self._index_servers, reloaded.servers)

    def routable_servers(self) -> list[str]:
        return [name for name, config in self.servers.items() if config.is_enabled and self.policy.server_visible(name)]

    def _resolve_server(self, name: str) -> ServerConfig:
        config = self.servers.get(name)
        if config is None:
            same = [known for known in self.servers if known.casefold() == name.casefold()]
            if len(same) > 1:
                # "Dup" and "dup" are two servers: a third spelling quietly ran the last in the file.
                raise UnknownServerError(
                    f"Unknown server '{shown_name(name)}': it differs only in letter case from "
                    f"{', '.join(repr(known) for known in sorted(same))}, which are different servers. "
                    "Pass the name exactly as route returns it."
                )
            if same:
                config = self.servers[same[0]]
        if config is None:
            known = self.routable_servers()
            hint = did_you_mean(suggest(name, known))
            listed = ", ".join(sorted(known)[:_LISTED_NAMES]) + (" …" if len(known) > _LISTED_NAMES else "")
            raise UnknownServerError(
                f"Unknown server '{shown_name(name)}'.{hint} Known servers: {listed or '(none)'}. "
                "Pass server names exactly as route returns them (search with route to find the right one)."
            )
        if not config.is_enabled:
            why = f" ({config.reason})" if config.reason else ""
            raise ServerUnavailableError(
                f"Server '{config.name}' is disabled in the servers file{why}. Use route to find another tool."
            )
        if not self.policy.server_visible(config.name):
            raise PolicyDeniedError(
                f"Server '{config.name}' may not be used: the copilot's allow/deny settings exclude it. "
                "Use route to find another tool."
            )
        return config

    def _resolve_route_server(self, name: str) -> ServerConfig:
        """``route``'s server filter: a server's name (as :meth:`_resolve_server` takes it), or the label
        route's own description shows for it ("yahoo finance" for ``yahoo-finance-mcp``), when exactly
        one routable server has that label. Every label the description listed was refused as unknown."""
        try:
            return self._resolve_server(name)
        except UnknownServerError:
            wanted = " ".join(name.casefold().split())
            labelled = [server for server in self.routable_servers() if server_label(server).casefold() == wanted]
            if len(labelled) != 1:
                raise
            return self._resolve_server(labelled[0])

    # -- route --------------------------------------------------------------------------------
    @instrumented("route")
    async def route(
        self,
        query: Any,
        top_k: Any,
        server: Any,
        log: SessionLog | None,
        *,
        kind: Any = None,
        annotate: Callable[[RouteAnswer], None] | None = None,
        argument_error: str | None = None,
    ) -> CallToolResult:
        """Search; ``kind`` picks tools (default), prompts, resources or any; ``annotate`` may add
        to the answer before it is rendered (how to use each hit directly, see ``server.aggregate``).
        ``argument_error`` says what was wrong with the request's argument names (then nothing is searched)."""
        try:
            await self.begin_session(log)
        except anyio.get_cancelled_exc_class():
            self._route_cancelled(log, log.next_call_id() if log else "", query, time.perf_counter())
            raise
        start = time.perf_counter()
        call_id = log.next_call_id() if log else ""
        text_query = query.strip() if isinstance(query, str) else ""
        answer: RouteAnswer | None = None
        try:
            if argument_error is not None:
                raise QueryError(argument_error)
            self.refresh_servers()
            # A definition approved a moment ago is what route shows -- once the model is in: before,
            # embedding it waits for the model, which route does not (route_model_wait, 0 by
            # default), so the sync lands in the background and a later route shows it.
            await self.follow_approvals(APPROVAL_SYNC_WAIT if self.index.embedder.loaded else 0.0)
            used = log.used_servers() if log is not None else ()
            answer = await self._route(text_query if isinstance(query, str) else query, top_k, server, kind, used)
            if annotate is not None:
                annotate(answer)
            result = CallToolResult(
                content=[text_result(render_route(answer)).content[0]],
                structured_content=answer.model_dump(mode="json"),
            )
            error = None
        except CopilotError as exc:
            error = str(exc)
            result = _error_result(exc)
        except Exception as exc:
            logger.exception("route failed")
            error = f"internal error while searching: {exc}"
            result = text_result(error + " (see the copilot's log)", is_error=True)
        except anyio.get_cancelled_exc_class():
            self._route_cancelled(log, call_id, query, start)
            raise
        self.telemetry.outcome(error=error, results=len(answer.tools) if answer else 0)
        if log is not None:
            hits = [RouteHit(server=t.server, tool=t.tool, score=t.score) for t in (answer.tools if answer else [])]
            ranking = answer.ranking if answer else None
            log.route(
                call_id, text_query or _logged_query(query), hits, _ms(start), error=error, ranking=ranking,
                session_servers=answer.session_servers if answer else None,
            )
        return result

    def _route_cancelled(self, log: SessionLog | None, call_id: str, query: Any, start: float) -> None:
        """A route the host cancelled (or the copilot's stop cut) is still one entry, counted as an error."""
        error = f"Route cancelled: {self._cancel_reason()}."
        self.telemetry.outcome(error=error, results=0)
        if log is not None:
            text_query = query.strip() if isinstance(query, str) else ""
            log.route(call_id, text_query or _logged_query(query), [], _ms(start), error=error)

    async def _route(
        self, query: Any, top_k: Any, server: Any, kind: Any = None, session_servers: Sequence[str] = ()
    ) -> RouteAnswer:
        query = route_query(query)
        limit = self.settings.max_top_k
        k, note = route_top_k(top_k, limit)
        kind_name = route_kind(kind)
        if kind_name is None:
            raise QueryError(unknown_kind_message(kind))
        kinds = ROUTE_KINDS[kind_name]
        servers = self.routable_servers()
        only: str | None = None
        if (asked := route_server(server)) is not None:
            only = self._resolve_route_server(asked).name
        # Servers whose last start failed: their tools go after the others' (the model was steered to a
        # server that could not run, five tools of it and none of another that could).
        failed_starts = self.pool.start_failures()
        filtered = bool(
            self.settings.allow or self.settings.deny or self.settings.read_only or self.guard is not None or failed_starts
        )
        # Over-fetch when allow/deny lists may remove hits, so k allowed tools remain.
        fetch = min(k * 3, MAX_TOP_K) if filtered else k
        try:
            found = await anyio.to_thread.run_sync(
                lambda: self.index.route(
                    query,
                    top_k=fetch,
                    server=only,
                    servers=servers,
                    kinds=kinds,
                    wait_for_model=False,
                    model_wait=self.settings.route_model_wait,
                    session_servers=session_servers,
                    hide=self._hidden_by_policy if self._policy_hides else None,
                ),
                abandon_on_cancel=True,
            )
            hits = found.hits
        except QueryError:
            status = self.indexer.status()
            if only is not None and only in status.failed_servers:
                raise QueryError(
                    f"server {only!r} is in the servers file, but its tools are not indexed: its crawl failed "
                    f"({status.failed_servers[only]}). Search without the server filter, or fix the server "
                    "(its log is in the copilot's logs) and search again."
                ) from None
            if only is not None and only in status.pending_servers:
                raise QueryError(
                    f"server {only!r} is being indexed in the background; search again in a minute."
                ) from None
            raise
        except IndexNotBuiltError as error:
            status = self.indexer.status()
            # The background build lives as long as this copilot: a short-lived host (a script) never
            # sees it finish, so the answer also names the command that builds the index for good.
            from index.search.tool_index import build_advice  # noqa: PLC0415 -- loaded already by now

            advice = f" (That build ends with this copilot; to build the index for good, {build_advice(self.settings)}.)"
            if status.in_progress and status.pending_servers:  # (not while only planning: there may be nothing to build)
                raise IndexNotBuiltError(
                    f"The tool index is being built in the background ({len(status.pending_servers)} server(s) "
                    f"left); search again in a minute.{advice}"
                ) from None
            if self._startup_indexing:
                raise IndexNotBuiltError(
                    "The copilot has just started and is building its tool index in the background; search again "
                    f"in a minute.{advice}"
                ) from None
            raise error
        tools: list[RoutedTool] = []
        cannot_start: list[RoutedTool] = []
        held: list[str] = []
        refused_read_only = 0
        # A prompt or resource not approved as it is gets the trust scan: up to a second of CPU for
        # a hostile 100 KB description, which on the event loop every other session waited for.
        withheld = await self._withheld_items(
            [hit for hit in hits if getattr(hit, "kind", "tool") != "tool" and self.policy.tool_allowed(hit.server, hit.tool)]
        )
        for hit in hits:
            if getattr(hit, "kind", "tool") == "tool":
                if (why := self._tool_held_back(hit.server, hit.tool, hit.annotations)) is not None:
                    how, message = why
                    if how == "held":
                        held.append(message)
                    elif how == "read-only":
                        refused_read_only += 1
                    continue
            elif not self.policy.tool_allowed(hit.server, hit.tool):  # prompts and resources run nothing
                continue
            elif (why_withheld := withheld.get(id(hit))) is not None:
                held.append(why_withheld)
                continue
            annotations = self.policy.annotations(hit.server, hit.tool, hit.annotations)
            start_failed = failed_starts.get(hit.server) if getattr(hit, "kind", "tool") == "tool" else None
            (tools if start_failed is None else cannot_start).append(
                RoutedTool(
                    server=hit.server,
                    tool=hit.tool,
                    kind=getattr(hit, "kind", "tool"),
                    uri=getattr(hit, "uri", None),
                    title=hit.title,
                    description=hit.description or "",
                    input_schema=dict(hit.input_schema or {}),
                    required=list(hit.required or []),
                    score=float(hit.score),
                    server_running=bool(self.pool.is_running(hit.server)),
                    server_start_failed=start_failed,
                    annotations=annotations,
                    structured_output=bool(getattr(hit, "output_schema", None)),
                    input_for=list(getattr(hit, "input_for", [])),
                    input_from=[
                        source for source in getattr(hit, "input_from", []) if self._may_suggest(hit.server, source.tool)
                    ],
                )
            )
            if len(tools) >= k:
                break
        tools.extend(cannot_start[: k - len(tools)])
        shown = {(tool.server, tool.tool) for tool in tools}
        for tool in tools:  # a tool the answer holds back is no reason to call another first
            tool.input_for = [need for need in tool.input_for if (tool.server, need.tool) in shown]
            tool.input_from = [source for source in tool.input_from if (tool.server, source.tool) not in shown]
        note = _hidden_note(note, held, refused_read_only + found.hidden.get("read-only", 0))
        if not tools and found.hidden.get("denied") and note is None:
            note = (
                f"The {found.hidden['denied']} best match(es){f' on server {only!r}' if only else ''} may not be used: "
                "the copilot's settings (COPILOT_DENY, COPILOT_ALLOW) leave them out. Search for another way to "
                "do the task, or ask the user to change those settings."
            )
        if not found.hits and note is None:
            note = await self._missing_kind_note(kind_name, servers, only)
        if not tools and note is None and found.mode not in LEXICAL_MODES:
            # (Keyword-only answers say why they found nothing themselves: see quality_sentences.)
            note = (
                "Nothing matched. Rephrase the query as the task you want done (what, on which kind of "
                "data or service)" + (", or drop the server filter." if only is not None else ".")
            )
        if found.mode not in LEXICAL_MODES:
            # A keyword-only answer (the model still loading) is too rough a guess to start servers for.
            self._warm([t.server for t in tools if t.kind == "tool" and t.server_start_failed is None])
        failure = found.model_failure
        return RouteAnswer(
            query=echo_query(query),
            query_chars=len(query),
            searched_chars=MAX_QUERY_CHARS if found.truncated else None,
            tools=tools,
            indexing=self.indexer.status(),
            note=note,
            ranking=found.mode,
            model_error=failure.reason if failure is not None else None,
            model_retry_seconds=math.ceil(failure.retry_in()) if failure is not None else None,
            weak_match=found.weak,
            related_servers=found.related_servers,
            related_categories=found.related_categories,
            # Of the hits trimmed, only those that top_k had room for (the search may have fetched 3k).
            omitted=min(found.trimmed, k - len(tools)) if len(tools) < k else 0,
            operations=found.operations,
            operations_listed=found.operations_listed,
            session_servers=found.session_servers,
        )

    @property
    def _policy_hides(self) -> bool:
        return bool(self.settings.allow or self.settings.deny or self.settings.read_only)

    def _hidden_by_policy(self, record: ToolRecord) -> str | None:
        """Why the settings keep ``record`` out of every answer (``denied``, ``read-only``), or None.
        Asked by the index before it judges an answer weak or trims it (see ``ToolIndex.route``)."""
        return self._policy_reason(record.server, record.name, record.annotations, record.kind)

    def _policy_reason(
        self, server: str, tool: str, annotations: dict[str, Any] | None, kind: str = "tool"
    ) -> str | None:
        """``denied`` (allow/deny lists), ``read-only`` (a tool the read-only setting refuses) or None."""
        if not self.policy.tool_allowed(server, tool):
            return "denied"
        if kind == "tool" and self.policy.read_only and not self.policy.read_only_permits(server, tool, annotations):
            return "read-only"
        return None

    def _tool_held_back(self, server: str, tool: str, annotations: dict[str, Any] | None) -> tuple[str, str] | None:
        """Why ``route`` does not show a tool, or None: ("denied", ""), ("held", the message to show:
        broken, past the cap or quarantined since it was indexed, so execute would refuse it) or
        ("read-only", "")."""
        by_policy = self._policy_reason(server, tool, annotations)
        if by_policy == "denied":
            return "denied", ""
        if (broken := self.pool.unusable_tool(server, tool)) is not None:
            return "held", str(broken)
        if self.guard is not None and (verdict := self.guard.blocked(server, tool)) is not None:
            return "held", verdict.message()
        if by_policy == "read-only":
            return "read-only", ""
        return None

    async def _withheld_items(self, hits: list[Any]) -> dict[int, str]:
        """Why each of these prompt or resource hits is withheld (by ``id(hit)``), decided in a
        worker thread: the trust scan of an item is CPU-bound."""
        guard = self.guard
        if guard is None or not hits:
            return {}

        def decide() -> dict[int, str]:
            return {id(hit): why for hit in hits if (why := guard.withheld(_item_record(hit))) is not None}

        return await anyio.to_thread.run_sync(decide, abandon_on_cancel=True)

    def _may_suggest(self, server: str, tool: str) -> bool:
        """Whether ``route`` may point the model at a tool it did not rank: one it would show."""
        record = self.index.get(server, tool) if self.policy.read_only else None  # annotations matter only then
        return self._tool_held_back(server, tool, record.annotations if record is not None else None) is None

    async def _missing_kind_note(self, kind: str, servers: list[str], only: str | None) -> str | None:
        """When the pool (or the server filter) offers nothing of ``kind``: say so and what it offers."""
        pool = await self._in_thread(self.index.kinds_offered, servers) or {}
        on_server = (await self._in_thread(self.index.kinds_offered, [only]) or {}) if only is not None else None
        return missing_kind_note(kind, pool, only, on_server)

    def _warm(self, servers: list[str]) -> None:
        """Start the best hits' servers in the background; the pool only uses free slots for that."""
        for name in list(dict.fromkeys(servers))[:WARM_TOP_SERVERS]:
            try:
                self.pool.warm(name)
            except Exception:  # noqa: BLE001 -- warming is an optimisation; the call itself reports errors
                logger.debug("could not warm %s", name, exc_info=True)

    # -- execute ------------------------------------------------------------------------------
    async def prepare(
        self, server_name: Any, tool_name: Any, params: Any, relay: CallRelay | None = None
    ) -> PreparedCall:
        """Every check before the call itself; raises the :class:`ExecuteError` to report.

        Checking may start the server (its live definitions are what the call is checked against):
        the call's ``relay`` then tells its host, as progress, why the call waits.
        """
        self.refresh_servers()
        server = self._resolve_server(_name(server_name, "server_name", UnknownServerError)).name
        tool_requested = _name(tool_name, "tool_name", UnknownToolError)
        arguments = coerce_params(params)
        self.policy.check_allowed(server, tool_requested)
        live = self.pool.is_running(server)
        info = await self._lookup_tool(server, tool_requested, relay)
        self.policy.check_allowed(server, info.name)
        if self.guard is not None:
            self.guard.check(server, info.name)
        check_params(server, info.name, info.input_schema, arguments)
        if not live:
            # Params that fail the index's schema were refused without starting the server. The call
            # starts it now anyway: its risk is judged on what it lists as it starts (and the guard
            # pins), not on the index's record, which a child may contradict (readOnlyHint: true
            # when indexed, destructive now).
            info = await self._pick_live(server, info.name, relay)
            if self.guard is not None:
                self.guard.check(server, info.name)
            check_params(server, info.name, info.input_schema, arguments)
        risk = self.policy.assess(server, info.name, info.annotations)
        return PreparedCall(server=server, tool=info.name, params=arguments, info=info, risk=risk)

    async def _lookup_tool(self, server: str, tool: str, relay: CallRelay | None) -> ToolInfo:
        """The tool's live definition when its server runs, else the indexed one.

        A server the index knows nothing about is asked directly (which starts it), so
        servers still being indexed -- or never indexed -- can be called at once.
        """
        if self.pool.is_running(server):
            return await self._pick_live(server, tool, relay)
        # A running server's live definition is used (the guard checks it against the pins): only the
        # index's record may lag behind an approval, so only it waits for approvals to be followed.
        await self.follow_approvals()  # an approved schema is what params are checked against
        record = await self._in_thread(self.index.get, server, tool)  # tools only
        if record is not None:
            return ToolInfo(record.name, record.description, dict(record.input_schema), record.annotations)
        records = await self._indexed_records()
        names = [r.name for r in records.values() if r.server == server and r.kind == "tool"]
        other = next((r for r in records.values() if r.server == server and r.name == tool and r.kind != "tool"), None)
        if other is not None:  # a prompt or resource of that name: execute runs tools only
            raise self._unknown_tool(server, tool, names, records, kind=other.kind)
        # Left out of the index for a broken definition, or past the cap: say why, without starting the server for it.
        if (left_out := await self._left_out_tool(server, tool, names)) is not None:
            raise left_out
        if not names:
            return await self._pick_live(server, tool, relay)
        raise self._unknown_tool(server, tool, names, records)

    async def _left_out_tool(
        self, server: str, tool: str, indexed: list[str]
    ) -> ServerUnavailableError | ToolPastCapError | None:
        """Why ``tool`` was left out of ``server``'s tools -- a broken definition, or listed past the
        cap -- or None: as the pool's last listing of it in this run says, else as the index's record
        of its crawl does (``indexed``: the server's tools the index has)."""
        if self.pool.skipped_tools(server) is not None:
            return self.pool.unusable_tool(server, tool)
        skipped = await self._in_thread(self.index.skipped_tools, server) or {}
        return skipped_tool_error(server, tool, skipped, indexed)

    async def _pick_live(self, server: str, tool: str, relay: CallRelay | None = None) -> ToolInfo:
        by_name = {t.name: t for t in await self.pool.list_tools(server, relay=relay)}
        found = by_name.get(tool)
        if found is None:
            unusable = self.pool.unusable_tool(server, tool)  # listed with a broken definition, or past the cap
            raise unusable or self._unknown_tool(server, tool, list(by_name), await self._indexed_records())
        annotations = found.annotations.model_dump(by_alias=True, exclude_none=True) if found.annotations else None
        # The live schema object itself (no copy): validators are cached by its identity.
        return ToolInfo(found.name, found.description or "", found.input_schema or {}, annotations)

    async def _in_thread(self, function: Any, *args: Any) -> Any:
        """Index reads off the event loop (they may load the index from disk); unbuilt reads as empty."""
        try:
            return await anyio.to_thread.run_sync(function, *args, abandon_on_cancel=True)
        except IndexNotBuiltError:
            return None

    async def _indexed_records(self) -> Mapping[str, Any]:
        return await self._in_thread(self.index.records) or {}

    def _unknown_tool(
        self, server: str, tool: str, names: list[str], records: Mapping[str, Any], *, kind: str | None = None
    ) -> UnknownToolError:
        # Only tools execute would run are suggested and listed: not denied ones, nor ones held back
        # (a new or changed definition awaiting review, a broken one), as route shows none of them.
        names = [name for name in names if self._may_suggest(server, name)]
        hint = did_you_mean(suggest(tool, names))
        if kind is not None:
            what = kind.replace("_", " ")
            message = (
                f"'{shown_name(tool)}' on server '{server}' is a {what}, not a tool: execute runs tools only (a host "
                f"gets prompts with prompts/get and reads resources with resources/read).{hint}"
            )
        else:
            message = f"Unknown tool '{shown_name(tool)}' on server '{server}'.{hint}"
        visible = set(self.routable_servers())
        elsewhere = sorted(
            {
                r.server
                for r in records.values()
                if r.name == tool and r.kind == "tool" and r.server in visible and self._may_suggest(r.server, tool)
            }
            - {server}
        )
        if elsewhere:
            message += f" A tool named '{shown_name(tool)}' exists on: {', '.join(elsewhere[:10])}."
        listed = ", ".join(sorted(names)[:_LISTED_NAMES]) + (" …" if len(names) > _LISTED_NAMES else "")
        message += f" Tools on {server}: {listed or '(none)'}. Use route to search for the right tool."
        return UnknownToolError(message)

    @instrumented("execute")
    async def execute(
        self,
        server_name: Any,
        tool_name: Any,
        params: Any,
        confirm: Any,
        confirmation: Confirmation | None,
        log: SessionLog | None,
        *,
        host: HostLink | None = None,
        state: str | None = None,
        responses: InputResponses | None = None,
        argument_error: str | None = None,
    ) -> CallToolResult | InputRequiredResult:
        """Check, confirm and run one call; ``host`` relays progress, logs and the child's questions.

        ``confirmation`` is the user's answer when the caller already asked; otherwise a risky call
        is confirmed through the host's elicitation when it can, or a confirm token.

        ``state``/``responses`` are a 2026-07-28 host's ``requestState``/``inputResponses`` when it
        retries after an ``input_required`` answer (a confirmation, or a child's question).
        ``argument_error`` says what was wrong with the request's argument names (then nothing runs).
        """
        try:
            await self.begin_session(log)  # the first call of a session waits for the index's details
        except anyio.get_cancelled_exc_class():
            # Cancelled while waiting: still one entry, after its session's start (without those
            # details), counted as an error; such calls left no trace and counted as successes.
            cancelled = _ExecuteRecord(log, server_name, tool_name, params, self.telemetry)
            cancelled.write_error(self._cancelled_error(http=host.client_gone if host is not None else None))
            raise
        round_state = decode_state(state)
        if "call" in round_state:
            return await self._resume(round_state["call"], host, responses, log, server_name, tool_name, params)
        record = _ExecuteRecord(log, server_name, tool_name, params, self.telemetry)
        error: str | None = None
        kind: str | None = None
        flags: list[Any] = []
        try:
            if argument_error is not None:
                raise InvalidParamsError(argument_error)
            if host is not None and isinstance(server_name, str) and server_name in self.servers:
                # Checking the call may start the server (one the index does not know yet): a
                # legacy host's roots must be known before, so it starts in the user's directory.
                await self.relay.learn_roots(self.servers[server_name], host, running=self.pool.is_running(server_name))
            # One relay for the whole request: the progress of its wait for the server and of the
            # child's work must increase together (see CallRelay.waiting).
            relay = self.relay.call(server_name, host) if host is not None and isinstance(server_name, str) else None
            try:
                prepared = await self.prepare(server_name, tool_name, params, relay)
            finally:
                if relay is not None:
                    await relay.flush()  # what it held back goes before whatever follows
            if relay is not None:
                relay.server = prepared.server  # the name as resolved (the host's may differ in case or spacing)
            record.resolved(prepared)
            if confirmation is None:
                asked = await self._ask_confirmation(prepared, confirm, host, round_state, responses)
                if isinstance(asked, InputRequiredResult):
                    return asked  # logged once the user answered and the call ran
                confirmation = asked
            self._check_confirmation(prepared, confirm, confirmation)
            if (
                relay is not None
                and relay.host.era == "modern"
                and relay.host.answers_anything
                and self._task_group is not None
            ):
                return await self._start_suspended(prepared, record, relay)
            result = await self._run(prepared, relay)
            result, flags = await self._flagged(result)
        except ExecuteError as exc:
            error, kind = str(exc), exc.kind
            result, flags = await self._error_flagged(exc)
            if isinstance(exc, ConfirmationRequiredError) and exc.token:
                result.structured_content = {"confirmation_required": True, "confirm": exc.token}  # type: ignore[attr-defined]
        except CopilotError as exc:
            error, kind = str(exc), "execute_error"
            result = _error_result(exc)
        except anyio.get_cancelled_exc_class():
            record.write_error(self._cancelled_error(http=host.client_gone if host is not None else None))
            raise
        except Exception as exc:
            logger.exception("execute %s/%s failed", record.server, record.tool)
            error, kind = f"internal error while calling {record.server}/{record.tool}: {exc}", "internal_error"
            result = text_result(error + " (see the copilot's log)", is_error=True)
        record.write(result, error, kind, flags)
        return result

    async def _error_flagged(self, exc: ExecuteError) -> tuple[CallToolResult, list[Any]]:
        """The error's result, scanned as a result when it quotes the child (its stderr, say)."""
        result = _error_result(exc)
        return await self._flagged(result) if exc.quotes_child else (result, [])

    async def _flagged(self, result: CallToolResult) -> tuple[CallToolResult, list[Any]]:
        """The result with a warning in front when it looks like it tries to steer the model (server.guard)."""
        flags = await result_findings(result)
        if flags and self.settings.result_warning:
            result = result.model_copy(update={"content": [warning_block(flags), *result.content]})
        return result, flags

    async def _run(self, call: PreparedCall, relay: Any) -> CallToolResult:
        """The child call itself, cut to the result limits; a closed HTTP request cancels it."""
        host: HostLink | None = relay.host if relay is not None else None
        if relay is not None and (
            not self.pool.is_running(call.server) or self.pool.started_without_root(call.server)
        ):
            await self.relay.before_start(self.servers[call.server], relay)
            self.pool.restart_in_root(call.server)

        def child_call() -> Any:
            return self.pool.call_tool(call.server, call.tool, call.params, relay=relay)

        try:
            # A suspended call outlives the request that started it; its rounds watch their own requests.
            if host is None or host.client_gone is None or relay.suspended is not None:
                result = await child_call()
            else:
                result = await unless_client_gone(host.client_gone, child_call)
                if result is None:
                    # A stop ends every response stream at once: that is not the client leaving.
                    why = (
                        f"the copilot is shutting down ({self.shutdown_reason})"
                        if self.shutdown_reason is not None
                        else "the HTTP client closed the request"
                    )
                    raise CallCancelledError(
                        f"Call to {call.server}/{call.tool} cancelled: {why}. The server's request was cancelled too."
                    )
        except Exception:
            if relay is not None:
                await relay.finish()  # an error result follows: what the relay held back goes first
            raise
        if relay is not None:
            await relay.finish()  # the latest progress held back goes before the result, never after
        return cap_result(result, self.limits)

    def _cancelled_error(
        self, call: SuspendedCall | None = None, *, http: anyio.Event | None = None
    ) -> CallCancelledError:
        why = self._cancel_reason(call, http=http)
        return CallCancelledError(f"Call cancelled: {why}. The server's request was cancelled too.")

    def _cancel_reason(self, call: SuspendedCall | None = None, *, http: anyio.Event | None = None) -> str:
        """Why a call was cancelled, in words: the copilot's stop, the host, its HTTP request, or the
        host's time to answer the server's question ran out."""
        if self.shutdown_reason is not None:
            return f"the copilot is shutting down ({self.shutdown_reason})"
        if http is not None and http.is_set():
            return "the HTTP client closed the request"
        if http is not None:
            # The transport may cancel the handler itself when the request's connection closes,
            # before the disconnect is seen: the two causes cannot always be told apart.
            return "the host cancelled it or closed its HTTP request"
        if call is not None and call.expired:
            return (
                f"the host did not answer the server's question within {self.settings.input_timeout:g}s "
                "(COPILOT_INPUT_TIMEOUT)"
            )
        return "the host cancelled it"

    async def _start_suspended(
        self, call: PreparedCall, record: _ExecuteRecord, relay: CallRelay
    ) -> CallToolResult | InputRequiredResult:
        """Run the call in the background so the child's questions can go back as ``input_required``.

        ``relay``: the request's (it may have reported the wait for the server already); its host
        is replaced by each round's.
        """

        async def run(suspended: SuspendedCall) -> Finished:
            relay.suspended = suspended
            suspended.relay = relay
            try:
                result, flags = await self._flagged(await self._run(call, relay))
                return Finished(result, flags=flags)
            except ExecuteError as exc:
                result, flags = await self._error_flagged(exc)
                return Finished(result, str(exc), exc.kind, flags=flags)
            except CopilotError as exc:
                return Finished(_error_result(exc), str(exc), "execute_error")
            except Exception as exc:
                logger.exception("execute %s/%s failed", call.server, call.tool)
                text = f"internal error while calling {call.server}/{call.tool}: {exc}"
                return Finished(text_result(text + " (see the copilot's log)", is_error=True), text, "internal_error")

        def cancelled(suspended: SuspendedCall) -> Finished:
            error = self._cancelled_error(suspended)
            return Finished(_error_result(error), str(error), error.kind)

        def ended(finished: Finished) -> None:
            record.write(finished.result, finished.error, finished.kind, finished.flags)

        assert self._task_group is not None
        suspended = self.relay.suspended.start(self._task_group, run, cancelled, ended)
        return await suspended.next_round()

    async def _resume(
        self,
        call_id: Any,
        host: HostLink | None,
        responses: InputResponses | None,
        log: SessionLog | None,
        server_name: Any,
        tool_name: Any,
        params: Any,
    ) -> CallToolResult | InputRequiredResult:
        """A 2026-07-28 host's answers to a suspended call's questions: deliver them, wait for what is next."""
        suspended = self.relay.suspended.get(call_id)
        if suspended is None:
            error = InputExpiredError(
                f"This call of {server_name}/{tool_name} no longer waits for an answer: it ended, or the host took "
                f"longer than {self.settings.input_timeout:g}s to answer (COPILOT_INPUT_TIMEOUT). Call execute again "
                "without the earlier answers."
            )
            result = _error_result(error)
            _ExecuteRecord(log, server_name, tool_name, params, self.telemetry).write(result, str(error), error.kind)
            return result
        if host is not None and suspended.relay is not None:
            suspended.relay.host = host  # progress and logs go to the request that waits now
        problems = suspended.deliver(responses)
        if problems:
            # The call still waits: the host can retry with answers of the right kind.
            raise MCPError(
                code=INVALID_PARAMS,
                message=f"{'; '.join(problems)}. Answer each question with a result of its own kind; the call "
                f"still waits for the answers (at most {self.settings.input_timeout:g}s).",
            )
        return await suspended.next_round()

    async def _ask_confirmation(
        self,
        call: PreparedCall,
        confirm: Any,
        host: HostLink | None,
        round_state: Mapping[str, Any],
        responses: InputResponses | None,
    ) -> Confirmation | InputRequiredResult | None:
        """Ask the user through the host's elicitation when the call needs confirmation and the host can."""
        risk = call.risk
        if host is None or not risk.needs_confirmation or risk.refused_read_only:
            return None
        if isinstance(confirm, str) and confirm.strip():
            return None
        question = self.confirmation_question(call)
        request = confirmation_request(question)
        if not host.can_answer(request):
            return None
        if host.era == "legacy":
            with anyio.move_on_after(self.settings.input_timeout):
                answer = await host.ask(request)
                decision = approved(answer)
                if decision is None:
                    return Confirmation(approved=False, unanswered=_no_decision(answer))
                return Confirmation(approved=decision)
            return Confirmation(
                approved=False,
                unanswered=f"no answer came within {self.settings.input_timeout:g}s (COPILOT_INPUT_TIMEOUT)",
            )
        token = round_state.get("confirm")
        answer = (responses or {}).get("confirm") if isinstance(token, str) else None
        if answer is None:
            return confirmation_round(question, self.confirmations.issue(call.server, call.tool, call.params))
        decision = approved(answer)
        if decision is None:
            return Confirmation(approved=False, unanswered=_no_decision(answer))
        try:
            self.confirmations.redeem(token, call.server, call.tool, call.params)  # once, within its TTL
        except ConfirmationRequiredError:
            raise ConfirmationRequiredError(
                f"This confirmation of {call.server}/{call.tool} was already used or has expired "
                f"(COPILOT_CONFIRM_TTL): call execute again without requestState, and the user is asked again."
            ) from None
        return Confirmation(approved=decision)

    def _check_confirmation(self, call: PreparedCall, confirm: Any, confirmation: Confirmation | None) -> None:
        risk = call.risk
        if not risk.needs_confirmation:
            return
        self.policy.check_read_only(call.server, call.tool, risk)
        if isinstance(confirm, str) and confirm.strip():
            self.confirmations.redeem(confirm.strip(), call.server, call.tool, call.params)
            return
        if confirmation is not None and confirmation.unanswered is not None:
            raise PolicyDeniedError(
                f"The user was asked through the host whether to run {call.server}/{call.tool}, but {confirmation.unanswered}; "
                "nothing was run. Call execute again to have them asked again. If the host cannot show such "
                "questions, its operator decides which calls need confirmation (COPILOT_CONFIRM)."
            )
        if confirmation is not None:
            if confirmation.approved:
                return
            raise PolicyDeniedError(
                f"The user declined to run {call.server}/{call.tool}. Do not retry it; tell the user what you "
                "would have done, or find another way."
            )
        token = self.confirmations.issue(call.server, call.tool, call.params)
        minutes = max(1, round(self.settings.confirm_ttl / 60))
        error = ConfirmationRequiredError(
            f"Confirmation required: {risk.reason}.{_not_a_token(confirm)} Ask the user whether to run "
            f"{call.server}/{call.tool} with these params. Only if they agree, call execute again with the same "
            f'server_name, tool_name and params plus confirm="{token}" (valid once, for {minutes} min).'
        )
        error.token = token
        raise error

    def confirmation_question(self, call: PreparedCall) -> str:
        return (
            f"An assistant wants to run {call.server}/{call.tool}: {call.risk.reason}.\n"
            f"Params: {call.params}\nAllow this call?"
        )
