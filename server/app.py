"""The copilot as an MCP server: tools ``route``, ``execute`` (and, when asked, its alias ``execute-tool``).

Built on mcp 2.x ``MCPServer``: it serves both protocol eras (the ``initialize`` handshake and
2026-07-28 per-request envelopes), stdio and streamable HTTP. ``execute`` relays between the host
and the child in either era (``server.relay``): progress, cancellation, log messages, and the
child's elicitation, sampling and roots requests -- asked directly of a legacy host, or through
the 2026-07-28 ``input_required`` round trip, which also carries the user's confirmation of risky
calls. The tools take loose arguments and advertise hand-written schemas, so a malformed call
reaches our own checks (clear messages, and a trajectory entry) instead of a pydantic error.
"""

from __future__ import annotations

import logging
import time
import weakref
from collections.abc import AsyncIterator, Callable, Hashable, Mapping
from contextlib import asynccontextmanager
from typing import Annotated, Any

import anyio
from mcp.server.context import ServerRequestContext
from mcp.server.mcpserver import Context, MCPServer
from mcp.server.mcpserver.tools import Tool
from mcp.shared.exceptions import MCPError
from mcp.shared.subscriptions import SUBSCRIPTION_ID_META_KEY
from mcp_types import (
    INTERNAL_ERROR,
    CallToolResult,
    InputRequiredResult,
    SubscriptionsListenResult,
    TextContent,
    ToolAnnotations,
)
from mcp_types.version import MODERN_PROTOCOL_VERSIONS

from index.catalog.self_entry import COPILOT_SERVER_NAME
from index.catalog.servers import ServersFile
from server.aggregate.notify import SHARED_SESSION
from server.aggregate.service import Aggregation
from server.execute.arguments import unknown_arguments, unknown_arguments_message
from server.copilot import Copilot, Shutdown, copilot_version
from server.route.answer import RouteAnswer
from server.route.arguments import DEFAULT_TOP_K
from server.route.kinds import ROUTE_KINDS
from server.invalid_params import invalid_params_hint
from server.unknown_method import unknown_method_hint
from server.pool.settings import PoolSettings
from server.relay.hub import install_handlers
from server.trajectory.session_log import SessionLog
from server.settings import ServerSettings

logger = logging.getLogger(__name__)

INSTRUCTIONS = """\
This server gives you access to a large pool of tools from many MCP servers through two tools.
1. route: describe what you need to do; it returns the most relevant tools with their server,
   tool name, description and input schema.
2. execute: call one of those tools with its exact server_name and tool_name, and params that
   match its input schema.
Search first, then execute. If a result is not what you need, search again with other words.
"""

ROUTE_DESCRIPTION = """\
Search for relevant tools given a task description. Use it whenever you cannot solve the user's
request yourself, when you are unsure which tool to use, or when a task is vague or complex and
you need to explore options. Returns the best-matching tools across all connected MCP servers,
each with its server name, tool name, description, input JSON schema, required parameters and a
relevance score.

Query in plain words what you want to do ("current time in Tokyo", "create a GitHub issue"), or
in this form:
<tool_assistant>
server: <what kind of server would have the tool>
tool: <what the tool should do>
</tool_assistant>
Split multi-step tasks and search once per step. Then call execute with a tool from the results.\
"""

EXECUTE_DESCRIPTION = """\
Execute a tool found by route. Pass its server_name and tool_name exactly as route returned them,
and params as a JSON object matching the tool's input schema (all required parameters, correct
types, no invented names). Returns the tool's own result unchanged. Errors say what to fix: an
unknown name comes with the nearest valid names, invalid params list the expected parameters.
Tools that can delete or overwrite data may need the user's confirmation: if the answer says
confirmation is required, ask the user and, only if they agree, call again with the confirm
token it gave.\
"""

ROUTE_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "query": {
            "type": "string",
            "description": (
                "The task in plain words, or '<tool_assistant>\\nserver: ...\\ntool: ...\\n</tool_assistant>'."
            ),
        },
        "top_k": {
            "type": "integer",
            "minimum": 1,
            "default": DEFAULT_TOP_K,
            "description": f"How many tools to return (default {DEFAULT_TOP_K}).",
        },
        "server": {"type": "string", "description": "Only search the tools of this server (its exact name)."},
        "kind": {
            "type": "string",
            "enum": list(ROUTE_KINDS),
            "default": "tool",
            "description": "What to search: tools (default), prompts, resources (and resource templates), or any.",
        },
    },
    "required": ["query"],
    "additionalProperties": False,
}

EXECUTE_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "server_name": {"type": "string", "description": "The server name exactly as route returned it."},
        "tool_name": {"type": "string", "description": "The tool name exactly as route returned it."},
        "params": {
            "type": "object",
            "additionalProperties": True,
            "description": "The tool's arguments, matching its input schema ({} or omitted if it takes none).",
        },
        "confirm": {
            "type": "string",
            "description": (
                "Only after a previous execute answered that confirmation is required and the user agreed: "
                "the confirm token from that answer."
            ),
        },
    },
    "required": ["server_name", "tool_name"],
    "additionalProperties": False,
}


def _copilot(ctx: Context) -> Copilot:
    return ctx.request_context.lifespan_context  # type: ignore[no-any-return]


# -- sessions -------------------------------------------------------------------------------------
def _session_key(ctx: ServerRequestContext[Any, Any]) -> tuple[Hashable, Any]:
    """A session is one handshake connection; 2026-era requests (no connection) share one log.

    ``ServerSession`` does not expose its ``Connection`` publicly; it is the only per-client
    object that lives as long as the client's session (and owns the teardown stack we need).
    """
    connection = getattr(ctx.session, "_connection", None)
    if connection is None or ctx.protocol_version in MODERN_PROTOCOL_VERSIONS:
        return SHARED_SESSION, None
    return id(connection), connection


def _client_info(ctx: ServerRequestContext[Any, Any]) -> dict[str, Any] | None:
    if ctx.method == "initialize" and isinstance(ctx.params, Mapping):
        info = ctx.params.get("clientInfo")
        return dict(info) if isinstance(info, Mapping) else None
    params = ctx.session.client_params
    if params is not None and params.client_info is not None:
        return params.client_info.model_dump(mode="json", exclude_none=True)
    return None


def session_log(copilot: Copilot, ctx: ServerRequestContext[Any, Any]) -> SessionLog:
    """The trajectory of the session ``ctx`` belongs to, started on its first request."""
    key, connection = _session_key(ctx)
    log = copilot.sessions.get(key)
    if log is not None:
        return log
    # The transport's own id (the ``mcp-session-id`` header of an HTTP session; none on stdio or for
    # session-less 2026-era requests) links what a host reports to this trajectory.
    transport_id = connection.session_id if connection is not None else None
    # Session-less requests share one log; over stdio they still come from the one host.
    private = connection is not None or copilot.transport != "http"
    log = copilot.sessions.open(key, _client_info(ctx), transport_session_id=transport_id, private=private)
    if connection is not None:
        connection.exit_stack.callback(lambda: copilot.sessions.end(key, _end_reason(copilot, log)))
    return log


def _end_reason(copilot: Copilot, log: SessionLog) -> str:
    """Why a session's connection closed: the copilot stopping, the HTTP idle timeout, or the client."""
    if copilot.shutdown_reason:
        return copilot.shutdown_reason
    idle = copilot.settings.http_session_idle_timeout
    # The transport closes an idle session only after this long without a message; a client's own
    # DELETE or disconnect comes sooner (it would otherwise have found the session gone). The
    # transport's clock starts when a message arrives, ours a little later, when it is handled:
    # up to a second (or half the timeout) of slack, or a 1 s timeout reads as the client leaving.
    slack = min(1.0, idle / 2)
    if copilot.transport == "http" and time.monotonic() - log.last_activity >= idle - slack:
        return f"idle for {idle:g}s (COPILOT_HTTP_SESSION_IDLE_TIMEOUT)"
    return "client disconnected"


def _session_log_or_none(copilot: Copilot, ctx: ServerRequestContext[Any, Any]) -> SessionLog | None:
    """The session's log, or ``None`` when it cannot be opened: an unwritable log dir must not fail calls."""
    try:
        return session_log(copilot, ctx)
    except OSError:
        logger.exception("could not open the session's trajectory log; this call is not logged")
        return None


async def session_middleware(ctx: ServerRequestContext[Any, Any], call_next: Callable[..., Any]) -> Any:
    result = await call_next(ctx)
    copilot = ctx.lifespan_context
    if isinstance(copilot, Copilot) and (known := copilot.sessions.get(_session_key(ctx)[0])) is not None:
        known.last_activity = time.monotonic()
    if ctx.request_id is not None and isinstance(copilot, Copilot):
        try:
            session_log(copilot, ctx)
        except Exception:  # noqa: BLE001 -- logging must never fail a request
            logger.exception("could not start the session's trajectory log")
        copilot.mark_started()
    return result


# -- stopping with requests in flight ---------------------------------------------------------------
class InFlightRequests:
    """The MCP requests being handled now, so a stopping copilot answers each one before it exits.

    Over HTTP a stop would otherwise leave uvicorn waiting for calls that may run for minutes (a slow
    child tool) and then cut their streams off without an answer; over stdio a signal cancelled them
    with the whole server, unanswered. :meth:`stop` cancels every one:
    ``execute`` logs its call as cancelled (and cancels the child's request), and the host gets a
    real answer saying the copilot is shutting down, so it knows to call again later.
    """

    def __init__(self) -> None:
        self._scopes: set[anyio.CancelScope] = set()
        #: Set when a request ends while stop() waits (made there: the app is built before any event loop).
        self._changed: anyio.Event | None = None
        #: Why the copilot stops, once :meth:`stop` was called; later requests are answered at once.
        self.stopping: str | None = None

    async def middleware(self, ctx: ServerRequestContext[Any, Any], call_next: Callable[..., Any]) -> Any:
        if ctx.request_id is None:  # a notification: nothing to answer
            return await call_next(ctx)
        if self.stopping is not None:
            return stopped_answer(ctx, self.stopping)
        with anyio.CancelScope() as scope:
            self._scopes.add(scope)
            try:
                return await call_next(ctx)
            finally:
                self._scopes.discard(scope)
                if self._changed is not None:
                    self._changed.set()
        # Only reached when stop() cancelled this request (our scope swallowed the cancellation).
        return stopped_answer(ctx, self.stopping or "shutdown")

    @property
    def open(self) -> int:
        """How many requests are being handled now."""
        return len(self._scopes)

    async def changed(self) -> None:
        """Wait until a request in flight ends (callers bound it). Waiters share one event: the
        end of input's settle and a signal's stop may wait at once."""
        if self._changed is None or self._changed.is_set():
            self._changed = anyio.Event()
        await self._changed.wait()

    async def stop(self, reason: str, timeout: float) -> int:
        """Cancel every request in flight and wait (at most ``timeout`` s) until each has its answer.

        Returns how many were still running after ``timeout`` (a handler that ignores cancellation).
        """
        self.stopping = reason
        cancelled = len(self._scopes)
        for scope in list(self._scopes):
            scope.cancel()
        with anyio.move_on_after(timeout):
            while self._scopes:
                await self.changed()
        if cancelled:
            logger.info("answered %d request(s) in flight: the copilot is shutting down (%s)", cancelled, reason)
        return len(self._scopes)


def stopped_answer(
    ctx: ServerRequestContext[Any, Any], reason: str
) -> CallToolResult | SubscriptionsListenResult:
    """What a request cut short by the copilot stopping is answered: for ``tools/call`` an error
    result the model reads (as every other failed call), for a ``subscriptions/listen`` stream its
    graceful end (the client listens again); anything else raises a JSON-RPC error."""
    why = f"the copilot is shutting down ({reason}); call again once it is back."
    if ctx.method == "tools/call":
        return CallToolResult(content=[TextContent(type="text", text=f"Call cancelled: {why}")], is_error=True)
    if ctx.method == "subscriptions/listen":
        return SubscriptionsListenResult(_meta={SUBSCRIPTION_ID_META_KEY: ctx.request_id})
    raise MCPError(code=INTERNAL_ERROR, message=f"Request cancelled: {why}")


#: The registry :func:`build_app` installed in each app (read by ``server.http.serve`` when it stops).
_IN_FLIGHT: weakref.WeakKeyDictionary[MCPServer[Any], InFlightRequests] = weakref.WeakKeyDictionary()


def in_flight_requests(app: MCPServer[Any]) -> InFlightRequests:
    """The requests ``app`` is handling now (an empty registry for an app not built by :func:`build_app`)."""
    return _IN_FLIGHT.setdefault(app, InFlightRequests())


# -- tools ----------------------------------------------------------------------------------------
async def route(
    ctx: Context, query: Any = None, top_k: Any = DEFAULT_TOP_K, server: Any = None, kind: Any = None
) -> Annotated[CallToolResult, RouteAnswer]:
    copilot = _copilot(ctx)
    annotator = copilot.aggregation.annotate_route(ctx.request_context) if copilot.aggregation else None
    result = await copilot.route(
        query,
        top_k,
        server,
        _session_log_or_none(copilot, ctx.request_context),
        kind=kind,
        annotate=annotator.annotate if annotator else None,
        argument_error=_argument_error(ctx.request_context, ROUTE_SCHEMA),
    )
    if annotator is not None:
        await annotator.finish()
    return result


async def execute(
    ctx: Context,
    server_name: Any = None,
    tool_name: Any = None,
    params: Any = None,
    confirm: Any = None,
) -> CallToolResult | InputRequiredResult:
    return await execute_in(
        ctx.request_context, server_name, tool_name, params, confirm,
        state=ctx.request_state, responses=ctx.input_responses,
    )


async def execute_in(
    rc: ServerRequestContext[Any, Any],
    server_name: Any = None,
    tool_name: Any = None,
    params: Any = None,
    confirm: Any = None,
    *,
    state: str | None = None,
    responses: Any = None,
) -> CallToolResult | InputRequiredResult:
    """``execute`` for one request: what the tool does once the SDK has handed it its context."""
    copilot: Copilot = rc.lifespan_context
    return await copilot.execute(
        server_name,
        tool_name,
        params,
        confirm,
        None,
        _session_log_or_none(copilot, rc),
        host=copilot.relay.host(rc),
        state=state,
        responses=responses,
        argument_error=_argument_error(rc, EXECUTE_SCHEMA),
    )


def _argument_error(rc: ServerRequestContext[Any, Any], schema: Mapping[str, Any]) -> str | None:
    """What is wrong with the names of a call's arguments to ``route``/``execute``, if anything."""
    unknown = unknown_arguments(rc.params, schema)
    if not unknown:
        return None
    name = rc.params.get("name") if isinstance(rc.params, Mapping) else None
    return unknown_arguments_message(name if isinstance(name, str) else "this tool", unknown, schema)


def _tool(fn: Callable[..., Any], name: str, description: str, schema: dict[str, Any], **kwargs: Any) -> Tool:
    tool = Tool.from_function(fn, name=name, description=description, **kwargs)
    tool.parameters = schema
    return tool


def build_tools(*, livemcpbench_alias: bool = False) -> list[Tool]:
    """``route`` and ``execute``; with ``livemcpbench_alias`` also ``execute-tool``, the name LiveMCPBench's prompts use."""
    open_world = ToolAnnotations(read_only_hint=False, destructive_hint=True, open_world_hint=True)
    tools = [
        _tool(
            route,
            "route",
            ROUTE_DESCRIPTION,
            ROUTE_SCHEMA,
            title="Find tools",
            annotations=ToolAnnotations(read_only_hint=True, open_world_hint=False),
        ),
        _tool(execute, "execute", EXECUTE_DESCRIPTION, EXECUTE_SCHEMA, title="Run a tool", annotations=open_world),
    ]
    if livemcpbench_alias:
        tools.append(
            _tool(
                execute,
                "execute-tool",
                EXECUTE_DESCRIPTION + "\n(Alias of execute, kept for LiveMCPBench prompts.)",
                EXECUTE_SCHEMA,
                title="Run a tool",
                annotations=open_world,
            )
        )
    return tools


async def use_generated_route_description(app: MCPServer[Copilot], copilot: Copilot, aggregation: Aggregation) -> None:
    """route's description summarizes the pool (generated from the servers file and the index) and
    follows it: when it changes, hosts get ``notifications/tools/list_changed`` (both eras)."""
    route_tool = app._tool_manager.get_tool("route")  # noqa: SLF001 -- the SDK has no public setter
    if route_tool is None:
        return
    await copilot.refresh_route_description()
    route_tool.description = copilot.route_description()

    async def changed(description: str) -> None:
        route_tool.description = description
        await aggregation.broadcaster.changed("tools")

    copilot.route_description_listeners.append(changed)


def build_app(
    settings: ServerSettings,
    servers_file: ServersFile,
    *,
    start_now: bool = False,
    shutdown: Shutdown | None = None,
    index: Any = None,
    pool_settings: PoolSettings | None = None,
    telemetry: Any = None,
    transport: str = "stdio",
) -> MCPServer[Copilot]:
    """The MCP server; its lifespan runs the :class:`Copilot` (``start_now`` for HTTP, see ``mark_started``)
    and the :class:`Aggregation` of the children's prompts, resources and exposed tools."""
    aggregation = Aggregation(settings, _session_key)
    in_flight = InFlightRequests()

    @asynccontextmanager
    async def lifespan(server: MCPServer[Copilot]) -> AsyncIterator[Copilot]:
        async with Copilot.running(
            settings, servers_file, start_now=start_now, shutdown=shutdown, index=index, telemetry=telemetry,
            pool_settings=pool_settings,
        ) as copilot:
            copilot.transport = transport
            if transport == "http":
                from server.http.common import MCP_PATH
                from server.http.guard import url_host

                copilot.http_url = f"http://{url_host(settings.http_host)}:{settings.http_port}{MCP_PATH}"
            async with aggregation.running(copilot):
                copilot.aggregation = aggregation
                await use_generated_route_description(server, copilot, aggregation)
                yield copilot

    app: MCPServer[Copilot] = MCPServer(
        COPILOT_SERVER_NAME,
        title="MCP Copilot",
        version=copilot_version(),
        instructions=INSTRUCTIONS,
        lifespan=lifespan,
        tools=build_tools(livemcpbench_alias=settings.livemcpbench_alias),
        log_level=settings.log_level.upper(),  # type: ignore[arg-type]
        # After the session middleware, so a request answered because the copilot stops still counts
        # as session activity. Over stdio too: a signal stops it with requests in flight.
        middleware=[session_middleware, in_flight.middleware],
        subscriptions=aggregation.bus,
    )
    _IN_FLIGHT[app] = in_flight
    lowlevel = app._lowlevel_server  # noqa: SLF001 -- the SDK lists no served methods publicly
    app.middleware.insert(0, unknown_method_hint(lambda: list(lowlevel._request_handlers)))  # noqa: SLF001
    app.middleware.insert(0, invalid_params_hint())
    aggregation.install(app)
    install_handlers(app)
    return app
