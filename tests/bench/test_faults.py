"""``python -m bench faults`` stopped early leaves nothing behind: no hostile process, no temp dir.

The benchmark is started as a real process and interrupted the moment it says its first
scenario's processes are up -- the baseline's plain MCP client, its hostile server (which ignores
SIGTERM) and two grandchildren that left its session. With ``--settle`` long, the benchmark is
then waiting for those to die on their own, which they never do: only its clean-up can stop them.
"""

from __future__ import annotations

import os
import queue
import secrets
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import IO

import psutil
import pytest

from bench.faults import RUN_TAG_VARIABLE, UP_MARKER
from tests.support.cli import PROJECT, cli_env
from tests.support.processes import kill_leftovers, running

pytestmark = pytest.mark.timeout(240)

#: Bounds on the waits (no fixed sleeps): the first scenario up, the benchmark's exit after the signal.
UP_WITHIN = 120.0
EXIT_WITHIN = 90.0


def tagged(tag: str) -> list[psutil.Process]:
    """Running processes whose environment carries this run's tag."""
    found = []
    for process in psutil.process_iter():
        try:
            if process.environ().get(RUN_TAG_VARIABLE) == tag and running(process):
                found.append(process)
        except psutil.Error:
            continue
    return found


def in_session(session: int) -> list[psutil.Process]:
    """Running processes of the benchmark's session (it leads one: started with a new session)."""
    found = []
    for process in psutil.process_iter():
        try:
            if os.getsid(process.pid) == session and running(process):
                found.append(process)
        except (OSError, psutil.Error):
            continue
    return found


def naming(directory: Path) -> list[psutil.Process]:
    """Running processes whose command line names ``directory`` (a copilot started by the
    benchmark does; it hides its environment from other users' processes)."""
    found = []
    for process in psutil.process_iter():
        try:
            if any(str(directory) in part for part in process.cmdline()) and running(process):
                found.append(process)
        except psutil.Error:
            continue
    return found


def drained(lines: queue.Queue[str | None]) -> str:
    """What a reader collected so far (all of it once the stream ended)."""
    collected = []
    while True:
        try:
            line = lines.get_nowait()
        except queue.Empty:
            break
        if line is None:
            break
        collected.append(line)
    return "".join(collected)


def lines_of(stream: IO[str], into: queue.Queue[str | None]) -> None:
    for line in stream:
        into.put(line)
    into.put(None)  # end of the stream: every process holding it is gone


def wait_for_line(lines: queue.Queue[str | None], marker: str, timeout: float, seen: list[str]) -> str:
    deadline = time.monotonic() + timeout
    while (left := deadline - time.monotonic()) > 0:
        try:
            line = lines.get(timeout=left)
        except queue.Empty:
            break
        if line is None:
            break
        seen.append(line)
        if marker in line:
            return line
    raise AssertionError(f"no line with {marker!r} within {timeout:g} s; output so far:\n{''.join(seen)}")


@pytest.mark.parametrize("stop", [signal.SIGINT, signal.SIGTERM, signal.SIGHUP])
def test_an_interrupted_run_stops_every_process_it_started_and_removes_its_files(tmp_path: Path, stop: signal.Signals) -> None:
    tag = f"test-{secrets.token_hex(8)}"
    scratch = tmp_path / "tmp"
    scratch.mkdir()
    env = cli_env(**{RUN_TAG_VARIABLE: tag, "TMPDIR": str(scratch)})

    def default_signals() -> None:  # as from a terminal, whatever this test process inherited
        for signum in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
            signal.signal(signum, signal.SIG_DFL)

    bench = subprocess.Popen(
        [sys.executable, "-m", "bench", "faults", "--settle", "600"],
        cwd=PROJECT, env=env, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        start_new_session=True, preexec_fn=default_signals,
    )  # fmt: skip
    out: queue.Queue[str | None] = queue.Queue()
    err: queue.Queue[str | None] = queue.Queue()
    readers = [
        threading.Thread(target=lines_of, args=(bench.stdout, out), daemon=True),
        threading.Thread(target=lines_of, args=(bench.stderr, err), daemon=True),
    ]
    for reader in readers:
        reader.start()
    seen: list[str] = []
    try:
        up = wait_for_line(out, UP_MARKER, UP_WITHIN, seen)
        assert up.strip().startswith("baseline"), up
        assert len(tagged(tag)) >= 3  # the hostile server and what it detached are running now
        bench.send_signal(stop)
        bench.wait(timeout=EXIT_WITHIN)
        for reader in readers:  # EOF on its pipes: no survivor holds them either
            reader.join(timeout=EXIT_WITHIN)
        stderr = drained(err)

        assert bench.returncode == 130, stderr
        assert "interrupted" in stderr and "Traceback" not in stderr and "survived" not in stderr
        assert not [r for r in readers if r.is_alive()], "a process still holds the benchmark's output"
        assert tagged(tag) == []
        assert in_session(bench.pid) == []
        assert naming(scratch) == []
        assert list(scratch.iterdir()) == []  # bench-faults-* is gone
    finally:
        if bench.poll() is None:
            bench.kill()
            bench.wait(timeout=EXIT_WITHIN)
        kill_leftovers([*tagged(tag), *in_session(bench.pid), *naming(scratch)])
