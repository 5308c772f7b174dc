"""An exclusive ``flock`` on a lock file, waited for boundedly, naming its holder.

A process stopped while it holds one (Ctrl-Z, a debugger, a hung disk) must not make every other
process wait without end or without a word: a waiter says once who it waits for, and gives up
after ``wait`` seconds with an error naming the holder. The holder writes who it is into the file
(the lock itself is the ``flock``, which dies with its process: no stale lock is ever left).
"""

from __future__ import annotations

import fcntl
import logging
import os
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, datetime
from pathlib import Path
from typing import IO

from index.errors import ConfigError, CopilotError

logger = logging.getLogger(__name__)

#: Seconds between two attempts while waiting (a ``flock`` wait cannot be bounded otherwise).
_POLL = 0.1


class LockBusyError(CopilotError):
    """Another process held a lock for longer than a waiter waits (the message names it)."""


def _holder(handle: IO[str]) -> str:
    handle.seek(0)
    return handle.read().strip() or "another process"


def _program() -> str:
    """How this process was started, as a person would type it: ``python -m index build`` (under
    ``-m``, ``argv[0]`` is the package's ``__main__.py``: the holder read "__main__.py build")."""
    if not sys.argv or not sys.argv[0]:
        return "python"
    first = Path(sys.argv[0])
    program = f"python -m {first.parent.name}" if first.name == "__main__.py" and first.parent.name else first.name
    return " ".join([program, *sys.argv[1:2]])


def _whoami() -> str:
    return f"pid {os.getpid()} ({_program()}), since {datetime.now(UTC):%Y-%m-%d %H:%M:%S} UTC"


@contextmanager
def exclusive_lock(path: Path, *, wait: float, what: str, unusable: str = "") -> Iterator[None]:
    """Hold ``path`` exclusively for the block; ``what`` names what it guards in messages
    ("writing the index in /x"): "another process is ``what`` (holder)". A lock file that cannot
    be made is a :class:`ConfigError` ending with ``unusable`` (what the user should fix)."""
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        handle = path.open("a+", encoding="utf-8")
    except OSError as error:
        raise ConfigError(
            f"{path}: cannot create this lock file ({error.strerror or error})" + (f"; {unusable}" if unusable else ".")
        ) from None
    with handle:
        _acquire(handle, wait, what)
        handle.seek(0)
        handle.truncate()
        handle.write(_whoami())
        handle.flush()
        try:
            yield
        finally:
            fcntl.flock(handle.fileno(), fcntl.LOCK_UN)


def _acquire(handle: IO[str], wait: float, what: str) -> None:
    try:
        fcntl.flock(handle.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
        return
    except BlockingIOError:
        pass
    logger.warning("another process is %s (%s); waiting up to %g s for it to finish", what, _holder(handle), wait)
    deadline = time.monotonic() + wait
    while True:
        try:
            fcntl.flock(handle.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
            return
        except BlockingIOError:
            if time.monotonic() >= deadline:
                raise LockBusyError(
                    f"another process is {what} ({_holder(handle)}) and did not finish within {wait:g} s. "
                    "Wait for it to finish, or stop it, then run this again."
                ) from None
            time.sleep(_POLL)
