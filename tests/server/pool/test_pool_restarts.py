"""What the pool counts as a restart: only a start after the server's process failed (crash,
timeout), never one after the copilot stopped a child on purpose (idle, evicted); idle stops are
counted apart. The same in ``status()``, the ``copilot_child_restarts`` metric, the status file
and ``python -m server status`` (real fixture children in subprocesses, the real telemetry hub).
"""

from __future__ import annotations

import os
import re
import sys
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import anyio
import pytest

from index.catalog.servers import ServerConfig
from server.errors import ChildCrashedError, ChildTimeoutError
from server.pool.sessions import ChildPool, PoolSettings
from server.telemetry import Telemetry
from server.telemetry.status import ChildStatus, CopilotStatus, process_created, status_path, write_status
from server.telemetry.status_cli import main as status_main
from tests.server.pool.pool_support import settings  # noqa: F401 -- a fixture

FIXTURE = Path(__file__).resolve().parents[2] / "fixtures" / "fixture_server.py"
WAIT = 60.0

pytestmark = pytest.mark.timeout(120)


def fixture_config(name: str) -> ServerConfig:
    return ServerConfig(name=name, command=sys.executable, args=[str(FIXTURE), "--name", name])


class Watch:
    """The pool's observer: the real telemetry hub, plus the stops seen, to wait for them without polling."""

    def __init__(self, servers: list[str]) -> None:
        self.telemetry = Telemetry(known_servers=lambda: servers)
        self.stops: list[tuple[str, str]] = []
        self._event = anyio.Event()

    def child_started(
        self, server: str, config: ServerConfig, pid: int | None, seconds: float, error: Any, restart: bool = False
    ) -> None:
        self.telemetry.child_started(server, config, pid, seconds, error, restart)

    def child_stopped(self, server: str, reason: str, uptime: float) -> None:
        self.telemetry.child_stopped(server, reason, uptime)
        self.stops.append((server, reason))
        self._event.set()
        self._event = anyio.Event()

    async def until(self, condition: Callable[[], bool]) -> None:
        with anyio.fail_after(WAIT):
            while not condition():
                await self._event.wait()

    def restarts_metric(self, server: str) -> float:
        value = self.telemetry.metrics.registry.get_sample_value("copilot_child_restarts_total", {"server": server})
        return value or 0.0


def cells_of(line: str) -> list[str]:
    """The cells of one line of a rich table (its header is drawn with heavy bars, its rows with light ones)."""
    return [cell.strip() for cell in re.split("[│┃]", line)[1:-1]]


def counter(result: Any) -> str:
    """The child's own answer (after a restart the copilot's note comes first)."""
    return result.content[-1].text


async def test_an_idle_stop_or_an_eviction_then_a_start_is_no_restart(settings: PoolSettings) -> None:  # noqa: F811
    settings.idle_timeout = 0.3
    settings.max_live_children = 1
    watch = Watch(["alpha", "beta"])
    with anyio.fail_after(WAIT):
        servers = {"alpha": fixture_config("alpha"), "beta": fixture_config("beta")}
        async with ChildPool(servers, settings, observer=watch) as pool:
            assert counter(await pool.call_tool("alpha", "counter", {})) == "1"
            await watch.until(lambda: ("alpha", "idle") in watch.stops)
            # Warm churn: the next call starts a fresh process. The status is read before any
            # await, so the idle reaper cannot stop the new one first.
            assert counter(await pool.call_tool("alpha", "counter", {})) == "1"
            status = pool.status()["alpha"]
            assert status["restarts"] == 0
            assert status.get("idle_stops") == 1

            await pool.call_tool("beta", "echo", {"text": "evicts alpha (one live child at most)"})
            assert counter(await pool.call_tool("alpha", "counter", {})) == "1"
            assert ("alpha", "evicted") in watch.stops
            assert pool.status()["alpha"]["restarts"] == 0
            assert watch.restarts_metric("alpha") == 0


async def test_a_start_after_a_crash_or_a_timeout_is_a_restart(settings: PoolSettings) -> None:  # noqa: F811
    watch = Watch(["alpha"])
    with anyio.fail_after(WAIT):
        async with ChildPool({"alpha": fixture_config("alpha")}, settings, observer=watch) as pool:
            assert counter(await pool.call_tool("alpha", "counter", {})) == "1"
            with pytest.raises(ChildCrashedError):
                await pool.call_tool("alpha", "crash", {})
            assert counter(await pool.call_tool("alpha", "counter", {})) == "1"
            assert pool.status()["alpha"]["restarts"] == 1
            assert pool.status()["alpha"].get("idle_stops") == 0
            with pytest.raises(ChildTimeoutError):
                await pool.call_tool("alpha", "sleep", {"seconds": 120}, timeout=0.5)
            assert counter(await pool.call_tool("alpha", "counter", {})) == "1"
            assert pool.status()["alpha"]["restarts"] == 2
            # The stop of each process reached the observer before the start of the next one.
            assert [reason for _, reason in watch.stops] == ["crashed", "timeout"]
            assert watch.restarts_metric("alpha") == 2


async def test_status_shows_restarts_and_idle_stops_apart(
    settings: PoolSettings,  # noqa: F811
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    settings.idle_timeout = 0.3
    watch = Watch(["alpha"])
    with anyio.fail_after(WAIT):
        async with ChildPool({"alpha": fixture_config("alpha")}, settings, observer=watch) as pool:
            await pool.call_tool("alpha", "counter", {})
            await watch.until(lambda: ("alpha", "idle") in watch.stops)
            await pool.call_tool("alpha", "counter", {})
            info = pool.status()["alpha"]
    # Written as the copilot writes its status file (server.telemetry.hub), for this live process.
    child = ChildStatus(server="alpha", **{k: v for k, v in info.items() if k in ChildStatus.model_fields})
    assert (child.restarts, child.idle_stops) == (0, 1)
    now = datetime.now(UTC).isoformat(timespec="seconds")
    write_status(
        status_path(tmp_path, os.getpid()),
        CopilotStatus(
            pid=os.getpid(), process_created=process_created(), transport="stdio", started_at=now, updated_at=now,
            children=[child],
        ),
    )
    assert status_main(["--home", str(tmp_path)]) == 0
    lines = capsys.readouterr().out.splitlines()
    header = next(cells_of(line) for line in lines if "idle stops" in line)
    row = next(cells_of(line) for line in lines if cells_of(line)[:1] == ["alpha"])
    cells = dict(zip(header, row, strict=True))
    assert (cells["restarts"], cells["idle stops"]) == ("0", "1")
