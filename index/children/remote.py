"""The remote transport to a child: streamable HTTP or SSE with the configured headers.

A remote server's messages are held to ``max_message_bytes`` (``COPILOT_MAX_MESSAGE_BYTES``), as a
stdio child's are: the MCP SDK reads a JSON response whole, however long, and bounds an SSE event
at its own 1 MiB. So an ``application/json`` body is cut off (and the request it answers fails,
naming the limit) once it passes the limit, an event of an SSE stream likewise, and the SDK's own
SSE limit is raised to the same number, so a reply a stdio child may send a remote one may too.
"""

from __future__ import annotations

import re
from collections.abc import AsyncIterator
from contextlib import AsyncExitStack, asynccontextmanager

import anyio
import httpx2
from mcp.shared.message import SessionMessage

from index.catalog.servers import ServerConfig
from index.children.stdio import Streams
from index.children.stream_limits import DEFAULT_MAX_MESSAGE_BYTES

#: Bytes an SSE event may hold beyond the message in it (``event:``, ``id:``, ``data:`` fields):
#: the SDK's own limit of an event, with its clearer error, is met first.
_SSE_FIELDS_SLACK = 64 * 1024
#: The blank line that ends an SSE event.
_EVENT_END = re.compile(rb"\r\n\r\n|\n\n|\r\r")


class MessageTooLargeError(httpx2.StreamError):
    """A remote server sent a message over the copilot's limit (the SDK fails its request with this)."""


class _BoundedBody(httpx2.AsyncByteStream):
    """A response body that raises :class:`MessageTooLargeError` once one message passes ``limit`` bytes.

    A JSON body is one message; in an SSE stream each event is (the count restarts at a blank line).
    """

    def __init__(self, inner: httpx2.AsyncByteStream, limit: int, events: bool, what: str) -> None:
        self._inner = inner
        self._limit = limit
        self._events = events
        self._what = what

    async def __aiter__(self) -> AsyncIterator[bytes]:
        size = 0
        carry = b""  # an event's end may straddle two chunks
        async for chunk in self._inner:
            if self._events:
                window = carry + chunk
                ends = [match.end() for match in _EVENT_END.finditer(window)]
                size = len(window) - ends[-1] if ends else size + len(chunk)
                carry = window[-3:]
            else:
                size += len(chunk)
            if size > self._limit:
                raise MessageTooLargeError(
                    f"{self._what} sent a message over the {self._limit}-byte limit (COPILOT_MAX_MESSAGE_BYTES); "
                    "ask the tool for less data"
                )
            yield chunk

    async def aclose(self) -> None:
        await self._inner.aclose()


def _bound_body(response: httpx2.Response, limit: int, what: str) -> None:
    """Wrap ``response``'s body so no message in it passes ``limit`` bytes (before anyone reads it)."""
    content_type = response.headers.get("content-type", "").lower()
    if content_type.startswith("application/json"):
        response.stream = _BoundedBody(response.stream, limit, False, what)  # type: ignore[arg-type]
    elif content_type.startswith("text/event-stream"):
        response.stream = _BoundedBody(response.stream, limit + _SSE_FIELDS_SLACK, True, what)  # type: ignore[arg-type]


@asynccontextmanager
async def remote_streams(config: ServerConfig, max_message_bytes: int = DEFAULT_MAX_MESSAGE_BYTES) -> AsyncIterator[Streams]:
    from mcp.client.sse import sse_client
    from mcp.client.streamable_http import streamable_http_client

    assert config.url is not None
    http_errors: list[str] = []

    async def record_status(response: httpx2.Response) -> None:
        _bound_body(response, max_message_bytes, f"server '{config.name}'")
        if response.status_code >= 400:
            # The entry's redactor, not redact_url alone: a ${VAR} in the URL's path or in a query
            # parameter of any name is a secret too.
            where = config.redact(str(response.request.url))
            http_errors.append(f"HTTP {response.status_code} {response.reason_phrase} from {where}")

    def client_factory(
        headers: dict[str, str] | None = None, timeout: httpx2.Timeout | None = None, auth: httpx2.Auth | None = None
    ) -> httpx2.AsyncClient:
        return httpx2.AsyncClient(
            headers={**config.headers, **(headers or {})},
            timeout=timeout or httpx2.Timeout(30.0, read=300.0),
            auth=auth,
            event_hooks={"response": [record_status]},
        )

    async with AsyncExitStack() as stack:
        if config.transport == "sse":
            read, write = await stack.enter_async_context(
                sse_client(config.url, headers=dict(config.headers), httpx_client_factory=client_factory)
            )
        else:
            client = await stack.enter_async_context(client_factory())
            read, write = await stack.enter_async_context(
                streamable_http_client(config.url, http_client=client, max_sse_event_size=max_message_bytes)
            )
        forward_send, forward_receive = anyio.create_memory_object_stream[SessionMessage | Exception](0)
        closed = anyio.Event()

        async def forward() -> None:
            # A separate hop so the pool learns when the remote connection ends.
            try:
                async for item in read:
                    await forward_send.send(item)
            except (anyio.ClosedResourceError, anyio.BrokenResourceError):
                pass
            finally:
                closed.set()  # before the session hears the end (index.children.errors.connection_lost)
                forward_send.close()

        async with anyio.create_task_group() as tg:
            tg.start_soon(forward)
            try:
                yield Streams(forward_receive, write, closed, http_errors=http_errors)
            finally:
                forward_receive.close()
                tg.cancel_scope.cancel()
