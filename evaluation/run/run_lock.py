"""One run per run directory at a time.

Two runs started on the same ``--out`` would each run every pending task: each one's ``_reset``
moves the other's trajectory aside and deletes its workspace mid-task, every task costs twice, and
``summary.json`` keeps whichever record was written last. A run therefore holds ``<out>/.run.lock``
(:mod:`evaluation.directory_lock`) from before it reads the run's manifest until it ends; a second
one stops at once, before any task.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from evaluation.directory_lock import directory_lock
from index.errors import ConfigError

LOCK_FILE = ".run.lock"


class RunDirectoryBusyError(ConfigError):
    """Another run is writing to the same run directory."""


@contextmanager
def run_lock(out: Path) -> Iterator[None]:
    """Hold ``out``'s run lock for the block; :class:`RunDirectoryBusyError` if another run holds it."""

    def busy(holder: str) -> RunDirectoryBusyError:
        return RunDirectoryBusyError(
            f"another run is using {out} ({holder}); wait for it to finish (or stop it), or pass another --out."
        )

    with directory_lock(out, LOCK_FILE, busy):
        yield
