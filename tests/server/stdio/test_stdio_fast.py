"""``server.stdio.fast``'s kernel step, in process on the SDK's own objects (the end-to-end
comparisons with the SDK path are in ``test_relay_fast.py``)."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any

import pytest
from mcp.server._otel import OpenTelemetryMiddleware
from mcp.server.connection import Connection, NotifyOnlyOutbound
from mcp.server.context import ServerRequestContext
from mcp.server.mcpserver import MCPServer
from mcp.server.runner import ServerRunner

from server.stdio.fast import FastExecute, FastRequest, _Call, _PipeOutbound, execute_tools

pytestmark = pytest.mark.asyncio

ENVELOPE = {
    "io.modelcontextprotocol/protocolVersion": "2026-07-28",
    "io.modelcontextprotocol/clientInfo": {"name": "test", "version": "0"},
    "io.modelcontextprotocol/clientCapabilities": {},
}


def _app(*middleware: Callable[..., Any]) -> MCPServer[Any]:
    app: MCPServer[Any] = MCPServer("fast-path-test", middleware=list(middleware))

    @app.tool()
    def execute(server_name: str = "", tool_name: str = "") -> str:
        raise AssertionError("the rewritten request must not reach execute")

    @app.tool()
    def echo(text: str) -> str:
        return f"echo: {text}"

    return app


async def _rewrite_to_echo(ctx: ServerRequestContext[Any, Any], call_next: Callable[..., Any]) -> Any:
    if ctx.method == "tools/call" and (ctx.params or {}).get("name") == "execute":
        params = {"name": "echo", "arguments": {"text": "rewritten"}, "_meta": ENVELOPE}
        return await call_next(dataclasses.replace(ctx, params=params))
    return await call_next(ctx)


async def _written(_: bytes) -> None:
    return None


async def test_a_request_a_middleware_rewrites_is_answered_as_the_kernel_answers_it() -> None:
    app = _app(_rewrite_to_echo)
    server = app._lowlevel_server
    params = {"name": "execute", "arguments": {}, "_meta": ENVELOPE}
    outbound = NotifyOnlyOutbound(_PipeOutbound(_written))
    fast = FastExecute(server, _written, execute_tools(app))
    answers = []
    for run in ("fast", "kernel"):
        connection = Connection.from_envelope("2026-07-28", None, None, outbound=outbound)
        runner = ServerRunner(server, connection, None)
        request = FastRequest(_written, 1, None)
        if run == "fast":
            answers.append(await fast._through(runner, _Call(request, params, route=None)))
        else:
            answers.append(await runner.on_request(request, "tools/call", params))
    assert answers[0] == answers[1]
    assert answers[0]["content"][0]["text"] == "echo: rewritten"


async def test_the_kernel_step_runs_the_servers_middleware_less_the_no_op_tracing_span() -> None:
    # A fast call is taken only while no tracer provider is installed: the SDK's span records nothing.
    seen: list[str] = []

    class Tracing(OpenTelemetryMiddleware):
        async def __call__(self, ctx: ServerRequestContext[Any, Any], call_next: Callable[..., Any]) -> Any:
            seen.append("tracing")
            return await call_next(ctx)

    async def recording(ctx: ServerRequestContext[Any, Any], call_next: Callable[..., Any]) -> Any:
        seen.append(f"recording {ctx.method}")
        return await call_next(ctx)

    app = _app(recording, _rewrite_to_echo)
    server = app._lowlevel_server
    assert isinstance(server.middleware[0], OpenTelemetryMiddleware)  # the SDK's, outermost
    server.middleware[0] = Tracing()
    connection = Connection.from_envelope("2026-07-28", None, None, outbound=NotifyOnlyOutbound(_PipeOutbound(_written)))
    fast = FastExecute(server, _written, execute_tools(app))
    call = _Call(FastRequest(_written, 1, None), {"name": "execute", "arguments": {}, "_meta": ENVELOPE}, route=None)
    answer = await fast._through(ServerRunner(server, connection, None), call)
    assert answer["content"][0]["text"] == "echo: rewritten"
    assert seen == ["recording tools/call"]
