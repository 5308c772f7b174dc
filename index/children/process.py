"""A stdio child's process tree and its stderr log: exit codes, bounded kill escalation, log tails.

Stopping a child signals its process group *and* every descendant seen or tagged as its own
(``index.children.containment.guard``), so a grandchild that left the group with ``setsid`` dies too.
"""

from __future__ import annotations

import logging
import os
import signal
from contextlib import suppress
from datetime import UTC, datetime
from pathlib import Path
from typing import IO

import anyio
import anyio.abc
import psutil

from index.cli.display import printable
from index.children.containment.guard import descendants, kill_tree, pdeathsig_available

logger = logging.getLogger(__name__)

#: Seconds between SIGTERM and SIGKILL to the child's process group.
KILL_GRACE = 2.0
#: When its owner gives up on a child (the copilot exiting, a cancelled crawl), closing waits this
#: long after stdin closes, then this long after SIGTERM: the whole stop, for all children in
#: parallel, fits in the 2 s a host waits after closing the copilot's stdin before it sends SIGTERM.
HURRIED_GRACE = 0.5
HURRIED_KILL_GRACE = 0.5
_EXIT_POLL_INTERVAL = 0.01
#: Probing a group scans the process table (~1 ms), so it is polled less often than an exit code.
_GROUP_POLL_INTERVAL = 0.05


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


def how_it_ended(returncode: int | None) -> str:
    """How a child that stopped answering ended, as a phrase: ``exited with exit code 3``, ``was
    killed by signal 9 (SIGKILL)``, or (no exit code) ``closed its stdout without exiting``."""
    if returncode is None:
        return "closed its stdout without exiting"
    if returncode < 0:
        return f"was {describe_exit(returncode)}"
    return f"exited with {describe_exit(returncode)}"


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


def _alive(processes: list[psutil.Process]) -> bool:
    """Whether any of ``processes`` still runs (a zombie does not count)."""
    for process in processes:
        try:
            if process.is_running() and process.status() != psutil.STATUS_ZOMBIE:
                return True
        except psutil.Error:
            continue
    return False


class ChildProcess:
    """A stdio child's process (the leader of its own process group) and its stderr log."""

    def __init__(self, process: anyio.abc.Process, log_path: Path, log_offset: int, tag: str | None = None) -> None:
        self.process = process
        self.pid: int = process.pid
        self.log_path = log_path
        self.log_offset = log_offset
        #: ``MCP_COPILOT_CHILD`` in its environment: finds its descendants wherever they went.
        self.tag = tag
        self.junk_lines = 0
        self.unreadable_lines = 0
        #: Requests of the child's dropped for reusing the id of an unanswered one.
        self.duplicate_requests = 0
        self.oversized_lines = 0
        #: Bytes of the stdout line the child has begun and not ended (kept current by the stdout
        #: reader) and its first bytes: a reply written without its newline is never read.
        self.unterminated_bytes = 0
        self.unterminated_head = b""
        #: Requests of the child's own left unanswered while its output is not read (``wire.ChildRequests``).
        self.paused_requests = 0
        self.log: IO[bytes] | None = None
        #: How closing treats it: seconds to exit after stdin closes, then seconds between SIGTERM and
        #: SIGKILL. The pool shortens both when the copilot exits (the host kills it 2 s after stdin).
        self.shutdown_grace = 2.0
        self.kill_grace = KILL_GRACE
        self._known: dict[int, psutil.Process] = {}
        self._server_pid: int | None = None

    @property
    def server_pid(self) -> int:
        """The server's own pid: on Linux the process started is its guardian
        (``index.children.containment.guardian``) and the server the guardian's first child; what
        people see (``status``, logs) and may signal. The guardian's pid until the server runs."""
        if self._server_pid is None and pdeathsig_available():
            try:
                children = psutil.Process(self.pid).children()
            except psutil.Error:
                children = []
            if children:  # what the guardian adopts later was started by the server, so after it
                self._server_pid = min(children, key=lambda process: (process.create_time(), process.pid)).pid
        return self._server_pid if self._server_pid is not None else self.pid

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

    def hurry(self, grace: float, kill_grace: float) -> None:
        """Shorten how long closing waits (the copilot is exiting within its host's budget)."""
        self.shutdown_grace = min(self.shutdown_grace, grace)
        self.kill_grace = min(self.kill_grace, kill_grace)

    def remember_tree(self) -> None:
        """Record the child's descendants now, so they can be killed after it exited (or re-parented them)."""
        for process in descendants(self.pid):
            self._known[process.pid] = process

    def kill(self) -> None:
        """SIGKILL the whole tree now. Synchronous: safe from signal handlers and atexit."""
        if os.name == "posix":
            kill_tree(self.pid, self.tag, list(self._known.values()))
        else:  # pragma: no cover - the project runs children on POSIX
            with suppress(ProcessLookupError, OSError):
                self.process.kill()

    def group_alive(self) -> bool:
        if os.name != "posix":  # pragma: no cover
            return self.process.returncode is None
        return _group_alive(self.pid)

    async def terminate(self, grace: float) -> None:
        """SIGTERM the tree, SIGKILL whatever is left after ``grace`` seconds; wait for the reap."""
        if os.name != "posix":  # pragma: no cover
            with suppress(ProcessLookupError, OSError):
                self.process.kill()
            await self.wait_exit(KILL_GRACE)
            return
        self.remember_tree()
        members = kill_tree(self.pid, self.tag, list(self._known.values()), signal.SIGTERM)
        if not await self._wait_tree_gone(members, grace):
            logger.info("child pid %d ignored SIGTERM for %.1fs; sending SIGKILL to its tree", self.server_pid, grace)
            # The guardian is spared: once its server is gone it kills and reaps what is left of its
            # tree, what was forked meanwhile included, and exits; it is killed only if it does not.
            guarded = pdeathsig_available()
            members = kill_tree(self.pid, self.tag, members, spare_leader=guarded)
            if not await self._wait_tree_gone(members, KILL_GRACE) and guarded:
                members = kill_tree(self.pid, self.tag, members)
                await self._wait_tree_gone(members, KILL_GRACE)
        if await self.wait_exit(KILL_GRACE) is None or self.group_alive() or _alive(members):
            logger.warning("child pid %d: processes of its tree survived SIGKILL; abandoning them", self.server_pid)

    async def _wait_tree_gone(self, members: list[psutil.Process], timeout: float) -> bool:
        with anyio.move_on_after(timeout):
            while self.group_alive() or _alive(members):
                _ = self.process.returncode  # lets the event loop reap a zombie leader
                await anyio.sleep(_GROUP_POLL_INTERVAL)
            return True
        return False

    def note(self, text: str) -> None:
        """Append a line from the copilot (not the child) to the child's stderr log.

        Control characters are written as escapes: the text may quote what the child sent (a tool's
        name, a reply), and a newline in it must not forge a ``[copilot …]`` line, nor a NUL or an
        escape sequence reach whoever reads the log."""
        if self.log is None or self.log.closed:
            return
        stamp = datetime.now(UTC).isoformat(timespec="seconds")
        with suppress(OSError, ValueError):
            self.log.write(f"[copilot {stamp}] {printable(text)}\n".encode("utf-8", "replace"))
            self.log.flush()

    def rotate_log_if_over(self, max_bytes: int) -> bool:
        """Keep the stderr log under ``max_bytes`` while the child runs (copy-truncate).

        The child writes through its own descriptor, opened for appending, so the copilot cannot
        swap the file under it; instead the last ``max_bytes`` are copied to ``<name>.1`` and the
        file is emptied in place, and the child's next write lands at its new end. Lines the
        child writes between the copy and the truncation are lost: the price of bounded disk.
        """
        if self.log is None or self.log.closed:
            return False
        try:
            size = os.fstat(self.log.fileno()).st_size
            if size <= max_bytes:
                return False
            backup = self.log_path.with_name(self.log_path.name + ".1")
            with self.log_path.open("rb") as source, backup.open("wb") as target:
                source.seek(max(size - max_bytes, 0))
                target.write(source.read(max_bytes))
            os.truncate(self.log_path, 0)
        except OSError as error:
            logger.warning("could not rotate %s: %s", self.log_path, error)
            return False
        self.log_offset = 0
        self.note(f"log rotated at {size:,} bytes: its last {max_bytes:,} bytes are in {backup.name}")
        return True

    def unterminated_stdout(self) -> str:
        """A sentence about a stdout line the child began and never ended, or ``""``."""
        if not self.unterminated_bytes:
            return ""
        shown = self.unterminated_head.decode("utf-8", "replace")
        more = "…" if self.unterminated_bytes > len(self.unterminated_head) else ""
        return (
            f" It wrote {self.unterminated_bytes:,} bytes to stdout without ending the line ({shown!r}{more}); "
            "an MCP stdio server must end every message with a newline, and a line is read only then."
        )

    def paused_output(self) -> str:
        """A sentence about the child's output not being read for its unanswered requests, or ``""``."""
        if not self.paused_requests:
            return ""
        return (
            f" It had sent {self.paused_requests} requests of its own whose answers it did not read (it may not read "
            "its stdin), so the copilot stopped reading its output until it did."
        )

    def stderr_tail(self, max_lines: int = 15, max_chars: int = 300) -> list[str]:
        """The last lines this child wrote to its stderr log during this session."""
        return read_log_tail(self.log_path, self.log_offset, max_lines=max_lines, max_chars=max_chars)


def read_log_tail(path: Path, offset: int = 0, *, max_lines: int = 15, max_chars: int = 300) -> list[str]:
    """Last non-empty lines of ``path`` after byte ``offset`` (each cut to ``max_chars``)."""
    try:
        with path.open("rb") as handle:
            size = handle.seek(0, os.SEEK_END)
            if offset > size:  # the log was rotated or truncated since ``offset`` was taken
                offset = 0
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


#: Seconds between checks of a running child's stderr log size (an ``fstat``; a flood at disk
#: speed still writes a few hundred MB between two checks, never without bound).
LOG_CHECK_INTERVAL = 1.0


async def keep_log_bounded(process: ChildProcess, max_bytes: int, interval: float) -> None:
    """Rotate ``process``'s stderr log whenever it passes ``max_bytes`` (checked every ``interval``
    seconds) until cancelled: a child flooding stderr must not fill the disk."""
    while True:
        await anyio.sleep(interval)
        process.rotate_log_if_over(max_bytes)
