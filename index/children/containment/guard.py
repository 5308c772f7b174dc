"""Children die with the copilot, however it ends: parent-death signal, process trees, a watchdog.

Closing a child kills its process group, but that alone leaves three ways out: a grandchild that
calls ``setsid`` (or double-forks into a daemon) leaves the group; a copilot that is SIGKILLed
runs no cleanup at all; and a host that signals only the copilot's pid never reaches the children.
So, for every stdio child:

- on Linux it runs under its own guardian (:mod:`index.children.containment.guardian`), a parent
  process that dies with the copilot (``PR_SET_PDEATHSIG``), adopts whatever the server
  double-forks (``PR_SET_CHILD_SUBREAPER``) and, when the server exits, kills what is left of its
  tree before exiting the way the server did;
- its environment carries ``MCP_COPILOT_CHILD=<copilot tag>:<n>``, which whatever it starts
  inherits, so its descendants can be found even after they left its group and its tree;
- it is registered with one watchdog process per copilot (:mod:`index.children.containment.watchdog`), which
  records its descendant tree while it runs and kills groups, trees and tagged processes as soon
  as the copilot exits, SIGKILL included.

Before the first child starts, the process that starts it gets the copilot's protection of its
secrets on Linux (:meth:`ChildGuard.protect_owner`, :mod:`index.children.containment.secrecy`): otherwise a child reads
its parent's secrets in ``/proc/<ppid>/environ``. The copilot's start-up does this itself; this
covers every other process that starts children through here, such as ``python -m index crawl``.

:func:`child_guard` is the process-wide instance. Its :meth:`ChildGuard.kill_all` is synchronous
(signal handlers, ``atexit``), and :meth:`ChildGuard.close` stops the watchdog on a clean exit.
"""

from __future__ import annotations

import atexit
import ctypes
import itertools
import logging
import os
import secrets
import signal
import subprocess
import sys
import threading
from contextlib import suppress
from pathlib import Path
from typing import Literal

import psutil

from index.children.containment.environment import inherited_environment
from index.children.containment.guardian import landlock_abi
from index.children.containment.secrecy import protect_secrets
from index.errors import ConfigError
from index.settings import CopilotSettings
from index.children.containment.watchdog import TAG_VARIABLE, tagged

__all__ = ["TAG_VARIABLE", "ChildGuard", "child_guard", "descendants", "kill_tree"]

logger = logging.getLogger(__name__)

_HERE = Path(__file__).resolve().parent
#: Seconds the watchdog gets to sweep and exit after a clean ``close``.
_WATCHDOG_EXIT_WAIT = 3.0
PR_GET_DUMPABLE = 3


def _wanted(setting: Literal["protect_process", "isolate_children"]) -> bool:
    """``COPILOT_PROTECT_PROCESS`` or ``COPILOT_ISOLATE_CHILDREN`` as every entry point reads it
    (environment, ``.env``)."""
    try:
        return bool(getattr(CopilotSettings.load(), setting))
    except ConfigError:
        return True  # the entry point refuses a bad value itself; until then, err on the safe side


def pdeathsig_available() -> bool:
    return sys.platform.startswith("linux")


def descendants(pid: int) -> list[psutil.Process]:
    """``pid``'s live descendants (empty when it is gone)."""
    try:
        return psutil.Process(pid).children(recursive=True)
    except psutil.Error:
        return []


def kill_tree(
    pid: int,
    tag: str | None,
    known: list[psutil.Process] | None = None,
    signum: int = signal.SIGKILL,
    *,
    spare_leader: bool = False,
) -> list[psutil.Process]:
    """Signal ``pid``'s process group, its descendants and their process groups, ``known`` and every
    process tagged ``tag``.

    Every group is signalled as a whole (``killpg``), so what a member forks while this runs is
    reached too: a server under its guardian leads a group of its own. ``spare_leader`` leaves
    ``pid`` and its group alone: a guardian whose server is SIGKILLed then sweeps what is left of
    its tree itself (it adopts what is orphaned meanwhile), where killing it first left that to init.

    Returns the processes signalled outside ``pid``'s group (to wait for). Synchronous and quick:
    safe from signal handlers and ``atexit``.
    """
    # Found before anything is signalled: a guardian SIGKILLed first would leave its tree to init.
    members = {process.pid: process for process in [*(known or []), *descendants(pid)]}
    if tag is not None:
        members.update((process.pid, process) for process in tagged(tag))
    members.pop(pid, None)
    groups: set[int] = set()
    for member in members:
        with suppress(OSError):
            groups.add(os.getpgid(member))
    with suppress(OSError):
        groups.discard(os.getpgid(0))  # never the caller's own group
    groups.discard(pid)
    for group in sorted(groups):
        with suppress(ProcessLookupError, PermissionError):
            os.killpg(group, signum)
    if not spare_leader:
        with suppress(ProcessLookupError, PermissionError):
            os.killpg(pid, signum)
    signalled = []
    for process in members.values():
        try:
            process.send_signal(signum)  # psutil checks it is still the same process (start time)
        except psutil.Error:
            continue
        signalled.append(process)
    return signalled


class ChildGuard:
    """The copilot's side of the parent-death protection (see the module docstring)."""

    def __init__(self) -> None:
        self.owner = os.getpid()
        self.tag = f"{self.owner}-{secrets.token_hex(6)}"
        self._serial = itertools.count(1)
        self._children: dict[int, str] = {}  # leader pid -> its tag
        self._watchdog: subprocess.Popen[bytes] | None = None
        self._lock = threading.Lock()
        self._protection_checked = False
        self._isolation: bool | None = None

    # -- before the first child -----------------------------------------------------------------
    def protect_owner(self) -> None:
        """Keep this process's secrets from its children before the first one starts (Linux).

        A no-op when it is non-dumpable already (the copilot's start-up protected it). Otherwise
        ``index.children.containment.secrecy.protect_secrets``: the secrets in ``/proc/<pid>/environ`` are blanked and,
        unless ``COPILOT_PROTECT_PROCESS`` is false, the process becomes non-dumpable. Once per process.
        """
        if self._protection_checked or not pdeathsig_available():
            return
        self._protection_checked = True
        if ctypes.CDLL(None, use_errno=True).prctl(PR_GET_DUMPABLE, 0, 0, 0, 0) == 0:
            return
        protect_secrets(non_dumpable=_wanted("protect_process"))

    # -- starting a child -----------------------------------------------------------------------
    def new_tag(self) -> str:
        """The value of ``MCP_COPILOT_CHILD`` for the next child."""
        return f"{self.tag}:{next(self._serial)}"

    def launch_argv(self, executable: str, args: list[str], *, isolate: bool = False) -> list[str]:
        """The argv that starts ``executable`` under its guardian (Linux; the process started is the guardian).

        ``isolate`` (a child server's entry asks for it) puts the program in a Landlock domain of its
        own where the kernel has Landlock and ``COPILOT_ISOLATE_CHILDREN`` is not false.
        """
        if not pdeathsig_available():  # pragma: no cover - macOS relies on the watchdog alone
            return [executable, *args]
        flags = ["--isolate"] if isolate and self.isolation_available() else []
        return [sys.executable, "-I", "-S", str(_HERE / "guardian.py"), *flags, str(os.getpid()), executable, *args]

    def isolation_available(self) -> bool:
        """Whether child servers whose entry asks for it are isolated
        (:func:`index.children.containment.guardian.isolate`); checked once."""
        if self._isolation is None:
            wanted = _wanted("isolate_children")
            abi = landlock_abi() if wanted else 0
            self._isolation = abi > 0
            if abi:
                logger.debug("child servers run isolated (Landlock ABI %d)", abi)
            elif wanted:
                logger.info(
                    "child servers are not isolated from each other: this kernel has no Landlock (Linux 5.13+), "
                    "so one may read another's environment through /proc"
                )
        return self._isolation

    def register(self, pid: int, tag: str) -> None:
        """Tell the watchdog a child started (it is the leader of its own process group)."""
        with self._lock:
            self._children[pid] = tag
            self._send(f"+ {pid}\n")

    def unregister(self, pid: int) -> None:
        with self._lock:
            if self._children.pop(pid, None) is not None:
                self._send(f"- {pid}\n")

    # -- ending -----------------------------------------------------------------------------------
    def kill_all(self) -> None:
        """SIGKILL every registered child's group, tree and tagged processes now. Synchronous."""
        for pid in list(self._children):
            kill_tree(pid, None)
        for process in tagged(self.tag + ":", exact=False):  # one scan for every child's tag
            with suppress(psutil.Error):
                process.kill()

    def close(self) -> None:
        """Clean shutdown: the watchdog sweeps (children should be gone already) and exits; bounded.

        A child started later (another copilot in the same process) starts a new watchdog.
        """
        with self._lock:
            watchdog, self._watchdog = self._watchdog, None
        if watchdog is None:
            return
        with suppress(OSError, ValueError):
            assert watchdog.stdin is not None
            watchdog.stdin.write(b"exit\n")
            watchdog.stdin.close()
        try:
            watchdog.wait(_WATCHDOG_EXIT_WAIT)
        except subprocess.TimeoutExpired:
            watchdog.kill()
            with suppress(subprocess.TimeoutExpired):
                watchdog.wait(_WATCHDOG_EXIT_WAIT)

    # -- the watchdog -----------------------------------------------------------------------------
    def _send(self, line: str) -> None:
        """Write to the watchdog (started on first use; restarted if it died). Caller holds the lock."""
        if os.getpid() != self.owner:
            return
        for _attempt in range(2):
            if self._watchdog is None or self._watchdog.poll() is not None:
                self._watchdog = self._start_watchdog()
                if self._watchdog is None:
                    return
                # A new watchdog learns every running child (the one being registered included).
                known = "".join(f"+ {pid}\n" for pid in self._children)
                line = known if line.startswith("+") else known + line
            try:
                assert self._watchdog.stdin is not None
                self._watchdog.stdin.write(line.encode())
                self._watchdog.stdin.flush()
                return
            except (OSError, ValueError):
                self._watchdog = None

    def _start_watchdog(self) -> subprocess.Popen[bytes] | None:
        try:
            watchdog = subprocess.Popen(
                [sys.executable, "-I", str(_HERE / "watchdog.py"), str(os.getpid()), self.tag],
                stdin=subprocess.PIPE,
                stdout=subprocess.DEVNULL,
                start_new_session=True,  # a signal to the copilot's group must not reach it
                # A new program's /proc/<pid>/environ is readable by the children it watches again.
                env=inherited_environment(os.environ),
            )
        except OSError as error:
            logger.warning("cannot start the child watchdog (%s); children rely on their parent-death signal", error)
            return None
        logger.debug("child watchdog started (pid %d)", watchdog.pid)
        return watchdog


_guard: ChildGuard | None = None
_guard_lock = threading.Lock()


def child_guard() -> ChildGuard:
    """The process-wide guard (a new one after ``fork``)."""
    global _guard
    with _guard_lock:
        if _guard is None or _guard.owner != os.getpid():
            _guard = ChildGuard()
            atexit.register(_guard.close)
        return _guard
