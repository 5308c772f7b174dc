"""``python -I watchdog.py COPILOT_PID TAG``: kill a copilot's children and their descendants when it dies.

Started by :class:`index.children.containment.guard.ChildGuard` in its own session (so a signal to the
copilot's process group does not reach it), with a pipe from the copilot on stdin. The copilot
writes one line per event:

- ``+ PID`` a child started (the leader of its own process group);
- ``- PID`` that child was stopped by the copilot;
- ``exit`` the copilot is shutting down cleanly.

While children run, every :data:`POLL_INTERVAL` seconds it records their descendants (pid and
start time), which catches grandchildren that leave the process group with ``setsid``. When the
pipe ends (the copilot exited, however it died: SIGKILL included), its parent changes, or ``exit``
arrives, it SIGKILLs every registered process group, the process groups of the recorded descendants
(a server under its guardian leads its own), every recorded descendant that is still the same
process, and every process whose environment carries the copilot's tag
(``MCP_COPILOT_CHILD=TAG:…``, set on every child and inherited by what it starts, even after a
double fork), then exits. Standard library and psutil only: it runs as a script, not a package.
"""

from __future__ import annotations

import os
import select
import signal
import sys
from contextlib import suppress

import psutil

#: Seconds between recordings of the children's descendant trees (and checks of the parent).
POLL_INTERVAL = 1.0
TAG_VARIABLE = "MCP_COPILOT_CHILD"


def _identity(process: psutil.Process) -> tuple[int, float] | None:
    try:
        return process.pid, process.create_time()
    except psutil.Error:
        return None


def tagged(tag: str, *, exact: bool = True, variable: str = TAG_VARIABLE) -> list[psutil.Process]:
    """Live processes whose environment has ``<variable>=<tag>`` (``<tag>…`` unless ``exact``);
    ``variable`` is ``MCP_COPILOT_CHILD`` unless given."""
    needle = f"\0{variable}={tag}{chr(0) if exact else ''}".encode()
    found = []
    for pid in psutil.pids():
        if pid == os.getpid():
            continue
        try:
            if os.path.isdir("/proc"):
                with open(f"/proc/{pid}/environ", "rb") as handle:
                    environ = b"\0" + handle.read()
                if needle not in environ:
                    continue
                found.append(psutil.Process(pid))
            else:  # pragma: no cover - macOS
                process = psutil.Process(pid)
                value = process.environ().get(variable, "")
                if value == tag or (not exact and value.startswith(tag)):
                    found.append(process)
        except (OSError, psutil.Error):
            continue
    return found


class Watchdog:
    def __init__(self, copilot: int, tag: str) -> None:
        self.copilot = copilot
        self.tag = tag
        self.leaders: dict[int, float] = {}
        self.seen: dict[int, float] = {}

    def handle(self, line: str) -> bool:
        """Apply one line from the copilot; ``False`` when it says it is shutting down."""
        kind, _, rest = line.strip().partition(" ")
        if kind == "exit":
            return False
        try:
            pid = int(rest)
        except ValueError:
            return True
        if kind == "+":
            try:
                self.leaders[pid] = psutil.Process(pid).create_time()
            except psutil.Error:
                pass
        elif kind == "-":
            self.leaders.pop(pid, None)
        return True

    def record(self) -> None:
        """Remember every live descendant of the registered children (one scan of the process table)."""
        children: dict[int, list[psutil.Process]] = {}
        live: set[int] = set()
        for process in psutil.process_iter(["ppid"]):
            children.setdefault(process.info["ppid"], []).append(process)
            live.add(process.pid)
        # A descendant that exited is nothing to kill: forgotten, or every child a crashing server
        # ever started stayed recorded for the copilot's lifetime (and was looked up again at exit).
        for pid in [pid for pid in self.seen if pid not in live]:
            del self.seen[pid]
        for pid, started in list(self.leaders.items()):
            try:
                if psutil.Process(pid).create_time() != started:
                    continue
            except psutil.Error:
                continue
            stack = [pid]
            while stack:
                for process in children.get(stack.pop(), []):
                    identity = _identity(process)
                    if identity is not None and identity[0] not in self.leaders:
                        self.seen[identity[0]] = identity[1]
                        stack.append(identity[0])

    def recorded_groups(self) -> set[int]:
        """The process groups of the recorded descendants still running: a server under its guardian
        leads a group of its own, which may hold what it started since the last recording."""
        groups: set[int] = set()
        for process in psutil.process_iter():
            identity = _identity(process)
            if identity is None or self.seen.get(identity[0]) != identity[1]:
                continue
            with suppress(OSError):
                groups.add(os.getpgid(identity[0]))
        with suppress(OSError):
            groups.discard(os.getpgid(0))
        return groups

    def sweep(self) -> int:
        """SIGKILL everything this copilot started; the number of processes signalled."""
        killed = 0
        groups = self.recorded_groups()  # before anything dies: a group is found through its members
        for pid in [*self.leaders, *sorted(groups)]:
            with suppress(OSError):
                os.killpg(pid, signal.SIGKILL)
                killed += 1
        targets = dict(self.seen)
        targets.update(self.leaders)
        for pid, started in targets.items():
            try:
                if psutil.Process(pid).create_time() == started:
                    os.kill(pid, signal.SIGKILL)
                    killed += 1
            except (OSError, psutil.Error):
                continue
        for _ in range(2):  # a second round catches what forked while the first one ran
            for process in tagged(self.tag + ":", exact=False):
                with suppress(OSError, psutil.Error):
                    process.kill()
                    killed += 1
        return killed

    def run(self) -> None:
        buffer = b""
        while True:
            ready, _, _ = select.select([0], [], [], POLL_INTERVAL)
            if ready:
                chunk = os.read(0, 65536)
                if not chunk:
                    break  # the copilot is gone
                buffer += chunk
                *lines, buffer = buffer.split(b"\n")
                if not all(self.handle(line.decode("utf-8", "replace")) for line in lines):
                    break
            if os.getppid() != self.copilot:
                break
            if self.leaders:
                self.record()
        self.sweep()


def main() -> None:
    for signum in (signal.SIGINT, signal.SIGHUP, signal.SIGPIPE):
        signal.signal(signum, signal.SIG_IGN)
    Watchdog(int(sys.argv[1]), sys.argv[2]).run()


if __name__ == "__main__":
    main()
