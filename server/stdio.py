"""Serving the copilot over stdio: the SDK's transport, plus an answer to every request it cannot parse.

The SDK's stdio transport hands a line it cannot parse (a lone surrogate escape such as
``"\\ud800"``, JSON nested deeper than its 200-level limit) to the server as an exception, and the
server drops it: the host waits for its own timeout. Over HTTP the same request gets a 400 with a
JSON-RPC parse error. :class:`AnswerUnparseable` sits between the transport and the server and
answers such a request at once with a JSON-RPC ``-32700`` error -- carrying the request's id when
it can be recovered from the line, so the host's pending call fails now, else ``"id": null`` as
JSON-RPC prescribes -- saying what was wrong with it.
"""

from __future__ import annotations

import contextvars
import json
import logging
from collections.abc import Callable
from types import TracebackType
from typing import Any

import anyio
import mcp.types as types
from mcp.server.mcpserver import MCPServer
from mcp.server.stdio import stdio_server
from mcp.shared.message import SessionMessage
from pydantic import ValidationError

from index.children.wire import describe_unreadable, request_id_of
from server.stdio_fast import FastExecute, execute_tools
from server.stdio_pipes import stdio_files

logger = logging.getLogger(__name__)


def _line_of(error: Exception) -> str | None:
    """The raw line a transport failed to parse (pydantic keeps it as the error's input)."""
    if isinstance(error, ValidationError):
        for detail in error.errors():
            if isinstance(detail.get("input"), str):
                return str(detail["input"])
    return None


def parse_error_reply(error: Exception) -> types.JSONRPCError | None:
    """The error answering the line behind ``error``; ``None`` for a notification or a malformed response."""
    line = _line_of(error)
    if line is None:
        return types.JSONRPCError(
            jsonrpc="2.0", id=None, error=types.ErrorData(code=types.PARSE_ERROR, message=f"Parse error: {error}")
        )
    raw = line.strip().encode("utf-8", "surrogatepass")
    try:
        parsed: Any = json.loads(raw)
    except (ValueError, RecursionError):
        parsed = None
    if isinstance(parsed, dict) and ("id" not in parsed or "method" not in parsed):
        return None  # a notification, or a reply to a request of ours: JSON-RPC answers neither
    assert isinstance(error, ValidationError)
    unparsed = parsed is None or any(detail.get("type") == "json_invalid" for detail in error.errors())
    code, kind = (types.PARSE_ERROR, "Parse error") if unparsed else (types.INVALID_REQUEST, "Invalid request")
    message = f"{kind}: the request could not be read: {describe_unreadable(raw, error)}."
    return types.JSONRPCError(
        jsonrpc="2.0", id=request_id_of(raw, parsed), error=types.ErrorData(code=code, message=message)
    )


class AnswerUnparseable:
    """A read stream that answers the exceptions of the one it wraps instead of passing them on."""

    def __init__(self, inner: Any, write: Any) -> None:
        self._inner = inner
        self._write = write

    @property
    def last_context(self) -> contextvars.Context | None:
        return getattr(self._inner, "last_context", None)

    async def receive(self) -> Any:
        while True:
            item = await self._inner.receive()
            if not isinstance(item, Exception):
                return item
            reply = parse_error_reply(item)
            if reply is None:
                logger.warning("dropped a notification or response that could not be parsed: %s", item)
                continue
            logger.warning("answered an unparseable request (id %r): %s", reply.id, reply.error.message)
            await self._write.send(SessionMessage(reply))

    def __aiter__(self) -> AnswerUnparseable:
        return self

    async def __anext__(self) -> Any:
        try:
            return await self.receive()
        except anyio.EndOfStream:
            raise StopAsyncIteration from None

    def close(self) -> None:
        self._inner.close()

    async def aclose(self) -> None:
        await self._inner.aclose()

    async def __aenter__(self) -> AnswerUnparseable:
        return self

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        await self.aclose()


async def serve_stdio(app: MCPServer[Any], *, fast: bool = True, on_taken: Callable[[], None] | None = None) -> None:
    """``app.run_stdio_async()`` with unparseable requests answered, on non-blocking pipes when it can.

    ``server.stdio_pipes`` serves stdin/stdout from the event loop (no worker thread per message)
    when they are pipes or sockets; otherwise the SDK's own file wrappers are used. On pipes,
    ``fast`` serves ``execute`` beside the SDK's dispatcher where that is equivalent
    (``server.stdio_fast``); ``on_taken`` is called for each call it takes.
    """
    # MCPServer exposes no public way to run its low-level server on our own streams.
    server = app._lowlevel_server  # noqa: SLF001
    async with stdio_files() as files:
        if files is None or not fast:
            stdin, stdout = files if files is not None else (None, None)
            async with stdio_server(stdin, stdout) as (read_stream, write_stream):  # type: ignore[arg-type]
                await server.run(
                    AnswerUnparseable(read_stream, write_stream), write_stream, server.create_initialization_options()
                )
            return
        stdin, stdout = files
        async with FastExecute.serving(server, stdout.send, execute_tools(app), on_taken=on_taken) as fast_path:
            stdin.take, stdin.at_end = fast_path.take, fast_path.finish
            async with stdio_server(stdin, stdout) as (read_stream, write_stream):  # type: ignore[arg-type]
                await server.run(
                    AnswerUnparseable(read_stream, write_stream), write_stream, server.create_initialization_options()
                )
