"""No process a child starts outlives it: setsid'd grandchildren, daemons, SIGTERM-ignorers, a child
hung before ``initialize``, and everything when the process that owns the session is SIGKILLed."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import anyio
import psutil
import pytest

from index.children.connect import InitializeTimeoutError, open_session
from index.children.containment.guard import child_guard
from index.children.containment.watchdog import Watchdog
from index.catalog.servers import ServerConfig
from tests.support.processes import HOSTILE_SERVER, as_processes, kill_leftovers, wait_for_file, wait_gone

pytestmark = pytest.mark.timeout(90)

REPO = Path(__file__).resolve().parents[4]


def _hostile(*flags: str) -> ServerConfig:
    return ServerConfig(name="hostile", command=sys.executable, args=[str(HOSTILE_SERVER), *flags])


async def _detach(session: object, how: str, ignore_sigterm: bool = True) -> int:
    arguments = {"how": how, "ignore_sigterm": ignore_sigterm}
    result = await session.call_tool("detach", arguments)  # type: ignore[attr-defined]
    return int(result.content[0].text)


async def test_closing_a_session_kills_grandchildren_that_left_the_process_group(tmp_path: Path) -> None:
    with anyio.fail_after(60):
        async with open_session(_hostile("--ignore-signals"), workdir=tmp_path / "work") as connection:
            session = connection.session
            child = psutil.Process(connection.pid)
            escaped = as_processes([await _detach(session, "setsid"), await _detach(session, "daemon")])
            assert all(os.getpgid(p.pid) != child.pid for p in escaped)  # neither is in the child's group
            assert escaped[1].ppid() == child.pid  # the daemon was orphaned and re-parented to the child (a subreaper)
    try:
        assert await wait_gone([child, *escaped]) == []
    finally:
        kill_leftovers([child, *escaped])


async def test_a_child_hung_before_initialize_is_killed_with_what_it_started(tmp_path: Path) -> None:
    pid_file = tmp_path / "grandchild.pid"
    config = _hostile("--hang-before-initialize", "--ignore-signals", "--detach-at-start", str(pid_file))
    started: list[psutil.Process] = []
    # 8 s: the server writes the pid file before it hangs, which a loaded machine may take seconds to reach.
    with anyio.fail_after(60), pytest.raises(InitializeTimeoutError, match="did not answer initialize"):
        async with open_session(
            config, workdir=tmp_path / "work", init_timeout=8, on_spawn=lambda p: started.append(psutil.Process(p.pid))
        ):
            pass
    grandchild = as_processes([int(pid_file.read_text(encoding="utf-8"))])
    try:
        assert await wait_gone([*started, *grandchild]) == []
    finally:
        kill_leftovers([*started, *grandchild])


#: A process that owns a session like the copilot does, prints its children's pids, then waits.
_OWNER = """
import anyio, json, sys
from pathlib import Path
from index.children.connect import open_session
from index.catalog.servers import ServerConfig

async def main():
    config = ServerConfig(name="hostile", command=sys.executable, args=[sys.argv[1], "--ignore-signals"])
    async with open_session(config, workdir=Path(sys.argv[2])) as connection:
        pids = [connection.pid]
        for how in ("setsid", "daemon"):
            result = await connection.session.call_tool("detach", {"how": how, "ignore_sigterm": True})
            pids.append(int(result.content[0].text))
        Path(sys.argv[3]).write_text(json.dumps(pids))
        await anyio.sleep_forever()

anyio.run(main)
"""


async def test_children_and_their_escaped_descendants_die_when_their_owner_is_sigkilled(tmp_path: Path) -> None:
    pids_file = tmp_path / "pids.json"
    owner = subprocess.Popen(
        [sys.executable, "-c", _OWNER, str(HOSTILE_SERVER), str(tmp_path / "work"), str(pids_file)],
        cwd=REPO,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
    )
    processes: list[psutil.Process] = []
    try:
        processes = as_processes(json.loads(await wait_for_file(pids_file, 60)))
        descendants = psutil.Process(owner.pid).children(recursive=True)  # the child and the watchdog
        processes += descendants
        assert len(processes) >= 4
        os.kill(owner.pid, signal.SIGKILL)
        owner.wait(30)
        assert await wait_gone(processes) == []
    finally:
        owner.kill()
        kill_leftovers(processes)


def test_the_watchdog_forgets_descendants_that_exited() -> None:
    # Before: every process a child ever started stayed recorded for the copilot's lifetime (a
    # server restarted 400 times: 400 entries, each looked up again at exit).
    leader = subprocess.Popen(
        ["/bin/sh", "-c", "sleep 300 & echo $!; wait"], stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, start_new_session=True
    )
    try:
        assert leader.stdout is not None
        child = int(leader.stdout.readline())
        watchdog = Watchdog(os.getpid(), "no-such-tag")
        watchdog.handle(f"+ {leader.pid}")
        watchdog.record()
        assert child in watchdog.seen
        os.kill(child, signal.SIGKILL)
        leader.wait(timeout=20)  # the shell reaped the child, then exited
        watchdog.record()
        assert child not in watchdog.seen
    finally:
        with contextlib.suppress(OSError):
            os.killpg(leader.pid, signal.SIGKILL)
        leader.wait(timeout=20)
        leader.stdout.close()  # type: ignore[union-attr]


def test_the_watchdog_finds_the_groups_of_what_it_recorded(tmp_path: Path) -> None:
    # A server under its guardian leads a group of its own: what it starts in that group after the
    # last recording is reached through the group when the copilot dies.
    argv = child_guard().launch_argv(sys.executable, ["-c", "import time\nprint('ready', flush=True)\ntime.sleep(60)"])
    guardian = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, start_new_session=True)
    try:
        assert guardian.stdout is not None and guardian.stdout.readline() == b"ready\n"
        watchdog = Watchdog(os.getpid(), "no-such-tag")
        watchdog.handle(f"+ {guardian.pid}")
        watchdog.record()
        (server,) = psutil.Process(guardian.pid).children()
        assert watchdog.recorded_groups() == {server.pid}  # the server's group; never the watchdog's own
    finally:
        os.killpg(guardian.pid, signal.SIGKILL)
        guardian.wait(timeout=20)
        guardian.stdout.close()  # type: ignore[union-attr]
