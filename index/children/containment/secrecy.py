"""Keeping the copilot's own secrets out of its children's reach (Linux).

Children start with an environment that holds none of the copilot's secrets
(``index.children.containment.environment``), but on Linux a child can still read the copilot's: any process
of the same user may open ``/proc/<copilot pid>/environ`` (and ``mem``), and root may read any
process's. :func:`protect_secrets` runs at start-up, once settings are read, and closes both ways:

1. It marks the process non-dumpable (``prctl(PR_SET_DUMPABLE, 0)``): its ``/proc`` files become
   root's, so other processes of the same user (every child) can neither read its environment or
   memory nor attach a debugger. ``COPILOT_PROTECT_PROCESS=false`` skips this, e.g. to attach
   py-spy or gdb.
2. It blanks, in the memory ``/proc/<pid>/environ`` shows (the environment block the kernel set up
   at ``exec``), the values of variables that look like secrets (names with token, key, password,
   secret, auth, credential; values with ``user:pass@`` in a URL), after pointing the C library's
   environment at copies of them. So even a reader allowed to bypass (1) -- root -- finds them
   blank there, while ``os.environ``, ``getenv()`` and processes the copilot starts itself still
   see the real values (``${VAR}`` in the servers file keeps working).

Root can still read the copilot's memory through ``/proc/<pid>/mem``: run untrusted servers as
another user or in a container when the copilot runs as root.

Neither step exists on macOS: there is no ``/proc``, and other processes of the same user can read
a process's environment (``ps -E``, ``KERN_PROCARGS2``). The allowlist still keeps secrets out of a
child's own environment there; keep secrets the copilot does not need out of its environment.
"""

from __future__ import annotations

import ctypes
import logging
import os
import sys
from dataclasses import dataclass, field

from index.children.containment.environment import has_url_credentials, looks_secret_name

logger = logging.getLogger(__name__)

PR_SET_DUMPABLE = 4


@dataclass
class Protection:
    """What :func:`protect_secrets` did."""

    non_dumpable: bool = False
    blanked: list[str] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)


def _libc() -> ctypes.CDLL:
    return ctypes.CDLL(None, use_errno=True)


def _environment_block() -> tuple[int, int]:
    """Start and end address of the initial environment block (``/proc/self/stat`` fields 50, 51)."""
    with open("/proc/self/stat", "rb") as handle:
        stat = handle.read()
    fields = stat[stat.rindex(b")") + 2 :].split()  # fields[0] is field 3 (the state)
    return int(fields[47]), int(fields[48])


def _is_secret(name: str, value: str) -> bool:
    return looks_secret_name(name) or has_url_credentials(value, name)


def blank_secret_environment() -> list[str]:
    """Blank the secret values in the environment block ``/proc/self/environ`` shows; their names."""
    start, end = _environment_block()
    if not start or end <= start:
        return []
    block = ctypes.string_at(start, end - start)
    blanked: list[str] = []
    offset = 0
    for entry in block.split(b"\0"):
        name, equals, value = entry.partition(b"=")
        value_offset = offset + len(name) + len(equals)
        offset += len(entry) + 1
        if not equals or not value:
            continue
        text_name = name.decode("utf-8", "surrogateescape")
        if not _is_secret(text_name, value.decode("utf-8", "surrogateescape")):
            continue
        current = os.environ.get(text_name)
        if current is not None:
            # setenv() copies the variable: getenv() and children started with the inherited
            # environment keep the value once the block is blanked.
            os.putenv(text_name, current)
        ctypes.memset(start + value_offset, 0, len(value))
        blanked.append(text_name)
    return blanked


def protect_secrets(*, non_dumpable: bool = True) -> Protection:
    """Make this process's environment and memory unreadable to its children; see the module docstring."""
    done = Protection()
    if not sys.platform.startswith("linux"):
        return done
    try:
        done.blanked = blank_secret_environment()
    except (OSError, ValueError, IndexError) as error:
        done.problems.append(f"could not blank secrets in /proc/self/environ: {error}")
    if non_dumpable:
        if _libc().prctl(PR_SET_DUMPABLE, 0, 0, 0, 0) == 0:
            done.non_dumpable = True
        else:
            done.problems.append(f"prctl(PR_SET_DUMPABLE, 0) failed (errno {ctypes.get_errno()})")
    for problem in done.problems:
        logger.warning("%s; children may be able to read the copilot's secrets", problem)
    return done
