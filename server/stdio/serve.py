"""Serving the copilot over stdio: the SDK's transport, plus an answer to every request it cannot read.

The SDK's stdio transport hands a line it cannot parse (a lone surrogate escape such as
``"\\ud800"``, JSON nested deeper than its 200-level limit, JSON that is no JSON-RPC message) to the
server as an exception, and the server drops it: the host waits for its own timeout.
:class:`AnswerUnparseable` sits between the transport and the server and answers such a request at
once, as ``server.envelope`` says and as the HTTP transport answers the same body -- ``-32700`` when
the line is not JSON the SDK reads, ``-32600`` when it is JSON but not a valid request (a batch, a
request without ``"jsonrpc": "2.0"``, params that are no object) -- carrying the request's id when
it can be recovered, so the host's pending call fails now, else ``"id": null`` as JSON-RPC
prescribes, and saying what was wrong with it. What JSON-RPC does not answer is not answered: a
notification, a reply (even a malformed one), a blank line.

On pipes (``server.stdio.pipes``) it also sees the raw lines, and answers a request whose id is
neither a string nor an integer (``null``, ``1.5``, an object), which the SDK's reader takes for a
notification and drops, with ``-32600`` and ``"id": null``; a line over
``server.stdio.pipes.MAX_LINE_BYTES`` is answered with ``-32600`` without being read; and a line
that is not UTF-8, which the SDK's reader would serve with its invalid bytes replaced (the data
changed without a word), with ``-32700``, as over HTTP (JSON-RPC messages of MCP are UTF-8).
"""

from __future__ import annotations

import contextvars
import logging
import re
from collections import deque
from collections.abc import Awaitable, Callable
from functools import partial
from types import TracebackType
from typing import Any

import anyio
import mcp.types as types
from mcp.server.mcpserver import MCPServer
from mcp.server.stdio import stdio_server
from mcp.shared.message import SessionMessage
from pydantic import ValidationError

from index.children.wire import error_at, loose_parse, request_id_of
from server.app import in_flight_requests
from server.envelope import EnvelopeProblem, invalid_request, message_problem, parse_error, value_problem
from server.stdio.fast import FastExecute, execute_tools
from server.stdio.settle import SETTLE_SECONDS, settle
from server.stdio.pipes import MAX_LINE_BYTES, PipeWriter, stdio_files

logger = logging.getLogger(__name__)

_UNKNOWN = object()


def _text_of(error: Exception, line: bytes | None) -> str | None:
    """The line behind ``error`` as the SDK's reader read it: from ``line`` (the raw bytes, when
    known: always UTF-8, ``PipeLines`` hands no other line on) or, for invalid JSON, from the error
    (pydantic keeps the text as the error's input)."""
    if line is not None:
        return line.decode("utf-8")
    if isinstance(error, ValidationError):
        for detail in error.errors():
            if detail.get("type") == "json_invalid" and isinstance(detail.get("input"), str):
                return str(detail["input"])
    return None


def _value_of(error: ValidationError) -> Any:
    """The JSON value the SDK's reader parsed and refused: the input of an error about the whole
    message (a value that is no object, a member it lacks); ``_UNKNOWN`` when none says."""
    for detail in error.errors():
        loc = detail.get("loc", ())
        if len(loc) == 1 or (len(loc) == 2 and detail.get("type") == "missing"):
            return detail.get("input")
    return _UNKNOWN


def is_blank(error: Exception, line: bytes | None = None) -> bool:
    """Whether ``error`` is the SDK's reader failing on a blank line (no message at all)."""
    text = _text_of(error, line)
    return text is not None and not text.strip()


def parse_error_reply(error: Exception, line: bytes | None = None) -> types.JSONRPCError | None:
    """The error answering the line behind ``error`` (``line``: its raw bytes, when known); ``None``
    for what JSON-RPC does not answer -- a blank line, a notification, a (malformed) response."""
    if not isinstance(error, ValidationError):
        return _reply(parse_error("the message could not be read"))
    text = _text_of(error, line)
    if text is not None:
        if not text.strip():
            return None
        # What the SDK's reader read less the line's end: the message as an HTTP body carries it,
        # so both transports answer it alike. (A decoded line holds no surrogate: UTF-8 has none.)
        raw = text.rstrip("\r\n").encode()
        problem = message_problem(raw)
        value = loose_parse(raw) if problem is None else None
    else:
        value = _value_of(error)
        problem = None if value is _UNKNOWN else value_problem(value)
    if problem is None:  # refused by the SDK's reader for a reason the shared checks do not name
        if isinstance(value, dict) and ("id" not in value or "method" not in value):
            return None  # a notification or a response
        problem = invalid_request(f"the message is not a valid JSON-RPC 2.0 message ({_summary(error)})")
    return _reply(problem) if problem.wants_answer else None


def invalid_id_reply(line: bytes) -> types.JSONRPCError | None:
    """The error answering ``line`` (UTF-8, as ``PipeLines`` hands lines on), which the SDK's reader
    took for a notification, when it has an id (of a type JSON-RPC ids of MCP requests cannot
    have); ``None`` when it is a notification."""
    problem = message_problem(line)
    return _reply(problem) if problem is not None and problem.wants_answer else None


_NOTIFICATION_METHOD = re.compile(rb'"method"\s*:\s*"notifications/')


def oversized_reply(head: bytes, tail: bytes, size: int) -> types.JSONRPCError | None:
    """The error answering a line over ``MAX_LINE_BYTES`` that was discarded unread (``head`` and
    ``tail``: its ends); ``None`` when it does not look like a request (a reply of the host's, or a
    notification, which JSON-RPC never answers)."""
    if b'"method"' not in head and b'"method"' not in tail:
        return None
    request_id = request_id_of(head + tail)
    if request_id is None and _NOTIFICATION_METHOD.search(head + tail):
        return None
    why = (
        f"the message is {size:,} bytes long, over the {MAX_LINE_BYTES:,} bytes the copilot reads in one "
        "message; it was discarded unread"
    )
    return _reply(invalid_request(why, request_id))


def undecodable_reply(line: bytes) -> types.JSONRPCError | None:
    """The error answering ``line``, which is not UTF-8; ``None`` when JSON-RPC does not answer it."""
    problem = message_problem(line.rstrip(b"\r\n"))
    return _reply(problem) if problem is not None and problem.wants_answer else None


def _summary(error: Exception) -> str:
    if isinstance(error, ValidationError) and error.errors():
        detail = error.errors()[0]
        return error_at(detail.get("loc", ()), detail.get("msg", ""))
    return str(error)


def _reply(problem: EnvelopeProblem) -> types.JSONRPCError:
    return types.JSONRPCError(
        jsonrpc="2.0", id=problem.request_id, error=types.ErrorData(code=problem.code, message=problem.message)
    )


def _wire(reply: types.JSONRPCError) -> bytes:
    """``reply`` as the SDK's stdio writer puts it on the wire."""
    return reply.model_dump_json(by_alias=True, exclude_unset=True).encode() + b"\n"


class SendsInFlight:
    """A send stream that knows whether a message is still on its way to its reader."""

    def __init__(self, inner: Any) -> None:
        self._inner = inner
        self._sending = 0
        self._drained: anyio.Event | None = None

    async def send(self, item: Any) -> None:
        self._sending += 1
        try:
            await self._inner.send(item)
        finally:
            self._sending -= 1
            if not self._sending and self._drained is not None:
                self._drained.set()

    async def drained(self, timeout: float) -> None:
        """Wait (at most ``timeout`` seconds) until no message waits for the reader."""
        with anyio.move_on_after(timeout):
            while self._sending:
                self._drained = anyio.Event()
                await self._drained.wait()

    def close(self) -> None:
        self._inner.close()

    async def aclose(self) -> None:
        await self._inner.aclose()

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)

    async def __aenter__(self) -> SendsInFlight:
        return self

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        await self.aclose()


class AnswerUnparseable:
    """A read stream that answers the exceptions of the one it wraps instead of passing them on.

    ``lines`` (on pipes): the raw lines the SDK's reader was given, one per item it delivers, in
    order; with them, requests whose id the SDK's reader could not take are answered too.
    """

    def __init__(
        self,
        inner: Any,
        write: Any,
        lines: deque[bytes] | None = None,
        at_end: Callable[[], Awaitable[Any]] | None = None,
    ) -> None:
        self._inner = inner
        self._write = write
        self._lines = lines
        #: Awaited once the input ended, before the SDK hears of it (as ``PipeLines.at_end`` on pipes).
        self._at_end = at_end

    @property
    def last_context(self) -> contextvars.Context | None:
        return getattr(self._inner, "last_context", None)

    async def receive(self) -> Any:
        while True:
            try:
                item = await self._inner.receive()
            except anyio.EndOfStream:
                if self._at_end is not None:
                    at_end, self._at_end = self._at_end, None
                    await at_end()
                raise
            line = self._lines.popleft() if self._lines else None
            if isinstance(item, Exception):
                reply = parse_error_reply(item, line)
                if reply is None:
                    if is_blank(item, line):
                        logger.debug("skipped a blank line")
                    else:
                        logger.warning("dropped a notification or reply that could not be read: %s", _summary(item))
                    continue
                logger.warning("answered an unparseable request (id %r): %s", reply.id, reply.error.message)
                await self._write.send(SessionMessage(reply))
                continue
            message = item.message
            if (
                line is not None
                and isinstance(message, types.JSONRPCNotification)
                and not message.method.startswith("notifications/")
            ):
                reply = invalid_id_reply(line)
                if reply is not None:
                    logger.warning("answered a request with an invalid id: %s", reply.error.message)
                    await self._write.send(SessionMessage(reply))
                    continue
            return item

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


async def _answer_aside(stdout: Any, reply: types.JSONRPCError) -> None:
    """Write ``reply`` to a line the SDK never saw straight to the host's pipe."""
    try:
        await stdout.send(_wire(reply))
    except (anyio.BrokenResourceError, anyio.ClosedResourceError, OSError):
        logger.debug("dropped the answer to request %r: the host's pipe is closed", reply.id)


async def _answer_undecodable(stdout: PipeWriter, line: bytes) -> None:
    reply = undecodable_reply(line)
    if reply is None:
        logger.warning("dropped a notification or reply that is not UTF-8")
        return
    logger.warning("answered a request that is not UTF-8 (id %r): %s", reply.id, reply.error.message)
    await _answer_aside(stdout, reply)


#: How long a signal's stop waits for the requests in flight to take their answers (as over HTTP).
STOP_ANSWER_SECONDS = 2.0


async def answer_in_flight(app: MCPServer[Any], reason: str) -> int:
    """Before a signal stops the server: cancel every request in flight and let each answer reach
    the host's pipe -- an ``execute`` "Call cancelled: the copilot is shutting down (SIGTERM); call
    again once it is back.", another request a JSON-RPC error saying so -- instead of ending the
    process under them (the host waited for its own timeout, or read "Connection closed"). Requests
    read meanwhile are answered so at once. Returns how many still ran when it gave up on them."""
    left = await in_flight_requests(app).stop(reason, STOP_ANSWER_SECONDS)
    if left:
        logger.warning("%d request(s) still running %gs after they were cancelled", left, STOP_ANSWER_SECONDS)
    with anyio.move_on_after(SETTLE_SECONDS):
        await anyio.wait_all_tasks_blocked()  # the answers pass the SDK's writer onto the pipe
    return left


async def serve_stdio(app: MCPServer[Any], *, fast: bool = True, on_taken: Callable[[], None] | None = None) -> None:
    """``app.run_stdio_async()`` with unparseable requests answered, on non-blocking pipes when it can.

    ``server.stdio.pipes`` serves stdin/stdout from the event loop (no worker thread per message)
    when they are pipes or sockets; otherwise the SDK's own file wrappers are used. On pipes,
    ``fast`` serves ``execute`` beside the SDK's dispatcher where that is equivalent
    (``server.stdio.fast``); ``on_taken`` is called for each call it takes.
    """
    # MCPServer exposes no public way to run its low-level server on our own streams.
    server = app._lowlevel_server  # noqa: SLF001
    async with stdio_files(_answer_undecodable) as files:
        if files is None:
            async with stdio_server() as (read_stream, sdk_write_stream):
                write_stream = SendsInFlight(sdk_write_stream)

                async def at_end() -> None:
                    # The requests read last get their answers before the SDK ends the session (it
                    # cancelled them: a file's last request went unanswered 4 times in 6). The
                    # SDK's writer writes in a thread, so an answer still waiting for it is waited for too.
                    await settle(in_flight_requests(app))
                    await write_stream.drained(SETTLE_SECONDS)

                reader = AnswerUnparseable(read_stream, write_stream, at_end=at_end)
                await server.run(reader, write_stream, server.create_initialization_options())
            return
        stdin, stdout = files
        stdin.given = lines = deque()

        async def answer_oversized(head: bytes, tail: bytes, size: int) -> None:
            reply = oversized_reply(head, tail, size)
            if reply is None:
                return
            logger.warning("answered an overlong request (id %r): %s", reply.id, reply.error.message)
            await _answer_aside(stdout, reply)

        stdin.on_oversized = answer_oversized
        if not fast:
            stdin.at_end = partial(settle, in_flight_requests(app))
            async with stdio_server(stdin, stdout) as (read_stream, write_stream):  # type: ignore[arg-type]
                answering = AnswerUnparseable(read_stream, write_stream, lines)
                await server.run(answering, write_stream, server.create_initialization_options())
            return
        async with FastExecute.serving(server, stdout.send, execute_tools(app), on_taken=on_taken) as fast_path:
            requests = in_flight_requests(app)

            async def at_end() -> None:
                await settle(requests)
                await fast_path.finish()

            stdin.take, stdin.at_end = fast_path.take, at_end
            async with stdio_server(stdin, stdout) as (read_stream, write_stream):  # type: ignore[arg-type]
                answering = AnswerUnparseable(read_stream, write_stream, lines)
                await server.run(answering, write_stream, server.create_initialization_options())
