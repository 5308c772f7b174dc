"""What the pool tests share: settings for a fast pool, a running pool, bounded waits."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from pathlib import Path

import anyio
import pytest

from index.catalog.servers import ServerConfig
from server.pool.sessions import ChildPool, PoolSettings


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
