"""Connecting to one child MCP server: start (stdio) or reach (HTTP/SSE) it, initialize, close cleanly.

``open_session`` is shared by the crawler (one short session per server) and the copilot's child
pool (one long-lived session per server). For stdio children it owns the whole process lifecycle:

- the child gets only ``ServerConfig.child_environment()`` (never the copilot's secrets) plus
  ``TMPDIR``/``TEMP``/``TMP`` pointing at ``<workdir>/tmp``, runs in ``config.cwd`` or ``workdir``,
  and writes stderr to its own log file (never to the copilot's stdout, which may be a protocol
  channel itself);
- it runs in a new session/process group, so closing kills the whole tree (``npx`` -> ``node``,
  ``uvx`` -> ``python``): stdin is closed, then SIGTERM to the group, then SIGKILL, every wait bounded;
- its stdout is read by our own newline-delimited JSON-RPC transport rather than
  ``mcp.client.stdio.stdio_client``: that one has no line-length cap (a child that floods stdout
  without newlines grows memory without bound), logs a traceback for every non-JSON line, and does
  not expose the process (pid, exit code) that error messages and the pool need.

Failures are :class:`ChildStartError` subclasses (all :class:`~index.errors.CrawlError`) whose
messages say what to do: a missing command names the command and how to install it; a child that
exits before ``initialize`` gives its exit code and the last lines of its stderr log.
"""

from __future__ import annotations

import logging
import os
import re
import shutil
import signal
import tempfile
from collections.abc import AsyncIterator, Callable
from contextlib import AsyncExitStack, asynccontextmanager, suppress
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import IO, Any

import anyio
import anyio.abc
import httpx2
import mcp.types as types
import psutil
from anyio.streams.memory import MemoryObjectReceiveStream, MemoryObjectSendStream
from mcp.client.session import ClientSession
from mcp.shared.exceptions import MCPError
from mcp.shared.message import SessionMessage

from index.errors import CrawlError
from index.servers import ServerConfig

logger = logging.getLogger(__name__)

#: Largest single JSON-RPC message accepted from a stdio child. Longer lines are dropped (a pending
#: request gets an error naming the limit) so a child flooding stdout cannot exhaust memory.
DEFAULT_MAX_MESSAGE_BYTES = 16 * 1024 * 1024
#: Seconds a child gets to exit by itself after its stdin closes, before SIGTERM to its group.
DEFAULT_SHUTDOWN_GRACE = 2.0
#: Seconds between SIGTERM and SIGKILL to the child's process group.
KILL_GRACE = 2.0
#: A child's stderr log is rotated to ``<name>.1`` when it is larger than this at start.
MAX_STDERR_LOG_BYTES = 5 * 1024 * 1024
#: Non-protocol stdout lines written to the stderr log per session; the rest are only counted.
_JUNK_LINES_LOGGED = 20
_READ_CHUNK = 64 * 1024
_EXIT_POLL_INTERVAL = 0.01
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


class ChildStartError(CrawlError):
    """A child server could not be started, reached or initialized."""

    def __init__(self, message: str, *, server: str = "", stderr_tail: list[str] | None = None) -> None:
        super().__init__(message)
        self.server = server
        self.stderr_tail = list(stderr_tail or [])


class CommandNotFoundError(ChildStartError):
    """The stdio command is not installed / not on PATH."""


class ChildExitedError(ChildStartError):
    """The child exited (or closed stdout) before answering ``initialize``."""

    def __init__(self, message: str, *, returncode: int | None = None, **kwargs: Any) -> None:
        super().__init__(message, **kwargs)
        self.returncode = returncode


class InitializeTimeoutError(ChildStartError):
    """The child did not answer ``initialize`` in time."""


class InitializeFailedError(ChildStartError):
    """The child answered ``initialize`` with an error or an unsupported protocol version."""


class RemoteConnectError(ChildStartError):
    """A remote (``url``) server could not be reached or answered with an HTTP error."""


def _format_tail(lines: list[str]) -> str:
    if not lines:
        return " It wrote nothing to stderr."
    return " Last stderr lines:\n  " + "\n  ".join(lines)


def describe_exit(returncode: int | None) -> str:
    """``exit code 3`` / ``killed by signal 9 (SIGKILL)`` / ``still running``."""
    if returncode is None:
        return "still running"
    if returncode < 0:
        try:
            name = signal.Signals(-returncode).name
        except ValueError:
            name = "unknown signal"
        return f"killed by signal {-returncode} ({name})"
    return f"exit code {returncode}"


# ---------------------------------------------------------------------------------------------
# Process groups


def _group_alive(pgid: int) -> bool:
    """Whether any member of process group ``pgid`` still runs."""
    try:
        os.killpg(pgid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        pass  # EPERM never proves the group is gone
    # killpg also succeeds while the only members left are zombies waiting for their parent
    # (often a container's PID 1) to reap them; those are dead for our purposes.
    for pid in psutil.pids():
        try:
            if os.getpgid(pid) == pgid and psutil.Process(pid).status() != psutil.STATUS_ZOMBIE:
                return True
        except (OSError, psutil.Error):
            continue
    return False


def _signal_group(pgid: int, signum: int) -> None:
    with suppress(ProcessLookupError, PermissionError):
        os.killpg(pgid, signum)


class ChildProcess:
    """A stdio child's process (the leader of its own process group) and its stderr log."""

    def __init__(self, process: anyio.abc.Process, log_path: Path, log_offset: int) -> None:
        self.process = process
        self.pid: int = process.pid
        self.log_path = log_path
        self.log_offset = log_offset
        self.junk_lines = 0
        self.oversized_lines = 0
        self._log: IO[bytes] | None = None

    @property
    def returncode(self) -> int | None:
        return self.process.returncode

    async def wait_exit(self, timeout: float) -> int | None:
        """The exit code once the leader exited, or ``None`` if it still runs after ``timeout``.

        Polls ``returncode`` rather than ``process.wait()``: on asyncio that also waits for the
        pipes' EOF, which a grandchild holding stdout would delay indefinitely.
        """
        with anyio.move_on_after(timeout):
            while self.process.returncode is None:
                await anyio.sleep(_EXIT_POLL_INTERVAL)
        return self.process.returncode

    def kill(self) -> None:
        """SIGKILL the whole process group now. Synchronous: safe from signal handlers and atexit."""
        if os.name == "posix":
            _signal_group(self.pid, signal.SIGKILL)
        else:  # pragma: no cover - the project runs children on POSIX
            with suppress(ProcessLookupError, OSError):
                self.process.kill()

    def group_alive(self) -> bool:
        if os.name != "posix":  # pragma: no cover
            return self.process.returncode is None
        return _group_alive(self.pid)

    async def terminate(self, grace: float) -> None:
        """SIGTERM the group, SIGKILL whatever is left after ``grace`` seconds; wait for the reap."""
        if os.name != "posix":  # pragma: no cover
            with suppress(ProcessLookupError, OSError):
                self.process.kill()
            await self.wait_exit(KILL_GRACE)
            return
        if not self.group_alive():
            return
        _signal_group(self.pid, signal.SIGTERM)
        with anyio.move_on_after(grace):
            while self.group_alive():
                _ = self.process.returncode  # lets the event loop reap a zombie leader
                await anyio.sleep(_EXIT_POLL_INTERVAL)
        if self.group_alive():
            logger.info("child pid %d ignored SIGTERM for %.1fs; sending SIGKILL to its group", self.pid, grace)
            _signal_group(self.pid, signal.SIGKILL)
            with anyio.move_on_after(KILL_GRACE):
                while self.group_alive():
                    _ = self.process.returncode
                    await anyio.sleep(_EXIT_POLL_INTERVAL)
        if await self.wait_exit(KILL_GRACE) is None or self.group_alive():
            logger.warning("process group %d is still alive after SIGKILL; abandoning it", self.pid)

    def note(self, text: str) -> None:
        """Append a line from the copilot (not the child) to the child's stderr log."""
        if self._log is None or self._log.closed:
            return
        stamp = datetime.now(UTC).isoformat(timespec="seconds")
        with suppress(OSError, ValueError):
            self._log.write(f"[copilot {stamp}] {text}\n".encode("utf-8", "replace"))
            self._log.flush()

    def stderr_tail(self, max_lines: int = 15, max_chars: int = 300) -> list[str]:
        """The last lines this child wrote to its stderr log during this session."""
        return read_log_tail(self.log_path, self.log_offset, max_lines=max_lines, max_chars=max_chars)


def read_log_tail(path: Path, offset: int = 0, *, max_lines: int = 15, max_chars: int = 300) -> list[str]:
    """Last non-empty lines of ``path`` after byte ``offset`` (each cut to ``max_chars``)."""
    try:
        with path.open("rb") as handle:
            size = handle.seek(0, os.SEEK_END)
            start = max(offset, size - 64 * 1024)
            handle.seek(start)
            data = handle.read()
    except OSError:
        return []
    lines = [line.strip() for line in data.decode("utf-8", "replace").splitlines()]
    lines = [line for line in lines if line]
    if start > offset and lines:
        lines = lines[1:]  # the first line was cut by the 64 KiB window
    return [line if len(line) <= max_chars else line[:max_chars] + "…" for line in lines[-max_lines:]]


# ---------------------------------------------------------------------------------------------
# stdio transport


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


class _StdoutReader:
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
class _Streams:
    read: MemoryObjectReceiveStream[SessionMessage | Exception]
    write: MemoryObjectSendStream[SessionMessage]
    closed: anyio.Event
    process: ChildProcess | None = None
    http_errors: list[str] = field(default_factory=list)
    #: Skip the graceful stdin-close wait on shutdown (the child is known to be broken or hung).
    abrupt_close: bool = False


@asynccontextmanager
async def _stdio_streams(
    config: ServerConfig,
    workdir: Path,
    stderr_path: Path,
    max_message_bytes: int,
    shutdown_grace: float,
    on_spawn: Callable[[ChildProcess], None] | None = None,
) -> AsyncIterator[_Streams]:
    tmpdir = workdir / "tmp"
    tmpdir.mkdir(parents=True, exist_ok=True)
    cwd = Path(config.cwd).expanduser() if config.cwd else workdir
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
        log.write(f"\n[copilot {stamp}] starting {config.command} {' '.join(config.args)}\n".encode())
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
        child._log = log
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
        reader = _StdoutReader(child, config.name, process.stdout, read_writer, max_message_bytes, mark_closed)
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

        streams = _Streams(read_stream, write_stream, closed, process=child)
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


# ---------------------------------------------------------------------------------------------
# remote transport


@asynccontextmanager
async def _remote_streams(config: ServerConfig) -> AsyncIterator[_Streams]:
    from mcp.client.sse import sse_client
    from mcp.client.streamable_http import streamable_http_client

    assert config.url is not None
    http_errors: list[str] = []

    async def record_status(response: httpx2.Response) -> None:
        if response.status_code >= 400:
            http_errors.append(f"HTTP {response.status_code} {response.reason_phrase} from {response.request.url}")

    def client_factory(
        headers: dict[str, str] | None = None, timeout: httpx2.Timeout | None = None, auth: httpx2.Auth | None = None
    ) -> httpx2.AsyncClient:
        return httpx2.AsyncClient(
            headers={**config.headers, **(headers or {})},
            timeout=timeout or httpx2.Timeout(30.0, read=300.0),
            auth=auth,
            event_hooks={"response": [record_status]},
        )

    async with AsyncExitStack() as stack:
        if config.transport == "sse":
            read, write = await stack.enter_async_context(
                sse_client(config.url, headers=dict(config.headers), httpx_client_factory=client_factory)
            )
        else:
            client = await stack.enter_async_context(client_factory())
            read, write = await stack.enter_async_context(streamable_http_client(config.url, http_client=client))
        forward_send, forward_receive = anyio.create_memory_object_stream[SessionMessage | Exception](0)
        closed = anyio.Event()

        async def forward() -> None:
            # A separate hop so the pool learns when the remote connection ends.
            try:
                async with forward_send:
                    async for item in read:
                        await forward_send.send(item)
            except (anyio.ClosedResourceError, anyio.BrokenResourceError):
                pass
            finally:
                closed.set()

        async with anyio.create_task_group() as tg:
            tg.start_soon(forward)
            try:
                yield _Streams(forward_receive, write, closed, http_errors=http_errors)
            finally:
                forward_receive.close()
                tg.cancel_scope.cancel()


# ---------------------------------------------------------------------------------------------
# sessions


@dataclass
class ChildConnection:
    """An initialized MCP client session to one child server."""

    server: str
    session: ClientSession
    initialize_result: types.InitializeResult
    #: Set when the transport ended: the child exited or closed stdout, or the remote connection dropped.
    closed: anyio.Event
    process: ChildProcess | None = None
    url: str | None = None

    @property
    def pid(self) -> int | None:
        return self.process.pid if self.process is not None else None

    @property
    def returncode(self) -> int | None:
        return self.process.returncode if self.process is not None else None

    @property
    def stderr_path(self) -> Path | None:
        return self.process.log_path if self.process is not None else None

    def stderr_tail(self, max_lines: int = 15) -> list[str]:
        return self.process.stderr_tail(max_lines) if self.process is not None else []

    async def wait_exit(self, timeout: float) -> int | None:
        """The child's exit code once it exited (``None`` for remote servers or if still running)."""
        if self.process is None:
            return None
        return await self.process.wait_exit(timeout)

    def kill(self) -> None:
        """Kill the child's whole process group now (e.g. a wedged child); closing then finishes fast."""
        if self.process is not None:
            self.process.kill()


def _client_info() -> types.Implementation:
    from importlib.metadata import PackageNotFoundError, version

    try:
        copilot_version = version("mcp-copilot")
    except PackageNotFoundError:  # pragma: no cover - running from a bare checkout
        copilot_version = "0"
    return types.Implementation(name="mcp-copilot", version=copilot_version)


async def _initialize(
    config: ServerConfig, session: ClientSession, streams: _Streams, init_timeout: float
) -> types.InitializeResult:
    name = config.name
    tail = streams.process.stderr_tail if streams.process is not None else (lambda: [])
    failure: str | None = None
    streams.abrupt_close = True  # until initialize succeeds, closing means giving up on the child
    with anyio.move_on_after(init_timeout) as scope:
        try:
            result = await session.initialize()
            streams.abrupt_close = False
            return result
        except MCPError as error:
            if error.code != types.CONNECTION_CLOSED:
                failure = f"answered initialize with error {error.code}: {error.message}"
        except RuntimeError as error:  # unsupported protocol version
            failure = str(error)
    command_line = " ".join([config.command or "", *config.args])
    if scope.cancelled_caught:
        where = command_line if config.command else config.url
        raise InitializeTimeoutError(
            f"server '{name}' ({where}) did not answer initialize within {init_timeout:g}s; it may be "
            f"waiting for input, downloading, or hung.{_format_tail(tail())}",
            server=name,
            stderr_tail=tail(),
        )
    if streams.http_errors:
        raise RemoteConnectError(
            f"server '{name}' at {config.url}: {streams.http_errors[-1]}; check the URL and the "
            "'headers' (e.g. Authorization) in the server list.",
            server=name,
        )
    if failure is not None:
        raise InitializeFailedError(f"server '{name}' {failure}.{_format_tail(tail())}", server=name, stderr_tail=tail())
    if streams.process is None:
        raise RemoteConnectError(f"server '{name}' at {config.url} closed the connection during initialize.", server=name)
    returncode = await streams.process.wait_exit(2.0)
    what = (
        f"exited with {describe_exit(returncode)}"
        if returncode is not None
        else "closed its stdout without exiting"
    )
    raise ChildExitedError(
        f"server '{name}' ({command_line}) {what} before answering "
        f"initialize.{_format_tail(tail())}\nFull log: {streams.process.log_path}",
        server=name,
        returncode=returncode,
        stderr_tail=tail(),
    )


def _leaf_exceptions(error: BaseException) -> list[BaseException]:
    if isinstance(error, BaseExceptionGroup):
        leaves: list[BaseException] = []
        for inner in error.exceptions:
            leaves.extend(_leaf_exceptions(inner))
        return leaves
    return [error]


def _unwrap(group: BaseExceptionGroup[Any], config: ServerConfig) -> BaseException:
    """The one meaningful error inside the task groups' wrapping, or the group itself."""
    cancelled = anyio.get_cancelled_exc_class()
    leaves = [leaf for leaf in _leaf_exceptions(group) if not isinstance(leaf, cancelled)]
    if len(leaves) == 1:
        leaf = leaves[0]
        if isinstance(leaf, httpx2.HTTPError | OSError) and config.url:
            return RemoteConnectError(
                f"server '{config.name}': cannot reach {config.url} ({type(leaf).__name__}: {leaf}); "
                "check the URL and that the server is running.",
                server=config.name,
            )
        return leaf
    return group


@asynccontextmanager
async def open_session(
    config: ServerConfig,
    *,
    workdir: Path | None = None,
    stderr_path: Path | None = None,
    init_timeout: float = 60.0,
    max_message_bytes: int = DEFAULT_MAX_MESSAGE_BYTES,
    shutdown_grace: float = DEFAULT_SHUTDOWN_GRACE,
    on_spawn: Callable[[ChildProcess], None] | None = None,
) -> AsyncIterator[ChildConnection]:
    """Start or reach ``config``'s server, initialize, yield the connection; close it on exit.

    ``workdir`` is the child's working directory (unless ``config.cwd`` is set) and holds its temp
    dir ``<workdir>/tmp``; without one a temporary directory is used and removed afterwards.
    ``stderr_path`` receives the child's stderr (appended); without one a temporary file is used.
    ``on_spawn`` is called with the :class:`ChildProcess` right after a stdio child is spawned, before
    ``initialize`` (so an owner can kill it from a signal handler even while it starts).
    Raises :class:`ChildStartError` subclasses; exceptions from the body propagate unchanged.
    """
    if not config.is_enabled:
        raise ChildStartError(
            f"server '{config.name}' is disabled" + (f": {config.reason}" if config.reason else "") + ".",
            server=config.name,
        )
    try:
        async with AsyncExitStack() as stack:
            streams: _Streams
            if config.transport == "stdio":
                if workdir is None:
                    workdir = Path(tempfile.mkdtemp(prefix="mcp-child-"))
                    stack.callback(shutil.rmtree, workdir, True)
                else:
                    workdir.mkdir(parents=True, exist_ok=True)
                if stderr_path is None:
                    handle, name = tempfile.mkstemp(prefix=f"mcp-child-{os.getpid()}-", suffix=".log")
                    os.close(handle)
                    stderr_path = Path(name)
                    stack.callback(stderr_path.unlink, True)
                streams = await stack.enter_async_context(
                    _stdio_streams(config, workdir, stderr_path, max_message_bytes, shutdown_grace, on_spawn)
                )
            else:
                streams = await stack.enter_async_context(_remote_streams(config))
            session = await stack.enter_async_context(
                ClientSession(streams.read, streams.write, client_info=_client_info())
            )
            result = await _initialize(config, session, streams, init_timeout)
            yield ChildConnection(
                server=config.name,
                session=session,
                initialize_result=result,
                closed=streams.closed,
                process=streams.process,
                url=config.url,
            )
    except BaseExceptionGroup as group:
        error = _unwrap(group, config)
        if error is group:
            raise
        raise error from None
