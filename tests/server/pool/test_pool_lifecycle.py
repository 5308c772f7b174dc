"""The pool's honesty about restarts and its restraint when warming (real child processes).

- calls cut off because another call on the same child timed out say so;
- the first result from a restarted child of a server that served calls says its state is lost
  (idle timeout, eviction, crash), unless the server declares itself ``stateful: false``;
- warming never evicts a child that served a call: it uses free slots only, is bounded, and skips
  servers that start slowly; eviction takes ``stateful`` servers last;
- a first start through a package runner (``npx``, ``uvx``, ...) gets ``install_timeout`` to install
  its package: the call that started it gives up at the normal start timeout, the start goes on and
  the next call uses that same process; other slow starts still end at ``init_timeout``.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import anyio
import psutil
import pytest

from index.catalog.servers import ServerConfig
from server.errors import ChildCrashedError, ChildTimeoutError, ServerUnavailableError
from server.pool.sessions import MAX_WARM_UNUSED, PoolSettings
from server.pool.settings import package_runner
from tests.server.pool.pool_support import running_pool, settings, wait_until  # noqa: F401 -- settings is a fixture
from tests.support.processes import SLOW_START_SERVER, hostile_entry, package_runner_script

FIXTURE = Path(__file__).resolve().parents[2] / "fixtures" / "fixture_server.py"

pytestmark = pytest.mark.timeout(90)


def hostile(name: str, **extra: Any) -> ServerConfig:
    return ServerConfig(name=name, **hostile_entry(**extra))


def restart_notes(result: Any) -> list[str]:
    return [block.text for block in result.content if block.text.startswith("[copilot]")]


def texts(result: Any) -> list[str]:
    """The child's own text blocks (without the copilot's notes)."""
    return [block.text for block in result.content if not block.text.startswith("[copilot]")]


# -- calls cut off by another call's timeout (item 9) ---------------------------------------------
async def test_calls_cut_off_by_another_calls_timeout_say_so(settings: PoolSettings) -> None:
    async with running_pool({"alpha": hostile("alpha")}, settings) as pool:
        assert texts(await pool.call_tool("alpha", "echo", {"text": "up"})) == ["up"]
        sibling_error: list[BaseException] = []

        async def sibling() -> None:
            try:
                await pool.call_tool("alpha", "sleep", {"seconds": 600})
            except ChildCrashedError as error:
                sibling_error.append(error)

        async with anyio.create_task_group() as group:
            group.start_soon(sibling)
            await wait_until(lambda: pool.status()["alpha"]["in_flight"] == 1)
            with pytest.raises(ChildTimeoutError, match="did not finish the call to 'sleep' within 1s"):
                await pool.call_tool("alpha", "sleep", {"seconds": 600}, timeout=1.0)
        (error,) = sibling_error
        message = str(error)
        assert "because another call to it (the call to 'sleep') did not finish within 1s" in message
        assert "SIGKILL" not in message and "crashed" not in message


# -- restart notes (item 10) ----------------------------------------------------------------------
async def test_a_restart_after_the_idle_timeout_is_noted_on_the_next_result(settings: PoolSettings) -> None:
    settings.idle_timeout = 0.3
    async with running_pool({"alpha": hostile("alpha")}, settings) as pool:
        assert texts(await pool.call_tool("alpha", "counter", {})) == ["1"]
        assert texts(await pool.call_tool("alpha", "counter", {})) == ["2"]
        await wait_until(lambda: not pool.is_running("alpha"))
        result = await pool.call_tool("alpha", "counter", {})
        assert texts(result) == ["1"]
        assert result.content[0].text.startswith("[copilot]")  # read before the result, kept by any cap
        (note,) = restart_notes(result)
        assert "Server 'alpha' was restarted" in note and "idle for 0.3s" in note and "is lost" in note
        assert restart_notes(await pool.call_tool("alpha", "counter", {})) == []  # said once


async def test_a_restart_after_eviction_or_a_crash_is_noted(settings: PoolSettings) -> None:
    settings.max_live_children = 1
    crashy = ServerConfig(name="crashy", command=sys.executable, args=[str(FIXTURE), "--name", "crashy"])
    async with running_pool({"alpha": hostile("alpha"), "other": hostile("other"), "crashy": crashy}, settings) as pool:
        await pool.call_tool("alpha", "counter", {})
        await pool.call_tool("other", "echo", {"text": "needs the only slot"})  # evicts alpha
        evicted = await pool.call_tool("alpha", "counter", {})
        assert texts(evicted) == ["1"]
        (note,) = restart_notes(evicted)
        assert "make room for another server (COPILOT_MAX_LIVE_CHILDREN=1)" in note

        await pool.call_tool("crashy", "counter", {})
        with pytest.raises(ChildCrashedError):
            await pool.call_tool("crashy", "crash", {})
        (note,) = restart_notes(await pool.call_tool("crashy", "counter", {}))
        assert "crashed (exit code 7)" in note


async def test_servers_that_keep_no_state_restart_without_a_note(settings: PoolSettings) -> None:
    settings.idle_timeout = 0.3
    async with running_pool({"plain": hostile("plain", stateful=False)}, settings) as pool:
        await pool.call_tool("plain", "echo", {"text": "1"})
        await wait_until(lambda: not pool.is_running("plain"))
        assert restart_notes(await pool.call_tool("plain", "echo", {"text": "2"})) == []


# -- warming (item 12) ----------------------------------------------------------------------------
async def test_warming_never_evicts_a_child_that_served_a_call(settings: PoolSettings) -> None:
    settings.max_live_children = 2
    servers = {name: hostile(name) for name in ("a", "b", "c")}
    async with running_pool(servers, settings) as pool:
        await pool.call_tool("a", "counter", {})
        await pool.call_tool("b", "counter", {})
        assert pool.warm("c") is False  # no free slot
        assert pool.is_running("a") and pool.is_running("b") and not pool.is_running("c")
        assert texts(await pool.call_tool("a", "counter", {})) == ["2"]  # a kept its state


async def test_warming_uses_free_slots_and_is_bounded(settings: PoolSettings) -> None:
    settings.max_live_children = 10
    servers = {name: hostile(name) for name in ("used", "w1", "w2", "w3")}
    async with running_pool(servers, settings) as pool:
        await pool.call_tool("used", "counter", {})
        for name in ("w1", "w2", "w3"):
            assert pool.warm(name) is True
        await wait_until(lambda: pool.is_running("w3") and pool.is_running("w2"))
        assert not pool.is_running("w1")  # the oldest guess made room for the newest
        warmed = [name for name in ("w1", "w2", "w3") if pool.is_running(name)]
        assert len(warmed) == MAX_WARM_UNUSED
        assert pool.is_running("used")


async def test_slow_starting_servers_are_not_warmed(settings: PoolSettings) -> None:
    settings.warm_max_start = 0.0  # every recorded start is "slow"
    settings.idle_timeout = 0.3
    async with running_pool({"slow": hostile("slow")}, settings) as pool:
        assert pool.warm("slow") is True  # nothing recorded yet
        await wait_until(lambda: pool.is_running("slow"))
        await wait_until(lambda: not pool.is_running("slow"))  # stopped when idle
        assert pool.warm("slow") is False


async def test_eviction_takes_stateful_servers_last(settings: PoolSettings) -> None:
    settings.max_live_children = 2
    servers = {"game": hostile("game"), "lookup": hostile("lookup", stateful=False), "third": hostile("third")}
    async with running_pool(servers, settings) as pool:
        await pool.call_tool("game", "counter", {})  # least recently used, but it keeps state
        await pool.call_tool("lookup", "echo", {"text": "x"})
        await pool.call_tool("third", "echo", {"text": "y"})
        assert pool.is_running("game") and not pool.is_running("lookup")
        assert texts(await pool.call_tool("game", "counter", {})) == ["2"]


async def test_start_times_from_the_catalog_keep_slow_starters_cold(settings: PoolSettings) -> None:
    async with running_pool({"slow": hostile("slow"), "quick": hostile("quick")}, settings) as pool:
        pool.expect_start_times({"slow": settings.warm_max_start + 5, "quick": 0.5})
        assert pool.warm("slow") is False
        assert pool.warm("quick") is True


# -- a first start through a package runner installs its package -------------------------------------
def installing_server(settings: PoolSettings, tmp_path: Path, name: str = "slow") -> tuple[Path, ServerConfig]:
    """(its gate file, its entry): a server launched through ``npx`` whose start waits, as an install
    does, until the gate file exists; ``settings`` give a start 2 s, a first install 60 s."""
    settings.init_timeout = 2.0
    settings.install_timeout = 60.0
    gate = tmp_path / "installed"
    return gate, ServerConfig(name=name, command=str(package_runner_script(tmp_path)), args=[str(gate)])


@pytest.mark.parametrize(
    ("command", "args", "runner"),
    [
        ("npx", ["-y", "@scope/pkg"], "npx"),
        ("/usr/local/bin/uvx", ["mcp-server-time"], "uvx"),
        ("bunx", ["pkg"], "bunx"),
        ("pnpx", ["pkg"], "pnpx"),
        ("npx.cmd", ["-y", "pkg"], "npx"),
        ("uv", ["tool", "run", "pkg"], "uv tool run"),
        ("pipx", ["run", "pkg"], "pipx run"),
        ("pnpm", ["dlx", "pkg"], "pnpm dlx"),
        ("npm", ["exec", "--yes", "pkg"], "npm exec"),
        ("yarn", ["dlx", "pkg"], "yarn dlx"),
        ("uv", ["run", "server.py"], None),
        ("npm", ["start"], None),
        ("node", ["server.js"], None),
        ("python", ["-m", "npx"], None),
    ],
)
def test_package_runners_are_recognised(command: str, args: list[str], runner: str | None) -> None:
    assert package_runner(ServerConfig(name="x", command=command, args=args)) == runner


async def test_a_first_install_goes_on_after_the_call_that_started_it_gave_up(
    settings: PoolSettings, tmp_path: Path
) -> None:
    gate, config = installing_server(settings, tmp_path)
    async with running_pool({"slow": config}, settings) as pool:
        with anyio.fail_after(30), pytest.raises(ServerUnavailableError) as caught:
            await pool.call_tool("slow", "echo", {"text": "x"})  # fails at init_timeout, not install_timeout
        message = str(caught.value)
        assert "server 'slow' is still starting after" in message
        assert "first start through npx downloads and installs its package" in message
        assert "up to 60 s, COPILOT_INSTALL_TIMEOUT" in message
        status = pool.status()["slow"]
        assert status["state"] == "starting" and status["errors"] == 0  # not the child's failure
        pid = status["pid"]
        assert pid is not None and psutil.pid_exists(pid)
        gate.touch()  # the install finishes
        await wait_until(lambda: pool.is_running("slow"))
        result = await pool.call_tool("slow", "echo", {"text": "installed"})
        assert texts(result) == ["installed"]
        assert pool.status()["slow"]["pid"] == pid  # the same process: no second start
        assert pool._states["slow"].starts == 1
        # Installed now: a later start of it gets the normal deadline (a generous one, for a loaded machine).
        settings.init_timeout = 30.0
        pool._retire(pool._children["slow"], "replaced")
        assert texts(await pool.call_tool("slow", "echo", {"text": "again"})) == ["again"]
        later = pool._children["slow"]
        assert later.installs is None and later.start_limit == 30.0


async def test_a_call_during_an_install_joins_the_same_start(settings: PoolSettings, tmp_path: Path) -> None:
    gate, config = installing_server(settings, tmp_path)
    async with running_pool({"slow": config}, settings) as pool:
        for _ in range(2):  # the second call joins the start the first one began
            with anyio.fail_after(30), pytest.raises(ServerUnavailableError, match="is still starting after"):
                await pool.call_tool("slow", "echo", {"text": "x"})
        assert pool._states["slow"].starts == 1
        gate.touch()
        await wait_until(lambda: pool.is_running("slow"))
        assert texts(await pool.call_tool("slow", "echo", {"text": "ok"})) == ["ok"]
        assert pool._states["slow"].starts == 1


async def test_a_warmed_install_is_not_given_up_for_another_guess(settings: PoolSettings, tmp_path: Path) -> None:
    # Warming keeps at most MAX_WARM_UNUSED unused children and retired the oldest for a new guess:
    # one still installing its package was killed mid-install.
    entries = [installing_server(settings, tmp_path, f"pkg{n}") for n in range(MAX_WARM_UNUSED)]
    gate = entries[0][0]  # one gate for all
    installing = {config.name: config for _, config in entries}
    async with running_pool({**installing, "quick": hostile("quick")}, settings) as pool:
        for name in installing:
            assert pool.warm(name) is True
        assert pool.warm("quick") is False  # no guess is given up for it
        assert all(pool.status()[name]["state"] == "starting" for name in installing)
        gate.touch()
        await wait_until(lambda: all(pool.is_running(name) for name in installing))
        assert [pool._states[name].starts for name in installing] == [1] * MAX_WARM_UNUSED  # none started again
        assert pool.warm("quick") is True  # installed now: the oldest guess makes room as before
        await wait_until(lambda: pool.is_running("quick"))
        assert sum(pool.is_running(name) for name in installing) == MAX_WARM_UNUSED - 1


async def test_a_slow_start_without_a_package_runner_times_out_at_init_timeout(
    settings: PoolSettings, tmp_path: Path
) -> None:
    settings.init_timeout = 2.0
    settings.install_timeout = 60.0
    gate = tmp_path / "never"
    config = ServerConfig(name="slow", command=sys.executable, args=[str(SLOW_START_SERVER), str(gate)])
    async with running_pool({"slow": config}, settings) as pool:
        with anyio.fail_after(30), pytest.raises(ServerUnavailableError) as caught:
            await pool.call_tool("slow", "echo", {"text": "x"})
        message = str(caught.value)
        assert "did not answer initialize within 2s" in message
        assert "raise COPILOT_INIT_TIMEOUT (2s) or the server's 'timeout' in the servers file" in message
        assert "COPILOT_INSTALL_TIMEOUT" not in message
        assert pool.status()["slow"]["state"] == "failed"
