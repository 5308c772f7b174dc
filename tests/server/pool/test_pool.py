"""``server.pool.sessions.ChildPool`` with real fixture MCP servers in subprocesses."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import anyio
import psutil
import pytest

from index.catalog.servers import ServerConfig
from index.children.containment.guardian import landlock_abi
from server.errors import (
    ChildCrashedError,
    ChildTimeoutError,
    ServerUnavailableError,
    UnknownServerError,
)
from server.pool.sessions import ChildPool, PoolSettings
from tests.server.support.copilot_harness import BROKEN_WRONG_TYPE, schema_breaker_entry
from tests.server.pool.pool_support import running_pool, settings, wait_until  # noqa: F401 -- settings is a fixture

FIXTURE = Path(__file__).resolve().parents[2] / "fixtures" / "fixture_server.py"

pytestmark = pytest.mark.timeout(90)


def fixture_config(name: str, mode: str = "healthy", **extra: Any) -> ServerConfig:
    return ServerConfig(name=name, command=sys.executable, args=[str(FIXTURE), "--name", name, "--mode", mode], **extra)


def text_of(result: Any) -> str:
    """The child's answer; after a restart the copilot's note that state was lost comes before it."""
    return result.content[-1].text


def gone(pid: int | None) -> bool:
    assert pid is not None
    try:
        return psutil.Process(pid).status() == psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return True


def processes_in(root: Path) -> list[psutil.Process]:
    """Live processes (children and their descendants alike) whose working directory is under ``root``."""
    found = []
    for process in psutil.process_iter(["cwd", "status"]):
        cwd = process.info.get("cwd")
        if cwd and Path(cwd).is_relative_to(root) and process.info.get("status") != psutil.STATUS_ZOMBIE:
            found.append(process)
    return found


async def test_state_is_kept_across_calls(settings: PoolSettings) -> None:
    async with running_pool({"alpha": fixture_config("alpha")}, settings) as pool:
        assert not pool.is_running("alpha")  # nothing starts before the first call
        counts = [text_of(await pool.call_tool("alpha", "counter", {})) for _ in range(3)]
        assert counts == ["1", "2", "3"]
        assert pool.is_running("alpha")
        status = pool.status()["alpha"]
        assert status["calls"] == 3 and status["errors"] == 0 and status["restarts"] == 0
        assert status["pid"] is not None and status["last_used"] is not None
        # The server's own pid, not its guardian's: what an operator may signal.
        command_line = " ".join(psutil.Process(status["pid"]).cmdline())
        assert "fixture_server.py" in command_line and "guardian.py" not in command_line


async def test_concurrent_first_calls_start_the_server_once(settings: PoolSettings) -> None:
    async with running_pool({"alpha": fixture_config("alpha")}, settings) as pool:
        results: list[str] = []

        async def count() -> None:
            results.append(text_of(await pool.call_tool("alpha", "counter", {})))

        async with anyio.create_task_group() as group:
            for _ in range(4):
                group.start_soon(count)
        assert sorted(results) == ["1", "2", "3", "4"]
        assert pool.status()["alpha"]["restarts"] == 0


async def test_calls_to_different_servers_overlap(settings: PoolSettings) -> None:
    servers = {"slow": fixture_config("slow"), "fast": fixture_config("fast")}
    async with running_pool(servers, settings) as pool:
        await pool.list_tools("slow")
        await pool.list_tools("fast")
        slow_finished = anyio.Event()

        async def slow_call() -> None:
            await pool.call_tool("slow", "sleep", {"seconds": 60})
            slow_finished.set()

        async with anyio.create_task_group() as group:
            group.start_soon(slow_call)
            await wait_until(lambda: pool.status()["slow"]["in_flight"] == 1)
            assert text_of(await pool.call_tool("fast", "echo", {"text": "done"})) == "done"
            # The fast server answered while the slow call was still running: they overlapped.
            assert not slow_finished.is_set()
            assert pool.status()["slow"]["in_flight"] == 1
            group.cancel_scope.cancel()


async def test_per_server_concurrency_limit_reports_busy_without_killing(settings: PoolSettings) -> None:
    settings.per_server_concurrency = 1
    async with running_pool({"alpha": fixture_config("alpha")}, settings) as pool:
        assert text_of(await pool.call_tool("alpha", "counter", {})) == "1"
        async with anyio.create_task_group() as group:
            group.start_soon(pool.call_tool, "alpha", "sleep", {"seconds": 60})
            await wait_until(lambda: pool.status()["alpha"]["in_flight"] == 1)
            with pytest.raises(ChildTimeoutError) as busy:
                await pool.call_tool("alpha", "counter", {}, timeout=0.3)
            assert str(busy.value) == (
                "server 'alpha' is busy: none of its 1 call slot(s) came free for this call within 0.3s (other calls "
                "held them). Try again later or call another server."
            )
            assert pool.is_running("alpha")
            assert pool.status()["alpha"]["errors"] == 0  # waiting for a slot is no failure of the child
            group.cancel_scope.cancel()
        # The slot is free again and the state survived: the same process answers.
        assert text_of(await pool.call_tool("alpha", "counter", {})) == "2"


async def test_crash_mid_call_is_reported_and_the_next_call_restarts(settings: PoolSettings) -> None:
    async with running_pool({"alpha": fixture_config("alpha")}, settings) as pool:
        assert text_of(await pool.call_tool("alpha", "counter", {})) == "1"
        assert text_of(await pool.call_tool("alpha", "counter", {})) == "2"
        first_pid = pool.status()["alpha"]["pid"]
        with pytest.raises(ChildCrashedError) as caught:
            await pool.call_tool("alpha", "crash", {})
        assert "exit code 7" in str(caught.value)
        assert "restarted on the next call" in str(caught.value)
        fresh = await pool.call_tool("alpha", "counter", {})
        assert text_of(fresh) == "1"  # a fresh process
        # Whether the child's session or the call noticed the exit first, the note tells it the same way.
        assert "it crashed (exit code 7) during the call to 'crash'. Any state" in fresh.content[0].text
        status = pool.status()["alpha"]
        assert status["pid"] != first_pid and status["restarts"] == 1 and status["errors"] == 1
        assert gone(first_pid)


async def test_a_crash_with_several_calls_in_flight_names_them_all(settings: PoolSettings) -> None:
    # The next call's note blamed the oldest call in flight: "during the call to 'sleep'".
    async with running_pool({"alpha": fixture_config("alpha")}, settings) as pool:
        assert text_of(await pool.call_tool("alpha", "counter", {})) == "1"  # state the crash loses
        async with anyio.create_task_group() as group:

            async def sleep_and_fail() -> None:
                with pytest.raises(ChildCrashedError, match="crashed during the call to 'sleep'"):
                    await pool.call_tool("alpha", "sleep", {"seconds": 60})

            group.start_soon(sleep_and_fail)
            await wait_until(lambda: pool.status()["alpha"]["in_flight"] == 1)
            with anyio.fail_after(30), pytest.raises(ChildCrashedError, match="crashed during the call to 'crash'"):
                await pool.call_tool("alpha", "crash", {})
        fresh = await pool.call_tool("alpha", "counter", {})
        assert (
            "it crashed (exit code 7) while it was answering 2 requests (the call to 'sleep' and the call to 'crash')."
            in fresh.content[0].text
        )


async def test_a_child_that_closes_its_output_mid_call_is_reported_as_such(settings: PoolSettings) -> None:
    async with running_pool({"alpha": fixture_config("alpha", "mute-crash")}, settings) as pool:
        assert text_of(await pool.call_tool("alpha", "counter", {})) == "1"
        muted_pid = pool.status()["alpha"]["pid"]
        with anyio.fail_after(30), pytest.raises(ChildCrashedError) as caught:
            await pool.call_tool("alpha", "crash", {})
        assert "crashed during the call to 'crash' (closed its output)" in str(caught.value)
        await wait_until(lambda: gone(muted_pid))  # still running when it went quiet: killed
        fresh = await pool.call_tool("alpha", "counter", {})
        assert text_of(fresh) == "1"
        assert "it crashed (closed its output) during the call to 'crash'. Any state" in fresh.content[0].text


async def test_hang_past_timeout_kills_and_restarts(settings: PoolSettings) -> None:
    async with running_pool({"alpha": fixture_config("alpha")}, settings) as pool:
        assert text_of(await pool.call_tool("alpha", "counter", {})) == "1"
        wedged_pid = pool.status()["alpha"]["pid"]
        with anyio.fail_after(10), pytest.raises(ChildTimeoutError) as caught:
            await pool.call_tool("alpha", "sleep", {"seconds": 120}, timeout=0.5)
        assert "within 0.5s" in str(caught.value)
        await wait_until(lambda: gone(wedged_pid))
        assert text_of(await pool.call_tool("alpha", "counter", {})) == "1"


async def test_an_answer_without_its_newline_is_named_in_the_timeout(settings: PoolSettings) -> None:
    # The child answered, but never ended the line: "it may be stuck" alone sent users looking elsewhere.
    escaping = Path(__file__).resolve().parents[2] / "fixtures" / "hostile" / "escaping_server.py"
    config = ServerConfig(name="forgetful", command=sys.executable, args=[str(escaping)])
    async with running_pool({"forgetful": config}, settings) as pool:
        with anyio.fail_after(20), pytest.raises(ChildTimeoutError) as caught:
            # 4 s: the partial answer must be written and read first, which a loaded machine may take seconds to do.
            await pool.call_tool("forgetful", "forget_newline", {}, timeout=4.0)
    message = str(caught.value)
    assert "did not finish the call to 'forget_newline' within 4s. It wrote" in message
    assert "bytes to stdout without ending the line ('{\"jsonrpc\": \"2.0\", \"id\": " in message


async def test_server_timeout_in_config_overrides_the_default(settings: PoolSettings) -> None:
    async with running_pool({"alpha": fixture_config("alpha", timeout=0.5)}, settings) as pool:
        with anyio.fail_after(20), pytest.raises(ChildTimeoutError, match="within 0.5s"):
            await pool.call_tool("alpha", "sleep", {"seconds": 120})


async def test_huge_result_passes_through_unchanged(settings: PoolSettings) -> None:
    async with running_pool({"alpha": fixture_config("alpha")}, settings) as pool:
        result = await pool.call_tool("alpha", "huge", {"size": 3_000_000})
        assert text_of(result) == "x" * 3_000_000


async def test_result_over_the_message_limit_is_an_error_result(settings: PoolSettings) -> None:
    settings.max_message_bytes = 256 * 1024
    async with running_pool({"alpha": fixture_config("alpha")}, settings) as pool:
        assert text_of(await pool.call_tool("alpha", "counter", {})) == "1"
        result = await pool.call_tool("alpha", "huge", {"size": 1_000_000})
        assert result.is_error and "message limit" in text_of(result)
        assert text_of(await pool.call_tool("alpha", "counter", {})) == "2"  # same process, state kept


async def test_junk_flooding_stdout_mid_call_does_not_break_the_session(settings: PoolSettings) -> None:
    async with running_pool({"alpha": fixture_config("alpha")}, settings) as pool:
        assert text_of(await pool.call_tool("alpha", "counter", {})) == "1"
        assert text_of(await pool.call_tool("alpha", "write_stdout", {"size": 2_000_000})) == "written"
        assert text_of(await pool.call_tool("alpha", "counter", {})) == "2"


async def test_idle_children_are_stopped(settings: PoolSettings) -> None:
    settings.idle_timeout = 0.3
    async with running_pool({"alpha": fixture_config("alpha")}, settings) as pool:
        await pool.call_tool("alpha", "echo", {"text": "hi"})
        pid = pool.status()["alpha"]["pid"]
        await wait_until(lambda: not pool.is_running("alpha"))
        await wait_until(lambda: gone(pid))
        assert text_of(await pool.call_tool("alpha", "echo", {"text": "again"})) == "again"


async def test_listing_a_running_childs_tools_counts_as_using_it(settings: PoolSettings) -> None:
    settings.max_live_children = 2
    servers = {name: fixture_config(name) for name in ("a", "b", "c")}
    async with running_pool(servers, settings) as pool:
        await pool.call_tool("a", "echo", {"text": "1"})
        listed = await pool.list_tools("a")  # listed now, and kept
        await pool.call_tool("b", "echo", {"text": "2"})
        assert await pool.list_tools("a") == listed  # the kept listing: a is now the most recently used
        a_pid, b_pid = pool.status()["a"]["pid"], pool.status()["b"]["pid"]
        await pool.call_tool("c", "echo", {"text": "3"})
        assert pool.is_running("a") and pool.is_running("c") and not pool.is_running("b")
        assert pool.status()["a"]["pid"] == a_pid
        await wait_until(lambda: gone(b_pid))


async def test_least_recently_used_child_is_evicted_at_the_cap(settings: PoolSettings) -> None:
    settings.max_live_children = 2
    servers = {name: fixture_config(name) for name in ("a", "b", "c")}
    async with running_pool(servers, settings) as pool:
        await pool.call_tool("a", "echo", {"text": "1"})
        await pool.call_tool("b", "echo", {"text": "2"})
        await pool.call_tool("a", "echo", {"text": "3"})  # b is now the least recently used
        b_pid = pool.status()["b"]["pid"]
        await pool.call_tool("c", "echo", {"text": "4"})
        assert pool.is_running("a") and pool.is_running("c") and not pool.is_running("b")
        await wait_until(lambda: gone(b_pid))


async def test_a_child_with_calls_in_flight_is_never_evicted(settings: PoolSettings) -> None:
    settings.max_live_children = 2
    servers = {name: fixture_config(name) for name in ("a", "b", "c")}
    async with running_pool(servers, settings) as pool:
        await pool.call_tool("a", "echo", {"text": "1"})
        async with anyio.create_task_group() as group:
            group.start_soon(pool.call_tool, "a", "sleep", {"seconds": 60})  # a: oldest, but busy
            await wait_until(lambda: pool.status()["a"]["in_flight"] == 1)
            await pool.call_tool("b", "echo", {"text": "2"})
            await pool.call_tool("c", "echo", {"text": "3"})
            assert pool.is_running("a") and pool.is_running("c") and not pool.is_running("b")
            group.cancel_scope.cancel()


async def test_warm_starts_in_the_background(settings: PoolSettings) -> None:
    async with running_pool(
        {"alpha": fixture_config("alpha"), "broken": fixture_config("broken", "crash-at-start")}, settings
    ) as pool:
        pool.warm("alpha")
        pool.warm("broken")  # errors are only logged
        pool.warm("no-such-server")
        await wait_until(lambda: pool.is_running("alpha"))
        assert pool.status()["alpha"]["calls"] == 0
        await wait_until(lambda: pool.status()["broken"]["state"] == "failed")


async def test_unknown_and_disabled_servers(settings: PoolSettings) -> None:
    servers = {
        "weather": fixture_config("weather"),
        "paid": fixture_config("paid", enabled=False, reason="needs an API key"),
    }
    async with running_pool(servers, settings) as pool:
        with pytest.raises(UnknownServerError, match="Did you mean 'weather'"):
            await pool.call_tool("wether", "echo", {"text": "x"})
        with pytest.raises(ServerUnavailableError, match="disabled: needs an API key"):
            await pool.call_tool("paid", "echo", {"text": "x"})
        assert pool.status()["paid"]["state"] == "disabled"


async def test_failed_start_names_exit_code_and_stderr(settings: PoolSettings) -> None:
    servers = {
        "crasher": fixture_config("crasher", "crash-at-start"),
        "missing": ServerConfig(name="missing", command="no-such-command-xyz"),
    }
    async with running_pool(servers, settings) as pool:
        with pytest.raises(ServerUnavailableError) as caught:
            await pool.call_tool("crasher", "echo", {"text": "x"})
        assert "exit code 3" in str(caught.value)
        assert "fatal: fixture configured to crash at start" in str(caught.value)
        with pytest.raises(ServerUnavailableError, match="'no-such-command-xyz' not found"):
            await pool.call_tool("missing", "echo", {"text": "x"})
        log = settings.server_log("crasher")
        assert "fatal: fixture configured to crash at start" in log.read_text()


async def test_a_servers_own_longer_timeout_extends_its_start(settings: PoolSettings) -> None:
    settings.init_timeout = 0.5
    servers = {"hang": fixture_config("hang", "hang-at-start", timeout=2.0), "quick": fixture_config("quick", timeout=0.1)}
    async with running_pool(servers, settings) as pool:
        with anyio.fail_after(30), pytest.raises(ServerUnavailableError, match=r"did not answer initialize within 2s"):
            await pool.call_tool("hang", "echo", {"text": "x"})
    assert settings.start_timeout(servers["quick"]) == 0.5  # a short call timeout leaves the start its own


async def test_failed_start_is_not_retried_within_the_backoff(settings: PoolSettings) -> None:
    settings.restart_backoff = 600.0
    async with running_pool({"crasher": fixture_config("crasher", "crash-at-start")}, settings) as pool:
        with pytest.raises(ServerUnavailableError):
            await pool.call_tool("crasher", "echo", {"text": "x"})
        # Refused at once (no new start), whatever the seconds since read on a loaded machine.
        with anyio.fail_after(10), pytest.raises(ServerUnavailableError, match=r"failed to start \d+s ago"):
            await pool.call_tool("crasher", "echo", {"text": "x"})
        assert pool.status()["crasher"]["restarts"] == 0


async def test_update_servers_stops_removed_and_changed_children(settings: PoolSettings) -> None:
    servers = {"keep": fixture_config("keep"), "drop": fixture_config("drop"), "change": fixture_config("change")}
    async with running_pool(servers, settings) as pool:
        for name in servers:
            await pool.call_tool(name, "counter", {})
        pids = {name: pool.status()[name]["pid"] for name in servers}
        changed = fixture_config("change", env={"NEW_SETTING": "1"})
        pool.update_servers({"keep": servers["keep"], "change": changed})
        await wait_until(lambda: gone(pids["drop"]) and gone(pids["change"]))
        with pytest.raises(UnknownServerError):
            await pool.call_tool("drop", "counter", {})
        assert text_of(await pool.call_tool("keep", "counter", {})) == "2"
        assert text_of(await pool.call_tool("change", "get_env", {"name": "NEW_SETTING"})) == "1"
        assert "drop" not in pool.status()


async def test_kill_all_is_a_synchronous_last_resort(settings: PoolSettings) -> None:
    async with running_pool({"alpha": fixture_config("alpha")}, settings) as pool:
        await pool.call_tool("alpha", "counter", {})
        pid = pool.status()["alpha"]["pid"]
        pool.kill_all()
        await wait_until(lambda: gone(pid) and not pool.is_running("alpha"))
        assert text_of(await pool.call_tool("alpha", "counter", {})) == "1"


async def test_no_process_is_left_after_exit(settings: PoolSettings) -> None:
    servers = {name: fixture_config(name) for name in ("a", "b")}
    async with running_pool(servers, settings) as pool:
        grandchildren = [int(text_of(await pool.call_tool(name, "spawn_child", {}))) for name in servers]
        leaders = [pool.status()[name]["pid"] for name in servers]
    for pid in grandchildren + leaders:
        assert gone(pid)
    assert processes_in(settings.work_root()) == []


async def test_no_process_is_left_when_the_owner_is_cancelled(settings: PoolSettings) -> None:
    servers = {"a": fixture_config("a"), "hang": fixture_config("hang", "hang-at-start")}
    pids: list[int] = []
    with anyio.fail_after(60):
        with anyio.CancelScope() as scope:
            async with ChildPool(servers, settings) as pool:
                pids.append(int(text_of(await pool.call_tool("a", "spawn_child", {"ignore_sigterm": True}))))
                pids.append(pool.status()["a"]["pid"])
                pool.warm("hang")  # still starting when the owner is cancelled
                await wait_until(lambda: pool.status()["hang"]["pid"] is not None)
                pids.append(pool.status()["hang"]["pid"])
                async with anyio.create_task_group() as group:
                    group.start_soon(pool.call_tool, "a", "sleep", {"seconds": 60})
                    await wait_until(lambda: pool.status()["a"]["in_flight"] == 1)
                    scope.cancel()
                    await anyio.sleep_forever()
    assert scope.cancelled_caught
    for pid in pids:
        assert gone(pid)
    assert processes_in(settings.work_root()) == []


async def test_copilot_secrets_do_not_reach_children(settings: PoolSettings, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("COPILOT_TEST_SECRET", "s3cret")
    async with running_pool({"alpha": fixture_config("alpha")}, settings) as pool:
        assert text_of(await pool.call_tool("alpha", "get_env", {"name": "COPILOT_TEST_SECRET"})) == "<unset>"
        tmpdir = text_of(await pool.call_tool("alpha", "get_env", {"name": "TMPDIR"}))
        assert tmpdir == str(settings.server_workdir("alpha") / "tmp")


async def test_list_tools_comes_from_the_live_session(settings: PoolSettings) -> None:
    async with running_pool({"alpha": fixture_config("alpha")}, settings) as pool:
        tools = await pool.list_tools("alpha")
        assert {"echo", "counter", "sleep"} <= {tool.name for tool in tools}
        assert pool.is_running("alpha")
        assert [tool.name for tool in await pool.list_tools("alpha")] == [tool.name for tool in tools]


async def test_a_tool_with_a_broken_definition_is_left_out_and_refused_while_the_others_work(
    settings: PoolSettings, caplog: pytest.LogCaptureFixture
) -> None:
    # One tool without a usable inputSchema made every listing fail (a pydantic traceback out of the pool).
    config = ServerConfig(name="breaker", **schema_breaker_entry())
    async with running_pool({"breaker": config}, settings) as pool:
        with caplog.at_level("WARNING", logger="server.pool.sessions"):
            assert [tool.name for tool in await pool.list_tools("breaker")] == ["fine", "echo"]
        assert text_of(await pool.call_tool("breaker", "echo", {"text": "hi"})) == 'echo ran with {"text": "hi"}'
        with pytest.raises(ServerUnavailableError) as refused:
            await pool.call_tool("breaker", "wrong_type", {})
        assert str(refused.value) == BROKEN_WRONG_TYPE
        assert "not valid JSON Schema" in str(pool.unusable_tool("breaker", "bad_json_schema"))
        assert pool.unusable_tool("breaker", "echo") is None
    assert (
        "server 'breaker': skipped tool 'wrong_type', its definition is broken: inputSchema.type: should be 'object' "
        "(got 'string')"
    ) in [record.getMessage() for record in caplog.records]


async def test_a_listing_broken_beyond_single_tools_is_an_error_saying_what_is_wrong(settings: PoolSettings) -> None:
    config = ServerConfig(name="breaker", **schema_breaker_entry("--bad-cursor"))
    async with running_pool({"breaker": config}, settings) as pool:
        with pytest.raises(ServerUnavailableError) as caught:
            await pool.list_tools("breaker")
    assert str(caught.value).startswith(
        "server 'breaker' answered tools/list with a reply that does not follow the MCP schema: nextCursor: should "
        "be a valid string (got 5)"
    )


async def test_a_child_a_listener_keeps_alive_is_not_stopped_for_being_idle(settings: PoolSettings) -> None:
    from server.pool.interfaces import PoolListener

    class Holding(PoolListener):
        def __init__(self) -> None:
            self.holding = True
            self.asked = 0

        def keeps_alive(self, server: str) -> bool:
            self.asked += 1
            return self.holding

    settings.idle_timeout = 0.2
    holding = Holding()
    async with running_pool({"alpha": fixture_config("alpha")}, settings) as pool:
        pool.subscribe(holding)
        await pool.call_tool("alpha", "echo", {"text": "hi"})
        await wait_until(lambda: holding.asked >= 2)  # two idle sweeps found it idle, and kept it
        assert pool.is_running("alpha") and pool.status()["alpha"]["idle_stops"] == 0
        holding.holding = False
        await wait_until(lambda: not pool.is_running("alpha"))


class _RecordingLink:
    """The pool's link to the hosts, recording what it is handed for each request and log of a child."""

    def __init__(self) -> None:
        self.asked: list[tuple[int, int]] = []
        self.logged: list[tuple[int, int]] = []

    def user_root(self) -> None:
        return None

    async def answer(self, server: str, calls: list[Any], request: Any, *, others: int = 0) -> Any:
        import mcp_types as types  # noqa: PLC0415

        self.asked.append((len(calls), others))
        return types.ErrorData(code=types.INVALID_REQUEST, message="refused by the test")

    async def log(self, server: str, calls: list[Any], params: Any, *, others: int = 0) -> None:
        self.logged.append((len(calls), others))


class _StubRelay:
    def __init__(self) -> None:
        self.started = anyio.Event()
        self.timeout_scope: Any = None

    async def progress(self, progress: float, total: float | None, message: str | None) -> None:
        self.started.set()

    def close(self) -> None:
        return None


async def test_a_childs_request_during_a_prompt_and_a_tool_call_is_handed_on_with_the_prompt_counted(
    settings: PoolSettings,  # noqa: F811
) -> None:
    # Before: the link got the one tool call in flight and nothing else, so it gave the child's
    # question -- asked for another host's prompts/get -- to that call's host.
    from tests.server.support.relay_harness import relay_entry  # noqa: PLC0415

    link, relay = _RecordingLink(), _StubRelay()
    config = ServerConfig(name="relay", **relay_entry("relay"))
    with anyio.fail_after(60):
        async with ChildPool({"relay": config}, settings, link=link) as pool, anyio.create_task_group() as group:

            async def blocked() -> None:
                await pool.call_tool("relay", "block", {"label": "x"}, relay=relay)

            group.start_soon(blocked)
            await relay.started.wait()
            prompt = await pool.request(
                "relay", "prompts/get", lambda session: session.get_prompt("greeting"), for_host=True
            )
            # The copilot's own listing of the same child is no host's: a question meanwhile is the call's.
            await pool.request("relay", "prompts/list", lambda session: session.list_prompts())
            group.cancel_scope.cancel()
    assert "refused: refused by the test" in prompt.messages[0].content.text
    assert link.asked == [(1, 1)] and link.logged == [(1, 1)]
    assert relay.started.is_set()


async def test_status_says_which_children_run_isolated(settings: PoolSettings, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("COPILOT_ISOLATE_CHILDREN", raising=False)
    servers = {
        "alpha": fixture_config("alpha"),
        "beta": fixture_config("beta", isolated=False),
        "remote": ServerConfig(name="remote", url="http://127.0.0.1:9/mcp"),
    }
    async with running_pool(servers, settings) as pool:
        shown = {name: report["isolated"] for name, report in pool.status().items()}
    assert shown == {"alpha": landlock_abi() > 0, "beta": False, "remote": None}
