"""Updates of one thing delivered at most once per interval, the last one always.

A child may announce ``notifications/resources/updated`` of a resource thousands of times a second;
its subscribers only need to hear that it changed since they last read it (they read it again).
:class:`Coalescer` turns a flood of updates of one key into at most one delivery per ``interval``:
the first goes out at once; the ones that arrive while it is being delivered, or within the
interval after it began, merge into one more delivery at the end of the interval (the trailing
edge: an update is merged, never lost). The same as a flood of ``list_changed`` costs one listing
per interval (``server.pool.sessions.RELIST_INTERVAL``).

At most ``max_pending`` keys are in flight at once (one task each), so a child that invents a new
URI per notification cannot grow the copilot's memory: an update of one more key is dropped, the
first drop of a flood logged, and how many were dropped logged once the flood is over.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Hashable
from typing import Generic, TypeVar

import anyio
import anyio.abc

logger = logging.getLogger(__name__)

K = TypeVar("K", bound=Hashable)


class Coalescer(Generic[K]):
    """``add(key)`` per update; ``deliver(key)`` runs per merged update (see the module docstring).

    ``describe(key)`` names a key in the log; ``what`` names what the keys stand for (``"resources"``).
    """

    def __init__(
        self,
        deliver: Callable[[K], Awaitable[None]],
        task_group: anyio.abc.TaskGroup,
        *,
        interval: float,
        max_pending: int,
        what: str,
        describe: Callable[[K], str] = repr,
    ) -> None:
        self._deliver = deliver
        self._task_group = task_group
        self.interval = interval
        self.max_pending = max_pending
        self._what = what
        self._describe = describe
        #: Keys in flight -> whether an update arrived since their last delivery began.
        self._due: dict[K, bool] = {}
        self.dropped = 0  # updates dropped in the current flood (the pending keys were at the cap)
        self._progress = anyio.Event()

    @property
    def pending(self) -> int:
        """Keys being delivered, waiting for their turn, or within the interval after a delivery."""
        return len(self._due)

    def add(self, key: K) -> bool:
        """Note an update of ``key``; False when it was dropped (too many keys in flight). Never blocks."""
        if key in self._due:
            self._due[key] = True  # merged into the delivery at the end of the interval
            return True
        if len(self._due) >= self.max_pending:
            self.dropped += 1
            if self.dropped == 1:
                logger.warning(
                    "updates of %s %s are waiting to be delivered, the most the copilot holds; dropping updates "
                    "of further %s until some are out (the first dropped: %s)",
                    f"{len(self._due):,}",
                    self._what,
                    self._what,
                    self._describe(key),
                )
            return False
        self._due[key] = True
        self._task_group.start_soon(self._run, key, name=f"deliver updates of {self._what}")
        return True

    async def _run(self, key: K) -> None:
        try:
            while self._due[key]:
                self._due[key] = False  # what arrives from now on needs another delivery
                began = anyio.current_time()
                try:
                    await self._deliver(key)
                except Exception:  # noqa: BLE001 -- one failed delivery must not stop the later ones
                    logger.exception("could not deliver the updates of %s", self._describe(key))
                # Updates arriving meanwhile wait for the end of the interval, merged into one.
                await anyio.sleep(max(began + self.interval - anyio.current_time(), 0))
        finally:
            del self._due[key]
            if not self._due and self.dropped:
                logger.warning(
                    "dropped %s update(s) of %s while too many waited to be delivered", f"{self.dropped:,}", self._what
                )
                self.dropped = 0
            self._progress.set()
            self._progress = anyio.Event()

    async def settled(self) -> None:
        """Until every update added so far is delivered and its interval over (callers bound the wait)."""
        while self._due:
            await self._progress.wait()
