"""Startup and shutdown of the real copilot process: no child before it is needed, none after.

These copilots never search, so they do not load the embedding model (COPILOT_WARM_INDEX=false).
"""

from __future__ import annotations

import json
import os
import re
import signal
import sys
from pathlib import Path

import anyio
import psutil
import pytest
from mcp_types import CallToolResult

from tests.server.support.copilot_harness import (
    EXECUTE_ONLY,
    RunningClient,
    alive,
    built_index,  # noqa: F401 -- session fixture
    copilot_env,
    copy_home,
    descendants,
    find_copilot,
    fixture_entry,
    read_events,
    stdio_client_for,
    text_of,
    wait_exited,
    write_servers,
)

pytestmark = pytest.mark.timeout(120)

def _setup(root: Path, built: Path, **settings: str) -> tuple[Path, dict[str, str], Path]:
    home = copy_home(built, root / "home")
    servers = write_servers(
        root / "servers.json",
        {
            "alpha": fixture_entry("alpha"),
            "crashy": fixture_entry("crashy"),
            "noisy": fixture_entry("noisy", "junk-stdout"),
        },
    )
    logs = root / "logs"
    return servers, copilot_env(home, COPILOT_LOG_DIR=str(logs), **EXECUTE_ONLY, **settings), logs


def _session_file(logs: Path) -> Path:
    files = sorted(logs.glob("*.jsonl"))
    assert len(files) == 1, files
    return files[0]


async def test_initialize_starts_no_child_and_closing_stdin_stops_every_child(
    built_index: Path,  # noqa: F811 -- the imported session fixture
    tmp_path: Path,
) -> None:
    # Read-only mode allows declared read-only tools and the allowlist; the fixture's echo declares nothing.
    servers, env, logs = _setup(
        tmp_path, built_index, COPILOT_READ_ONLY="true", COPILOT_READ_ONLY_ALLOW="alpha/echo,noisy/echo"
    )
    running = RunningClient(stdio_client_for(servers, env, tmp_path / "stderr.log", client_name="lifecycle"))
    client = await running.start()
    try:
        copilot = find_copilot(str(servers))
        assert descendants(copilot) == []  # initialize answered, nothing started

        echo = await client.call_tool(
            "execute", {"server_name": "alpha", "tool_name": "echo", "params": {"text": "hi"}}
        )
        assert text_of(echo) == "hi"
        noisy = await client.call_tool(
            "execute", {"server_name": "noisy", "tool_name": "echo", "params": {"text": "ok"}}
        )
        assert text_of(noisy) == "ok"

        refused = await client.call_tool(
            "execute", {"server_name": "alpha", "tool_name": "delete_item", "params": {"item_id": "1"}}
        )
        assert refused.is_error
        assert "read-only mode" in text_of(refused)

        children = descendants(copilot)
        assert children
    finally:
        await running.stop()  # closes the copilot's stdin
    await wait_exited(copilot, 30)
    assert alive(children) == []

    events = read_events(_session_file(logs))
    assert events[0].event == "session_start" and events[0].client["name"] == "lifecycle"
    assert events[0].transport_session_id is None  # stdio has no transport session id
    assert events[-1].event == "session_end" and events[-1].reason == "client disconnected"
    refusal = [e for e in events if e.event == "execute" and e.tool == "delete_item"]
    assert refusal[0].error_kind == "policy_denied"


async def test_sigterm_stops_every_child(built_index: Path, tmp_path: Path) -> None:  # noqa: F811
    servers, env, logs = _setup(tmp_path, built_index)
    running = RunningClient(stdio_client_for(servers, env, tmp_path / "stderr.log"))
    client = await running.start()
    try:
        copilot = find_copilot(str(servers))
        for server in ("alpha", "crashy"):
            result = await client.call_tool(
                "execute", {"server_name": server, "tool_name": "echo", "params": {"text": server}}
            )
            assert text_of(result) == server
        children = descendants(copilot)
        assert len(children) >= 2
        os.kill(copilot.pid, signal.SIGTERM)
        await wait_exited(copilot, 30)
        assert alive(children) == []
    finally:
        await running.stop()
    events = read_events(_session_file(logs))
    assert events[-1].event == "session_end" and events[-1].reason == "SIGTERM"


def _message(**fields: object) -> bytes:
    return (json.dumps({"jsonrpc": "2.0", **fields}) + "\n").encode()


async def test_stdout_carries_only_protocol_messages(built_index: Path, tmp_path: Path) -> None:  # noqa: F811
    """Raw stdio, no SDK client: every byte the copilot writes to stdout is a JSON-RPC message."""
    servers, env, _ = _setup(tmp_path, built_index)
    requests = [
        _message(
            id=1,
            method="initialize",
            params={"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "raw", "version": "0"}},
        ),
        _message(method="notifications/initialized"),
        _message(id=2, method="tools/list"),
        _message(
            id=3,
            method="tools/call",
            params={
                "name": "execute",
                "arguments": {"server_name": "noisy", "tool_name": "echo", "params": {"text": "x"}},
            },
        ),
    ]
    with (tmp_path / "stderr.log").open("wb") as stderr:
        process = await anyio.open_process(
            [sys.executable, "-m", "server", "--servers", str(servers)], env=env, cwd=str(tmp_path), stderr=stderr
        )
        async with process:
            assert process.stdin is not None and process.stdout is not None
            answered: dict[int, dict] = {}
            buffer = b""
            with anyio.fail_after(60):
                for request in requests:
                    await process.stdin.send(request)
                    expected = json.loads(request).get("id")
                    while expected is not None and expected not in answered:
                        buffer += await process.stdout.receive()
                        *lines, buffer = buffer.split(b"\n")
                        for line in lines:
                            message = json.loads(line)  # anything but JSON-RPC fails here
                            assert message["jsonrpc"] == "2.0"
                            if "id" in message:
                                answered[message["id"]] = message
                await process.stdin.aclose()
                rest = b"".join([chunk async for chunk in process.stdout])
                code = await process.wait()
    for line in (buffer + rest).splitlines():
        assert json.loads(line)["jsonrpc"] == "2.0"
    # Two tools unless asked for LiveMCPBench's alias (COPILOT_LIVEMCPBENCH_ALIAS, see test_app_stdio).
    assert {t["name"] for t in answered[2]["result"]["tools"]} == {"route", "execute"}
    assert answered[3]["result"]["content"][0]["text"] == "x"
    assert code == 0


BLOCKING_SERVER = Path(__file__).resolve().parents[3] / "tests" / "fixtures" / "hostile" / "blocking_server.py"


@pytest.mark.parametrize("path", ["fast", "sdk"])
async def test_sigterm_answers_the_stdio_call_in_flight(built_index: Path, tmp_path: Path, path: str) -> None:  # noqa: F811
    """Over stdio too a signal does not end the process under a call: the host reads why (the SDK
    path ended it unanswered, the fast path with "Connection closed"), the child's call is cancelled
    and logged so, and the copilot exits 0 with every child stopped."""
    from tests.server.support.relay_harness import Progress, execute_args  # noqa: PLC0415

    record = tmp_path / "blocker.record"
    home = copy_home(built_index, tmp_path / "home")
    blocker = {"command": sys.executable, "args": [str(BLOCKING_SERVER), "--record", str(record)]}
    servers = write_servers(tmp_path / "servers.json", {"blocker": blocker})
    logs = tmp_path / "logs"
    settings = {} if path == "fast" else {"COPILOT_FAST_RELAY": "false"}
    env = copilot_env(home, COPILOT_LOG_DIR=str(logs), **EXECUTE_ONLY, **settings)
    stderr = tmp_path / "stderr.log"
    running = RunningClient(stdio_client_for(servers, env, stderr))
    client = await running.start()
    answers: list[CallToolResult] = []
    progress = Progress()
    try:
        copilot = find_copilot(str(servers))
        with anyio.fail_after(90):
            async with anyio.create_task_group() as group:

                async def blocked() -> None:
                    arguments = execute_args("blocker", "block", {"label": path})
                    answers.append(await client.call_tool("execute", arguments, progress_callback=progress))

                group.start_soon(blocked)
                await progress.started.wait()  # the child is blocked in its call
                children = descendants(copilot)
                os.kill(copilot.pid, signal.SIGTERM)
            await wait_exited(copilot, 30)
    finally:
        await running.stop()
    [answer] = answers
    assert answer.is_error
    assert text_of(answer) == "Call cancelled: the copilot is shutting down (SIGTERM); call again once it is back."
    assert children and alive(children) == []
    assert f"cancelled {path}" in record.read_text(encoding="utf-8").splitlines()
    log = stderr.read_text(encoding="utf-8")
    assert "answered 1 request(s) in flight: the copilot is shutting down (SIGTERM)" in log
    assert not re.search(r"\bERROR\b|Traceback", log), log
    events = read_events(_session_file(logs))
    [call] = [e for e in events if e.event == "execute" and e.tool == "block"]
    assert call.error_kind == "cancelled" and "the copilot is shutting down (SIGTERM)" in (call.error or ""), call
    assert events[-1].event == "session_end" and events[-1].reason == "SIGTERM"


@pytest.mark.parametrize("mode", ["legacy", "2026-07-28"])
async def test_sigterm_answers_the_http_call_in_flight_and_stops_without_waiting(
    built_index: Path,  # noqa: F811
    tmp_path: Path,
    mode: str,
) -> None:
    """SIGTERM with an ``execute`` in flight: the host gets an answer saying why (so it can call
    again), the child's call is cancelled and the child stopped, the trajectory logs the stop (not
    the client leaving), and uvicorn is left nothing to wait for: no "graceful shutdown exceeded"
    ERROR, no traceback. The other streams a host holds open end too: a legacy client's GET event
    stream, a 2026-07-28 client's ``subscriptions/listen`` stream (gracefully: its loop just ends)."""
    from tests.server.support.copilot_harness import HttpCopilot, http_client_for  # noqa: PLC0415
    from tests.server.support.relay_harness import Progress, execute_args  # noqa: PLC0415

    record = tmp_path / "blocker.record"
    home = copy_home(built_index, tmp_path / "home")
    blocker = {"command": sys.executable, "args": [str(BLOCKING_SERVER), "--record", str(record)]}
    servers = write_servers(tmp_path / "servers.json", {"blocker": blocker})
    logs = tmp_path / "logs"
    stderr = tmp_path / "err.log"
    env = copilot_env(home, COPILOT_LOG_DIR=str(logs), **EXECUTE_ONLY)
    process = HttpCopilot(["--servers", str(servers), "--http", "--port", "0"], env, tmp_path, stderr)
    await process.start()
    assert process.url is not None and process.process is not None
    running = RunningClient(http_client_for(process.url, token=None, mode=mode))
    client = await running.start()
    answers: list[CallToolResult] = []
    listens_ended: list[str] = []
    progress = Progress()
    try:
        with anyio.fail_after(90):
            async with anyio.create_task_group() as group:

                async def blocked() -> None:
                    arguments = execute_args("blocker", "block", {"label": mode})
                    answers.append(await client.call_tool("execute", arguments, progress_callback=progress))

                async def listening(*, task_status: anyio.abc.TaskStatus[None]) -> None:
                    async with client.listen(tools_list_changed=True) as subscription:
                        task_status.started()
                        async for _ in subscription:
                            pass  # an abrupt end raises SubscriptionLost instead of ending the loop
                    listens_ended.append("gracefully")

                if mode != "legacy":
                    await group.start(listening)
                group.start_soon(blocked)
                await progress.started.wait()  # the child is blocked in its call
                children = descendants(psutil.Process(process.process.pid))
                os.kill(process.process.pid, signal.SIGTERM)
            code = await process.process.wait()  # the call was answered first: the group waited for it
    finally:
        await running.stop()
        await process.stop()
    [answer] = answers
    assert listens_ended == ([] if mode == "legacy" else ["gracefully"])
    assert answer.is_error
    assert text_of(answer) == "Call cancelled: the copilot is shutting down (SIGTERM); call again once it is back."
    assert code == 0
    assert children and alive(children) == []
    assert f"cancelled {mode}" in record.read_text(encoding="utf-8").splitlines()  # cancelled, not just killed
    log = stderr.read_text(encoding="utf-8")
    assert not re.search(r"\bERROR\b|Traceback", log), log
    events = [event for path in sorted(logs.glob("*.jsonl")) for event in read_events(path)]
    [call] = [e for e in events if e.event == "execute" and e.tool == "block"]
    assert call.error_kind == "cancelled" and "the copilot is shutting down (SIGTERM)" in (call.error or ""), call
    assert "client closed" not in (call.error or "")
    assert [e.reason for e in events if e.event == "session_end"] == ["SIGTERM"]
