"""An agent's log kept in a file of bounded size: its head and its tail.

An external agent's stdout and stderr, and the stderr of the copilot the built-in agent starts.
An agent that floods its output (a debug mode left on, a loop printing forever) must not fill
the run's disk, so the runner copies each stream from a pipe into its log and keeps at most
``max_bytes``: the first half as it streams (the file is readable while the agent runs), and,
once the cap is passed, the last half in memory, written after a one-line note of how much was
cut between them when the stream ends. A stream that stays under the cap is written unchanged
and costs no memory. :func:`piped_into` makes the pipe for a process the runner does not start
itself (the SDK's stdio client starts the built-in agent's copilot).

Why not the copilot's ``index.children.process.keep_log_bounded``: it rotates a child's stderr
log by copy-and-truncate, checked once a second, and keeps only the tail. Between two checks a
flood at disk speed still writes hundreds of megabytes, the head (where an agent says how it
started, or why it did not) is lost, and its note would land in the agent's stdout, which is the
task's answer when there is no answer file. Reading the pipe makes the cap exact and the result
the same whatever the timing.
"""

from __future__ import annotations

import logging
import os
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager, suppress
from pathlib import Path
from typing import TextIO

import anyio
import anyio.abc
from pydantic import BaseModel

logger = logging.getLogger(__name__)

#: Default cap of each agent log (``--max-agent-log-bytes``): big enough for any real agent's
#: chatter and for a stdout answer (the runner reads at most 1 MB of it), small next to a disk.
DEFAULT_MAX_AGENT_LOG_BYTES = 4 * 1024 * 1024
#: The smallest cap accepted: below it the head and tail say too little to be worth keeping.
MIN_AGENT_LOG_BYTES = 1024
#: Seconds :func:`piped_into` waits, once its own end is closed, for the other writers of its pipe
#: to close theirs: a process that outlived the one it was given to must not keep a task waiting.
PIPE_DRAIN_SECONDS = 5.0
_READ_CHUNK = 64 * 1024


class LogCut(BaseModel):
    """What a capped log left out (recorded in ``summary.json`` and the trajectory's ``session_end``)."""

    written: int  # bytes the agent wrote to the stream
    head: int  # bytes kept from its start
    tail: int  # bytes kept from its end
    cut: int  # bytes between them, not kept


def cut_note(stream: str, cut: LogCut, max_bytes: int, writer: str = "the agent") -> str:
    """The line that stands where the middle of a capped log was."""
    return (
        f"\n[... evaluation.run: {cut.cut:,} of the {cut.written:,} bytes {writer} wrote to {stream} were cut here; "
        f"this log keeps the first {cut.head:,} and the last {cut.tail:,} (--max-agent-log-bytes {max_bytes:,}) ...]\n"
    )


class BoundedLog:
    """One stream of ``writer`` (the agent, its copilot) written to ``path``, at most ``max_bytes``
    of it plus one note line.

    Feed it chunks with :meth:`write` and finish with :meth:`close`, which writes the kept tail.
    """

    def __init__(self, path: Path, stream: str, max_bytes: int, writer: str = "the agent") -> None:
        self.path = path
        self.stream = stream
        self.writer = writer
        self.max_bytes = max_bytes
        self.head_limit = max_bytes // 2
        self.tail_limit = max_bytes - self.head_limit
        self.written = 0
        self._tail = bytearray()
        self._cutting = False
        self._file = path.open("w+b")
        self.result: LogCut | None = None

    def write(self, data: bytes) -> None:
        if not self._cutting and self.written + len(data) <= self.max_bytes:
            self._file.write(data)
            self._file.flush()  # readable while the agent runs (a chunk is up to 64 KiB: few calls)
            self.written += len(data)
            return
        if not self._cutting:
            self._start_cutting(data)
        self.written += len(data)
        self._remember(data)

    def _start_cutting(self, data: bytes) -> None:
        """The cap is passed: the file keeps the head; what was written after it is the start of
        the tail, kept in memory from now on."""
        self._cutting = True
        if self.written > self.head_limit:
            self._file.seek(self.head_limit)
            self._tail = bytearray(self._file.read())  # at most tail_limit bytes: under the cap so far
            self._file.truncate(self.head_limit)
            self._file.seek(self.head_limit)
        else:
            self._file.write(data[: self.head_limit - self.written])
            self._file.flush()

    def _remember(self, data: bytes) -> None:
        self._tail += data
        if len(self._tail) > 2 * self.tail_limit:  # trimmed now and then, not per chunk: linear time
            del self._tail[: len(self._tail) - self.tail_limit]

    def close(self) -> LogCut | None:
        """Write the tail (after the note, when something was cut); what was cut, if anything."""
        if self._file.closed:
            return self.result
        try:
            if self._cutting:
                tail = bytes(self._tail[-self.tail_limit :])
                head = self._file.tell()
                self.result = LogCut(written=self.written, head=head, tail=len(tail), cut=self.written - head - len(tail))
                self._file.write(cut_note(self.stream, self.result, self.max_bytes, self.writer).encode())
                self._file.write(tail)
            self._file.close()
        except OSError as error:  # the run's disk (full?): the log stays as it is; the task goes on
            logger.warning("cannot finish %s: %s", self.path, error)
        finally:
            if not self._file.closed:
                with suppress(OSError):
                    self._file.close()
            self._tail = bytearray()
        return self.result


async def pump(stream: anyio.abc.ByteReceiveStream | None, log: BoundedLog) -> None:
    """Copy ``stream`` into ``log`` until its end (every writer closed it)."""
    if stream is None:
        return
    failed = False
    try:
        async for chunk in stream:
            if failed:
                continue  # still drained: an agent blocked on a full pipe would hang until --task-timeout
            try:
                log.write(chunk)
            except OSError as error:  # the run's disk (full?): the agent goes on, its log stops here
                failed = True
                logger.warning("cannot write %s: %s; the rest of %s's %s is dropped", log.path, error, log.writer, log.stream)
    except (anyio.ClosedResourceError, anyio.BrokenResourceError):
        pass


class _PipeReader(anyio.abc.ByteReceiveStream):
    """The reading end of a pipe (non-blocking), read from the event loop."""

    def __init__(self, fd: int) -> None:
        os.set_blocking(fd, False)
        self._fd = fd

    async def receive(self, max_bytes: int = _READ_CHUNK) -> bytes:
        while True:
            if self._fd < 0:
                raise anyio.ClosedResourceError
            try:
                chunk = os.read(self._fd, max_bytes)
            except BlockingIOError:
                await anyio.wait_readable(self._fd)
                continue
            if not chunk:
                raise anyio.EndOfStream
            return chunk

    def close(self) -> None:
        if self._fd >= 0:
            fd, self._fd = self._fd, -1
            os.close(fd)

    async def aclose(self) -> None:
        self.close()


@asynccontextmanager
async def piped_into(log: BoundedLog, drain_seconds: float = PIPE_DRAIN_SECONDS) -> AsyncIterator[TextIO]:
    """A pipe whose writing end is yielded, to give a process as its output (only its descriptor
    is used), and whose content goes into ``log`` as it streams.

    On exit the yielded end is closed, and the pipe is read to its end -- once every process given
    it closed it, or after ``drain_seconds`` for one that holds it still. ``log`` stays open: its
    owner closes it (which writes its kept tail).
    """
    read_fd, write_fd = os.pipe()  # (not inherited by other processes: only by the one given it)
    reader = _PipeReader(read_fd)
    try:
        writer = open(write_fd, "w", encoding="utf-8")  # noqa: SIM115 -- closed below, before the drain
    except OSError:
        os.close(write_fd)
        reader.close()
        raise
    try:
        async with anyio.create_task_group() as group:
            group.start_soon(pump, reader, log)
            try:
                yield writer
            finally:
                writer.close()  # the pipe ends once the processes given it are gone too
                group.cancel_scope.deadline = anyio.current_time() + drain_seconds
        if group.cancel_scope.cancelled_caught:
            logger.warning(
                "stopped reading %s's %s into %s after %gs: a process it started still holds it open",
                log.writer, log.stream, log.path, drain_seconds,
            )  # fmt: skip
    finally:
        writer.close()
        reader.close()
