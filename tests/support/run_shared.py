"""What the workers of one test run share: a directory, and things built once in it.

Under xdist every worker has its own base temp directory; their common parent is the run's.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Callable
from pathlib import Path

import pytest
from filelock import FileLock

#: How long a worker waits for another building what it needs (the build itself takes seconds).
BUILD_WAIT = 300.0


def run_root(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The directory every worker of this run shares (the base temp directory without xdist)."""
    base = tmp_path_factory.getbasetemp()
    return base.parent if os.environ.get("PYTEST_XDIST_WORKER") else base


def built_once(tmp_path_factory: pytest.TempPathFactory, name: str, build: Callable[[Path], None]) -> Path:
    """``run_root/name``, built by ``build`` by the first worker that asks; the others wait for it
    (up to :data:`BUILD_WAIT`) and get the same directory, which nobody may change afterwards. A
    build that failed leaves nothing behind, so the next worker tries again and fails as visibly."""
    root = run_root(tmp_path_factory)
    target, done = root / name, root / f"{name}.built"
    with FileLock(str(root / f"{name}.lock"), timeout=BUILD_WAIT):
        if not done.exists():
            shutil.rmtree(target, ignore_errors=True)
            target.mkdir()
            try:
                build(target)
            except BaseException:
                shutil.rmtree(target, ignore_errors=True)
                raise
            done.touch()
    return target
