"""One writer per output directory at a time (the benchmark run's ``--out``, the judge's ``--out``).

Two processes writing one directory (a command started again in another terminal while a ``nohup``
one still runs, a CI retry racing the first job) would each do all the work and overwrite each
other's files. The writer holds an exclusive ``flock`` on a lock file in the directory; a second
one stops at once with an error naming the holder. The lock dies with its process, so a killed
writer never leaves a stale lock behind.
"""

from __future__ import annotations

import fcntl
import os
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

from index.errors import ConfigError, CopilotError
from server.trajectory.records import utc_now


@contextmanager
def directory_lock(directory: Path, lock_file: str, busy: Callable[[str], CopilotError]) -> Iterator[None]:
    """Hold ``directory/lock_file`` for the block; raises ``busy(holder)`` if another process holds it."""
    path = directory / lock_file
    try:
        handle = path.open("a+", encoding="utf-8")
    except OSError as error:
        raise ConfigError(f"--out {directory}: cannot create {lock_file} there ({error.strerror or error}).") from None
    with handle:
        try:
            fcntl.flock(handle.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            handle.seek(0)
            raise busy(handle.read().strip() or "another process") from None
        # Who holds it, for the message a second writer prints (the lock itself is the flock).
        handle.seek(0)
        handle.truncate()
        handle.write(f"pid {os.getpid()}, since {utc_now()}")
        handle.flush()
        yield
