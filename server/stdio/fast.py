"""``execute`` over stdio beside the SDK's JSON-RPC dispatcher: the relay's fast path.

Over stdio, every message of the host passes through the SDK's transport (a pydantic model per
message), two memory streams and its dispatcher (a task per request) before ``execute`` runs, and
the answer, each progress notification and each log message take the same way back. For a proxy
that framing was most of the time a call spent in the copilot. :class:`FastExecute` reads
``tools/call`` requests for ``execute`` (and its alias ``execute-tool``) off the pipe itself, runs
them through the SDK's own request kernel (``ServerRunner``'s request context, its middleware --
session and trajectory bookkeeping, request state -- and its per-version result
shaping) and writes the response and the call's notifications straight to the pipe. Of the
kernel's steps it leaves out only those the eligibility checks below make moot: the surface
validation of params, the handler lookup and initialization gate, the tool manager's
per-call ``Context`` (the tool's own argument model still reads the arguments) and the SDK's
OpenTelemetry span (with no tracer provider installed it records nothing).

It takes a request only where that is equivalent, and leaves it to the SDK otherwise:

- the stream's protocol era is known (the SDK served a request first): a 2025-11-25 (or older)
  session once ``initialize`` was accepted; or a 2026-07-28 request whose envelope is valid and
  whose host declares neither elicitation, sampling nor roots (questions to such a host go
  through the ``input_required`` round trip, which stays with the SDK);
- ``_meta`` carries nothing but a progress token (and the 2026-07-28 envelope), so a host's trace
  context is continued by the SDK, and no OpenTelemetry tracer provider is installed;
- the line is JSON the SDK's reader would read the same way: valid UTF-8 (``server.stdio.pipes``
  answers a line that is not, before the SDK reads it) and no byte order mark (refused), no UTF-16
  surrogate escapes, nesting well within its 200-level limit, exactly the keys of a ``tools/call``
  request, each of a type the kernel's validation accepts (a 2026-07-28 ``logLevel`` among the
  spec's levels).

During a fast call the copilot's requests to a 2025-era host (elicitation, sampling, roots) go
through the SDK's dispatcher, which also reads the host's answers. ``notifications/cancelled`` for a
fast call cancels it where the SDK's reader would read it as such a notification (no answer is
written, as the SDK does); at the end of input the calls still running are cancelled and answered
with "Connection closed", as the SDK does. A signal cancels them through the server's middleware
(``server.app.InFlightRequests``, which fast calls pass through too): they are answered that the
copilot is shutting down, as calls on the SDK's path are.
"""

from __future__ import annotations

import json
import logging
import re
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from functools import partial
from typing import Any, get_args

import anyio
import anyio.abc
import anyio.lowlevel
import mcp_types as types
from mcp.server._otel import OpenTelemetryMiddleware
from mcp.server.connection import Connection, NotifyOnlyOutbound
from mcp.server.context import CallNext, ServerRequestContext
from mcp.server.mcpserver.tools import Tool
from mcp.server.runner import (
    ServerRunner,
    _apply_middleware,
    _dump_result,
    _extract_meta,
    aclose_shielded,
    modern_error_data,
)
from mcp.shared.dispatcher import CallOptions, as_request_id, coerce_request_id
from mcp.shared.exceptions import MCPError, NoBackChannelError
from mcp.shared.inbound import InboundLadderRejection, InboundModernRoute, classify_inbound_request
from mcp.shared.jsonrpc_dispatcher import handler_exception_to_error_data
from mcp.shared.transport_context import TransportContext
from mcp_types import methods as _methods
from mcp_types.version import MODERN_PROTOCOL_VERSIONS
from pydantic import ValidationError

from index.children.wire import jsonrpc_line
from server.app import execute_in
from server.execute.results import text_result
from server.telemetry.tracing import sdk_tracing_on

logger = logging.getLogger(__name__)

Write = Callable[[bytes], Awaitable[None]]

#: Any UTF-16 surrogate escape: the SDK's reader refuses lone ones, Python's accepts them.
_SURROGATE_ESCAPE = re.compile(rb"\\u[dD][89a-fA-F]")
#: Opening brackets a fast line may hold; the SDK's reader stops at 200 levels of nesting.
_MAX_BRACKETS = 100
_REQUEST_KEYS = frozenset({"jsonrpc", "id", "method", "params"})
_PARAMS_KEYS = frozenset({"name", "arguments", "_meta"})
_MODERN_META_KEYS = frozenset(
    {
        "progressToken",
        types.PROTOCOL_VERSION_META_KEY,
        types.CLIENT_INFO_META_KEY,
        types.CLIENT_CAPABILITIES_META_KEY,
        types.LOG_LEVEL_META_KEY,
    }
)
_LOG_LEVELS = frozenset(get_args(types.LoggingLevel))
#: Capabilities that let a 2026-07-28 host answer questions (then ``execute`` may suspend the call).
_ANSWERING = frozenset({"elicitation", "sampling", "roots"})
#: Event-loop turns that carry a message already handed to the SDK's transport to its handler.
_SDK_HOPS = 3
#: Seconds the last answer of a call cut off at the end of input may take to write.
_CLOSING_WRITE = 1.0
#: Seconds the end of input waits for fast calls to finish after cancelling them.
_CLOSING_WAIT = 10.0


@dataclass(eq=False)
class FastRequest:
    """The SDK's ``DispatchContext`` for one fast call: notifications to the pipe, requests via the SDK."""

    write: Write
    request_id: types.RequestId
    progress_token: types.ProgressToken | None
    #: The SDK's dispatcher of a 2025-era stream (requests to the host); ``None`` on 2026-07-28.
    back_channel: Any = None
    cancel_requested: anyio.Event = field(default_factory=anyio.Event)
    message_metadata: Any = None
    closed: bool = False

    @property
    def transport(self) -> TransportContext:
        return TransportContext(kind="jsonrpc", can_send_request=self.back_channel is not None)

    @property
    def can_send_request(self) -> bool:
        return self.back_channel is not None and not self.closed

    async def send_raw_request(
        self, method: str, params: Mapping[str, Any] | None, opts: CallOptions | None = None
    ) -> dict[str, Any]:
        if not self.can_send_request:
            raise NoBackChannelError(method)
        result: dict[str, Any] = await self.back_channel.send_raw_request(
            method, params, opts, _related_request_id=self.request_id
        )
        return result

    async def notify(self, method: str, params: Mapping[str, Any] | None, opts: CallOptions | None = None) -> None:
        if self.closed:
            logger.debug("dropped %s: the call has ended", method)
            return
        message: dict[str, Any] = {"jsonrpc": "2.0", "method": method}
        if params is not None:
            message["params"] = dict(params)
        try:
            await self.write(jsonrpc_line(message))
        except (anyio.BrokenResourceError, anyio.ClosedResourceError, OSError):
            logger.debug("dropped %s: the host's pipe is closed", method)

    async def progress(self, progress: float, total: float | None = None, message: str | None = None) -> None:
        if self.progress_token is None:
            return
        params: dict[str, Any] = {"progressToken": self.progress_token, "progress": progress}
        if total is not None:
            params["total"] = total
        if message is not None:
            params["message"] = message
        await self.notify("notifications/progress", params)


class _PipeOutbound:
    """The connection-wide channel of fast 2026-07-28 calls: notifications to the pipe, no requests."""

    def __init__(self, write: Write) -> None:
        self._write = write

    async def send_raw_request(
        self, method: str, params: Mapping[str, Any] | None, opts: CallOptions | None = None
    ) -> dict[str, Any]:
        raise NoBackChannelError(method)

    async def notify(self, method: str, params: Mapping[str, Any] | None, opts: CallOptions | None = None) -> None:
        message: dict[str, Any] = {"jsonrpc": "2.0", "method": method}
        if params is not None:
            message["params"] = dict(params)
        await self._write(jsonrpc_line(message))


@dataclass(eq=False)
class _Call:
    request: FastRequest
    params: dict[str, Any]
    route: InboundModernRoute | None  # 2026-07-28: the request's envelope
    scope: anyio.CancelScope = field(default_factory=anyio.CancelScope)


class FastExecute:
    """See the module docstring. ``take`` is given every line the host writes, before the SDK reads it."""

    def __init__(
        self, server: Any, write: Write, tools: Mapping[str, Tool], *, on_taken: Callable[[], None] | None = None
    ) -> None:
        self._server = server
        self._write = write
        self._tools = tools
        self._on_taken = on_taken
        self._lifespan: Any = None
        self._modern = False
        self._connection: Connection | None = None
        self._runner: ServerRunner[Any] | None = None
        self._modern_outbound = NotifyOnlyOutbound(_PipeOutbound(write))
        #: Calls by (coerced) id, for cancellation: a later call with the same id replaces one, as in the SDK.
        self._calls: dict[types.RequestId, _Call] = {}
        #: Every call still running (two with one id included), for the end of input.
        self._running: set[_Call] = set()
        self._group: anyio.abc.TaskGroup | None = None
        self._idle = anyio.Event()
        self._idle.set()
        #: A line went to the SDK since the last fast call started (it must reach its handler first).
        self._behind_sdk = False
        self.taken = 0

    @classmethod
    @asynccontextmanager
    async def serving(
        cls, server: Any, write: Write, tools: Mapping[str, Tool], *, on_taken: Callable[[], None] | None = None
    ) -> AsyncIterator[FastExecute]:
        fast = cls(server, write, tools, on_taken=on_taken)
        server.middleware.append(fast.learn)
        try:
            async with anyio.create_task_group() as group:
                fast._group = group
                try:
                    yield fast
                finally:
                    fast._group = None
                    group.cancel_scope.cancel()
        finally:
            server.middleware.remove(fast.learn)

    # -- what the SDK served ------------------------------------------------------------------------
    async def learn(self, ctx: ServerRequestContext[Any, Any], call_next: Callable[..., Any]) -> Any:
        """Server middleware: the first request the SDK serves tells the stream's era and its copilot."""
        if self._lifespan is None:
            if ctx.protocol_version in MODERN_PROTOCOL_VERSIONS:
                self._modern = True
            else:
                connection = getattr(ctx.session, "_connection", None)
                if connection is None:
                    return await call_next(ctx)
                self._connection = connection
                self._runner = ServerRunner(self._server, connection, ctx.lifespan_context)
            self._lifespan = ctx.lifespan_context
        return await call_next(ctx)

    # -- reading the host's lines ------------------------------------------------------------------
    def take(self, line: bytes) -> bool:
        """Serve ``line`` here (``True``) or leave it to the SDK (``False``)."""
        if self._lifespan is None or self._group is None:
            return False
        if b'"tools/call"' in line:
            call = self._eligible(line)
            if call is not None:
                self._calls[coerce_request_id(call.request.request_id)] = call
                self._running.add(call)
                self._idle = anyio.Event() if self._idle.is_set() else self._idle
                behind, self._behind_sdk = self._behind_sdk, False
                self.taken += 1
                if self._on_taken is not None:
                    self._on_taken()
                self._group.start_soon(self._serve, call, behind)
                return True
            logger.debug("a tools/call request goes the SDK's way (not one the fast path serves identically)")
        # (A cancellation whose reason names "tools/call" is still one.)
        if self._calls and b'"notifications/cancelled"' in line and self._cancel(line):
            return True
        self._behind_sdk = True
        return False

    def _eligible(self, line: bytes) -> _Call | None:
        if sdk_tracing_on():
            return None
        message = _read_as_the_sdk(line)
        if message is None:
            return None
        if message.keys() - _REQUEST_KEYS or message.get("jsonrpc") != "2.0":
            return None
        request_id = message.get("id")
        params = message.get("params")
        if message.get("method") != "tools/call" or as_request_id(request_id) is None or not isinstance(params, dict):
            return None
        if params.keys() - _PARAMS_KEYS or params.get("name") not in self._tools:
            return None
        if not isinstance(params.get("arguments", {}), dict | None):
            return None
        meta = params.get("_meta", {})
        if not isinstance(meta, dict):
            return None
        token = meta.get("progressToken")
        if "progressToken" in meta and as_request_id(token) is None:
            return None
        route: InboundModernRoute | None = None
        if self._modern:
            capabilities = meta.get(types.CLIENT_CAPABILITIES_META_KEY)
            if meta.keys() - _MODERN_META_KEYS or not isinstance(capabilities, dict) or capabilities.keys() & _ANSWERING:
                return None
            if meta.get(types.LOG_LEVEL_META_KEY, "info") not in _LOG_LEVELS:
                return None  # the kernel's surface validation refuses it
            classified = classify_inbound_request({"method": "tools/call", "params": params})
            if isinstance(classified, InboundLadderRejection):
                return None
            route = classified
            back_channel = None
        else:
            connection = self._connection
            if meta.keys() - {"progressToken"} or connection is None:
                return None
            if not connection.initialize_accepted or connection.protocol_version in MODERN_PROTOCOL_VERSIONS:
                return None
            back_channel = connection.outbound
        request = FastRequest(self._write, request_id, token, back_channel)
        return _Call(request, params, route)

    def _cancel(self, line: bytes) -> bool:
        """``notifications/cancelled`` for a fast call: cancel it (the SDK never knew it).

        Only a line the SDK's reader would read as that notification (a request by that name, one
        with a valid id, the SDK answers; a line it cannot read, it drops) cancels the call.
        """
        message = _read_as_the_sdk(line)
        if message is None or message.get("jsonrpc") != "2.0" or message.get("method") != "notifications/cancelled":
            return False
        if as_request_id(message.get("id")) is not None:
            return False
        params = message.get("params")
        request_id = as_request_id(params.get("requestId")) if isinstance(params, dict) else None
        call = self._calls.get(coerce_request_id(request_id)) if request_id is not None else None
        if call is None:
            return False
        logger.debug("host cancelled execute request %r (fast path)", request_id)
        call.request.cancel_requested.set()
        call.scope.cancel()
        return True

    async def finish(self) -> None:
        """End of input: cancel the fast calls still running (each is answered "Connection closed")."""
        for call in list(self._running):
            call.scope.cancel()
        with anyio.move_on_after(_CLOSING_WAIT, shield=True):
            await self._idle.wait()

    # -- one call ------------------------------------------------------------------------------------
    async def _serve(self, call: _Call, behind_sdk: bool) -> None:
        request = call.request
        answered = False
        try:
            with call.scope:
                try:
                    if behind_sdk:
                        # Messages read before this one are on their way to the SDK's handlers; the
                        # SDK would start those first (a logging/setLevel, roots/list_changed).
                        for _ in range(_SDK_HOPS):
                            await anyio.lowlevel.checkpoint()
                    result = await self._handle(call)
                finally:
                    request.closed = True
                    key = coerce_request_id(request.request_id)
                    if self._calls.get(key) is call:
                        del self._calls[key]
                if not request.cancel_requested.is_set():
                    answered = True
                    logger.debug("answered execute request %r on the fast path", request.request_id)
                    await self._answer({"jsonrpc": "2.0", "id": request.request_id, "result": result})
            if call.scope.cancelled_caught and not answered and not request.cancel_requested.is_set():
                await self._answer_closed(request)  # cut off at the end of input (``finish``)
        except anyio.get_cancelled_exc_class():
            if not answered and not request.cancel_requested.is_set():
                await self._answer_closed(request)
            raise
        except Exception as exc:
            error = handler_exception_to_error_data(exc)
            if error is None:
                if call.route is not None:
                    error = modern_error_data(exc)  # logs it
                else:
                    logger.exception("handler for 'tools/call' raised")
                    error = types.ErrorData(code=0, message=str(exc))  # what the SDK's dispatcher answers
            if not request.cancel_requested.is_set():
                await self._answer_error(request.request_id, error)
        finally:
            self._running.discard(call)
            if not self._running:
                self._idle.set()

    async def _handle(self, call: _Call) -> dict[str, Any]:
        """The request through the SDK's kernel for this era: its context, middleware and result shaping."""
        if call.route is None:
            assert self._runner is not None
            return await self._through(self._runner, call)
        route = call.route
        connection = Connection.from_envelope(
            route.protocol_version, route.client_info, route.client_capabilities, outbound=self._modern_outbound
        )
        try:
            return await self._through(ServerRunner(self._server, connection, self._lifespan), call)
        finally:
            await aclose_shielded(connection)

    async def _through(self, runner: ServerRunner[Any], call: _Call) -> dict[str, Any]:
        """``ServerRunner.on_request`` for a request ``_eligible`` took, without the steps its checks
        made moot: the surface validation of params, the handler lookup and the initialization gate,
        and the tool manager's per-call ``Context`` (``execute`` needs only the request context)."""
        params = call.params
        version = runner.connection.protocol_version
        ctx = runner._make_context(call.request, "tools/call", params, _extract_meta(params), version)  # noqa: SLF001

        async def inner(ctx: ServerRequestContext[Any, Any]) -> Any:
            if ctx.method != "tools/call" or ctx.params is not params:
                # A middleware rewrote the request: it takes the kernel's general way.
                return await _general(runner, ctx, version)
            name = params["name"]
            result = await self._run_tool(ctx, name, params.get("arguments") or {})
            return runner._serialize("tools/call", version, result)  # noqa: SLF001

        return _dump_result(await _without_tracing(runner, inner)(ctx))

    async def _run_tool(self, ctx: ServerRequestContext[Any, Any], name: str, arguments: dict[str, Any]) -> Any:
        """What ``MCPServer`` makes of a ``tools/call`` for ``name``: arguments read by the tool's own
        model, failures answered as the SDK answers them."""
        metadata = self._tools[name].fn_metadata
        try:
            validated = metadata.validate_arguments(arguments)
        except ValidationError as exc:
            fields = sorted({".".join(str(part) for part in err["loc"]) for err in exc.errors()})
            logger.info("Tool %r rejected arguments: %r", name, fields)
            return text_result(f"Error executing tool {name}: {exc}", is_error=True)
        try:
            return metadata.convert_result(await execute_in(ctx, **validated))
        except MCPError:
            raise
        except Exception:
            logger.exception("Tool %r raised an unexpected exception", name)
            return text_result(f"Error executing tool {name}", is_error=True)

    async def _answer(self, message: dict[str, Any]) -> None:
        try:
            await self._write(jsonrpc_line(message))
        except (anyio.BrokenResourceError, anyio.ClosedResourceError, OSError):
            logger.debug("dropped the answer to %r: the host's pipe is closed", message.get("id"))

    async def _answer_closed(self, request: FastRequest) -> None:
        closed = types.ErrorData(code=types.CONNECTION_CLOSED, message="Connection closed")
        with anyio.move_on_after(_CLOSING_WRITE, shield=True):
            await self._answer_error(request.request_id, closed)

    async def _answer_error(self, request_id: types.RequestId, error: types.ErrorData) -> None:
        await self._answer(
            {"jsonrpc": "2.0", "id": request_id, "error": error.model_dump(by_alias=True, mode="json", exclude_none=True)}
        )


def _read_as_the_sdk(line: bytes) -> dict[str, Any] | None:
    """``line`` as a JSON object, if the SDK's reader reads it as the same JSON; else ``None``.

    It decodes as ``server.stdio.pipes`` decodes for the SDK: strictly (a line that is not UTF-8 is
    left to it, which answers it with an error; a byte order mark stays, and neither JSON reader
    takes it) -- the decoding ``json.loads`` does for bytes anyway, so it costs nothing more.
    """
    if line.count(b"{") + line.count(b"[") > _MAX_BRACKETS or _SURROGATE_ESCAPE.search(line):
        return None
    try:
        message = json.loads(line.decode("utf-8"))
    except (ValueError, RecursionError):
        return None
    return message if isinstance(message, dict) else None


def _without_tracing(runner: ServerRunner[Any], inner: CallNext) -> CallNext:
    """``runner``'s middleware around ``inner``, as the kernel composes it, less the SDK's
    OpenTelemetry span: a fast call is taken only while no tracer provider is installed
    (``_eligible``), when that span is a no-op that cost ~2% of the copilot's CPU per relayed call."""
    call = inner
    for middleware in reversed(runner.server.middleware):
        if not isinstance(middleware, OpenTelemetryMiddleware):
            call = partial(_apply_middleware, middleware, call)
    return call


async def _general(runner: ServerRunner[Any], ctx: ServerRequestContext[Any, Any], version: str) -> Any:
    """The kernel's handler step for a request a middleware rewrote (as ``ServerRunner`` runs it)."""
    if ctx.method in _methods.SPEC_CLIENT_METHODS:
        try:
            _methods.validate_client_request(ctx.method, version, ctx.params)
        except KeyError:
            raise MCPError(code=types.METHOD_NOT_FOUND, message="Method not found", data=ctx.method) from None
    entry = runner.server.get_request_handler(ctx.method)
    if entry is None:
        raise MCPError(code=types.METHOD_NOT_FOUND, message="Method not found", data=ctx.method)
    typed = entry.params_type.model_validate({} if ctx.params is None else ctx.params, by_name=False)
    result = await entry.handler(ctx, typed)
    if isinstance(result, types.ErrorData):
        raise MCPError.from_error_data(result)
    return runner._serialize(ctx.method, version, result)  # noqa: SLF001


def execute_tools(app: Any) -> dict[str, Tool]:
    """The copilot's ``execute`` tools on ``app`` by name (``execute-tool`` too when the alias is on)."""
    manager = app._tool_manager  # noqa: SLF001 -- MCPServer has no public tool lookup
    return {name: tool for name in ("execute", "execute-tool") if (tool := manager.get_tool(name)) is not None}


__all__ = ["FastExecute", "FastRequest", "execute_tools"]
