"""The remote transport to a child: streamable HTTP or SSE with the configured headers."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import AsyncExitStack, asynccontextmanager

import anyio
import httpx2
from mcp.shared.message import SessionMessage

from index.redact import redact_url
from index.servers import ServerConfig
from index.children.stdio import Streams


@asynccontextmanager
async def remote_streams(config: ServerConfig) -> AsyncIterator[Streams]:
    from mcp.client.sse import sse_client
    from mcp.client.streamable_http import streamable_http_client

    assert config.url is not None
    http_errors: list[str] = []

    async def record_status(response: httpx2.Response) -> None:
        if response.status_code >= 400:
            where = redact_url(str(response.request.url))
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
            read, write = await stack.enter_async_context(streamable_http_client(config.url, http_client=client))
        forward_send, forward_receive = anyio.create_memory_object_stream[SessionMessage | Exception](0)
        closed = anyio.Event()

        async def forward() -> None:
            # A separate hop so the pool learns when the remote connection ends.
            try:
                async with forward_send:
                    async for item in read:
                        await forward_send.send(item)
            except (anyio.ClosedResourceError, anyio.BrokenResourceError):
                pass
            finally:
                closed.set()

        async with anyio.create_task_group() as tg:
            tg.start_soon(forward)
            try:
                yield Streams(forward_receive, write, closed, http_errors=http_errors)
            finally:
                forward_receive.close()
                tg.cancel_scope.cancel()
