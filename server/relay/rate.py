"""How many of a child's notifications one call passes to the host: a token bucket.

A call may send ``burst`` at once; after that, one more each ``1 / per_second`` seconds. The
bucket is plain arithmetic on the event loop's clock (no task, no timer), so a call that sends
nothing, or only a few, pays nothing for it.
"""

from __future__ import annotations

#: Clock arithmetic in floats: a token due now may come out a hair short of one.
_EPSILON = 1e-9


class Rate:
    """``burst`` notifications at once, then ``per_second``; ``now`` is ``anyio.current_time()``."""

    __slots__ = ("_burst", "_per_second", "_stamp", "_tokens")

    def __init__(self, burst: int, per_second: float) -> None:
        self._burst = float(burst)
        self._per_second = per_second
        self._tokens = float(burst)
        self._stamp: float | None = None

    def _refill(self, now: float) -> None:
        if self._stamp is not None:
            self._tokens = min(self._burst, self._tokens + (now - self._stamp) * self._per_second)
        self._stamp = now

    def take(self, now: float) -> bool:
        """Spend one notification if one is allowed now."""
        self._refill(now)
        if self._tokens >= 1.0 - _EPSILON:
            self._tokens = max(self._tokens - 1.0, 0.0)
            return True
        return False

    def spend(self, now: float) -> None:
        """Spend one notification whether or not it was allowed (one written early, at the end of a call)."""
        self._refill(now)
        self._tokens = max(self._tokens - 1.0, 0.0)

    def delay(self, now: float) -> float:
        """Seconds until :meth:`take` would allow one."""
        self._refill(now)
        missing = 1.0 - self._tokens
        return missing / self._per_second if missing > _EPSILON else 0.0
