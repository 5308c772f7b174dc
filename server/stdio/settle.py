"""The requests a stdio host sent before it closed its input get a moment to be answered.

At the end of input the SDK cancels every request it is handling, and one it has only just
received is cancelled before its handler even starts: it gets no answer at all (a host that pipes
``initialize``, ``tools/list`` and then closes stdin hears nothing for the listing). So when the
input ends, before the SDK hears of it, :func:`settle` lets the requests handed over
start, and waits (at most :data:`SETTLE_SECONDS`) for those in flight to finish. One still running
after that (a slow child behind ``resources/read``, say) is answered ``-32000``
(``Connection closed``) by the SDK, as before, and the copilot still stops within the 2 s a host
waits before it sends SIGTERM.

The requests are those ``server.app.InFlightRequests`` tracks (it also answers them when a signal
stops the copilot): one registry, one middleware on the hot path.
"""

from __future__ import annotations

from typing import Protocol

import anyio

#: How long requests in flight at the end of input may still take.
SETTLE_SECONDS = 0.5


class Requests(Protocol):
    """The requests being handled (``server.app.InFlightRequests``)."""

    @property
    def open(self) -> int: ...

    async def changed(self) -> None: ...


async def settle(requests: Requests, timeout: float = SETTLE_SECONDS) -> int:
    """Let requests handed over start, then wait for those in flight to end; how many did not."""
    with anyio.move_on_after(timeout):
        await anyio.wait_all_tasks_blocked()  # the handler of a request just received starts
        while requests.open:
            await requests.changed()
        await anyio.wait_all_tasks_blocked()  # and its answer reaches the writer
    return requests.open
