"""One judge per output directory at a time: two judges writing the same ``verdicts.jsonl`` would
both judge every task (each reads the file before the other appends) and leave duplicate verdicts."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from evaluation.directory_lock import directory_lock
from evaluation.judge.outputs import LOCK_FILE
from index.errors import CopilotError


class OutputLockedError(CopilotError):
    """Another judge is writing to the same output directory."""


@contextmanager
def output_lock(out_dir: Path) -> Iterator[None]:
    def busy(holder: str) -> OutputLockedError:
        return OutputLockedError(
            f"another judge is writing to {out_dir} ({holder}); wait for it to finish, or pass another --out DIR."
        )

    with directory_lock(out_dir, LOCK_FILE, busy):
        yield
