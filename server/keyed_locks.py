"""One ``anyio.Lock`` per key (a host connection, a child's resource), kept only while in use."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable, Hashable
from contextlib import asynccontextmanager
from typing import TypeVar

import anyio

K = TypeVar("K", bound=Hashable)


def _never() -> bool:
    return False


class KeyedLocks(dict[K, anyio.Lock]):
    """The locks by key: one is made when first held and dropped when released with nobody waiting
    (unless ``keep`` says otherwise), so keys that come and go leave nothing behind."""

    @asynccontextmanager
    async def hold(self, key: K, *, keep: Callable[[], bool] = _never) -> AsyncIterator[None]:
        lock = self.setdefault(key, anyio.Lock())
        try:
            async with lock:
                yield
        finally:
            # Released with nobody waiting (a waiter is handed the lock, so it stays locked).
            idle = not lock.locked() and not lock.statistics().tasks_waiting
            if idle and not keep() and self.get(key) is lock:
                del self[key]
