"""The real copilot process against a hostile child and a rough host (issue 9's fault matrix).

- a child reading ``/proc/<ancestor>/environ`` finds none of the copilot's secrets;
- an isolated child can neither read nor signal a sibling server or the copilot;
- no child, grandchild (``setsid``, double-forked daemon, SIGTERM-ignoring) or child hung before
  ``initialize`` survives a SIGKILL of the copilot (stdio and HTTP), a SIGHUP (HTTP), a second
  signal during shutdown, or a host's stop escalation;
- over stdio, a request the SDK cannot parse is answered with a JSON-RPC parse error.

These copilots never search: they have no index, and tools are listed from the live child.
"""

from __future__ import annotations

import json
import os
import signal
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager, suppress
from pathlib import Path
from typing import Any

import anyio
import psutil
import pytest
from mcp import Client

from index.children.containment.guardian import landlock_abi
from tests.server.support.copilot_harness import (
    EXECUTE_ONLY,
    SECRET_VALUE,
    HttpCopilot,
    RunningClient,
    copilot_env,
    descendants,
    find_copilot,
    free_port,
    http_client_for,
    raw_initialize,
    raw_stdio_answers,
    read_events,
    stdio_client_for,
    text_of,
    wait_exited,
    write_servers,
)
from tests.support.processes import as_processes, hostile_entry, kill_leftovers, wait_for_file, wait_gone

pytestmark = pytest.mark.timeout(150)

OPENAI_KEY = "sk-test-openai-key-0123456789"
HTTP_TOKEN = "test-http-token-0123456789abcdef"


def _env(root: Path, **settings: str) -> dict[str, str]:
    return copilot_env(
        root / "home",
        COPILOT_LOG_DIR=str(root / "logs"),
        OPENAI_API_KEY=OPENAI_KEY,
        COPILOT_HTTP_TOKEN=HTTP_TOKEN,
        **EXECUTE_ONLY,
        **settings,
    )


def _escape_servers(root: Path) -> Path:
    """A stubborn child that will start escaping grandchildren, and one hung before initialize."""
    return write_servers(
        root / "servers.json",
        {
            "evil": hostile_entry("--ignore-signals"),
            "hung": hostile_entry(
                "--hang-before-initialize", "--ignore-signals", "--detach-at-start", str(root / "hung-grandchild.pid")
            ),
        },
    )


async def _execute(client: Client, server: str, tool: str, **params: Any) -> str:
    result = await client.call_tool("execute", {"server_name": server, "tool_name": tool, "params": params})
    assert not result.is_error, text_of(result)
    return text_of(result)


async def _quietly(call: Callable[[], Awaitable[Any]]) -> None:
    with suppress(Exception):  # the copilot dies under these calls on purpose
        await call()


async def _provoke(client: Client, root: Path, group: anyio.abc.TaskGroup) -> list[int]:
    """Grandchildren that left the child's group, a call in flight, a start hung before initialize."""
    escaped = [
        int(await _execute(client, "evil", "detach", how=how, ignore_sigterm=True)) for how in ("setsid", "daemon")
    ]
    in_flight = root / "in-flight"
    group.start_soon(_quietly, lambda: _execute(client, "evil", "sleep", seconds=600, started_file=str(in_flight)))
    group.start_soon(_quietly, lambda: _execute(client, "hung", "echo", text="never"))
    await wait_for_file(in_flight)
    escaped.append(int(await wait_for_file(root / "hung-grandchild.pid")))
    return escaped


def _everything_started_by(copilot: psutil.Process, escaped: list[int]) -> list[psutil.Process]:
    processes = [*descendants(copilot), *as_processes(escaped)]
    assert len(processes) >= 6, processes  # evil, 2 escaped, hung, its grandchild, the watchdog
    return processes


# -- secrets --------------------------------------------------------------------------------------
async def test_a_child_reading_its_ancestors_environments_finds_no_secret(tmp_path: Path) -> None:
    secrets = [OPENAI_KEY, HTTP_TOKEN, SECRET_VALUE]
    look_for = [flag for value in secrets for flag in ("--look-for", value)]
    servers = write_servers(
        tmp_path / "servers.json",
        {
            "evil": hostile_entry(
                *look_for, "--report", str(tmp_path / "at-start.json"), env={"GIVEN": "${OPENAI_API_KEY}"}
            )
        },
    )
    running = RunningClient(stdio_client_for(servers, _env(tmp_path), tmp_path / "stderr.log"))
    client = await running.start()
    try:
        copilot = find_copilot(str(servers))
        report = json.loads(await _execute(client, "evil", "steal"))
        # An entry may still hand a secret to its server on purpose; nothing else reaches it.
        assert await _execute(client, "evil", "getenv", name="GIVEN") == OPENAI_KEY
        assert await _execute(client, "evil", "getenv", name="OPENAI_API_KEY") == "<unset>"
    finally:
        await running.stop()
    at_start = json.loads((tmp_path / "at-start.json").read_text(encoding="utf-8"))
    for seen in (at_start, report):
        assert copilot.pid in [entry["pid"] for entry in seen["ancestors"]]
        assert seen["found"] == 0, seen


@pytest.mark.parametrize("isolated", [True, False], ids=["isolated", "unisolated"])
async def test_an_isolated_child_cannot_read_inspect_or_signal_a_sibling_or_the_copilot(
    tmp_path: Path, isolated: bool
) -> None:
    abi = landlock_abi()
    if not abi:
        pytest.skip("this kernel has no Landlock (Linux 5.13+): children cannot be isolated here")
    keeper_key = f"sk-keeper-{os.getpid()}-{id(tmp_path):x}"  # only in the keeper's environment
    servers = write_servers(
        tmp_path / "servers.json",
        {
            "keeper": hostile_entry(env={"KEEPER_KEY": keeper_key}),
            "evil": hostile_entry("--look-for", keeper_key, isolated=isolated),
        },
    )
    running = RunningClient(stdio_client_for(servers, _env(tmp_path), tmp_path / "stderr.log"))
    client = await running.start()
    try:
        copilot = find_copilot(str(servers))
        keeper = json.loads(await _execute(client, "keeper", "steal"))["pid"]
        assert await _execute(client, "keeper", "getenv", name="KEEPER_KEY") == keeper_key
        stolen = json.loads(await _execute(client, "evil", "steal"))
        on_keeper = json.loads(await _execute(client, "evil", "probe", pid=keeper))
        on_copilot = json.loads(await _execute(client, "evil", "probe", pid=copilot.pid))
    finally:
        await running.stop()
    if not isolated:  # what an entry with "isolated": false still allows (same user, dumpable)
        assert stolen["elsewhere"] == [keeper]
        assert on_keeper == {"environ": "ok", "maps": "ok", "mem": "ok", "signal": "ok"}
        assert on_copilot["signal"] == "ok"
        return
    assert stolen["elsewhere"] == []
    signals = "EPERM" if abi >= 6 else "ok"  # Landlock scopes signals from ABI 6 (Linux 6.12) on
    for probed in (on_keeper, on_copilot):
        assert probed == {"environ": "EACCES", "maps": "EACCES", "mem": "EACCES", "signal": signals}


# -- orphans --------------------------------------------------------------------------------------
@asynccontextmanager
async def _stdio_copilot(tmp_path: Path) -> AsyncIterator[tuple[psutil.Process, Client, list[psutil.Process]]]:
    """A stdio copilot over the escaping children (its stderr in ``stderr.log``), a client of it, and
    the processes to clean up after."""
    servers = _escape_servers(tmp_path)
    running = RunningClient(stdio_client_for(servers, _env(tmp_path), tmp_path / "stderr.log"))
    client = await running.start()
    processes: list[psutil.Process] = []
    try:
        yield find_copilot(str(servers)), client, processes
    finally:
        kill_leftovers(processes)
        await running.stop()


async def test_nothing_survives_a_sigkill_of_the_stdio_copilot(tmp_path: Path) -> None:
    async with _stdio_copilot(tmp_path) as (copilot, client, processes):
        async with anyio.create_task_group() as group:
            escaped = await _provoke(client, tmp_path, group)
            processes += _everything_started_by(copilot, escaped)
            os.kill(copilot.pid, signal.SIGKILL)
            await wait_exited(copilot, 30)
            survivors = await wait_gone(processes)
            group.cancel_scope.cancel()
        assert survivors == []


@asynccontextmanager
async def _http_copilot(tmp_path: Path) -> AsyncIterator[tuple[HttpCopilot, Client, list[psutil.Process]]]:
    """An HTTP copilot over the escaping children, a client of it, and the processes to clean up after."""
    servers = _escape_servers(tmp_path)
    port = free_port()
    copilot_process = HttpCopilot(
        ["--servers", str(servers), "--http", "--port", str(port)], _env(tmp_path), tmp_path, tmp_path / "stderr.log"
    )
    await copilot_process.start()
    running = RunningClient(http_client_for(f"http://127.0.0.1:{port}/mcp", token=HTTP_TOKEN))
    client = await running.start()
    processes: list[psutil.Process] = []
    try:
        assert copilot_process.process is not None
        yield copilot_process, client, processes
    finally:
        kill_leftovers(processes)
        await running.stop()
        await copilot_process.stop()


@pytest.mark.parametrize("signum", [signal.SIGKILL, signal.SIGHUP], ids=["SIGKILL", "SIGHUP"])
async def test_nothing_survives_the_http_copilot(tmp_path: Path, signum: signal.Signals) -> None:
    async with _http_copilot(tmp_path) as (copilot_process, client, processes):
        assert copilot_process.process is not None
        copilot = psutil.Process(copilot_process.process.pid)
        async with anyio.create_task_group() as group:
            escaped = await _provoke(client, tmp_path, group)
            processes += _everything_started_by(copilot, escaped)
            os.kill(copilot.pid, signum)
            with anyio.fail_after(60):
                code = await copilot_process.process.wait()
            survivors = await wait_gone(processes)
            group.cancel_scope.cancel()
        assert survivors == []
        if signum == signal.SIGHUP:  # a clean shutdown, with every trajectory closed
            assert code == 0
            ends = [read_events(path)[-1] for path in (tmp_path / "logs").glob("*.jsonl")]
            assert ends and all(e.event == "session_end" and e.reason == "SIGHUP" for e in ends)


async def _stderr_says(path: Path, text: str, timeout: float = 30.0) -> None:
    with anyio.fail_after(timeout):
        while text not in path.read_text(encoding="utf-8", errors="replace"):
            await anyio.sleep(0.02)


async def _signal_twice(copilot: psutil.Process, stderr: Path) -> None:
    """SIGTERM, and a second one once the copilot (logging to ``stderr``) is shutting down."""
    os.kill(copilot.pid, signal.SIGTERM)
    await _stderr_says(stderr, "received SIGTERM, shutting down")
    with suppress(ProcessLookupError):  # it may be done already: then there was nothing to abort
        os.kill(copilot.pid, signal.SIGTERM)


async def test_a_second_signal_during_shutdown_finishes_the_cleanup(tmp_path: Path) -> None:
    async with _stdio_copilot(tmp_path) as (copilot, client, processes):
        async with anyio.create_task_group() as group:
            escaped = await _provoke(client, tmp_path, group)
            processes += _everything_started_by(copilot, escaped)
            await _signal_twice(copilot, tmp_path / "stderr.log")
            await wait_exited(copilot, 30)
            survivors = await wait_gone(processes)
            group.cancel_scope.cancel()
        assert survivors == []
        events = read_events(next((tmp_path / "logs").glob("*.jsonl")))
        assert events[-1].event == "session_end" and events[-1].reason == "SIGTERM"


async def test_a_second_signal_during_an_http_shutdown_finishes_the_cleanup(tmp_path: Path) -> None:
    async with _http_copilot(tmp_path) as (copilot_process, client, processes):
        assert copilot_process.process is not None
        copilot = psutil.Process(copilot_process.process.pid)
        async with anyio.create_task_group() as group:
            escaped = await _provoke(client, tmp_path, group)
            processes += _everything_started_by(copilot, escaped)
            await _signal_twice(copilot, tmp_path / "stderr.log")
            with anyio.fail_after(60):
                await copilot_process.process.wait()
            survivors = await wait_gone(processes)
            group.cancel_scope.cancel()
        assert survivors == []


async def test_no_child_outlives_a_hosts_stop_escalation(tmp_path: Path) -> None:
    """The SDK host closes stdin, SIGTERMs the copilot 2 s later, SIGKILLs it 2 s after that."""
    servers = write_servers(
        tmp_path / "servers.json",
        {"stubborn": hostile_entry("--ignore-signals"), "stubborn-too": hostile_entry("--ignore-signals")},
    )
    stderr = tmp_path / "stderr.log"
    running = RunningClient(stdio_client_for(servers, _env(tmp_path), stderr))
    client = await running.start()
    processes: list[psutil.Process] = []
    try:
        copilot = find_copilot(str(servers))
        for server in ("stubborn", "stubborn-too"):
            assert await _execute(client, server, "echo", text=server) == server
        processes = [copilot, *descendants(copilot)]
    finally:
        await running.stop()
    try:
        # How long the copilot took (under the host's 2 s before SIGTERM) is measured by bench.faults.
        assert await wait_gone(processes) == []
    finally:
        kill_leftovers(processes)


# -- unparseable requests over stdio ---------------------------------------------------------------
def _frame(text: str) -> bytes:
    return text.encode() + b"\n"


async def test_requests_the_sdk_cannot_parse_get_a_parse_error(tmp_path: Path) -> None:
    servers = write_servers(tmp_path / "servers.json", {"evil": hostile_entry()})
    deep = "[" * 250 + "]" * 250
    frames = [
        _frame(json.dumps(raw_initialize("raw"))),
        _frame('{"jsonrpc": "2.0", "method": "notifications/initialized"}'),
        _frame('{"jsonrpc": "2.0", "id": 2, "method": "tools/list", "params": {"cursor": "\\ud800"}}'),
        _frame('{"jsonrpc": "2.0", "id": 3, "method": "tools/list", "params": {"_meta": {"x": %s}}}' % deep),
        _frame('{"jsonrpc": "2.0", "id": 4, "method": "tools/li'),
        _frame('{"jsonrpc": "2.0", "id": 5, "method": "tools/list"}'),
    ]
    answers = await raw_stdio_answers(servers, _env(tmp_path), tmp_path, frames, expect={1, 2, 3, 4, 5}, timeout=60)
    assert "lone UTF-16 surrogate" in answers[2]["error"]["message"]
    assert "nested deeper than the 200 levels" in answers[3]["error"]["message"]
    assert "not valid JSON" in answers[4]["error"]["message"]
    assert {answers[i]["error"]["code"] for i in (2, 3, 4)} == {-32700}
    assert {tool["name"] for tool in answers[5]["result"]["tools"]} >= {"route", "execute"}
