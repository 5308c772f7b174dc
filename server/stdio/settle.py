"""The requests a stdio host sent before it closed its input get a moment to be answered.

At the end of input the SDK cancels every request it is handling, and one it has only just
received is cancelled before its handler even starts: it gets no answer at all (a host that pipes
``initialize``, ``tools/list`` and then closes stdin hears nothing for the listing). So when the
input ends, before the SDK hears of it, :meth:`OpenRequests.settle` lets the requests handed over
start, and waits (at most :data:`SETTLE_SECONDS`) for those in flight to finish. One still running
after that (a slow child behind ``resources/read``, say) is answered ``-32000``
(``Connection closed``) by the SDK, as before, and the copilot still stops within the 2 s a host
waits before it sends SIGTERM.

Counting costs two integer operations per request: no cancel scope on the stdio hot path.
"""

from __future__ import annotations

import weakref
from collections.abc import Callable
from typing import Any

import anyio
from mcp.server.context import ServerRequestContext
from mcp.server.mcpserver import MCPServer

#: How long requests in flight at the end of input may still take.
SETTLE_SECONDS = 0.5


class OpenRequests:
    """How many requests (not notifications) the SDK is handling now."""

    def __init__(self) -> None:
        self.count = 0
        #: Set when the last request in flight ends while :meth:`settle` waits.
        self._idle: anyio.Event | None = None

    async def middleware(self, ctx: ServerRequestContext[Any, Any], call_next: Callable[..., Any]) -> Any:
        if ctx.request_id is None:
            return await call_next(ctx)
        self.count += 1
        try:
            return await call_next(ctx)
        finally:
            self.count -= 1
            if self.count == 0 and self._idle is not None:
                self._idle.set()

    async def settle(self, timeout: float = SETTLE_SECONDS) -> int:
        """Let requests handed over start, then wait for those in flight to end; how many did not."""
        with anyio.move_on_after(timeout):
            await anyio.wait_all_tasks_blocked()  # the handler of a request just received starts
            while self.count:
                self._idle = anyio.Event()
                await self._idle.wait()
            await anyio.wait_all_tasks_blocked()  # and its answer reaches the writer
        return self.count


_OPEN: weakref.WeakKeyDictionary[MCPServer[Any], OpenRequests] = weakref.WeakKeyDictionary()


def open_requests(app: MCPServer[Any]) -> OpenRequests:
    """The requests ``app`` is handling now over stdio (installed by ``server.app.build_app``)."""
    return _OPEN.setdefault(app, OpenRequests())
