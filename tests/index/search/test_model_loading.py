"""A route that may wait for the embedding model (``ToolIndex.route(model_wait=…)``, the copilot's
``COPILOT_ROUTE_MODEL_WAIT``): the real bundled model, a real index, and a real broken model directory.

Without it, whether a route right after start-up ranked by keywords alone or by the hybrid depended on
how fast the model loaded; a caller that needs the hybrid's ranking waits, and the wait is bounded.
"""

from __future__ import annotations

import logging
import os
import subprocess
import sys
import threading
from pathlib import Path

import pytest

import index.search.model_loading as model_loading
from index.models.embedding import Embedder, EmbeddingModelError
from tests.index.index_support import index_with_broken_model, open_index

pytestmark = pytest.mark.timeout(300)


def test_a_route_that_may_wait_is_ranked_by_the_hybrid_once_the_model_is_in(built_home: Path) -> None:
    fresh = Embedder()  # real model, not loaded yet (the process-wide one is)
    index = open_index(built_home, fresh)
    # No tool shares a word with this query: keywords alone would answer nothing.
    routed = index.route("is it going to rain tomorrow", top_k=3, wait_for_model=False, model_wait=240)
    assert routed.mode == "hybrid" and fresh.loaded
    assert routed.hits[0].tool == "get_weather_forecast"
    assert index.model_loader.attempts == 1  # the route started the load and waited for it


def test_the_wait_is_bounded_and_then_the_answer_is_by_keywords(built_home: Path) -> None:
    fresh = Embedder()
    index = open_index(built_home, fresh)
    assert index.model_state() == {"state": "not loaded"}
    # Holding the embedder's load lock keeps the load the route starts from finishing: the wait ends
    # at its bound, not when the model is in.
    with fresh._load_lock:  # noqa: SLF001 -- deterministic "still loading" without timing
        routed = index.route("air quality", top_k=5, wait_for_model=False, model_wait=0.2)
        assert routed.mode == "lexical-startup" and not fresh.loaded
        assert [hit.tool for hit in routed.hits] == ["get_air_quality"]
        loader = index.model_loader.thread
        assert loader is not None and loader.is_alive()
        assert index.model_state() == {"state": "loading"}
    loader.join(timeout=240)
    assert fresh.loaded
    assert index.model_state() == {"state": "loaded"}


def test_a_route_that_waits_reports_a_failed_load_at_once_and_does_not_retry_early(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    model, home = index_with_broken_model(tmp_path)
    monkeypatch.setattr(model_loading, "RETRY_SECONDS", (3600.0,))
    index = open_index(home, Embedder(str(model)), embedding_model=str(model))
    # Without a wait the first answer says "still loading"; waiting, it knows the load failed.
    first = index.route("air quality", top_k=5, wait_for_model=False, model_wait=240)
    assert first.mode == "lexical-fallback" and first.model_failure is not None
    assert f"cannot load the embedding model from {model}" in first.model_failure.reason
    assert [hit.tool for hit in first.hits] == ["get_air_quality"]
    # The next attempt is an hour away: a route that may wait starts none, and does not wait for one.
    again = index.route("air quality", wait_for_model=False, model_wait=240)
    assert again.mode == "lexical-fallback" and index.model_loader.attempts == 1
    state = index.model_state()
    assert (state["state"], state["attempts"]) == ("failed", 1) and 3000 < state["retry_in_s"] <= 3600
    assert state["reason"] == first.model_failure.reason


class _EnteredCondition(threading.Condition):
    """A condition that says when someone starts waiting on it (so a test knows a thread is parked)."""

    def __init__(self, lock: threading.Lock) -> None:
        super().__init__(lock)
        self.entered = threading.Event()

    def wait(self, timeout: float | None = None) -> bool:
        self.entered.set()
        return super().wait(timeout)


def test_a_warm_up_during_a_routes_attempt_waits_for_it_instead_of_loading_again(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """At start-up a route often arrives before the warm-up: the warm-up used to start a second attempt,
    doubling the attempts, logging the failure twice and pushing the next retry to the second delay."""
    model, home = index_with_broken_model(tmp_path)
    embedder = Embedder(str(model))
    index = open_index(home, embedder, embedding_model=str(model))
    loader = index.model_loader
    ended = loader._ended = _EnteredCondition(loader._lock)  # noqa: SLF001 -- know when warm-up waits
    raised: list[BaseException] = []

    def warm() -> None:
        try:
            index.warm()
        except BaseException as error:  # noqa: BLE001 -- the test checks it
            raised.append(error)

    caplog.set_level(logging.WARNING, logger=model_loading.__name__)
    # Holding the embedder's load lock keeps the route's attempt running until the warm-up is waiting.
    with embedder._load_lock:  # noqa: SLF001 -- deterministic "still loading" without timing
        assert index.route("air quality", wait_for_model=False).mode == "lexical-startup"
        background = loader.thread
        assert background is not None and background.is_alive()
        warm_up = threading.Thread(target=warm, name="test-warm-up", daemon=True)
        warm_up.start()
        assert ended.entered.wait(timeout=60), "the warm-up did not wait for the running attempt"
    warm_up.join(timeout=120)
    background.join(timeout=120)
    assert not warm_up.is_alive() and not background.is_alive()
    assert len(raised) == 1 and isinstance(raised[0], EmbeddingModelError)
    assert "cannot load the embedding model" in str(raised[0])
    failure = loader.failure
    assert loader.attempts == 1 and failure is not None and failure.attempts == 1
    assert failure.retry_in() <= model_loading.RETRY_SECONDS[0]
    # This test's model only: another test's attempt may end in a thread of its own.
    warnings = [
        record for record in caplog.records if record.name == model_loading.__name__ and str(model) in record.getMessage()
    ]
    assert len(warnings) == 1 and "attempt 1;" in warnings[0].getMessage()


_LOAD_WITH_CWD_REMOVED = """
import os, sys
os.chdir(sys.argv[1])
os.rmdir(sys.argv[1])  # a host that started the copilot in a temporary directory removed it
from index.search.model_loading import ModelLoader
ModelLoader(lambda: __import__("torch")).load()
print("loaded in", "copilot-cwd-" in os.getcwd() and "a directory of its own")
print(os.getcwd(), flush=True)
if sys.argv[2:] == ["copilot-exit"]:
    from server.__main__ import _exit_now
    _exit_now(0)
"""


@pytest.mark.parametrize("leaving", ["normal-exit", "copilot-exit"])
def test_a_working_directory_removed_while_running_does_not_abort_the_model_load(tmp_path: Path, leaving: str) -> None:
    """Importing torch there ended the whole process (oneMKL "Cannot load libtorch_cpu.so"). The
    directory made for it goes when the process does, also through the copilot's ``os._exit``: one
    was left in the temporary directory for each such copilot."""
    gone = tmp_path / "gone"
    gone.mkdir()
    ran = subprocess.run(
        [sys.executable, "-c", _LOAD_WITH_CWD_REMOVED, str(gone), leaving],
        capture_output=True, text=True, timeout=120, check=False,
        env={**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[3])},
    )
    loaded, _, refuge = ran.stdout.strip().partition("\n")
    left = "copilot-cwd-" in refuge and Path(refuge).is_dir()
    if left:
        Path(refuge).rmdir()  # the process is gone; keep the temporary directory clean even when this fails
    assert ran.returncode == 0 and loaded == "loaded in a directory of its own", ran.stdout + ran.stderr
    assert "the working directory was removed while running; continuing in" in ran.stderr
    assert "copilot-cwd-" in refuge and not left, f"{refuge} was left behind"
