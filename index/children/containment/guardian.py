"""``python -I -S guardian.py [--isolate] PARENT_PID PROGRAM ARG...``: the parent of one child
server, which dies with the copilot and takes everything the server leaves behind with it.

Linux only. The guardian asks the kernel to signal it when its parent (the copilot's thread that
started it) dies (``prctl(PR_SET_PDEATHSIG)``) and checks the parent did not die before that took
effect; on that signal it SIGKILLs everything in its tree, the server included, and exits. (It was
SIGKILLed itself: what the server had daemonized was then orphaned to init, and a daemon that had
also dropped its environment outlived a copilot killed before its watchdog's next scan.) It makes
itself a *child subreaper* (``prctl(PR_SET_CHILD_SUBREAPER)``), forks, and the fork sets its own
parent-death signal (dying with the guardian) and ``exec``s the server's command: same working
directory and file descriptors, exactly the environment the guardian was started with (read back
from ``/proc/self/environ``: Python's start-up may have added ``LC_CTYPE`` to its own), and the
default disposition of every signal Python's start-up or the guardian ignores.

The guardian then waits. Whatever the server double-forks is orphaned to the guardian instead of to
init, and reaped by it as it exits (no zombies pile up). When the server exits -- stopped by the
copilot, crashed, or done -- the guardian SIGKILLs every process left in its tree and reaps them,
then exits the way the server did (the same exit code, or the same signal), so the copilot sees
the server's own ending. Before it, a daemon that double-forked, called ``setsid`` and ``exec``d
with an empty environment (no ``MCP_COPILOT_CHILD`` tag) *while its server was being stopped*, or
just before it crashed, was found by nothing and outlived the copilot.

The server leads a process group of its own, as it did when it was started directly, so its
signals to its group (``kill(0, …)``, ``killpg(getpid(), …)``) reach its processes and not the
guardian. SIGTERM, SIGINT and SIGHUP sent to the guardian (the copilot signals the guardian's group)
are passed on to the server's group, and the guardian ends when the server does; a SIGKILL of the
guardian ends the server through its parent-death signal. The guardian closes its copies of the
server's stdin and stdout, so the pipes close when the server's do. A program that cannot be
``exec``d is reported on stderr in a line that begins with :data:`CANNOT_START` and the reason in
parentheses, then the path (exit code 127),
which the copilot reads back as a start error.

Its environment is its server's, so its ``/proc/<pid>/environ`` would show a secret an entry hands
its server to every other child: the guardian keeps a copy, zeroes the block that file shows (which
holds even against root) and makes itself non-dumpable (``prctl(PR_SET_DUMPABLE, 0)``: its
``/proc`` files become root's).

With ``--isolate`` (the copilot's default for every server, where the kernel has Landlock: Linux
5.13 and later), the fork puts itself in a Landlock domain of its own before the ``exec``
(:func:`isolate`). The kernel then refuses the server, and everything it starts, any ptrace-type
access to a process outside that domain: ``/proc/<pid>/environ``, ``mem``, ``maps`` of the other
servers, the copilot and the guardians; ``ptrace``; and, from Landlock ABI 6 (Linux 6.12) on,
signals to them. The guardian stays outside, so it still signals and sweeps the server's tree. A
server that runs with ``CAP_SYS_ADMIN`` or ``CAP_PERFMON`` (root) reads any process's ``environ``
and ``maps`` whatever Landlock says (the kernel lets a performance monitor read them), so an isolated
server loses those two capabilities too.

A separate tiny program because ``anyio.open_process`` has no ``preexec_fn`` (and ``preexec_fn`` is
unsafe in a process with threads); it runs with ``-I -S`` (standard library only) to stay small
(about 4 MB of private memory per child).
"""

import ctypes
import errno
import os
import resource
import signal
import struct
import sys
import time

PR_SET_PDEATHSIG = 1
PR_SET_DUMPABLE = 4
PR_SET_CHILD_SUBREAPER = 36
PR_CAPBSET_DROP = 24
PR_SET_NO_NEW_PRIVS = 38
#: With either, the kernel lets a process read any other's ``environ`` and ``maps``, Landlock or not.
_CAP_SYS_ADMIN, _CAP_PERFMON = 21, 38
_LINUX_CAPABILITY_VERSION_3 = 0x20080522
#: Landlock's system calls have these numbers on every architecture that has them (Linux 5.13+).
_LANDLOCK_CREATE_RULESET, _LANDLOCK_RESTRICT_SELF = 444, 446
_LANDLOCK_CREATE_RULESET_VERSION = 1
#: What the domain restricts besides ptrace-type access: signals out of it where the ABI has that
#: scope (6+); before that, making block devices (a domain must restrict something, and no server
#: needs to).
_LANDLOCK_SCOPE_SIGNAL = 1 << 1
_LANDLOCK_ACCESS_FS_MAKE_BLOCK = 1 << 11
#: The guardian's parent-death signal: not one the server or anyone else has a use for.
_COPILOT_GONE = signal.SIGRTMIN + 1
#: Signals meant for the server, which the guardian passes on to the server's process group.
_FOR_THE_SERVER = (signal.SIGTERM, signal.SIGINT, signal.SIGHUP)
#: How the guardian's line on stderr begins when the server's program cannot be ``exec``d.
CANNOT_START = "mcp-copilot guardian: cannot start "
#: Signals Python's start-up ignores; the server gets them back at their defaults (as ``subprocess`` does).
_RESTORED = tuple(getattr(signal, name) for name in ("SIGPIPE", "SIGXFZ", "SIGXFSZ") if hasattr(signal, name))
#: Seconds the sweep after the server's exit may take (a process stuck in the kernel is left behind).
_SWEEP_SECONDS = 2.0
_SWEEP_POLL = 0.005


def _original_environment() -> dict[bytes, bytes]:
    with open("/proc/self/environ", "rb") as handle:
        entries = handle.read().split(b"\0")
    return dict(entry.split(b"=", 1) for entry in entries if b"=" in entry)


def _blank_environment_block() -> None:
    """Zero the environment block ``/proc/self/environ`` shows (the guardian has its copy)."""
    with open("/proc/self/stat", "rb") as handle:
        stat = handle.read()
    fields = stat.rpartition(b")")[2].split()  # fields[0] is field 3 (the state)
    start, end = int(fields[47]), int(fields[48])
    if start and end > start:
        ctypes.memset(start, 0, end - start)


def _prctl(libc: ctypes.CDLL, option: int, value: int, what: str) -> None:
    if libc.prctl(option, value, 0, 0, 0) != 0:
        print(f"guardian: {what} failed (errno {ctypes.get_errno()}); continuing", file=sys.stderr)


def _syscall(libc: ctypes.CDLL, number: int, *args: object) -> int:
    libc.syscall.restype = ctypes.c_long
    return int(libc.syscall(ctypes.c_long(number), *args))


def landlock_abi(libc: ctypes.CDLL | None = None) -> int:
    """The Landlock ABI version this kernel offers; 0 where it has none (or is not Linux)."""
    if not sys.platform.startswith("linux"):
        return 0
    libc = libc if libc is not None else ctypes.CDLL(None, use_errno=True)
    version = _syscall(
        libc, _LANDLOCK_CREATE_RULESET, None, ctypes.c_size_t(0), ctypes.c_uint32(_LANDLOCK_CREATE_RULESET_VERSION)
    )
    return max(version, 0)


def isolate(libc: ctypes.CDLL) -> str | None:
    """Enter a Landlock domain of this process's own and drop ``CAP_SYS_ADMIN`` and ``CAP_PERFMON``
    from what a program it ``exec``s can have. What went wrong, or None."""
    abi = landlock_abi(libc)
    if abi < 1:
        return "this kernel has no Landlock"
    if abi >= 6:
        attributes = struct.pack("=QQQ", 0, 0, _LANDLOCK_SCOPE_SIGNAL)  # handled fs, handled net, scoped
    else:
        attributes = struct.pack("=Q", _LANDLOCK_ACCESS_FS_MAKE_BLOCK)
    buffer = ctypes.create_string_buffer(attributes, len(attributes))
    ruleset = _syscall(libc, _LANDLOCK_CREATE_RULESET, buffer, ctypes.c_size_t(len(attributes)), ctypes.c_uint32(0))
    if ruleset < 0:
        return f"landlock_create_ruleset failed ({os.strerror(ctypes.get_errno())})"
    try:
        if _syscall(libc, _LANDLOCK_RESTRICT_SELF, ctypes.c_int(ruleset), ctypes.c_uint32(0)) != 0:
            if ctypes.get_errno() != errno.EPERM:
                return f"landlock_restrict_self failed ({os.strerror(ctypes.get_errno())})"
            # Without CAP_SYS_ADMIN the kernel asks for no_new_privs first: a set-user-ID program
            # (sudo) then runs without its privileges in the server's tree.
            if libc.prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0:
                return f"prctl(PR_SET_NO_NEW_PRIVS) failed ({os.strerror(ctypes.get_errno())})"
            if _syscall(libc, _LANDLOCK_RESTRICT_SELF, ctypes.c_int(ruleset), ctypes.c_uint32(0)) != 0:
                return f"landlock_restrict_self failed ({os.strerror(ctypes.get_errno())})"
    finally:
        os.close(ruleset)
    return _drop_capabilities(libc, (_CAP_SYS_ADMIN, _CAP_PERFMON))


def _drop_capabilities(libc: ctypes.CDLL, capabilities: tuple[int, ...]) -> str | None:
    """Out of the bounding and inheritable sets, so a program ``exec``'d as root does not get them."""
    for capability in capabilities:
        # EPERM: no CAP_SETPCAP, so not privileged; EINVAL: a kernel older than CAP_PERFMON (5.8).
        dropped = libc.prctl(PR_CAPBSET_DROP, capability, 0, 0, 0) == 0
        if not dropped and ctypes.get_errno() not in (errno.EPERM, errno.EINVAL):
            return f"prctl(PR_CAPBSET_DROP) failed ({os.strerror(ctypes.get_errno())})"
    header = (ctypes.c_uint32 * 2)(_LINUX_CAPABILITY_VERSION_3, 0)
    data = (ctypes.c_uint32 * 6)()  # two of (effective, permitted, inheritable)
    if libc.capget(header, data) != 0:
        return f"capget failed ({os.strerror(ctypes.get_errno())})"
    inheritable = data[2] | data[5] << 32
    lowered = inheritable & ~sum(1 << capability for capability in capabilities)
    if lowered != inheritable:  # lowering the inheritable set needs no privilege
        data[2], data[5] = lowered & 0xFFFFFFFF, lowered >> 32
        if libc.capset(header, data) != 0:
            return f"capset failed ({os.strerror(ctypes.get_errno())})"
    return None


def _descendants(root: int) -> list[int]:
    """Every live process under ``root`` (read from ``/proc``; the guardian has no psutil)."""
    children: dict[int, list[int]] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat", "rb") as handle:
                stat = handle.read()
        except OSError:
            continue
        fields = stat.rpartition(b")")[2].split()  # the command name may hold spaces and parentheses
        if len(fields) > 1:
            children.setdefault(int(fields[1]), []).append(int(entry))
    found, queue = [], list(children.get(root, []))
    while queue:
        pid = queue.pop()
        found.append(pid)
        queue.extend(children.get(pid, []))
    return found


def _sweep() -> None:
    """SIGKILL what the server left in the guardian's tree and reap it, until none is left; bounded."""
    me = os.getpid()
    deadline = time.monotonic() + _SWEEP_SECONDS
    while True:
        for pid in _descendants(me):
            try:
                os.kill(pid, signal.SIGKILL)
            except OSError:
                pass
        # What the killed processes had started is orphaned to the guardian: the next round gets it.
        try:
            while os.waitpid(-1, os.WNOHANG)[0]:
                pass
        except ChildProcessError:
            return  # no child left, so no descendant either
        if time.monotonic() > deadline:
            print("guardian: processes left by the server did not exit after SIGKILL; leaving them", file=sys.stderr)
            return
        time.sleep(_SWEEP_POLL)


def _end_with_the_copilot(_signum: int, _frame: object) -> None:
    """The copilot is gone: take the server and everything it started along, then go."""
    _sweep()
    os._exit(128 + signal.SIGKILL)


def _end_like(status: int) -> None:
    """Exit the way the server did: its exit code, or killed by its signal."""
    if os.WIFSIGNALED(status):
        signum = os.WTERMSIG(status)
        resource.setrlimit(resource.RLIMIT_CORE, (0, 0))  # the server may have dumped core; the guardian does not
        try:
            signal.signal(signum, signal.SIG_DFL)
        except (OSError, ValueError):
            pass  # SIGKILL and SIGSTOP cannot be caught (their action is the default already)
        os.kill(os.getpid(), signum)
        os._exit(128 + signum)  # a signal that does not end this process (the C library's own)
    os._exit(os.waitstatus_to_exitcode(status))


def _become_server(
    libc: ctypes.CDLL, guardian: int, program: str, argv: list[str], environment: dict[bytes, bytes], *, isolated: bool
) -> None:
    for signum in (*_FOR_THE_SERVER, *_RESTORED):
        signal.signal(signum, signal.SIG_DFL)
    signal.pthread_sigmask(signal.SIG_UNBLOCK, _FOR_THE_SERVER)  # a signal mask survives exec
    # Its own process group (in the guardian's session): ``kill(0, …)`` and ``killpg(getpid(), …)``
    # reach the server's processes, as they did when it led the group itself, and not the guardian.
    try:
        os.setpgid(0, 0)
    except OSError:
        pass
    _prctl(libc, PR_SET_PDEATHSIG, signal.SIGKILL, "prctl(PR_SET_PDEATHSIG)")
    if os.getppid() != guardian:
        os._exit(137)  # the guardian died before the signal was set: do not start an orphan
    if isolated and (problem := isolate(libc)) is not None:
        print(f"guardian: the server is not isolated as asked: {problem}", file=sys.stderr)
    try:
        os.execve(program, argv, environment)
    except OSError as error:
        # The reason first: the copilot reads this line back cut to a few hundred characters, and
        # a long path before the reason cut the reason off.
        print(f"{CANNOT_START}({error.strerror or type(error).__name__}): {program}", file=sys.stderr)
        os._exit(127)


def _forward(server: int) -> None:
    """Pass the signals meant for the server on to its process group."""

    def forward(signum: int, _frame: object) -> None:
        try:
            os.killpg(server, signum)
        except OSError:
            try:
                os.kill(server, signum)
            except OSError:
                pass

    for signum in _FOR_THE_SERVER:
        signal.signal(signum, forward)


def main() -> None:
    arguments = sys.argv[1:]
    isolated = arguments[0] == "--isolate"
    if isolated:
        arguments = arguments[1:]
    parent = int(arguments[0])
    program, argv = arguments[1], arguments[1:]
    libc = ctypes.CDLL(None, use_errno=True)
    # Its environment is its server's, secrets an entry hands it included: only the server may read
    # them (in its own /proc/<pid>/environ), not the other children. ``exec`` makes the server
    # dumpable again.
    environment = _original_environment()
    try:
        _blank_environment_block()
    except (OSError, ValueError, IndexError) as error:
        print(f"guardian: could not blank /proc/self/environ ({error}); continuing", file=sys.stderr)
    _prctl(libc, PR_SET_DUMPABLE, 0, "prctl(PR_SET_DUMPABLE)")
    signal.signal(_COPILOT_GONE, _end_with_the_copilot)
    _prctl(libc, PR_SET_PDEATHSIG, _COPILOT_GONE, "prctl(PR_SET_PDEATHSIG)")
    _prctl(libc, PR_SET_CHILD_SUBREAPER, 1, "prctl(PR_SET_CHILD_SUBREAPER)")
    if os.getppid() != parent:
        os._exit(137)  # the copilot died before the guard was set: do not start an orphan
    # Blocked, not ignored, until the forwarding is in place: one that arrives meanwhile stays
    # pending and is passed on then (ignored, it was lost, and the server never got its SIGTERM).
    signal.pthread_sigmask(signal.SIG_BLOCK, _FOR_THE_SERVER)
    guardian = os.getpid()
    server = os.fork()
    if server == 0:
        _become_server(libc, guardian, program, argv, environment, isolated=isolated)
    try:
        os.setpgid(server, server)  # as the server does itself, so neither order of the two races
    except OSError:
        pass  # it has exec'd already (and set its group first)
    _forward(server)
    signal.pthread_sigmask(signal.SIG_UNBLOCK, _FOR_THE_SERVER)
    null = os.open(os.devnull, os.O_RDWR)
    os.dup2(null, 0)
    os.dup2(null, 1)
    os.close(null)
    while True:
        pid, status = os.wait()  # reaps orphans as they exit, until the server does
        if pid == server:
            break
    _sweep()
    _end_like(status)


if __name__ == "__main__":
    main()
