"""Serving MCP over stdio without a thread hop per message.

The SDK's stdio transport reads stdin and writes stdout through ``anyio.wrap_file``: every line
read, every write and every flush is a round trip to a worker thread. For the copilot, which sits
between a host and a child, those hops were most of the latency it added to a call (a call with
three progress notifications made nine of them). When stdin and stdout are pipes or sockets --
which is how hosts start MCP servers -- :func:`stdio_files` serves them from the event loop with
non-blocking I/O instead, as drop-in ``stdin``/``stdout`` objects for ``mcp.server.stdio.stdio_server``
(``server.stdio.serve_stdio`` uses them).

Like the SDK, it keeps the protocol channel private while serving: the wire moves to descriptors
above 2, fd 0 reads from the null device and fd 1 writes to stderr, so a stray ``print`` of a
library (or a child that inherits fd 1) cannot corrupt the stream; both are restored on exit. When
stdin or stdout is a terminal or a regular file it yields ``None`` and the SDK's own transport is used.
"""

from __future__ import annotations

import asyncio
import fcntl
import logging
import os
import stat
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager, suppress
from typing import Any

logger = logging.getLogger(__name__)

_READ_CHUNK = 256 * 1024


def _is_pipe_or_socket(fd: int) -> bool:
    try:
        mode = os.fstat(fd).st_mode
    except OSError:
        return False
    return stat.S_ISFIFO(mode) or stat.S_ISSOCK(mode)


class PipeLines:
    """``async for line in stdin``: text lines of a non-blocking pipe (what ``stdio_server`` reads).

    ``take`` sees each line first and may keep it (``server.stdio_fast``: ``execute`` served beside
    the SDK); ``at_end`` is awaited once the input ended, before the SDK hears of it.
    """

    def __init__(self, reader: asyncio.StreamReader) -> None:
        self._reader = reader
        self._buffer = bytearray()
        self.take: Callable[[bytes], bool] | None = None
        self.at_end: Callable[[], Awaitable[None]] | None = None

    def __aiter__(self) -> PipeLines:
        return self

    async def __anext__(self) -> str:
        while True:
            line = await self._next_line()
            if line is None:
                if self.at_end is not None:
                    at_end, self.at_end = self.at_end, None
                    await at_end()
                raise StopAsyncIteration
            if self.take is None or not self.take(line):
                return line.decode("utf-8", "replace")

    async def _next_line(self) -> bytes | None:
        while True:
            newline = self._buffer.find(b"\n")
            if newline >= 0:
                line = bytes(self._buffer[: newline + 1])
                del self._buffer[: newline + 1]
                return line
            chunk = await self._reader.read(_READ_CHUNK)
            if not chunk:
                if self._buffer:
                    rest = bytes(self._buffer)
                    self._buffer.clear()
                    return rest
                return None
            self._buffer += chunk


class PipeWriter:
    """``await stdout.write(text)`` / ``await stdout.flush()`` on a non-blocking pipe."""

    def __init__(self, writer: asyncio.StreamWriter) -> None:
        self._writer = writer

    async def write(self, text: str) -> None:
        self._writer.write(text.encode("utf-8"))

    async def flush(self) -> None:
        await self._writer.drain()

    async def send(self, data: bytes) -> None:
        """Write whole lines at once: they never interleave with the SDK's writes."""
        self._writer.write(data)
        await self._writer.drain()


def _claim(fd: int, diversion: int) -> int:
    """Move the wire off ``fd`` onto a private descriptor (returned) and point ``fd`` at ``diversion``."""
    private = fcntl.fcntl(fd, fcntl.F_DUPFD_CLOEXEC, 3)
    os.dup2(diversion, fd)
    return private


@asynccontextmanager
async def stdio_files() -> AsyncIterator[tuple[PipeLines, PipeWriter] | None]:
    """Non-blocking ``(stdin, stdout)`` for ``stdio_server``, or ``None`` when they are not pipes/sockets."""
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
        try:
            yield PipeLines(reader), PipeWriter(writer)
        finally:
            with suppress(Exception):
                await asyncio.wait_for(writer.drain(), 5)
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
