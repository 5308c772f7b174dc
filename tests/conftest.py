"""Settings every test process and every process it starts shares."""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterator

import pytest

from tests.support.run_shared import run_root
from tests.support.sockets import SocketDirs, short_base_dir


def pytest_configure(config: pytest.Config) -> None:
    """One thread per process for torch (OpenMP), set before any test imports it and inherited by
    every process a test starts. The suite runs a worker more than the cores, each starting
    copilots and CLIs: torch's own threads only fought over the cores. With one, the index tests
    (``tests/index/storage``, ``tests/index/search``, 4 workers) took 134 s and 244 s of CPU here
    instead of 217 s and 400 s. (Since then the copilot runs every single text, a query or an int8
    document, on one thread for users too, see ``index/models/torch_threads.py``; this still covers
    float32 batches.) A value set by whoever runs the tests wins."""
    os.environ.setdefault("OMP_NUM_THREADS", "1")


@pytest.fixture(scope="session", autouse=True)
def shared_user_cache(tmp_path_factory: pytest.TempPathFactory) -> Iterator[None]:
    """The user's cache directory (``XDG_CACHE_HOME``) is one temporary directory for the whole run.

    The copilot keeps the embedding model's traced encoder there (``COPILOT_MODEL_CACHE``'s
    default): the first process that loads the model stores it, every later one (this run's
    copilots and CLIs, on every worker) loads it in about a second -- and the user's real cache is
    never touched. Entries are written atomically, so workers may race to store the same one.
    """
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("XDG_CACHE_HOME", str(run_root(tmp_path_factory) / "user-cache"))
        yield


@pytest.fixture(scope="session")
def socket_dirs() -> Iterator[SocketDirs]:
    """Fresh directories with short paths, for Unix sockets (``tests/support/sockets.py``)."""
    base = short_base_dir()
    try:
        yield SocketDirs(base)
    finally:
        shutil.rmtree(base, ignore_errors=True)


@pytest.hookimpl(optionalhook=True)  # without xdist (``-p no:xdist``) there is no such hook
def pytest_xdist_auto_num_workers(config: pytest.Config) -> int:
    """``-n auto``: one worker more than the cores, at most 4. Most tests wait on processes they
    started (copilots, children, CLIs) for part of their time; with a third worker CI's two cores
    stayed busy and the whole suite took 668 s instead of 777 s here (``/usr/bin/time``: 194% CPU)."""
    cores = os.cpu_count() or 1
    return min(4, cores + 1)
