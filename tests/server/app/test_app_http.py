"""The copilot over streamable HTTP: bearer token, Origin checks, both protocol eras, elicitation.

One copilot process (``python -m server --http``) serves the whole module.
"""

from __future__ import annotations

import sys
from contextlib import AsyncExitStack
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import anyio
import httpx2
import mcp_types as types
import pytest
import pytest_asyncio
from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared._httpx_utils import create_mcp_http_client

from tests.server.support.copilot_harness import (
    EXECUTE_ONLY,
    HttpCopilot,
    RunningClient,
    built_index,  # noqa: F401 -- session fixture
    copilot_env,
    copy_home,
    fixture_entry,
    http_client_for,
    raw_initialize,
    raw_mcp_headers,
    read_events,
    text_of,
    write_servers,
)
from tests.support.cli import server_status

pytestmark = [pytest.mark.asyncio(loop_scope="module"), pytest.mark.timeout(120)]

TOKEN = "test-token-0123456789"
#: Seconds the host has to answer a question: one test waits it out.
INPUT_TIMEOUT = 5
INITIALIZE = raw_initialize("raw")
MCP_HEADERS = {"Accept": "application/json, text/event-stream", "Content-Type": "application/json"}


@dataclass
class Served:
    url: str
    logs: Path
    process: HttpCopilot


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def served(built_index: Path, tmp_path_factory: pytest.TempPathFactory) -> Any:  # noqa: F811
    root = tmp_path_factory.mktemp("http-copilot")
    home = copy_home(built_index, root / "home")
    servers = write_servers(
        root / "servers.json", {"alpha": fixture_entry("alpha"), "beta": fixture_entry("beta", trusted=False)}
    )
    logs = root / "logs"
    # The token comes from a file, so the whole module also proves the token-file path end to end.
    token_file = root / "token"
    token_file.write_text(TOKEN + "\n", encoding="utf-8")
    env = copilot_env(
        home, COPILOT_LOG_DIR=str(logs), COPILOT_HTTP_TOKEN_FILE=str(token_file), COPILOT_AUTO_INDEX="false",
        COPILOT_INPUT_TIMEOUT=str(INPUT_TIMEOUT),
    )
    process = HttpCopilot(["--servers", str(servers), "--http", "--port", "0"], env, root, root / "stderr.log")
    await process.start()
    try:
        assert process.url is not None and process.url.startswith("http://127.0.0.1:")
        yield Served(process.url, logs, process)
    finally:
        await process.stop()


async def _connected(served: Served, **options: Any) -> RunningClient:
    running = RunningClient(http_client_for(served.url, token=TOKEN, **options))
    await running.start()
    return running


async def _post(served: Served, headers: dict[str, str]) -> int:
    async with httpx2.AsyncClient(timeout=30) as http:
        response = await http.post(served.url, json=INITIALIZE, headers={**MCP_HEADERS, **headers})
        return response.status_code


async def test_requests_without_the_bearer_token_are_rejected(served: Served) -> None:
    assert await _post(served, {}) == 401
    assert await _post(served, {"Authorization": "Bearer wrong-token"}) == 401
    assert await _post(served, {"Authorization": f"Bearer {TOKEN}"}) == 200


async def test_foreign_origins_are_rejected(served: Served) -> None:
    auth = {"Authorization": f"Bearer {TOKEN}"}
    assert await _post(served, {**auth, "Origin": "https://evil.example"}) == 403
    assert await _post(served, {**auth, "Origin": "http://localhost:3000"}) == 200


async def test_a_foreign_host_is_refused_on_every_path(served: Served) -> None:
    """DNS rebinding: a page on attacker.example resolving to 127.0.0.1 sends its own Host and no Origin."""
    auth = {"Authorization": f"Bearer {TOKEN}"}
    port = served.url.split(":")[2].split("/")[0]
    assert await _post(served, {**auth, "Host": f"attacker.example:{port}"}) == 421
    async with httpx2.AsyncClient(timeout=30) as http:
        metrics = served.url.removesuffix("/mcp") + "/metrics"
        assert (await http.get(metrics, headers={**auth, "Host": f"attacker.example:{port}"})).status_code == 421
        assert (await http.get(metrics, headers={**auth, "Host": f"localhost:{port}"})).status_code == 200


async def test_status_names_the_port_picked_for_port_0(served: Served) -> None:
    shown = await anyio.to_thread.run_sync(server_status, served.logs.parent / "home")
    assert shown.returncode == 0, shown.stderr
    assert f"(http at {served.url})" in shown.stdout, shown.stdout


async def test_route_then_execute_over_http(served: Served) -> None:
    running = await _connected(served)
    try:
        client = running.client
        routed = await client.call_tool("route", {"query": "add two integers", "server": "alpha"})
        best = routed.structured_content["tools"][0]
        assert (best["server"], best["tool"]) == ("alpha", "add")
        result = await client.call_tool(
            "execute", {"server_name": "alpha", "tool_name": "add", "params": {"a": 7, "b": 5}}
        )
        assert text_of(result) == "12"
    finally:
        await running.stop()


async def test_child_state_outlives_client_sessions(served: Served) -> None:
    values = []
    for mode in ("auto", "legacy"):
        running = await _connected(served, mode=mode)
        try:
            result = await running.client.call_tool(
                "execute", {"server_name": "alpha", "tool_name": "counter", "params": {"step": 10}}
            )
            values.append(int(text_of(result)))
        finally:
            await running.stop()
    assert values[1] == values[0] + 10


def _elicitation(answer: str, asked: list[str]) -> Any:
    async def callback(context: Any, params: types.ElicitRequestParams) -> types.ElicitResult:
        asked.append(params.message)
        if answer == "accept":
            return types.ElicitResult(action="accept", content={"approve": True})
        return types.ElicitResult(action="decline")

    return callback


@pytest.mark.parametrize("mode", ["auto", "legacy"])
async def test_destructive_call_confirmed_through_elicitation(served: Served, mode: str) -> None:
    asked: list[str] = []
    running = await _connected(served, mode=mode, elicitation_callback=_elicitation("accept", asked))
    try:
        result = await running.client.call_tool(
            "execute", {"server_name": "alpha", "tool_name": "delete_item", "params": {"item_id": mode}}
        )
    finally:
        await running.stop()
    assert not result.is_error, text_of(result)
    assert text_of(result) == f"deleted {mode}"
    assert len(asked) == 1 and "alpha/delete_item" in asked[0]


async def _execute_2026_07_28(
    served: Served, http: httpx2.AsyncClient, call: dict[str, Any], **rounds: Any
) -> dict[str, Any]:
    """The result of one 2026-07-28 ``tools/call`` of ``execute`` from a host that can elicit
    (``rounds``: the ``requestState`` and ``inputResponses`` of a retry)."""
    envelope = {
        "io.modelcontextprotocol/protocolVersion": "2026-07-28",
        "io.modelcontextprotocol/clientCapabilities": {"elicitation": {"form": {}}},
    }
    headers = {
        **raw_mcp_headers(TOKEN), "mcp-protocol-version": "2026-07-28", "mcp-method": "tools/call", "mcp-name": "execute",
    }
    params = {"name": "execute", "arguments": call, "_meta": envelope, **rounds}
    answer = await http.post(served.url, json={"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": params}, headers=headers)
    assert answer.status_code == 200, answer.text
    return dict(answer.json()["result"])


async def test_a_confirmed_2026_07_28_round_runs_the_call_once(served: Served) -> None:
    # Before: the sealed requestState stayed valid for the SDK's ten minutes, so replaying the
    # confirmed retry ran the destructive call again each time.
    call = {"server_name": "alpha", "tool_name": "delete_item", "params": {"item_id": "once"}}

    async def execute(http: httpx2.AsyncClient, **rounds: Any) -> dict[str, Any]:
        return await _execute_2026_07_28(served, http, call, **rounds)

    yes = {"confirm": {"action": "accept", "content": {"approve": True}}}
    async with httpx2.AsyncClient(timeout=60) as http:
        asked = await execute(http)
        assert list(asked["inputRequests"]) == ["confirm"]
        state = asked["requestState"]
        first = await execute(http, requestState=state, inputResponses=yes)
        again = await execute(http, requestState=state, inputResponses=yes)
    assert first["content"][0]["text"] == "deleted once"
    assert again["isError"] and "already used or has expired" in again["content"][0]["text"]


@pytest.mark.parametrize("mode", ["auto", "legacy"])
async def test_declined_elicitation_refuses_the_call(served: Served, mode: str) -> None:
    asked: list[str] = []
    running = await _connected(served, mode=mode, elicitation_callback=_elicitation("decline", asked))
    try:
        result = await running.client.call_tool(
            "execute", {"server_name": "beta", "tool_name": "echo", "params": {"text": "risky"}}
        )
    finally:
        await running.stop()
    assert result.is_error
    assert "declined" in text_of(result)
    assert len(asked) == 1 and "untrusted" in asked[0]


@pytest.mark.parametrize("answer", ["error", "silence"])
async def test_a_host_asked_that_gives_no_decision_refuses_the_call_without_a_token(served: Served, answer: str) -> None:
    # Before: an error or no answer in time fell back to a confirm token, which the agent could
    # redeem itself though the host can ask the user: no person had agreed.
    asked: list[str] = []

    async def callback(context: Any, params: types.ElicitRequestParams) -> types.ElicitResult | types.ErrorData:
        asked.append(params.message)
        if answer == "silence":
            await anyio.sleep_forever()  # until the copilot's COPILOT_INPUT_TIMEOUT, then the client stops
        return types.ErrorData(code=types.INTERNAL_ERROR, message="dialog closed")

    running = await _connected(served, mode="legacy", elicitation_callback=callback)
    try:
        result = await running.client.call_tool(
            "execute", {"server_name": "alpha", "tool_name": "delete_item", "params": {"item_id": answer}}
        )
    finally:
        await running.stop()
    why = "the host answered with an error (-32603: dialog closed)" if answer == "error" else (
        f"no answer came within {INPUT_TIMEOUT}s (COPILOT_INPUT_TIMEOUT)"
    )
    assert result.is_error and len(asked) == 1
    assert text_of(result).startswith(
        f"The user was asked through the host whether to run alpha/delete_item, but {why}; nothing was run."
    ), text_of(result)
    assert "confirm=" not in text_of(result)


async def test_a_2026_07_28_answer_that_is_no_decision_refuses_the_call_without_a_token(served: Served) -> None:
    call = {"server_name": "alpha", "tool_name": "delete_item", "params": {"item_id": "sampled"}}
    # A sampling result where the confirmation's answer belongs.
    sampled = {"confirm": {"role": "assistant", "content": {"type": "text", "text": "yes"}, "model": "m"}}
    async with httpx2.AsyncClient(timeout=60) as http:
        asked = await _execute_2026_07_28(served, http, call)
        result = await _execute_2026_07_28(served, http, call, requestState=asked["requestState"], inputResponses=sampled)
    text = result["content"][0]["text"]
    assert result["isError"] and "but the host's answer holds no decision; nothing was run." in text, text
    assert "confirm=" not in text


async def test_each_handshake_session_writes_its_own_trajectory(served: Served) -> None:
    for name in ("legacy-one", "legacy-two"):
        running = await _connected(served, mode="legacy", client_name=name)
        try:
            await running.client.call_tool(
                "execute", {"server_name": "alpha", "tool_name": "echo", "params": {"text": name}}
            )
        finally:
            await running.stop()
    starts = {}
    for path in served.logs.glob("*.jsonl"):
        events = read_events(path)
        if events and events[0].event == "session_start" and events[0].client:
            starts.setdefault(events[0].client.get("name"), []).append((path, events))
    for name in ("legacy-one", "legacy-two"):
        assert len(starts[name]) == 1, starts.keys()
        _, events = starts[name][0]
        echoes = [e for e in events if e.event == "execute" and e.tool == "echo"]
        assert [e.params for e in echoes] == [{"text": name}]


def _client_noting_session_ids(url: str, client_name: str, mode: str, seen: set[str]) -> Any:
    """An SDK client (as ``http_client_for``) that notes every ``mcp-session-id`` the copilot answers with."""

    async def note(response: httpx2.Response) -> None:
        if session_id := response.headers.get("mcp-session-id"):
            seen.add(session_id)

    async def connect(stack: AsyncExitStack) -> Client:
        http = await stack.enter_async_context(create_mcp_http_client())
        http.event_hooks["response"].append(note)
        client = Client(
            streamable_http_client(url, http_client=http),
            client_info=types.Implementation(name=client_name, version="1.0"),
            mode=mode,
        )
        return await stack.enter_async_context(client)

    return connect


async def test_the_http_session_id_leads_to_the_sessions_trajectory(
    built_index: Path,  # noqa: F811
    tmp_path: Path,
) -> None:
    """The ``mcp-session-id`` a host sees (and names in its errors) is in its trajectory's
    ``session_start`` and in the copilot's log line naming that file; session-less 2026-07-28
    requests have none. Only a session the transport names remembers the servers it ran for
    ``route``'s session prior: session-less requests over HTTP share one log with any client."""
    home = copy_home(built_index, tmp_path / "home")
    servers = write_servers(tmp_path / "servers.json", {"alpha": fixture_entry("alpha")})
    logs = tmp_path / "logs"
    env = copilot_env(
        home, COPILOT_LOG_DIR=str(logs), **EXECUTE_ONLY,
        COPILOT_ROUTE_MODEL_WAIT="90",  # the session prior lifts ranked, not keyword-only, answers
    )
    process = HttpCopilot(["--servers", str(servers), "--http", "--port", "0"], env, tmp_path, tmp_path / "stderr.log")
    await process.start()
    assert process.url is not None
    seen: dict[str, set[str]] = {"legacy": set(), "2026-07-28": set()}
    lifted: dict[str, Any] = {}
    try:
        for mode, ids in seen.items():
            running = RunningClient(_client_noting_session_ids(process.url, f"ids-{mode}", mode, ids))
            client = await running.start()
            try:
                result = await client.call_tool(
                    "execute", {"server_name": "alpha", "tool_name": "echo", "params": {"text": mode}}
                )
                assert text_of(result) == mode
                routed = await client.call_tool("route", {"query": "echo the given text back"})
                lifted[mode] = routed.structured_content["session_servers"]
            finally:
                await running.stop()
    finally:
        await process.stop()  # the copilot's log is complete once it has exited
    assert lifted == {"legacy": ["alpha"], "2026-07-28": []}
    [session_id] = seen["legacy"]
    assert seen["2026-07-28"] == set()
    starts = {}
    for path in logs.glob("*.jsonl"):
        start = read_events(path)[0]
        starts[start.client["name"]] = (path, start)
    log = (tmp_path / "stderr.log").read_text(encoding="utf-8")

    path, start = starts["ids-legacy"]
    assert start.transport_session_id == session_id
    assert f"session {start.session_id[:8]} (mcp-session-id {session_id}): trajectory in {path}" in log, log

    path, start = starts["ids-2026-07-28"]
    assert start.transport_session_id is None
    assert f"session {start.session_id[:8]}: trajectory in {path}" in log, log


async def test_refuses_to_listen_beyond_loopback_without_a_token(tmp_path: Path) -> None:
    servers = write_servers(tmp_path / "servers.json", {"alpha": fixture_entry("alpha")})
    env = copilot_env(tmp_path / "home")
    with anyio.fail_after(60):
        result = await anyio.run_process(
            [sys.executable, "-m", "server", "--servers", str(servers), "--http", "--host", "0.0.0.0", "--port", "0"],
            env=env,
            cwd=str(tmp_path),
            check=False,
        )
    assert result.returncode == 2
    assert b"refusing to listen on 0.0.0.0 without a bearer token" in result.stderr
    assert result.stdout == b""


@pytest.mark.parametrize(
    ("extra", "env_settings", "message"),
    [
        (["--token", "abc"], {}, b"the bearer token has 3 characters; use at least 16"),
        ([], {"COPILOT_HTTP_TOKEN": "short-token"}, b"the bearer token has 11 characters; use at least 16"),
        (
            [],
            {"COPILOT_HTTP_TOKEN_FILE": "/nonexistent/token"},
            b"error: cannot read the token file /nonexistent/token (--token-file or COPILOT_HTTP_TOKEN_FILE)",
        ),
        (["--token-file", "/dev/null"], {}, b"error: the token file /dev/null (--token-file or COPILOT_HTTP_TOKEN_FILE) is empty"),
        # Tokens no client could present: the guard reads the header as latin-1 bytes.
        ([], {"COPILOT_HTTP_TOKEN": "p\u00e4sswort-0123456789abcdef"}, "the bearer token holds 'ä' at position 2".encode()),
        (["--token", "0123456789abcdef-token\r"], {}, b"the bearer token holds '\\r' at position 23; use visible ASCII"),
    ],
)
async def test_refuses_guessable_or_unreadable_tokens(
    tmp_path: Path, extra: list[str], env_settings: dict[str, str], message: bytes
) -> None:
    servers = write_servers(tmp_path / "servers.json", {"alpha": fixture_entry("alpha")})
    env = copilot_env(tmp_path / "home", **env_settings)
    command = [sys.executable, "-m", "server", "--servers", str(servers), "--http", "--host", "0.0.0.0", "--port", "0"]
    with anyio.fail_after(60):
        result = await anyio.run_process([*command, *extra], env=env, cwd=str(tmp_path), check=False)
    assert result.returncode == 2, result.stderr
    assert message in result.stderr, result.stderr
    assert b"Traceback" not in result.stderr
    assert result.stdout == b""
