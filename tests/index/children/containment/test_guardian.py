"""The guardian a stdio child runs under: it becomes the parent of the server, ends the way the
server ended, gives the server its signals and environment untouched, keeps the environment out of
its own ``/proc`` entry, and kills what the server left behind when it exits."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
from pathlib import Path

import psutil
import pytest

from index.children.containment.guard import child_guard
from tests.support.processes import as_processes, kill_leftovers, orphan_leaving_code, wait_for_file, wait_gone

pytestmark = [pytest.mark.timeout(60), pytest.mark.skipif(not sys.platform.startswith("linux"), reason="Linux prctl")]


def _guarded(code: str, env: dict[str, str] | None = None, **options: object) -> subprocess.CompletedProcess[str]:
    argv = child_guard().launch_argv(sys.executable, ["-c", code])
    return subprocess.run(
        argv, env=env if env is not None else {"PATH": os.environ.get("PATH", "")}, capture_output=True,
        text=True, timeout=30, stdin=subprocess.DEVNULL, **options,  # type: ignore[arg-type]
    )


def test_the_server_runs_as_the_guardians_child_and_its_exit_code_is_the_guardians() -> None:
    done = _guarded("import os, sys; print(os.getppid()); sys.exit(7)")
    assert done.returncode == 7
    assert done.stdout.strip().isdigit() and int(done.stdout) != os.getpid()  # its parent is the guardian


def test_a_server_killed_by_a_signal_is_reported_killed_by_that_signal() -> None:
    done = _guarded("import os, signal; os.kill(os.getpid(), signal.SIGUSR1)")
    assert done.returncode == -signal.SIGUSR1


def test_a_program_that_cannot_start_exits_127_with_why() -> None:
    argv = child_guard().launch_argv("/nonexistent/mcp-server", [])
    done = subprocess.run(argv, capture_output=True, text=True, timeout=30, stdin=subprocess.DEVNULL)
    assert done.returncode == 127
    assert "cannot start (No such file or directory): /nonexistent/mcp-server" in done.stderr


def test_sigterm_to_the_group_ends_the_server_and_the_guardian_ends_like_it() -> None:
    code = "import time\nprint('ready', flush=True)\nwhile True: time.sleep(1)"
    argv = child_guard().launch_argv(sys.executable, ["-c", code])
    process = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, start_new_session=True)
    try:
        assert process.stdout is not None
        assert process.stdout.readline() == b"ready\n"  # bounded by the test's timeout
        os.killpg(process.pid, signal.SIGTERM)
        assert process.wait(timeout=20) == -signal.SIGTERM  # the server's end; the guardian ignored it
    finally:
        if process.poll() is None:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait(timeout=20)
        if process.stdout is not None:
            process.stdout.close()


def _cat(path: str, env: dict[str, str]) -> str:
    """``cat PATH`` run as a server: a program that changes nothing of what it was given."""
    cat = shutil.which("cat")
    assert cat is not None
    done = subprocess.run(
        child_guard().launch_argv(cat, [path]), env=env, capture_output=True, timeout=30, stdin=subprocess.DEVNULL
    )
    assert done.returncode == 0, done.stderr
    return done.stdout.decode()


def test_the_server_gets_exactly_its_environment_and_default_signal_dispositions() -> None:
    environment = {"PATH": os.environ.get("PATH", ""), "GIVEN": "value", "LANG": "C"}
    # Nothing the guardian's Python adds to its own environment (LC_CTYPE for LANG=C) is passed on.
    seen = dict(entry.split("=", 1) for entry in _cat("/proc/self/environ", environment).split("\0") if entry)
    assert seen == environment
    status = dict(line.split(":", 1) for line in _cat("/proc/self/status", environment).splitlines() if ":" in line)
    mask = int(status["SigIgn"], 16)
    ignored = {number for number in range(1, 65) if mask & (1 << (number - 1))}
    # Python ignores SIGPIPE in the guardian, which ignores SIGTERM/SIGINT/SIGHUP too; the server gets none of that.
    assert ignored & {signal.SIGPIPE, signal.SIGTERM, signal.SIGINT, signal.SIGHUP} == set()


def test_the_guardians_own_environ_shows_nothing_of_the_servers_environment(tmp_path: Path) -> None:
    code = (
        "import os\n"
        "print(open(f'/proc/{os.getppid()}/environ', 'rb').read().replace(b'\\0', b'').decode() or '<empty>')"
    )
    done = _guarded(code, env={"PATH": "/usr/bin:/bin", "HANDED_TOKEN": "sk-handed-0123456789"})
    # Readable by root (non-dumpable makes it root's), but blank either way.
    assert "sk-handed-0123456789" not in done.stdout
    assert done.stdout.strip() in ("<empty>", "") or "Permission denied" in done.stderr


def test_what_the_server_left_behind_dies_when_it_exits(tmp_path: Path) -> None:
    pid_file = tmp_path / "orphan.pid"
    try:
        done = _guarded(orphan_leaving_code(pid_file))
        assert done.returncode == 0, done.stderr
        orphan = int(pid_file.read_text(encoding="ascii"))
        assert not psutil.pid_exists(orphan) or psutil.Process(orphan).status() == psutil.STATUS_ZOMBIE
    finally:  # a failing run must not leave the orphan to the rest of the suite
        if pid_file.exists():
            kill_leftovers(as_processes([int(pid_file.read_text(encoding="ascii"))]))


def test_a_server_killed_by_sigkill_is_reported_so_without_a_word_from_the_guardian() -> None:
    done = _guarded("import os, signal; os.kill(os.getpid(), signal.SIGKILL)")
    assert done.returncode == -signal.SIGKILL  # as the kernel's OOM killer ends a server
    assert done.stderr == ""


def test_the_server_leads_its_own_group_and_its_signals_to_it_do_not_reach_the_guardian() -> None:
    code = (
        "import os, signal\n"
        "got = []\n"
        "signal.signal(signal.SIGUSR1, lambda *_: got.append(1))\n"
        "os.killpg(os.getpid(), signal.SIGUSR1)\n"  # trap 'kill -- -$$' in a shell, process.kill(-pid) in Node
        "os.kill(0, signal.SIGUSR1)\n"
        "print(os.getpgid(0) == os.getpid(), os.getppid() != os.getpgid(0), len(got))"
    )
    done = _guarded(code)
    assert (done.returncode, done.stdout.split()) == (0, ["True", "True", "2"]), done.stderr


#: A server that starts a daemon the way nothing else can find: it leaves the group (``setsid``),
#: is orphaned to the guardian, and ``exec``s with an empty environment (no ``MCP_COPILOT_CHILD``).
#: The daemon writes its pid itself, once ``exec`` is done: written by its parent after ``fork``,
#: the pid could be read while the child still had the parent's environment.
_DAEMON = (
    "import os, pathlib, sys, time\n"
    "pathlib.Path(sys.argv[1] + '.tmp').write_text(str(os.getpid()))\n"
    "os.replace(sys.argv[1] + '.tmp', sys.argv[1])\n"
    "while True: time.sleep(1)\n"
)
_DAEMON_STARTER = f"""
import os, sys, time
if os.fork() == 0:
    os.setsid()
    if os.fork() == 0:
        os.execve(sys.executable, [sys.executable, '-c', {_DAEMON!r}, sys.argv[1]], {{}})
    os._exit(0)
os.wait()
while True:
    time.sleep(1)
"""

#: Starts that server under its guardian, without the copilot's watchdog (which would find the
#: daemon within a second by scanning trees), then waits to be SIGKILLed.
_OWNER_WITHOUT_WATCHDOG = """
import subprocess, sys, time
from index.children.containment.guard import child_guard
argv = child_guard().launch_argv(sys.executable, ["-c", sys.argv[1], sys.argv[2]])
subprocess.Popen(argv, stdin=subprocess.DEVNULL, start_new_session=True)
while True:
    time.sleep(1)
"""


async def test_a_daemon_nothing_else_finds_dies_when_the_copilot_is_sigkilled(tmp_path: Path) -> None:
    pid_file = tmp_path / "daemon.pid"
    owner = subprocess.Popen(
        [sys.executable, "-c", _OWNER_WITHOUT_WATCHDOG, _DAEMON_STARTER, str(pid_file)],
        cwd=Path(__file__).resolve().parents[4], stdin=subprocess.DEVNULL,
    )  # fmt: skip
    daemon: list[psutil.Process] = []
    try:
        daemon = as_processes([int(await wait_for_file(pid_file, 30))])
        assert daemon and daemon[0].environ() == {}
        owner.kill()  # the copilot, SIGKILLed: its guardian learns it from its parent-death signal
        owner.wait(30)
        assert await wait_gone(daemon) == []
    finally:
        owner.kill()
        owner.wait(30)
        kill_leftovers(daemon)
