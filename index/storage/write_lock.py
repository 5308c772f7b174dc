"""One writer of an index at a time, across processes (``python -m index build``, a copilot indexing).

Each writer computes what to add and delete from the store as it finds it, so two at once (a
build started twice, a build beside a copilot indexing new servers) each missed what the other
added: the store ended up holding both catalogs, and the build manifest vouched for it. Two
creating a fresh store at once failed with Chroma's "table collections already exists", which
read as a damaged index. A writer holds ``write.lock`` in the index directory
(:func:`index.storage.file_lock.exclusive_lock`); another waits for it, boundedly, saying whom it
waits for.

The lock is re-entrant within a thread (a build holds it around its whole write, and its sync
takes it again); another thread of the same process waits like another process would.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import AbstractContextManager, contextmanager, nullcontext
from pathlib import Path

from index.settings import CopilotSettings
from index.storage.file_lock import exclusive_lock

LOCK_FILE = "write.lock"
#: Seconds a writer waits for another one: a full build of a large catalog on a slow machine.
WRITE_LOCK_WAIT = 1800.0

_held = threading.local()


def settings_write_lock(settings: CopilotSettings) -> AbstractContextManager[None]:
    """The write lock of the index ``settings`` name; none for a store behind ``COPILOT_CHROMA_URL``
    (a server that takes its clients' writes itself; a lock here would not reach its other machines)."""
    return nullcontext() if settings.chroma_url else index_write_lock(settings.index_dir)


@contextmanager
def index_write_lock(index_dir: Path, *, wait: float = WRITE_LOCK_WAIT) -> Iterator[None]:
    """Hold the index's write lock for the block, waiting up to ``wait`` seconds for another writer."""
    path = (index_dir / LOCK_FILE).resolve()
    depth: dict[Path, int] = _held.__dict__.setdefault("depth", {})
    if depth.get(path):
        depth[path] += 1
        try:
            yield
        finally:
            depth[path] -= 1
        return
    unusable = (
        "COPILOT_HOME must be a writable directory holding index/ (move what is in the way, or set COPILOT_HOME "
        "elsewhere)."
    )
    with exclusive_lock(path, wait=wait, what=f"writing the index in {path.parent}", unusable=unusable):
        depth[path] = 1
        try:
            yield
        finally:
            depth.pop(path, None)
