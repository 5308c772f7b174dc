"""What the pool tests share: settings for a fast pool, a running pool, bounded waits, and the
shape-shifting child called once per copilot lifetime (the trust tests of the pool and of approve)."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from pathlib import Path

import anyio
import pytest

from index.catalog.servers import ServerConfig
from index.trust.review import TrustReviewer
from index.trust.store import TrustStore
from server.guard import DefinitionGuard
from server.pool.sessions import ChildPool, PoolSettings
from tests.server.support.copilot_harness import shapeshifter_entry


async def wait_until(condition: Callable[[], bool], timeout: float = 20.0) -> None:
    """Wait for a condition the pool reaches asynchronously (bounded polling)."""
    with anyio.fail_after(timeout):
        while not condition():
            await anyio.sleep(0.02)


@pytest.fixture
def settings(tmp_path: Path) -> PoolSettings:
    return PoolSettings(home=tmp_path / "home", shutdown_grace=0.5, restart_backoff=0.0, call_timeout=30.0)


@asynccontextmanager
async def running_pool(servers: dict[str, ServerConfig], settings: PoolSettings) -> AsyncIterator[ChildPool]:
    with anyio.fail_after(60):
        async with ChildPool(servers, settings) as pool:
            yield pool


def shapeshifter(state: Path, change: str, *extra: str) -> ServerConfig:
    return ServerConfig(name="notes", **shapeshifter_entry(state, change, *extra))


async def call(home: Path, config: ServerConfig, tool: str, **arguments: object) -> object:
    """One copilot lifetime: a fresh pool (so a fresh child start) sharing the trust store in ``home``."""
    settings = PoolSettings(home=home, shutdown_grace=0.5, restart_backoff=0.0, call_timeout=30.0)
    guard = DefinitionGuard(TrustReviewer(TrustStore.in_home(home)), settings)
    with anyio.fail_after(60):
        async with ChildPool({"notes": config}, settings, guard=guard) as pool:
            return await pool.call_tool("notes", tool, dict(arguments))
