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

The pieces live in ``index.children.stdio`` (spawning, the stdout reader), ``index.children.remote``,
``index.children.process`` (process groups, stderr logs) and ``index.children.errors``; everything
callers need is importable from here.
"""

from __future__ import annotations

import logging
import os
import re
import shutil
import tempfile
from collections.abc import AsyncIterator, Callable
from contextlib import AsyncExitStack, asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import anyio
import httpx2
import mcp.types as types
from mcp.client.session import ClientSession, MessageHandlerFnT
from mcp.shared.exceptions import MCPError
from pydantic import ValidationError

from index.children.containment.guardian import CANNOT_START
from index.children.direct import DirectRequests
from index.children.raw_pages import describe_schema_error
from index.children.process import KILL_GRACE, ChildProcess, describe_exit, how_it_ended, read_log_tail
from index.children.errors import (
    ChildExitedError,
    ChildStartError,
    CommandNotFoundError,
    InitializeFailedError,
    InitializeTimeoutError,
    RemoteConnectError,
    SelfEntryError,
    connection_lost,
    format_tail,
)
from index.children.remote import remote_streams
from index.catalog.self_entry import COPILOT_SERVER_NAME, SELF_ENTRY_ADVICE, is_copilot_answer
from index.catalog.servers import ServerConfig
from index.children.stdio import Streams, stdio_streams
from index.children.stream_limits import DEFAULT_MAX_MESSAGE_BYTES, DEFAULT_SHUTDOWN_GRACE

__all__ = [
    "DEFAULT_MAX_MESSAGE_BYTES",
    "DEFAULT_SHUTDOWN_GRACE",
    "KILL_GRACE",
    "ChildConnection",
    "ChildExitedError",
    "ChildProcess",
    "ChildStartError",
    "ClientCallbacks",
    "CommandNotFoundError",
    "InitializeFailedError",
    "InitializeTimeoutError",
    "RemoteConnectError",
    "SelfEntryError",
    "describe_exit",
    "open_session",
    "read_log_tail",
]

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class ClientCallbacks:
    """How the copilot's client session answers what a child sends it (the SDK's callback types).

    Without them (the crawler) a child's sampling, elicitation and roots requests get the SDK's
    "not supported" and its log messages are dropped; the pool relays them (``server.relay``).
    """

    sampling: Any = None
    elicitation: Any = None
    list_roots: Any = None
    logging: Any = None


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
    #: Masks the server entry's secrets in anything shown from this child (its stderr lines).
    redact: Callable[[str], str] = str
    #: Requests beside the session, answered by id (stdio children; ``index.children.direct``).
    direct: DirectRequests | None = None

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
        lines = self.process.stderr_tail(max_lines) if self.process is not None else []
        return [self.redact(line) for line in lines]

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
    return types.Implementation(name=COPILOT_SERVER_NAME, version=copilot_version)


#: What an initialize timeout says to do when the caller has nothing more specific (``open_session``'s ``timeout_advice``).
DEFAULT_TIMEOUT_ADVICE = "if it is only slow, raise the server's 'timeout' in the servers file"


async def _initialize(
    config: ServerConfig,
    session: ClientSession,
    streams: Streams,
    init_timeout: float,
    timeout_advice: str = DEFAULT_TIMEOUT_ADVICE,
) -> types.InitializeResult:
    name = config.name

    def tail() -> list[str]:
        lines = streams.process.stderr_tail() if streams.process is not None else []
        return [config.redact(line) for line in lines]

    failure: str | None = None
    streams.abrupt_close = True  # until initialize succeeds, closing means giving up on the child
    with anyio.move_on_after(init_timeout) as scope:
        try:
            result = await session.initialize()
            streams.abrupt_close = False
            return result
        except MCPError as error:
            if not connection_lost(error, streams.closed):
                failure = config.redact(f"answered initialize with error {error.code}: {error.message}")
        except RuntimeError as error:  # unsupported protocol version
            failure = str(error)
        except ValidationError as error:
            failure = config.redact(
                f"answered initialize with a reply that does not follow the MCP schema: {describe_schema_error(error)}"
            )
    command_line = config.display_command
    if scope.cancelled_caught:
        where = config.display_target
        lines = tail()
        unended = config.redact(streams.process.unterminated_stdout()) if streams.process is not None else ""
        raise InitializeTimeoutError(
            f"server '{name}' ({where}) did not answer initialize within {init_timeout:g}s, so it was stopped; "
            f"it may be waiting for input, downloading, or hung. Starting it again gets it no more time: "
            f"{timeout_advice}.{unended}{format_tail(lines)}",
            server=name,
            stderr_tail=lines,
        )
    if streams.http_errors:
        raise RemoteConnectError(
            f"server '{name}' at {config.display_url}: {streams.http_errors[-1]}; check the URL and the "
            "'headers' (e.g. Authorization) in the server list.",
            server=name,
        )
    if failure is not None:
        lines = tail()
        raise InitializeFailedError(f"server '{name}' {failure}.{format_tail(lines)}", server=name, stderr_tail=lines)
    if streams.process is None:
        raise RemoteConnectError(
            f"server '{name}' at {config.display_url} closed the connection during initialize.", server=name
        )
    returncode = await streams.process.wait_exit(2.0)
    lines = tail()
    reason = _cannot_start(lines) if returncode == 127 else None
    if reason is not None:  # the program never ran: the guardian could not exec it
        raise ChildStartError(f"server '{name}': cannot start '{config.redact(config.command or '')}': {reason}.", server=name)
    what = how_it_ended(returncode)
    unended = config.redact(streams.process.unterminated_stdout())
    raise ChildExitedError(
        f"server '{name}' ({command_line}) {what} before answering "
        f"initialize.{unended}{format_tail(lines)}\nFull log: {streams.process.log_path}",
        server=name,
        returncode=returncode,
        stderr_tail=lines,
    )


def _cannot_start(lines: list[str]) -> str | None:
    """Why the guardian could not ``exec`` the server's program, from its line on stderr, or ``None``."""
    for line in reversed(lines):
        if line.startswith(CANNOT_START) and (reason := _REASON.match(line, len(CANNOT_START))) is not None:
            return reason.group(1)
    return None


#: The guardian's reason, in parentheses right after :data:`CANNOT_START` (the program's path follows).
_REASON = re.compile(r"\(([^()]+)\)")


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
                f"server '{config.name}': cannot reach {config.display_url} "
                f"({type(leaf).__name__}: {config.redact(str(leaf))}); "
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
    message_handler: MessageHandlerFnT | None = None,
    callbacks: ClientCallbacks | None = None,
    root: Path | None = None,
    timeout_advice: str = DEFAULT_TIMEOUT_ADVICE,
) -> AsyncIterator[ChildConnection]:
    """Start or reach ``config``'s server, initialize, yield the connection; close it on exit.

    ``workdir`` is the child's working directory (unless ``config.cwd`` is set) and holds its temp
    dir ``<workdir>/tmp``; without one a temporary directory is used and removed afterwards.
    ``stderr_path`` receives the child's stderr (appended); without one a temporary file is used.
    ``on_spawn`` is called with the :class:`ChildProcess` right after a stdio child is spawned, before
    ``initialize`` (so an owner can kill it from a signal handler even while it starts).
    ``message_handler`` receives the child's notifications (e.g. ``notifications/tools/list_changed``);
    it runs on the session's reader, so it must hand work off rather than await the session.
    ``callbacks`` answer the child's own requests and take its log messages. ``root`` is the user's
    directory (the host's first root, or ``COPILOT_ROOTS``): a ``works_in: roots`` server without
    its own ``cwd`` runs there, and ``${COPILOT_ROOT}`` in its entry names it (``workdir`` without one).
    ``timeout_advice`` ends the message of a start that exceeds ``init_timeout``: which setting gives it longer.
    Raises :class:`ChildStartError` subclasses; exceptions from the body propagate unchanged.
    """
    if not config.is_enabled:
        raise ChildStartError(
            f"server '{config.name}' is disabled" + (f": {config.reason}" if config.reason else "") + ".",
            server=config.name,
        )
    try:
        async with AsyncExitStack() as stack:
            streams: Streams
            if config.transport == "stdio":
                if workdir is None:
                    workdir = Path(tempfile.mkdtemp(prefix="mcp-child-"))
                    stack.callback(shutil.rmtree, workdir, True)
                else:
                    workdir.mkdir(mode=0o700, parents=True, exist_ok=True)
                if stderr_path is None:
                    handle, name = tempfile.mkstemp(prefix=f"mcp-child-{os.getpid()}-", suffix=".log")
                    os.close(handle)
                    stderr_path = Path(name)
                    stack.callback(stderr_path.unlink, True)
                streams = await stack.enter_async_context(
                    stdio_streams(config, workdir, stderr_path, max_message_bytes, shutdown_grace, on_spawn, root)
                )
            else:
                streams = await stack.enter_async_context(remote_streams(config, max_message_bytes))
            given = callbacks or ClientCallbacks()
            session = await stack.enter_async_context(
                ClientSession(
                    streams.read,
                    streams.write,
                    client_info=_client_info(),
                    sampling_callback=given.sampling,
                    elicitation_callback=given.elicitation,
                    list_roots_callback=given.list_roots,
                    logging_callback=given.logging,
                    message_handler=message_handler,
                    # Relayed to hosts that support tool use in sampling; refused clearly to others.
                    sampling_capabilities=(
                        types.SamplingCapability(tools=types.SamplingToolsCapability()) if given.sampling else None
                    ),
                )
            )
            result = await _initialize(config, session, streams, init_timeout, timeout_advice)
            if streams.direct is not None:
                streams.direct.protocol_version = session.protocol_version
                streams.direct.on_log = given.logging
                streams.direct.on_change = message_handler
            if is_copilot_answer(result):
                where = config.display_target
                raise SelfEntryError(
                    f"server '{config.name}' ({where}) is this copilot (it answered initialize as "
                    f"'{COPILOT_SERVER_NAME}'); {SELF_ENTRY_ADVICE}.",
                    server=config.name,
                )
            yield ChildConnection(
                server=config.name,
                session=session,
                initialize_result=result,
                closed=streams.closed,
                process=streams.process,
                url=config.display_url or None,
                redact=config.redact,
                direct=streams.direct,
            )
    except BaseExceptionGroup as group:
        error = _unwrap(group, config)
        if error is group:
            raise
        raise error from None
