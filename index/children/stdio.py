"""The stdio transport to a child: spawn it in its own process group, speak newline-delimited JSON-RPC.

Written here rather than taken from ``mcp.client.stdio.stdio_client``, which has no line-length cap
(a child flooding stdout without newlines grows memory without bound), logs a traceback for every
non-JSON line, and exposes neither the process (pid, exit code) nor a way to kill it from a signal
handler. The child gets only ``ServerConfig.child_environment()`` plus ``TMPDIR``/``TEMP``/``TMP``
set to ``<workdir>/tmp``; its stderr is appended to its own log file.
"""

from __future__ import annotations

import logging
import os
import re
import shutil
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager, suppress
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import IO

import anyio
import anyio.abc
import mcp.types as types
from anyio.streams.memory import MemoryObjectReceiveStream, MemoryObjectSendStream
from mcp.shared.message import SessionMessage

from index.children.process import KILL_GRACE, ChildProcess, describe_exit
from index.children.errors import ChildStartError, CommandNotFoundError
from index.servers import ServerConfig

logger = logging.getLogger(__name__)

#: Largest single JSON-RPC message accepted from a stdio child. Longer lines are dropped (a pending
#: request gets an error naming the limit) so a child flooding stdout cannot exhaust memory.
DEFAULT_MAX_MESSAGE_BYTES = 16 * 1024 * 1024
#: Seconds a child gets to exit by itself after its stdin closes, before SIGTERM to its group.
DEFAULT_SHUTDOWN_GRACE = 2.0
#: A child's stderr log is rotated to ``<name>.1`` when it is larger than this at start.
MAX_STDERR_LOG_BYTES = 5 * 1024 * 1024
#: Non-protocol stdout lines written to the stderr log per session; the rest are only counted.
_JUNK_LINES_LOGGED = 20
_READ_CHUNK = 64 * 1024
_SNIPPET = 4096

_INSTALL_HINTS = {
    "npx": "install Node.js (https://nodejs.org), which provides npx",
    "node": "install Node.js (https://nodejs.org)",
    "npm": "install Node.js (https://nodejs.org), which provides npm",
    "uvx": "install uv (`pip install uv` or https://docs.astral.sh/uv/), which provides uvx",
    "uv": "install uv (`pip install uv` or https://docs.astral.sh/uv/)",
    "docker": "install Docker (https://docs.docker.com/get-docker/)",
    "deno": "install Deno (https://deno.land)",
    "bun": "install Bun (https://bun.sh)",
}
# Where a response's id sits: right after "jsonrpc" (Python SDKs) or last (JSON.stringify in the TS SDK).
_ID_AT_HEAD = re.compile(rb'^\{\s*"jsonrpc"\s*:\s*"2\.0"\s*,\s*"id"\s*:\s*(-?\d+|"(?:[^"\\]|\\.)*")')
_ID_AT_TAIL = re.compile(rb'"id"\s*:\s*(-?\d+|"(?:[^"\\]|\\.)*")\s*\}\s*$')


def _resolve_command(config: ServerConfig, env: dict[str, str], cwd: Path) -> str:
    command = config.command or ""
    if os.sep in command or (os.altsep and os.altsep in command):
        candidate = Path(command) if Path(command).is_absolute() else cwd / command
        if candidate.is_file() and os.access(candidate, os.X_OK):
            return str(candidate)
        found = None
    else:
        found = shutil.which(command, path=env.get("PATH", os.defpath))
    if found is None:
        base = Path(command).name
        hint = _INSTALL_HINTS.get(base, f"install the program that provides '{base}'")
        raise CommandNotFoundError(
            f"server '{config.name}': command '{command}' not found"
            f"{'' if os.sep in command else ' on PATH'}. To use this server, {hint}, "
            "or fix its 'command' in the server list.",
            server=config.name,
        )
    return found


def _open_log(path: Path) -> tuple[IO[bytes], int]:
    path.parent.mkdir(parents=True, exist_ok=True)
    with suppress(OSError):
        if path.stat().st_size > MAX_STDERR_LOG_BYTES:
            path.replace(path.with_name(path.name + ".1"))
    handle = path.open("ab")
    return handle, handle.tell()


class StdoutReader:
    """Splits the child's stdout into lines, delivers JSON-RPC messages, drops everything else.

    Memory stays bounded by ``max_bytes``: a longer line is discarded while it streams in, keeping
    only its head and tail to answer the request it belonged to with an error.
    """

    def __init__(
        self,
        child: ChildProcess,
        server: str,
        stdout: anyio.abc.ByteReceiveStream,
        deliver: MemoryObjectSendStream[SessionMessage | Exception],
        max_bytes: int,
        on_close: Callable[[], None],
    ) -> None:
        self.child = child
        self.server = server
        self.stdout = stdout
        self.deliver = deliver
        self.max_bytes = max_bytes
        self.on_close = on_close
        self.delivering = True

    async def run(self) -> None:
        buffer = bytearray()
        discarding = False
        head = b""
        tail = b""
        dropped = 0
        try:
            while True:
                try:
                    chunk = await self.stdout.receive(_READ_CHUNK)
                except (anyio.EndOfStream, anyio.ClosedResourceError, anyio.BrokenResourceError, OSError):
                    break
                start = 0
                while True:
                    newline = chunk.find(b"\n", start)
                    piece = chunk[start:] if newline < 0 else chunk[start:newline]
                    if discarding:
                        dropped += len(piece)
                        tail = (tail + piece)[-_SNIPPET:]
                    else:
                        buffer += piece
                        if len(buffer) > self.max_bytes:
                            discarding = True
                            dropped = len(buffer)
                            head, tail = bytes(buffer[:_SNIPPET]), bytes(buffer[-_SNIPPET:])
                            buffer = bytearray()
                    if newline < 0:
                        break
                    start = newline + 1
                    if discarding:
                        discarding = False
                        await self._oversized(head, tail, dropped)
                    else:
                        line = bytes(buffer)
                        buffer.clear()
                        await self._line(line)
        finally:
            self.on_close()

    async def _send(self, item: SessionMessage) -> None:
        if not self.delivering:
            return
        try:
            await self.deliver.send(item)
        except (anyio.ClosedResourceError, anyio.BrokenResourceError):
            # The session is gone; keep draining so a child flushing output can still exit.
            self.delivering = False

    async def _line(self, line: bytes) -> None:
        line = line.strip()
        if not line:
            return
        if line.startswith(b"{"):
            try:
                message = types.jsonrpc_message_adapter.validate_json(line, by_name=False)
            except ValueError:
                pass
            else:
                await self._send(SessionMessage(message))
                return
        self.child.junk_lines += 1
        if self.child.junk_lines <= _JUNK_LINES_LOGGED:
            snippet = line[:200].decode("utf-8", "replace")
            logger.debug("%s: ignored non-protocol stdout line: %r", self.server, snippet)
            self.child.note(f"ignored a non-protocol line on stdout ({len(line)} bytes): {snippet}")
            if self.child.junk_lines == _JUNK_LINES_LOGGED:
                self.child.note("further non-protocol stdout lines are dropped without logging")

    async def _oversized(self, head: bytes, tail: bytes, size: int) -> None:
        self.child.oversized_lines += 1
        self.child.note(f"dropped a {size}-byte stdout line (limit {self.max_bytes} bytes)")
        logger.warning("%s: dropped a %d-byte stdout line (limit %d bytes)", self.server, size, self.max_bytes)
        # Answer the request it was the response to, so the caller hears why instead of timing out.
        match = _ID_AT_HEAD.match(head) or _ID_AT_TAIL.search(tail)
        if match is None or b'"method"' in head[:200]:
            return
        raw_id = match.group(1)
        request_id: int | str = int(raw_id) if not raw_id.startswith(b'"') else raw_id[1:-1].decode("utf-8", "replace")
        error = types.JSONRPCError(
            jsonrpc="2.0",
            id=request_id,
            error=types.ErrorData(
                code=types.INTERNAL_ERROR,
                message=(
                    f"the server's response was {size} bytes, over the {self.max_bytes}-byte message limit "
                    "(COPILOT_MAX_MESSAGE_BYTES); ask the tool for less data"
                ),
            ),
        )
        await self._send(SessionMessage(error))


@dataclass
class Streams:
    read: MemoryObjectReceiveStream[SessionMessage | Exception]
    write: MemoryObjectSendStream[SessionMessage]
    closed: anyio.Event
    process: ChildProcess | None = None
    http_errors: list[str] = field(default_factory=list)
    #: Skip the graceful stdin-close wait on shutdown (the child is known to be broken or hung).
    abrupt_close: bool = False


@asynccontextmanager
async def stdio_streams(
    config: ServerConfig,
    workdir: Path,
    stderr_path: Path,
    max_message_bytes: int,
    shutdown_grace: float,
    on_spawn: Callable[[ChildProcess], None] | None = None,
    root: Path | None = None,
) -> AsyncIterator[Streams]:
    tmpdir = workdir / "tmp"
    tmpdir.mkdir(parents=True, exist_ok=True)
    config = config.for_workdir(workdir, root=root)
    if config.cwd:
        cwd = Path(config.cwd).expanduser()
    elif config.works_in == "roots" and root is not None:
        cwd = root
    else:
        cwd = workdir
    if not cwd.is_dir():
        raise ChildStartError(
            f"server '{config.name}': working directory '{cwd}' does not exist; create it or fix 'cwd'.",
            server=config.name,
        )
    env = config.child_environment()
    for name in ("TMPDIR", "TEMP", "TMP"):
        env[name] = str(tmpdir)
    executable = _resolve_command(config, env, cwd)

    log, log_offset = _open_log(stderr_path)
    try:
        stamp = datetime.now(UTC).isoformat(timespec="seconds")
        log.write(f"\n[copilot {stamp}] starting {config.display_command}\n".encode())
        log.flush()
        log_offset = log.tell()
        try:
            # The spawn and the task group below have no await between them, so a cancellation
            # cannot land after the spawn and leak the process.
            process = await anyio.open_process(
                [executable, *config.args], env=env, cwd=cwd, stderr=log, start_new_session=True
            )
        except OSError as error:
            raise ChildStartError(
                f"server '{config.name}': cannot start '{config.command}': {error.strerror or error}.",
                server=config.name,
            ) from None
        child = ChildProcess(process, stderr_path, log_offset)
        child.log = log
        logger.debug("%s: started pid %d (%s)", config.name, child.pid, executable)
        if on_spawn is not None:
            on_spawn(child)

        read_writer, read_stream = anyio.create_memory_object_stream[SessionMessage | Exception](0)
        write_stream, write_reader = anyio.create_memory_object_stream[SessionMessage](0)
        closed = anyio.Event()

        def mark_closed() -> None:
            read_writer.close()
            closed.set()

        assert process.stdout is not None and process.stdin is not None
        reader = StdoutReader(child, config.name, process.stdout, read_writer, max_message_bytes, mark_closed)
        writer_done = anyio.Event()

        async def write_stdin() -> None:
            assert process.stdin is not None
            try:
                async with write_reader:
                    async for message in write_reader:
                        data = message.message.model_dump_json(by_alias=True, exclude_unset=True)
                        await process.stdin.send(data.encode() + b"\n")
            except (anyio.ClosedResourceError, anyio.BrokenResourceError, OSError):
                mark_closed()  # the child stopped reading: fail pending requests instead of hanging
            finally:
                writer_done.set()

        async def shutdown() -> None:
            read_stream.close()
            write_stream.close()
            with anyio.move_on_after(0.5):
                await writer_done.wait()
            with suppress(OSError, anyio.BrokenResourceError, anyio.ClosedResourceError):
                await process.stdin.aclose()  # type: ignore[union-attr]
            if child.returncode is None and not streams.abrupt_close:
                await child.wait_exit(shutdown_grace)
            # Even after a clean exit of the leader, descendants may remain in its group.
            await child.terminate(KILL_GRACE)
            with suppress(OSError, anyio.BrokenResourceError, anyio.ClosedResourceError):
                await process.stdout.aclose()  # type: ignore[union-attr]
            transport = getattr(getattr(process, "_process", None), "_transport", None)
            if transport is not None:
                with suppress(Exception):
                    transport.close()
            if child.junk_lines > _JUNK_LINES_LOGGED:
                child.note(f"{child.junk_lines} non-protocol stdout lines were dropped in this session")
            child.note(f"session closed ({describe_exit(child.returncode)})")

        streams = Streams(read_stream, write_stream, closed, process=child)
        async with anyio.create_task_group() as tg:
            tg.start_soon(reader.run)
            tg.start_soon(write_stdin)
            try:
                yield streams
            finally:
                # Shielded and bounded: a cancelled caller must neither leak the process group
                # nor hang on it.
                with anyio.CancelScope(shield=True):
                    await shutdown()
                tg.cancel_scope.cancel()
    finally:
        log.close()
