"""One judge per output directory at a time.

Two judges writing the same ``verdicts.jsonl`` would both judge every task (each reads the file
before the other appends) and leave duplicate verdicts. The judge therefore holds an exclusive
``flock`` on ``<out>/.judge.lock`` while it judges and writes the reports; a second one stops at
once with an error naming the holder. The lock dies with its process, so a killed judge never
leaves a stale lock behind.
"""

from __future__ import annotations

import fcntl
import os
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from index.errors import CopilotError
from server.trajectory import utc_now

LOCK_FILE = ".judge.lock"


class OutputLockedError(CopilotError):
    """Another judge is writing to the same output directory."""


@contextmanager
def output_lock(out_dir: Path) -> Iterator[None]:
    path = out_dir / LOCK_FILE
    handle = path.open("a+", encoding="utf-8")
    try:
        try:
            fcntl.flock(handle.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            handle.seek(0)
            holder = handle.read().strip() or "another process"
            raise OutputLockedError(
                f"another judge is writing to {out_dir} ({holder}); wait for it to finish, "
                "or pass another --out DIR."
            ) from None
        handle.seek(0)
        handle.truncate()
        handle.write(f"pid {os.getpid()}, since {utc_now()}")
        handle.flush()
        yield
    finally:
        handle.close()
