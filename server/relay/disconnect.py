"""Noticing that an HTTP client went away in the middle of a request.

On the legacy streamable-HTTP transport the SDK keeps running a request whose client closed the
connection (the response stream just ends), so a call whose agent gave up would hold its child's
per-server slot until the child answered or timed out. :class:`ClientGoneMiddleware` watches each
request's ASGI ``receive`` channel -- the SDK's SSE response already listens on it -- and sets an
event in the request's scope when ``http.disconnect`` arrives; ``execute`` cancels its child call
when that event fires. (On the 2026-07-28 transport the SDK itself cancels the handler.)
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any, Final, TypeVar

import anyio
from starlette.types import ASGIApp, Message, Receive, Scope, Send

T = TypeVar("T")

#: Key of the per-request ``anyio.Event`` in the ASGI scope.
CLIENT_GONE_KEY: Final = "mcp-copilot.client_gone"


class ClientGoneMiddleware:
    """Sets ``scope[CLIENT_GONE_KEY]`` when the client of an HTTP request disconnects."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        gone = anyio.Event()
        scope = {**scope, CLIENT_GONE_KEY: gone}

        async def watched_receive() -> Message:
            message = await receive()
            if message.get("type") == "http.disconnect":
                gone.set()
            return message

        try:
            await self.app(scope, watched_receive, send)
        finally:
            # Whatever still waits on this request (a relayed call) must not outlive it.
            gone.set()


def client_gone_event(request: Any) -> anyio.Event | None:
    """The disconnect event of the HTTP request behind a handler's context (``None`` on stdio)."""
    scope = getattr(request, "scope", None)
    if isinstance(scope, dict):
        event = scope.get(CLIENT_GONE_KEY)
        return event if isinstance(event, anyio.Event) else None
    return None


async def unless_client_gone(gone: anyio.Event, call: Callable[[], Awaitable[T]]) -> T | None:
    """``await call()``, cancelled (returning ``None``) when ``gone`` is set first."""
    outcome: list[T] = []
    try:
        async with anyio.create_task_group() as group:

            async def run() -> None:
                outcome.append(await call())
                group.cancel_scope.cancel()

            group.start_soon(run)
            await gone.wait()
            group.cancel_scope.cancel()
    except BaseExceptionGroup as errors:
        error: BaseException = errors
        while isinstance(error, BaseExceptionGroup) and len(error.exceptions) == 1:
            error = error.exceptions[0]
        raise error from None
    return outcome[0] if outcome else None
