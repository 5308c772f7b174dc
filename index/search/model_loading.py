"""Loading the embedding model off the search path, and again after a failure.

The copilot answers ``route`` lexically until the model is in (:meth:`ToolIndex.route` with
``wait_for_model=False``). A load can fail for good reasons (``COPILOT_EMBEDDING_MODEL`` names a
directory whose weights are broken, torch cannot start): the failure is remembered with its
reason so route can say so instead of "still loading" forever, and a later search retries. Only
searches start attempts, one at a time and only once the delay for that many failures in a row
has passed (:data:`RETRY_SECONDS`), so a model that stays broken costs one attempt every few
minutes, never a loop.
"""

from __future__ import annotations

import atexit
import logging
import os
import shutil
import tempfile
import threading
import time
from collections.abc import Callable

from pydantic import BaseModel

from index.errors import CopilotError

logger = logging.getLogger(__name__)

#: Modes in which BM25 alone ranked the hits because the embedding model is not in.
LEXICAL_MODES: frozenset[str] = frozenset({"lexical-startup", "lexical-fallback"})
#: Seconds to wait before the next attempt after the 1st, 2nd, 3rd ... failure in a row (the last repeats).
RETRY_SECONDS: tuple[float, ...] = (5.0, 15.0, 60.0, 300.0)
#: A loader's message can quote a whole stack of library errors; route shows this much of it.
MAX_REASON_CHARS = 400


class LoadFailure(BaseModel):
    """The last failed attempt to load the model."""

    reason: str
    #: Failed attempts in a row.
    attempts: int
    #: ``time.monotonic()`` after which a search may start the next attempt.
    retry_at: float

    def retry_in(self) -> float:
        """Seconds until the next attempt may start (0 when a search would start it now)."""
        return max(0.0, self.retry_at - time.monotonic())


def retry_delay(attempts: int) -> float:
    """The wait after ``attempts`` failures in a row (bounded by the last of :data:`RETRY_SECONDS`)."""
    return RETRY_SECONDS[min(max(attempts, 1), len(RETRY_SECONDS)) - 1]


def keep_a_working_directory() -> None:
    """Move to a private empty directory when the working directory was removed under a running
    process: torch's libraries then fail to load with no Python error to catch (oneMKL prints
    "Cannot load libtorch_cpu.so" and exits the process: the copilot died mid-session, with no
    session_end). An empty directory of its own, not ``/``: a relative path that could no longer
    be reached must not start meaning something else."""
    try:
        os.getcwd()
    except FileNotFoundError:
        refuge = tempfile.mkdtemp(prefix="copilot-cwd-")
        os.chdir(refuge)
        if not _refuges:
            atexit.register(remove_refuges)
        _refuges.append(refuge)
        logger.warning("the working directory was removed while running; continuing in %s", refuge)


#: Directories :func:`keep_a_working_directory` made, removed when the process leaves.
_refuges: list[str] = []


def remove_refuges() -> None:
    """Remove the directories made to work in, as the process leaves: at ``atexit``, and from the
    copilot's own exit, which leaves through ``os._exit`` (skipping ``atexit``) so that a library's
    thread cannot hold it up. Each refuge is one per process in the temporary directory; left behind,
    every copilot whose host removed its directory would add one."""
    while _refuges:
        shutil.rmtree(_refuges.pop(), ignore_errors=True)


def _reason(error: BaseException) -> str:
    """One line of why: the copilot's own errors are sentences already, others get their type."""
    text = " ".join(str(error).split())
    if not isinstance(error, CopilotError):
        text = f"{type(error).__name__}: {text}" if text else type(error).__name__
    return text if len(text) <= MAX_REASON_CHARS else text[: MAX_REASON_CHARS - 1] + "…"


class ModelLoader:
    """Runs ``load`` in a daemon thread when asked, remembering a failure and when to try again."""

    def __init__(self, load: Callable[[], object]) -> None:
        self._load = load
        self._lock = threading.Lock()
        #: Notified whenever an attempt ends (loaded or failed), for :meth:`wait`.
        self._ended = threading.Condition(self._lock)
        self._thread: threading.Thread | None = None
        #: An attempt is in progress: the warm-up's (in its own thread) counts too, so a search arriving
        #: meanwhile does not start a second one, and a warm-up arriving meanwhile waits for it.
        self._running = False
        self._failure: LoadFailure | None = None
        #: What the last failed attempt raised, for a warm-up that waited for it to raise in turn.
        self._error: Exception | None = None
        #: Attempts started so far (background and warm-up ones alike).
        self.attempts = 0

    @property
    def failure(self) -> LoadFailure | None:
        """Why the last attempt failed; None before any failure and after a success."""
        return self._failure

    @property
    def running(self) -> bool:
        """An attempt is in progress (the warm-up's or a background one)."""
        return self._running

    @property
    def thread(self) -> threading.Thread | None:
        """The last background attempt (tests join it instead of sleeping)."""
        return self._thread

    def start(self) -> bool:
        """Start a background attempt unless one is running or the retry delay has not passed yet;
        returns whether one started."""
        with self._lock:
            if self._running:
                return False
            if self._failure is not None and time.monotonic() < self._failure.retry_at:
                return False
            self.attempts += 1
            self._running = True
            self._thread = threading.Thread(target=self._attempt, name="copilot-model-load", daemon=True)
            self._thread.start()
            return True

    def wait(self, timeout: float) -> None:
        """Wait until no attempt is in progress, at most ``timeout`` seconds (for a caller that would
        rather have the model than an answer at once; whether it loaded is the embedder's to say)."""
        with self._ended:
            self._ended.wait_for(lambda: not self._running, timeout=max(0.0, timeout))

    def load(self) -> None:
        """Load in this thread (the copilot's warm-up); a failure is remembered like a background
        one's, and raised.

        When an attempt is already running (a route often arrives before the warm-up), its outcome
        is this call's: a second attempt would double the work, log the failure twice and push the
        next retry to the longer delay.
        """
        with self._lock:
            if self._running:
                # Unbounded like loading here would be: the running attempt holds the embedder's load
                # lock, so a load of our own would wait for it all the same.
                self._ended.wait_for(lambda: not self._running)
                if self._failure is not None and self._error is not None:
                    raise self._error
                return
            self.attempts += 1
            self._running = True
        self._attempt(raise_error=True)

    def _attempt(self, *, raise_error: bool = False) -> None:
        try:
            keep_a_working_directory()
            self._load()
        except Exception as error:
            with self._lock:
                attempts = (self._failure.attempts if self._failure is not None else 0) + 1
            delay = retry_delay(attempts)
            failure = LoadFailure(reason=_reason(error), attempts=attempts, retry_at=time.monotonic() + delay)
            # Logged before the attempt ends: whoever waited for it finds the failure said already.
            logger.warning(
                "loading the embedding model failed (attempt %d; searches are keyword-only until it loads, "
                "next attempt in %.0f s or later): %s",
                attempts,
                delay,
                failure.reason,
            )
            with self._lock:
                self._failure = failure
                self._error = error
                self._running = False
                self._ended.notify_all()
            if raise_error:
                raise
            return
        with self._lock:
            earlier = self._failure
        if earlier is not None:
            logger.info("loaded the embedding model after %d failed attempt(s)", earlier.attempts)
        with self._lock:
            self._failure = None
            self._error = None
            self._running = False
            self._ended.notify_all()
