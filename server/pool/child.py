"""One child server as the pool keeps it: the process and its session (:class:`Child`), the
bookkeeping that outlives any one process (:class:`ServerState`), and how an exit, a failure or a
reply that breaks the schema reads (the words every caller of the pool shows alike)."""

from __future__ import annotations

import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import anyio
import mcp.types as types
from pydantic import ValidationError

from index.children.connect import ChildConnection, ChildProcess, ChildStartError, describe_exit
from index.children.raw_pages import describe_schema_error
from index.catalog.servers import ServerConfig
from server.errors import ChildCrashedError, ChildTimeoutError, ServerUnavailableError


@dataclass
class ServerState:
    """Per-server bookkeeping that outlives any one child process."""

    calls: int = 0
    errors: int = 0
    starts: int = 0
    #: Starts that brought the server back after its process failed (crashed, timed out, exited
    #: on its own); a start after the copilot stopped it on purpose (idle, evicted) is no restart.
    restarts: int = 0
    idle_stops: int = 0  # children stopped for idleness (COPILOT_IDLE_TIMEOUT)
    #: The last child started (its end decides whether the next start is a restart).
    last_child: Child | None = None
    #: The last process that ran failed and no start has brought the server back yet.
    restart_due: bool = False
    last_used: float | None = None  # wall clock, for status()
    last_error: str | None = None
    start_error: ChildStartError | None = None
    failed_at: float = 0.0  # monotonic
    slots: anyio.Semaphore | None = None
    listed_digest: str | None = None  # of the last tool listing passed to listeners
    #: Tools the last listing left out for a broken definition (``index.children.tool_listing``): name -> why,
    #: and its cut at the cap (``LISTING_CUT``); None until a child of the server listed its tools in this pool.
    skipped_tools: dict[str, str] | None = None
    #: The names of the tools the last listing kept, in its order (a call to another one is past a cut,
    #: if there was one; the nearest of them are suggested in listing order, not a set's).
    listed_names: dict[str, None] = field(default_factory=dict)
    #: What the last listing cut (``index.children.tool_listing.list_all_tools``), logged once per change.
    listing_warnings: list[str] = field(default_factory=list)
    relisted_at: float = float("-inf")  # monotonic: the last re-list after a change
    #: Monotonic time the server's prompts / resources list_changed was last logged.
    lists_logged_at: dict[str, float] = field(default_factory=dict)
    #: Seconds the last successful start took (spawn to initialized): slow starters are not warmed.
    start_seconds: float | None = None
    #: A child of the server answered initialize in this pool: a package runner's package is installed,
    #: so its later starts get the normal deadline (``start_seconds`` may come from the catalog instead).
    started_once: bool = False
    #: Why a child that had served calls is gone, until the next child's first result says so.
    lost_state: str | None = None


@dataclass(eq=False)
class Child:
    """One child process/connection and the runner task that owns it."""

    name: str
    config: ServerConfig
    #: The user's directory it was started in (``works_in: roots`` servers); ``None`` when none was known.
    root: Path | None = None
    ready: anyio.Event = field(default_factory=anyio.Event)
    stop: anyio.Event = field(default_factory=anyio.Event)
    done: anyio.Event = field(default_factory=anyio.Event)
    connection: ChildConnection | None = None
    process: ChildProcess | None = None
    start_error: BaseException | None = None
    broken: bool = False  # crashed, timed out or exited: never used for a new call
    retired: bool = False  # replaced/removed/evicted: stops when its last call finishes
    in_flight: int = 0
    last_used: float = field(default_factory=time.monotonic)
    tools: list[types.Tool] | None = None
    relist_pending: bool = False  # a tools/list_changed re-list is scheduled
    #: Relays of the calls in flight (see ``ChildPool.call_tool``), oldest first.
    calls: list[Any] = field(default_factory=list)
    #: The requests it is answering now, in words ("the call to 'crash'"), oldest first: an exit
    #: noticed by the session task before the caller describes it the caller's way.
    busy_with: list[str] = field(default_factory=list)
    #: Requests in flight made for a host that are no tool call (``prompts/get``, ``resources/read``,
    #: ``completion/complete``): a question the child asks meanwhile may be theirs.
    host_requests: int = 0
    served: int = 0  # calls this process answered
    warmed: bool = False  # started by warm() and not used since
    #: Why the copilot stopped it, in words (in-flight calls cut off with it say so; the next child's first result too).
    stopped_because: str | None = None
    #: The note for this child's first result: its server was restarted and lost its state.
    restart_note: str | None = None
    #: Set when the copilot kills it on purpose while calls may be in flight (they say why).
    cut_off_because: str | None = None
    blocked: dict[str, Any] = field(default_factory=dict)  # tool -> the guard's verdict (held back)
    stop_reason: str | None = None  # why the pool stopped it, as a kind (idle, evicted, replaced, crashed, ...)
    stop_reported: bool = False  # the observer heard it stopped
    restart: bool = False  # it brings the server back after its previous process failed
    started_at: float | None = None  # monotonic, when it became ready
    created_at: float = field(default_factory=time.monotonic)
    #: Seconds its start may take (``open_session``'s ``init_timeout``).
    start_limit: float = 0.0
    #: The package runner ("npx") of a first start given ``install_timeout`` to download its package;
    #: calls do not wait for such a start beyond the normal start timeout (it goes on without them).
    installs: str | None = None

    @property
    def usable(self) -> bool:
        """Starting or running, and fit for new calls (a child that exited while idle is not)."""
        if self.broken or self.retired or self.stop.is_set() or self.done.is_set():
            return False
        return self.connection is None or not self.connection.closed.is_set()

    @property
    def running(self) -> bool:
        return self.usable and self.ready.is_set() and self.connection is not None

    @property
    def pid(self) -> int | None:
        """The server's own pid (not its guardian's): what ``status`` shows and people may signal."""
        return self.process.server_pid if self.process is not None else None


def how_it_ended(code: int | None) -> str:
    """A child process's end, once its output closed (``None``: it has not exited yet)."""
    return describe_exit(code) if code is not None else "closed its output"


def exit_words(child: Child, connection: ChildConnection | None, code: int | None) -> str:
    """How a child's unexpected exit reads: the same whether its session or a caller notices it first."""
    during = in_flight_words(child.busy_with)
    if connection is None or connection.process is None:
        return f"its connection closed{during}" if during else "it exited on its own (connection closed)"
    if during:
        return f"it crashed ({how_it_ended(code)}){during}"
    return f"it exited on its own ({how_it_ended(code)})"


def in_flight_words(busy_with: list[str]) -> str:
    """When an exit happened, in words: every request in flight is named, not only the oldest (the
    one to blame is not known; naming one of several blamed a call that may have done nothing)."""
    if not busy_with:
        return ""
    if len(busy_with) == 1:
        return f" during {busy_with[0]}"
    shown = busy_with[:3] + ([f"{len(busy_with) - 3} more"] if len(busy_with) > 3 else [])
    return f" while it was answering {len(busy_with)} requests ({', '.join(shown[:-1])} and {shown[-1]})"


@contextmanager
def answering(child: Child, doing: str) -> Iterator[None]:
    child.busy_with.append(doing)
    try:
        yield
    finally:
        child.busy_with.remove(doing)


@contextmanager
def host_request(child: Child, for_host: bool) -> Iterator[None]:
    child.host_requests += for_host
    try:
        yield
    finally:
        child.host_requests -= for_host


def stderr_tail_text(lines: list[str]) -> str:
    return (" Last stderr lines:\n  " + "\n  ".join(lines)) if lines else ""


def redact_error(error: BaseException, config: ServerConfig) -> BaseException:
    """``error`` with its server's secrets masked in place (its message and stderr tail).

    A safety net under the places that build these messages: what the pool stores, logs and hands
    the host must not carry a ``${VAR}`` value or a literal API key of the entry, whoever worded it.
    Only messages held whole in ``args[0]`` are rewritten (others, such as ``OSError``, are shown redacted).
    """
    if len(error.args) == 1 and isinstance(error.args[0], str):
        shown = config.redact(error.args[0])
        if shown != error.args[0]:
            error.args = (shown,)
    tail = getattr(error, "stderr_tail", None)
    if isinstance(tail, list):
        error.stderr_tail = [config.redact(line) for line in tail]  # type: ignore[attr-defined]
    return error


class StillStartingError(ServerUnavailableError):
    """A call gave up waiting for a first start that installs its package; the start goes on.
    Not the child's failure, so not counted among its errors."""


@contextmanager
def counting_errors(state: ServerState, config: ServerConfig) -> Iterator[None]:
    """Count a child's failures (not the caller's mistakes) in ``status()``."""
    try:
        yield
    except StillStartingError:
        raise
    except (ChildCrashedError, ChildTimeoutError, ServerUnavailableError) as error:
        redact_error(error, config)
        state.errors += 1
        state.last_error = str(error)
        raise


def end_reason(child: Child) -> str:
    """Why a child that ran ended, as a kind: the pool's reason, else it ended on its own ("crashed")."""
    return child.stop_reason or "crashed"


def bad_reply(child: Child, doing: str, error: ValidationError) -> ServerUnavailableError:
    """A child's reply to ``doing`` that breaks the MCP schema, saying where (the child is alive)."""
    return ServerUnavailableError(
        f"server '{child.name}' answered {doing} with a reply that does not follow the MCP schema: "
        f"{describe_schema_error(error)}"
    )
