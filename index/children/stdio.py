"""The stdio transport to a child: spawn it in its own process group, speak newline-delimited JSON-RPC.

Written here rather than taken from ``mcp.client.stdio.stdio_client``, which has no line-length cap
(a child flooding stdout without newlines grows memory without bound), logs a traceback for every
non-JSON line, lets a malformed reply cost the call's whole timeout, and exposes neither the
process (pid, exit code) nor a way to kill it from a signal handler. Reading stdout is
``index.children.wire``'s job. The child gets only ``ServerConfig.child_environment()`` plus
``TMPDIR``/``TEMP``/``TMP`` set to ``<workdir>/tmp`` and its ``MCP_COPILOT_CHILD`` tag; it starts
through ``index.children.containment.guard`` (it dies with the copilot); its stderr is appended to its own log.
"""

from __future__ import annotations

import asyncio
import errno
import logging
import os
import resource
import shutil
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager, suppress
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import IO

import anyio
import anyio.abc
from anyio.streams.memory import MemoryObjectReceiveStream, MemoryObjectSendStream
from mcp.shared.message import SessionMessage

from index.children.direct import DirectRequests
from index.children.errors import ChildStartError, CommandNotFoundError
from index.children.containment.guard import TAG_VARIABLE, child_guard
from index.children.stream_limits import MAX_STDERR_LOG_BYTES
from index.children.process import HURRIED_GRACE, HURRIED_KILL_GRACE, ChildProcess, describe_exit
from index.children.wire import ChildRequests, PendingRequests, StdoutReader, note_dropped
from index.catalog.servers import ServerConfig
from index.json_text import arguments_for_os, environment_for_os

logger = logging.getLogger(__name__)

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
        hint = _INSTALL_HINTS.get(base, f"install the program that provides '{config.redact(base)}'")
        raise CommandNotFoundError(
            f"server '{config.name}': command '{config.redact(command)}' not found"
            f"{'' if os.sep in command else ' on PATH'}. To use this server, {hint}, "
            "or fix its 'command' in the server list.",
            server=config.name,
        )
    return found


def _open_log(path: Path) -> tuple[IO[bytes], int]:
    # Private whatever the umask: a child's stderr may print the keys its entry hands it.
    path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
    with suppress(OSError):
        if path.stat().st_size > MAX_STDERR_LOG_BYTES:
            path.replace(path.with_name(path.name + ".1"))
    handle = os.fdopen(os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_CLOEXEC, 0o600), "ab")
    return handle, handle.tell()


def os_problem(error: OSError) -> str:
    """What ``error`` means for starting a child; out of file descriptors is the copilot's own
    limit, not the child's fault ("cannot start 'python': Too many open files" blamed the child)."""
    if error.errno in (errno.EMFILE, errno.ENFILE):
        which = "the copilot's" if error.errno == errno.EMFILE else "the system's"
        soft, _hard = resource.getrlimit(resource.RLIMIT_NOFILE)
        return (
            f"{error.strerror}: {which} limit of open files is reached (ulimit -n: {soft}; each running child "
            "holds a few); raise it, or lower COPILOT_MAX_LIVE_CHILDREN"
        )
    return str(error.strerror or error)


@dataclass
class Streams:
    read: MemoryObjectReceiveStream[SessionMessage | Exception]
    write: MemoryObjectSendStream[SessionMessage]
    closed: anyio.Event
    process: ChildProcess | None = None
    http_errors: list[str] = field(default_factory=list)
    #: Skip the graceful stdin-close wait on shutdown (the child is known to be broken or hung).
    abrupt_close: bool = False
    #: Requests written beside the session (stdio children only; ``index.children.direct``).
    direct: DirectRequests | None = None


def _asyncio_writer(stream: object) -> asyncio.StreamWriter | None:
    """The asyncio writer under anyio's stdin wrapper, or ``None`` (another anyio backend or version).

    Writing to it directly skips the wrapper's closing checkpoint: a whole event-loop turn on every
    request the pool sends a child, the copilot's hot path. A closed pipe still raises (``drain``).
    """
    writer = getattr(stream, "_stream", None)
    return writer if isinstance(writer, asyncio.StreamWriter) else None


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
    try:
        tmpdir.mkdir(mode=0o700, parents=True, exist_ok=True)  # no other user may plant files in it
    except OSError as error:
        raise ChildStartError(
            f"server '{config.name}': cannot make its temporary directory {tmpdir}: {os_problem(error)}.",
            server=config.name,
        ) from None
    config = config.for_workdir(workdir, root=root)
    if config.cwd:
        cwd = Path(config.cwd).expanduser()
    elif config.works_in == "roots" and root is not None:
        cwd = root
    else:
        cwd = workdir
    # Absolute before the command is looked for in it and the child is started in it: a relative
    # 'cwd' means the copilot's working directory's subdirectory, and a relative 'command' is found
    # in 'cwd' -- run from inside a relative cwd, 'proj/bin/serve' would be looked for in proj/proj/.
    cwd = Path(os.path.abspath(cwd))
    if not cwd.is_dir():
        raise ChildStartError(
            f"server '{config.name}': working directory '{config.redact(str(cwd))}' does not exist; create it or fix 'cwd'.",
            server=config.name,
        )
    env = config.child_environment()
    for name in ("TMPDIR", "TEMP", "TMP"):
        env[name] = str(tmpdir)
    executable = _resolve_command(config, env, cwd)

    try:
        log, log_offset = _open_log(stderr_path)
    except OSError as error:
        raise ChildStartError(
            f"server '{config.name}': cannot open its stderr log {stderr_path}: {os_problem(error)}.",
            server=config.name,
        ) from None
    try:
        stamp = datetime.now(UTC).isoformat(timespec="seconds")
        log.write(f"\n[copilot {stamp}] starting {config.display_command}\n".encode())
        log.flush()
        log_offset = log.tell()
        guard = child_guard()
        guard.protect_owner()  # before the child can look at /proc/<its parent>/environ
        tag = env[TAG_VARIABLE] = guard.new_tag()
        try:
            # The spawn and the task group below have no await between them, so a cancellation
            # cannot land after the spawn and leak the process.
            process = await anyio.open_process(
                arguments_for_os(guard.launch_argv(executable, config.args, isolate=config.isolated)),
                env=environment_for_os(env), cwd=cwd, stderr=log, start_new_session=True,
            )
        except OSError as error:
            raise ChildStartError(
                f"server '{config.name}': cannot start '{config.redact(config.command or '')}': "
                f"{config.redact(os_problem(error))}.",
                server=config.name,
            ) from None
        child = ChildProcess(process, stderr_path, log_offset, tag=tag)
        child.log = log
        child.shutdown_grace = shutdown_grace
        guard.register(child.pid, tag)
        logger.debug("%s: started %s (pid %d: its guardian on Linux)", config.name, config.redact(executable), child.pid)
        if on_spawn is not None:
            on_spawn(child)

        asked = ChildRequests()  # the child's own requests, until their answers are written
        read_writer, read_stream = anyio.create_memory_object_stream[SessionMessage | Exception](0)
        write_stream, write_reader = anyio.create_memory_object_stream[SessionMessage](0)
        closed = anyio.Event()

        def mark_closed() -> None:
            asked.close()  # a reader waiting for answers that can no longer be written reads on
            direct.close()
            read_writer.close()
            closed.set()

        writer = _asyncio_writer(process.stdin)

        async def write_line(data: bytes) -> None:
            assert process.stdin is not None
            try:
                if writer is not None:
                    writer.write(data)
                    await writer.drain()  # waits only while the pipe is full
                else:
                    await process.stdin.send(data)
            except (anyio.ClosedResourceError, anyio.BrokenResourceError, OSError):
                mark_closed()  # the child stopped reading: pending requests fail instead of hanging
                raise

        assert process.stdout is not None and process.stdin is not None
        requests = PendingRequests()
        direct = DirectRequests(write_line, requests)
        reader = StdoutReader(
            child, config.name, process.stdout, read_writer, max_message_bytes, mark_closed, requests, asked
        )
        reader.direct = direct
        writer_done = anyio.Event()

        async def write_stdin() -> None:
            assert process.stdin is not None
            try:
                async with write_reader:
                    async for message in write_reader:
                        data = message.message.model_dump_json(by_alias=True, exclude_unset=True)
                        requests.sent(message.message)
                        await write_line(data.encode() + b"\n")
                        asked.sent(message.message)
            except (anyio.ClosedResourceError, anyio.BrokenResourceError, OSError):
                mark_closed()  # the child stopped reading: fail pending requests instead of hanging
            finally:
                writer_done.set()

        async def shutdown() -> None:
            child.remember_tree()  # before the leader exits and its setsid'd descendants are re-parented
            read_stream.close()
            write_stream.close()
            with anyio.move_on_after(0.5):
                await writer_done.wait()
            with suppress(OSError, anyio.BrokenResourceError, anyio.ClosedResourceError):
                await process.stdin.aclose()  # type: ignore[union-attr]
            if child.returncode is None and not streams.abrupt_close:
                await child.wait_exit(child.shutdown_grace)
            # Even after a clean exit of the leader, descendants may remain in its group or tree.
            await child.terminate(child.kill_grace)
            guard.unregister(child.pid)
            with suppress(OSError, anyio.BrokenResourceError, anyio.ClosedResourceError):
                await process.stdout.aclose()  # type: ignore[union-attr]
            transport = getattr(getattr(process, "_process", None), "_transport", None)
            if transport is not None:
                with suppress(Exception):
                    transport.close()
            note_dropped(child)
            child.note(f"session closed ({describe_exit(child.returncode)})")

        streams = Streams(read_stream, write_stream, closed, process=child, direct=direct)
        async with anyio.create_task_group() as tg:
            tg.start_soon(reader.run)
            tg.start_soon(write_stdin)
            try:
                yield streams
            except anyio.get_cancelled_exc_class():
                # The caller gives up (the copilot stopping mid-crawl, a hard deadline): the short
                # waits, so the stop fits in the 2 s a host waits before it sends SIGTERM.
                child.hurry(HURRIED_GRACE, HURRIED_KILL_GRACE)
                raise
            finally:
                # Shielded and bounded: a cancelled caller must neither leak the process group
                # nor hang on it.
                with anyio.CancelScope(shield=True):
                    await shutdown()
                tg.cancel_scope.cancel()
    finally:
        log.close()
