"""Process helpers for tests of children that must not outlive the copilot: the hostile fixture,
waiting (bounded, no sleeps of fixed length) for processes to disappear, counting survivors."""

from __future__ import annotations

import sys
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import anyio
import psutil

HOSTILE_SERVER = Path(__file__).resolve().parents[1] / "fixtures" / "hostile" / "hostile_server.py"
SLOW_START_SERVER = Path(__file__).resolve().parents[1] / "fixtures" / "slow_start_server.py"
_POLL = 0.05


def hostile_entry(*flags: str, **extra: Any) -> dict[str, Any]:
    """A servers-file entry running the hostile fixture server with ``flags``."""
    return {"command": sys.executable, "args": [str(HOSTILE_SERVER), *flags], **extra}


def package_runner_script(directory: Path, name: str = "npx") -> Path:
    """A script named like a package runner (``directory/bin/npx``) that execs the slow-starting
    fixture (``tests/fixtures/slow_start_server.py``): a child whose first start "installs" until
    the test creates its gate file, the first argument."""
    runner = directory / "bin" / name
    runner.parent.mkdir(parents=True, exist_ok=True)
    runner.write_text(f'#!/bin/sh\nexec "{sys.executable}" "{SLOW_START_SERVER}" "$@"\n')
    runner.chmod(0o755)
    return runner


def orphan_leaving_code(pid_file: Path) -> str:
    """Python code for a server that leaves an orphan behind: a grandchild that left its process
    group (``setsid``), writes its pid to ``pid_file`` and runs until killed; the code returns once
    that file exists."""
    return (
        "import os, pathlib, time\n"
        "if os.fork() == 0:\n"
        "    os.setsid()\n"
        "    if os.fork() == 0:\n"
        f"        pathlib.Path({str(pid_file)!r}).write_text(str(os.getpid()))\n"
        "        while True: time.sleep(1)\n"
        "    os._exit(0)\n"
        "os.wait()\n"
        f"while not pathlib.Path({str(pid_file)!r}).exists(): time.sleep(0.01)\n"
    )


def running(process: psutil.Process) -> bool:
    try:
        return process.is_running() and process.status() != psutil.STATUS_ZOMBIE
    except psutil.Error:
        return False


def as_processes(pids: Iterable[int | psutil.Process]) -> list[psutil.Process]:
    """``psutil.Process`` objects for the pids still running now (identity is kept by start time)."""
    found = []
    for item in pids:
        if isinstance(item, psutil.Process):
            found.append(item)
            continue
        try:
            found.append(psutil.Process(item))
        except psutil.Error:
            continue
    return found


def survivors(processes: Iterable[psutil.Process]) -> list[psutil.Process]:
    return [process for process in processes if running(process)]


async def wait_gone(processes: Iterable[psutil.Process], timeout: float = 30.0) -> list[psutil.Process]:
    """Wait until every process has exited (bounded); the ones still running when time ran out."""
    remaining = list(processes)
    with anyio.move_on_after(timeout):
        while remaining := survivors(remaining):
            await anyio.sleep(_POLL)
    return survivors(remaining)


async def wait_for_file(path: Path, timeout: float = 30.0) -> str:
    """The text of ``path`` once a process wrote it (bounded)."""
    with anyio.fail_after(timeout):
        while not (path.exists() and path.stat().st_size):
            await anyio.sleep(_POLL)
    return path.read_text(encoding="utf-8")


def kill_leftovers(processes: Iterable[psutil.Process]) -> None:
    """Clean up after a failing test so survivors do not leak into the rest of the suite."""
    for process in survivors(processes):
        try:
            process.kill()
        except psutil.Error:
            continue
