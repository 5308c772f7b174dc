"""A host connection's outbound side for tests that watch what the copilot notifies hosts of."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import anyio


class StreamOutbound:
    """A connection's outbound side that writes each notification into a memory stream, as the
    SDK's transports do; with nobody reading and no buffer left, a write waits forever."""

    def __init__(self, buffer: float) -> None:
        self.send, self.receive = anyio.create_memory_object_stream(buffer)

    async def notify(self, method: str, params: Mapping[str, Any] | None, opts: Any = None) -> None:
        await self.send.send((method, params))

    def received(self) -> list[tuple[str, Any]]:
        out = []
        while True:
            try:
                out.append(self.receive.receive_nowait())
            except anyio.WouldBlock:
                return out
