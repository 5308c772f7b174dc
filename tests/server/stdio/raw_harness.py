"""A real copilot over stdio on raw pipes, no SDK client (the stdio robustness and envelope tests).

:func:`raw_copilot` starts ``python -m server`` serving an ``alpha`` fixture child and a ``relay``
child, on the shipped path (``fast``) or with every message through the SDK (``sdk``); :class:`Raw`
writes raw lines to it and reads its stdout line by line, each of which must be a JSON-RPC message.
"""

from __future__ import annotations

import json
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager, suppress
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import anyio
import anyio.abc
import mcp_types as types

from tests.server.support.copilot_harness import EXECUTE_ONLY, copilot_env, fixture_entry, write_servers
from tests.server.support.relay_harness import relay_entry

WAIT = 60.0
INITIALIZE = {
    "jsonrpc": "2.0",
    "id": "initialize",
    "method": "initialize",
    "params": {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "raw-host", "version": "0"}},
}
INITIALIZED = {"jsonrpc": "2.0", "method": "notifications/initialized"}
#: No request id given (``None`` is an id: JSON-RPC's ``null``).
UNSET = object()


def line(message: Any) -> bytes:
    return json.dumps(message).encode() + b"\n"


def ping(request_id: Any) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": request_id, "method": "ping"}


def same_id(a: Any, b: Any) -> bool:
    return type(a) is type(b) and a == b


@dataclass
class Raw:
    """A copilot process and its pipes, read line by line; every line must be a JSON-RPC message."""

    path: str
    process: anyio.abc.Process
    stderr: Path
    inbox: list[dict[str, Any]] = field(default_factory=list)
    _buffer: bytes = b""
    _count: int = 0

    async def send(self, *frames: bytes) -> None:
        assert self.process.stdin is not None
        for frame in frames:
            await self.process.stdin.send(frame)

    async def read(self) -> dict[str, Any]:
        assert self.process.stdout is not None
        while b"\n" not in self._buffer:
            self._buffer += await self.process.stdout.receive()
        raw, self._buffer = self._buffer.split(b"\n", 1)
        types.jsonrpc_message_adapter.validate_json(raw)  # nothing but JSON-RPC on stdout
        message: dict[str, Any] = json.loads(raw)
        return message

    async def answer(self, request_id: Any) -> dict[str, Any]:
        """The next answer to ``request_id`` (other messages stay in the inbox)."""
        with anyio.fail_after(WAIT):
            while True:
                for index, message in enumerate(self.inbox):
                    if "method" not in message and same_id(message.get("id"), request_id):
                        return self.inbox.pop(index)
                self.inbox.append(await self.read())

    async def notification(self, method: str) -> dict[str, Any]:
        with anyio.fail_after(WAIT):
            while True:
                for index, message in enumerate(self.inbox):
                    if message.get("method") == method:
                        return self.inbox.pop(index)
                self.inbox.append(await self.read())

    async def exchange(self, frame: bytes, request_id: Any = UNSET) -> list[dict[str, Any]]:
        """``frame``, then a ping: the answers (with ``request_id`` or ``null``) written before the ping's."""
        self._count += 1
        sentinel = f"sentinel-{self._count}"
        await self.send(frame, line(ping(sentinel)))
        await self.answer(sentinel)
        ids = [None] if request_id is UNSET else [None, request_id]
        answered = [m for m in self.inbox if "method" not in m and any(same_id(m.get("id"), i) for i in ids)]
        self.inbox = [m for m in self.inbox if not any(m is a for a in answered)]
        return answered

    async def initialize(self) -> None:
        await self.send(line(INITIALIZE))
        assert "result" in await self.answer("initialize")
        await self.send(line(INITIALIZED))

    def log(self) -> str:
        return self.stderr.read_text(encoding="utf-8", errors="replace")

    def assert_clean(self) -> None:
        assert "Traceback" not in self.log(), self.log()[-4000:]


def raw_copilot_env(root: Path, path: str) -> dict[str, str]:
    return copilot_env(
        root / "home",
        **EXECUTE_ONLY,
        COPILOT_LOG_LEVEL="DEBUG",  # the fast path names each call it serves or cancels
        COPILOT_LOG_DIR=str(root / "logs"),
        COPILOT_PER_SERVER_CONCURRENCY="16",
        **({} if path == "fast" else {"COPILOT_FAST_RELAY": "false"}),
    )


@asynccontextmanager
async def raw_copilot(root: Path, path: str, *, stdout: Any = None, initialize: bool = True) -> AsyncIterator[Raw]:
    """A real copilot serving an ``alpha`` fixture child and a ``relay`` child, on raw pipes."""
    root.mkdir(parents=True, exist_ok=True)
    servers = write_servers(root / "servers.json", {"alpha": fixture_entry("alpha"), "relay": relay_entry("relay")})
    stderr = root / "copilot.stderr.log"
    with stderr.open("wb") as log:
        process = await anyio.open_process(
            [sys.executable, "-m", "server", "--servers", str(servers)],
            env=raw_copilot_env(root, path),
            cwd=str(root),
            stderr=log,
            **({} if stdout is None else {"stdout": stdout}),
        )
        try:
            raw = Raw(path, process, stderr)
            if initialize:
                await raw.initialize()
            yield raw
        finally:
            with suppress(anyio.BrokenResourceError, anyio.ClosedResourceError, OSError):
                await process.stdin.aclose()  # type: ignore[union-attr]
            with anyio.move_on_after(WAIT, shield=True):
                await process.wait()
            if process.returncode is None:
                process.kill()
                with anyio.move_on_after(10, shield=True):
                    await process.wait()
            await process.aclose()
