"""Serving MCP over stdio without a thread hop per message.

The SDK's stdio transport reads stdin and writes stdout through ``anyio.wrap_file``: every line
read, every write and every flush is a round trip to a worker thread. For the copilot, which sits
between a host and a child, those hops were most of the latency it added to a call (a call with
three progress notifications made nine of them). When stdin and stdout are pipes or sockets --
which is how hosts start MCP servers -- :func:`stdio_files` serves them from the event loop with
non-blocking I/O instead, as drop-in ``stdin``/``stdout`` objects for ``mcp.server.stdio.stdio_server``
(``server.stdio.serve.serve_stdio`` uses them).

Like the SDK, it keeps the protocol channel private while serving: the wire moves to descriptors
above 2, fd 0 reads from the null device and fd 1 writes to stderr, so a stray ``print`` of a
library (or a child that inherits fd 1) cannot corrupt the stream; both are restored on exit. When
stdin or stdout is a terminal or a regular file it yields ``None`` and the SDK's own transport is used.

Unlike the SDK's reader, which reads a line of any length into memory, a line longer than
:data:`MAX_LINE_BYTES` is discarded as it streams in (only its head and tail are kept, to find the
request's id) and handed to ``PipeLines.on_oversized``; the SDK's streamable HTTP transport
likewise refuses bodies over 4 MiB. Where the SDK's reader replaces invalid UTF-8 (its text
wrapper decodes with ``errors="replace"``) and serves the request with its data changed, a line
that is not UTF-8 is handed to ``PipeLines.on_undecodable`` instead. And where the SDK's writer
would wait forever for a host that closed its input but never reads the answers, or fail with a
traceback when the host closed its end of stdout, :class:`PipeWriter` gives the last answers
:data:`LAST_WRITES_SECONDS` once the input ended, and a host that stopped listening ends the
session (its output is dropped) as if it had left.
"""

from __future__ import annotations

import asyncio
import fcntl
import logging
import os
import stat
from collections import deque
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager, suppress
from functools import partial
from typing import Any

import anyio

logger = logging.getLogger(__name__)

_READ_CHUNK = 256 * 1024
#: The longest line (one JSON-RPC message) read from the host; a longer one is discarded unread.
MAX_LINE_BYTES = 16 * 1024 * 1024
#: Bytes kept of each end of a discarded line (a request's id is at its head or its tail).
_KEPT = 4096
#: Seconds the answers written once the host's input ended may wait, in all, for the host to read them.
LAST_WRITES_SECONDS = 5.0


def _is_pipe_or_socket(fd: int) -> bool:
    try:
        mode = os.fstat(fd).st_mode
    except OSError:
        return False
    return stat.S_ISFIFO(mode) or stat.S_ISSOCK(mode)


class PipeLines:
    """``async for line in stdin``: text lines of a non-blocking pipe (what ``stdio_server`` reads).

    ``take`` sees each line first and may keep it (``server.stdio.fast``: ``execute`` served beside
    the SDK); ``at_end`` is awaited once the input ended, before the SDK hears of it. A line over
    ``max_line`` bytes is never held whole: ``on_oversized(head, tail, size)`` is awaited for it
    instead, and reading goes on with the next line; so is ``on_undecodable(line)`` for a line that
    is not UTF-8: every line handed to the SDK is UTF-8. When ``given`` is a deque, each line handed
    to the SDK is appended to it first (``server.stdio.serve.AnswerUnparseable`` takes them back one
    per message the SDK's reader delivers).
    """

    def __init__(
        self,
        reader: asyncio.StreamReader,
        on_undecodable: Callable[[bytes], Awaitable[None]],
        max_line: int = MAX_LINE_BYTES,
    ) -> None:
        self._reader = reader
        self._buffer = bytearray()
        #: Bytes at the start of ``_buffer`` already searched for a newline (none there).
        self._scanned = 0
        self._max_line = max_line
        self.take: Callable[[bytes], bool] | None = None
        self.at_end: Callable[[], Awaitable[None]] | None = None
        self.on_oversized: Callable[[bytes, bytes, int], Awaitable[None]] | None = None
        self.on_undecodable = on_undecodable
        self.given: deque[bytes] | None = None
        #: Called once the input ended (``stdio_files``: bounds the writes still to come).
        self.on_end: Callable[[], None] | None = None

    def __aiter__(self) -> PipeLines:
        return self

    async def __anext__(self) -> str:
        while True:
            line = await self._next_line()
            if line is None:
                if self.on_end is not None:
                    self.on_end()
                if self.at_end is not None:
                    at_end, self.at_end = self.at_end, None
                    await at_end()
                raise StopAsyncIteration
            if self.take is None or not self.take(line):
                try:
                    text = line.decode("utf-8")
                except UnicodeDecodeError:
                    await self.on_undecodable(line)
                    continue
                if self.given is not None:
                    self.given.append(line)
                return text

    async def _next_line(self) -> bytes | None:
        while True:
            newline = self._buffer.find(b"\n", self._scanned)
            if newline >= 0:
                line = bytes(self._buffer[: newline + 1])
                del self._buffer[: newline + 1]
                self._scanned = 0
                return line
            # Search only what arrives next: a long line costs one pass, not one per chunk.
            self._scanned = len(self._buffer)
            if self._scanned > self._max_line:
                await self._discard_line()
                continue
            chunk = await self._reader.read(_READ_CHUNK)
            if not chunk:
                if self._buffer:
                    rest = bytes(self._buffer)
                    self._buffer.clear()
                    self._scanned = 0
                    return rest
                return None
            self._buffer += chunk

    async def _discard_line(self) -> None:
        """Skip the rest of the overlong line begun in ``_buffer``, keeping its head and tail."""
        head, tail, size = bytes(self._buffer[:_KEPT]), bytes(self._buffer[-_KEPT:]), len(self._buffer)
        self._buffer.clear()
        self._scanned = 0
        while chunk := await self._reader.read(_READ_CHUNK):
            newline = chunk.find(b"\n")
            if newline >= 0:
                size += newline
                tail = (tail + chunk[:newline])[-_KEPT:]
                self._buffer += chunk[newline + 1 :]
                break
            size += len(chunk)
            tail = (tail + chunk)[-_KEPT:]
        logger.warning("discarded a %d-byte line of the host's, over the %d-byte limit", size, self._max_line)
        if self.on_oversized is not None:
            await self.on_oversized(head, tail, size)


class PipeWriter:
    """``await stdout.write(text)`` / ``await stdout.flush()`` on a non-blocking pipe.

    Once the host's input ended (``input_ended``), the writes still to come wait at most
    :data:`LAST_WRITES_SECONDS` in all for the host to read them. When the host stops listening --
    it closed its end of the pipe, or that time ran out -- the output is ``lost``: the rest is
    dropped and ``on_lost`` is called (``stdio_files`` ends the input: the session ends as if the
    host had left).
    """

    def __init__(self, writer: asyncio.StreamWriter, on_lost: Callable[[], None] | None = None) -> None:
        self._writer = writer
        self._transport = writer.transport
        #: Below this many buffered bytes the writer is never paused: ``drain`` returns at once.
        self._low_water = writer.transport.get_write_buffer_limits()[0]
        self._on_lost = on_lost
        self._deadline: float | None = None
        #: Scopes of the drains waiting for the host to read (given the deadline once input ends).
        self._waiting: set[anyio.CancelScope] = set()
        self.lost = False

    def input_ended(self) -> None:
        if self._deadline is None:
            self._deadline = anyio.current_time() + LAST_WRITES_SECONDS
            for scope in self._waiting:
                scope.deadline = self._deadline

    async def write(self, text: str) -> None:
        if not self.lost:
            self._writer.write(text.encode("utf-8"))

    def last_writes_left(self) -> float:
        """Seconds the last writes may still take: what is left of the deadline once input ended."""
        if self._deadline is None:
            return LAST_WRITES_SECONDS
        return max(self._deadline - anyio.current_time(), 0.0)

    def _flowing(self) -> bool:
        """Not paused and no deadline to give: ``drain`` would return at once."""
        return (
            self._deadline is None
            and not self._transport.is_closing()
            and self._transport.get_write_buffer_size() <= self._low_water
        )

    async def flush(self) -> None:
        if not self._flowing():
            await self._drain()

    async def send(self, data: bytes) -> None:
        """Write whole lines at once: they never interleave with the SDK's writes."""
        if self.lost:
            return
        self._writer.write(data)
        if not self._flowing():
            await self._drain()

    async def _drain(self) -> None:
        """``drain``, bounded once the input ended; a host that stopped listening loses the output."""
        if self.lost:
            return
        try:
            with anyio.CancelScope(deadline=self._deadline or float("inf")) as scope:
                self._waiting.add(scope)
                try:
                    await self._writer.drain()
                    return
                finally:
                    self._waiting.discard(scope)
            if scope.cancelled_caught:  # (an outer cancellation propagates instead)
                waited = f"{LAST_WRITES_SECONDS:g} s"
                self._lose(f"the host has not read the copilot's answers in the {waited} since its input ended")
        except ConnectionError:
            self._lose("the host closed its end of the copilot's output")

    def _lose(self, why: str) -> None:
        if self.lost:
            return
        self.lost = True
        logger.warning("%s: the rest of the copilot's output is dropped", why)
        if self._on_lost is not None:
            self._on_lost()


def _claim(fd: int, diversion: int) -> int:
    """Move the wire off ``fd`` onto a private descriptor (returned) and point ``fd`` at ``diversion``."""
    private = fcntl.fcntl(fd, fcntl.F_DUPFD_CLOEXEC, 3)
    os.dup2(diversion, fd)
    return private


@asynccontextmanager
async def stdio_files(
    on_undecodable: Callable[[PipeWriter, bytes], Awaitable[None]],
) -> AsyncIterator[tuple[PipeLines, PipeWriter] | None]:
    """Non-blocking ``(stdin, stdout)`` for ``stdio_server``, or ``None`` when they are not pipes/sockets.

    ``on_undecodable(stdout, line)`` is awaited for a line of the host's that is not UTF-8 (see
    :class:`PipeLines`), instead of handing it to the SDK.
    """
    if not (_is_pipe_or_socket(0) and _is_pipe_or_socket(1)):
        yield None
        return
    loop = asyncio.get_running_loop()
    devnull = os.open(os.devnull, os.O_RDONLY)
    private_in = private_out = -1
    transports: list[Any] = []
    try:
        private_in = _claim(0, devnull)
        private_out = _claim(1, 2)
        reader = asyncio.StreamReader(limit=_READ_CHUNK)
        read_transport, _ = await loop.connect_read_pipe(
            lambda: asyncio.StreamReaderProtocol(reader), os.fdopen(private_in, "rb", buffering=0)
        )
        transports.append(read_transport)
        in_fd, private_in = private_in, -1  # owned by the transport now
        write_transport, write_protocol = await loop.connect_write_pipe(
            asyncio.streams.FlowControlMixin, os.fdopen(private_out, "wb", buffering=0)
        )
        transports.append(write_transport)
        writer = asyncio.StreamWriter(write_transport, write_protocol, None, loop)
        out_fd, private_out = private_out, -1

        def end_input() -> None:
            # The host no longer hears us: read no more (closing the transport would free the
            # descriptor restored below) and let the session end as at the end of input.
            read_transport.pause_reading()
            reader.feed_eof()

        out = PipeWriter(writer, on_lost=end_input)
        lines = PipeLines(reader, partial(on_undecodable, out))
        lines.on_end = out.input_ended
        try:
            yield lines, out
        finally:
            if not out.lost:
                with suppress(Exception):
                    # What is left of the writer's own deadline: LAST_WRITES_SECONDS in all, not twice.
                    await asyncio.wait_for(writer.drain(), out.last_writes_left())
            # Give the wire back to fds 0 and 1 (blocking again), as the SDK does on exit.
            for private, fd in ((out_fd, 1), (in_fd, 0)):
                with suppress(OSError):
                    os.set_blocking(private, True)
                    os.dup2(private, fd)
    finally:
        for transport in transports:
            transport.close()
        for fd in (private_in, private_out, devnull):
            if fd >= 0:
                with suppress(OSError):
                    os.close(fd)
