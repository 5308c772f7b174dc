"""``python -I -S exec_guard.py PARENT_PID PROGRAM ARG...``: die with the parent, then become PROGRAM.

Linux only. Asks the kernel to SIGKILL this process when its parent (the copilot's thread that
started it) dies (``prctl(PR_SET_PDEATHSIG)``), checks the parent did not die before that took
effect, and ``exec``s the server's command in place. The setting survives ``exec``, so the child
server itself dies with the copilot even when the copilot is SIGKILLed.

It also makes the child a *child subreaper* (``prctl(PR_SET_CHILD_SUBREAPER)``, also kept across
``exec``): a descendant orphaned by a double fork is re-parented to the child instead of to init,
so it stays in the child's tree, where closing the child and the watchdog find it. Without this a
daemon that double-forks, calls ``setsid`` and ``exec``s with an empty environment (no
``MCP_COPILOT_CHILD`` tag) between two of the watchdog's scans was found by nothing and outlived
the copilot. The price: such orphans that exit stay zombies until the child exits (most servers
reap only their own children), which costs a process-table entry each, no memory.

A separate tiny program because ``anyio.open_process`` has no ``preexec_fn`` (and ``preexec_fn`` is
unsafe in a process with threads); it runs with ``-I -S`` (standard library only) to stay fast,
and changes nothing else: same working directory and file descriptors, and exactly the
environment it was started with (read back from ``/proc/self/environ``: Python's start-up may have added ``LC_CTYPE`` to its own).
"""

import ctypes
import os
import signal
import sys

PR_SET_PDEATHSIG = 1
PR_SET_CHILD_SUBREAPER = 36


def _original_environment() -> dict[bytes, bytes]:
    with open("/proc/self/environ", "rb") as handle:
        entries = handle.read().split(b"\0")
    return dict(entry.split(b"=", 1) for entry in entries if b"=" in entry)


def main() -> None:
    parent = int(sys.argv[1])
    program, argv = sys.argv[2], sys.argv[2:]
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0) != 0:
        print(f"exec_guard: prctl failed (errno {ctypes.get_errno()}); continuing", file=sys.stderr)
    if libc.prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) != 0:
        print(f"exec_guard: PR_SET_CHILD_SUBREAPER failed (errno {ctypes.get_errno()}); continuing", file=sys.stderr)
    if os.getppid() != parent:
        os._exit(137)  # the copilot died before the guard was set: do not start an orphan
    try:
        os.execve(program, argv, _original_environment())
    except OSError as error:
        print(f"cannot start {program}: {error.strerror or error}", file=sys.stderr)
        os._exit(127)


if __name__ == "__main__":
    main()
