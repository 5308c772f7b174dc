"""``COPILOT_EXPOSE``: ``meta`` lists only the copilot's own tools; ``all`` lists every routable child tool and runs calls of them through execute's checks
(a real stdio copilot process and real children; ``routed`` is covered in ``test_proxy``)."""

from __future__ import annotations

import math
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import anyio
import mcp.types as types
import pytest
import pytest_asyncio
from mcp import Client
from mcp.shared.exceptions import MCPError

from tests.server.support.copilot_harness import (
    RunningClient,
    built_index,  # noqa: F401 -- session fixture
    changing_entry,
    copilot_env,
    copy_home,
    fixture_entry,
    stdio_client_for,
    text_of,
    write_servers,
)

pytestmark = [pytest.mark.asyncio(loop_scope="module"), pytest.mark.timeout(180)]


async def _all_tools(client: Client) -> list[types.Tool]:
    tools: list[types.Tool] = []
    cursor = None
    for _ in range(100):
        result = await client.list_tools(cursor=cursor, cache_mode="bypass")
        tools += result.tools
        cursor = result.next_cursor
        if cursor is None:
            return tools
    raise AssertionError("endless pagination")


async def _start(root: Path, home: Path, expose: str, *, warm: bool = True, **handlers: Any) -> RunningClient:
    servers = write_servers(
        root / "servers.json",
        {"alpha": fixture_entry("alpha"), "jotter": changing_entry("jotter"), "beta": fixture_entry("beta")},
    )
    env = copilot_env(
        home,
        COPILOT_EXPOSE=expose,
        COPILOT_DENY="beta,alpha/crash",
        COPILOT_AUTO_INDEX="false",
        COPILOT_WARM_INDEX=str(warm).lower(),
        COPILOT_TRUST_AUTO_APPROVE="jotter",  # its tools change on purpose here
    )
    running = RunningClient(stdio_client_for(servers, env, root / f"{expose}.log", mode="legacy", **handlers))
    await running.start()
    return running


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def everything(built_index: Path, tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[Any]:  # noqa: F811
    root = tmp_path_factory.mktemp("expose-all")
    # Every tools/list_changed the host hears (route's description changing at start-up sends one too).
    send, notices = anyio.create_memory_object_stream[None](max_buffer_size=math.inf)

    async def on_message(message: Any) -> None:
        if isinstance(message, types.ToolListChangedNotification):
            send.send_nowait(None)

    running = await _start(root, copy_home(built_index, root / "home"), "all", message_handler=on_message)
    try:
        yield running.client, notices
    finally:
        await running.stop()


async def test_all_lists_every_allowed_child_tool(everything: Any) -> None:
    client, _ = everything
    assert client.server_capabilities.tools.list_changed
    names = {tool.name for tool in await _all_tools(client)}
    assert {"route", "execute", "alpha__add", "alpha__delete_item", "jotter__echo"} <= names
    assert "alpha__crash" not in names  # COPILOT_DENY=alpha/crash
    assert not any(name.startswith("beta__") for name in names)  # the whole server is denied


async def test_calls_of_exposed_tools_pass_executes_checks(everything: Any) -> None:
    client, _ = everything
    assert text_of(await client.call_tool("jotter__echo", {"text": "direct"})) == "direct"
    invalid = await client.call_tool("alpha__add", {"a": "two", "b": 3})
    assert invalid.is_error and "'a'" in text_of(invalid)
    risky = await client.call_tool("alpha__delete_item", {"item_id": "x"})  # destructive: no elicitation here
    assert risky.is_error and "Confirmation required" in text_of(risky)
    with pytest.raises(MCPError) as caught:
        await client.call_tool("beta__echo", {"text": "denied"})
    assert caught.value.code == -32602


async def test_a_child_adding_a_tool_reaches_tools_list(everything: Any) -> None:
    client, notices = everything
    added = await client.call_tool(
        "execute",
        {"server_name": "jotter", "tool_name": "add_tool", "params": {"name": "orbit", "description": "Plan an orbit."}},
    )
    assert not added.is_error, text_of(added)
    with anyio.fail_after(120):  # the new tool is listed after one of the notifications
        while "jotter__orbit" not in {tool.name for tool in await _all_tools(client)}:
            await notices.receive()
    assert text_of(await client.call_tool("jotter__orbit", {"value": "LEO"})) == "orbit: LEO"


async def test_meta_lists_only_the_copilots_tools(built_index: Path, tmp_path: Path) -> None:  # noqa: F811
    running = await _start(tmp_path, copy_home(built_index, tmp_path / "home"), "meta", warm=False)
    try:
        client = running.client
        # Declared in every mode: route's description follows the pool.
        assert client.server_capabilities.tools.list_changed is True
        assert [tool.name for tool in await _all_tools(client)] == ["route", "execute"]
        with pytest.raises(MCPError) as caught:
            await client.call_tool("alpha__add", {"a": 1, "b": 2})
        assert caught.value.code == -32602 and "route" in caught.value.message
    finally:
        await running.stop()
