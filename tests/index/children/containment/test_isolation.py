"""A child server isolated by its guardian (a Landlock domain of its own): it keeps what it does
with its own processes, loses the capabilities that read any process, and is isolated only where
the settings and its entry ask for it. What it can no longer do to a sibling or the copilot is
tested end to end in ``tests/server/app/test_app_faults.py``."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import psutil
import pytest

from index.children.containment.guard import ChildGuard
from index.children.containment.guardian import landlock_abi
from tests.support.processes import as_processes, kill_leftovers, orphan_leaving_code

pytestmark = [
    pytest.mark.timeout(60),
    pytest.mark.skipif(not landlock_abi(), reason="this kernel has no Landlock (Linux 5.13+): nothing is isolated"),
]

_CAP_SYS_ADMIN, _CAP_PERFMON = 21, 38


def _run(argv: list[str], env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        argv, env=env if env is not None else {"PATH": os.environ.get("PATH", "")}, capture_output=True,
        text=True, timeout=30, stdin=subprocess.DEVNULL,
    )


def _isolated(code: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    argv = ChildGuard().launch_argv(sys.executable, ["-c", code], isolate=True)
    assert "--isolate" in argv
    return _run(argv, env)


def _status(text: str) -> dict[str, str]:
    return {key: value.strip() for key, value in (line.split(":", 1) for line in text.splitlines() if ":" in line)}


def test_an_isolated_server_still_reads_and_signals_the_processes_it_starts() -> None:
    code = (
        "import os, signal, subprocess, sys\n"
        "child = subprocess.Popen([sys.executable, '-c', 'import sys; print(1, flush=True); sys.stdin.read()'],\n"
        "                         env={'OWN_TOKEN': 'sk-own-0123456789'}, stdin=subprocess.PIPE, stdout=subprocess.PIPE)\n"
        "child.stdout.readline()  # it has exec'd\n"
        "seen = open(f'/proc/{child.pid}/environ', 'rb').read()\n"
        "os.kill(child.pid, signal.SIGTERM)\n"
        "own = open('/proc/self/environ', 'rb').read()\n"
        "print(b'sk-own-0123456789' in seen, child.wait(20) == -signal.SIGTERM, b'GIVEN=yes' in own)\n"
    )
    done = _isolated(code, {"PATH": os.environ.get("PATH", ""), "GIVEN": "yes"})
    assert (done.returncode, done.stdout.split()) == (0, ["True", "True", "True"]), done.stderr
    assert "not isolated" not in done.stderr


def test_an_isolated_server_is_refused_its_guardian_and_the_guardian_still_sweeps_its_tree(tmp_path: Path) -> None:
    pid_file = tmp_path / "orphan.pid"
    code = (
        "import os\n"
        "try:\n"
        "    open(f'/proc/{os.getppid()}/maps', 'rb').close(); print('guardian-readable')\n"
        "except PermissionError:\n"
        "    print('guardian-refused')\n"
    ) + orphan_leaving_code(pid_file)
    try:
        done = _isolated(code)
        assert done.returncode == 0, done.stderr
        assert done.stdout.split() == ["guardian-refused"]
        orphan = int(pid_file.read_text(encoding="ascii"))
        assert not psutil.pid_exists(orphan) or psutil.Process(orphan).status() == psutil.STATUS_ZOMBIE
    finally:  # a failing run must not leave the orphan to the rest of the suite
        if pid_file.exists():
            kill_leftovers(as_processes([int(pid_file.read_text(encoding="ascii"))]))


def _capabilities(status: dict[str, str], field: str) -> set[int]:
    mask = int(status[field], 16)
    return {bit for bit in (_CAP_SYS_ADMIN, _CAP_PERFMON) if mask & (1 << bit)}


@pytest.mark.skipif(os.geteuid() != 0, reason="only a server run as root has CAP_SYS_ADMIN and CAP_PERFMON to lose")
def test_a_server_run_as_root_loses_the_capabilities_that_read_any_process() -> None:
    code = "print(open('/proc/self/status').read())"
    plain = _status(_run(ChildGuard().launch_argv(sys.executable, ["-c", code])).stdout)
    isolated = _status(_isolated(code).stdout)
    if not _capabilities(plain, "CapEff"):
        pytest.skip("this test runs without CAP_SYS_ADMIN and CAP_PERFMON already")
    for field in ("CapEff", "CapPrm", "CapBnd", "CapInh", "CapAmb"):
        assert _capabilities(isolated, field) == set(), (field, isolated[field])
    lost = (1 << _CAP_SYS_ADMIN) | (1 << _CAP_PERFMON)
    assert int(isolated["CapEff"], 16) == int(plain["CapEff"], 16) & ~lost  # and nothing else


@pytest.mark.skipif(
    os.geteuid() != 0 or shutil.which("setpriv") is None, reason="needs root and setpriv to drop CAP_SYS_ADMIN"
)
def test_without_cap_sys_admin_the_server_is_isolated_after_no_new_privs() -> None:
    # As for any user but root: Landlock then wants no_new_privs first.
    setpriv = shutil.which("setpriv")
    assert setpriv is not None
    code = "import os\nprint(open('/proc/self/status').read())\nopen(f'/proc/{os.getppid()}/maps', 'rb')"
    argv = ChildGuard().launch_argv(sys.executable, ["-c", code], isolate=True)
    # setpriv execs the guardian in its own place, so the guardian's parent is still this process.
    done = _run([setpriv, "--bounding-set", "-sys_admin", "--", *argv])
    assert _status(done.stdout)["NoNewPrivs"] == "1", done.stderr
    assert "not isolated" not in done.stderr
    assert done.returncode == 1 and "PermissionError" in done.stderr  # isolated: its guardian is out of reach


def test_isolation_is_asked_for_where_the_entry_and_the_settings_want_it(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("COPILOT_ISOLATE_CHILDREN", raising=False)
    assert "--isolate" in ChildGuard().launch_argv("/bin/true", [], isolate=True)
    assert "--isolate" not in ChildGuard().launch_argv("/bin/true", [], isolate=False)  # "isolated": false
    monkeypatch.setenv("COPILOT_ISOLATE_CHILDREN", "false")
    assert "--isolate" not in ChildGuard().launch_argv("/bin/true", [], isolate=True)


#: Enters Landlock's deepest nesting (16 domains), then becomes the guardian: its isolation must fail.
_NESTED_16_DEEP = """
import ctypes, os, struct, sys
libc = ctypes.CDLL(None, use_errno=True)
libc.syscall.restype = ctypes.c_long
libc.prctl(38, 1, 0, 0, 0)  # no_new_privs, which Landlock asks of a process without CAP_SYS_ADMIN
attributes = struct.pack("=Q", 1 << 11)
for _ in range(16):
    ruleset = libc.syscall(ctypes.c_long(444), attributes, ctypes.c_size_t(8), ctypes.c_uint32(0))
    assert ruleset >= 0 and libc.syscall(ctypes.c_long(446), ctypes.c_int(ruleset), ctypes.c_uint32(0)) == 0
    os.close(ruleset)
os.execv(sys.argv[1], sys.argv[1:])
"""


def test_a_server_that_cannot_be_isolated_still_runs_and_its_log_says_why() -> None:
    argv = ChildGuard().launch_argv(sys.executable, ["-c", "print('served')"], isolate=True)
    done = _run([sys.executable, "-c", _NESTED_16_DEEP, *argv])
    assert (done.returncode, done.stdout.strip()) == (0, "served"), done.stderr
    assert "guardian: the server is not isolated as asked: landlock_restrict_self failed" in done.stderr
