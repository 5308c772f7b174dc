"""The copilot as an aggregating proxy, end to end: a real MCP client as host, the real
``python -m server`` process, the changing fixture child and a real index -- over stdio and
streamable HTTP, each with a 2025-11-25 session client and a 2026-07-28 session-less client.

Settings of the copilots here: ``COPILOT_EXPOSE=routed``, two items per list page (so every list
is paginated), and ``jotter/readme`` denied. The allow/deny test of prompts starts copilots of its
own (stdio, other lists).
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import anyio
import mcp.types as types
import pytest
import pytest_asyncio
from mcp import Client
from mcp.shared.exceptions import MCPError

from tests.fixtures.hostile.changing_server import LOGO, TEAPOT, TEAPOT_CODE
from tests.server.support.copilot_harness import (
    EXECUTE_ONLY,
    HttpCopilot,
    RunningClient,
    built_index,  # noqa: F401 -- session fixture
    changing_entry,
    copilot_env,
    copy_home,
    fixture_entry,
    free_port,
    http_client_for,
    read_events,
    stdio_client_for,
    text_of,
    write_servers,
)

pytestmark = [pytest.mark.asyncio(loop_scope="module"), pytest.mark.timeout(180)]

MODERN = "2026-07-28"
WAIT = 120.0
TOKEN = "aggregate-token-0123456789"
SETTINGS = {
    "COPILOT_EXPOSE": "routed",
    "COPILOT_LIST_PAGE_SIZE": "2",
    "COPILOT_DENY": "jotter/readme",
    "COPILOT_AUTO_INDEX": "false",
    "COPILOT_TRUST_AUTO_APPROVE": "jotter",  # its tools change on purpose here
}
#: (transport, era) of each host this module runs every test with.
HOSTS = [("stdio", "legacy"), ("stdio", MODERN), ("http", "legacy"), ("http", MODERN)]


@dataclass
class Changes:
    """``list_changed`` the host heard: notifications (2025-11-25) or listen events (2026-07-28)."""

    seen: list[str] = field(default_factory=list)
    _event: asyncio.Event = field(default_factory=asyncio.Event)

    def add(self, kind: str) -> None:
        self.seen.append(kind)
        self._event.set()

    async def message_handler(self, message: Any) -> None:
        kinds = {
            types.ToolListChangedNotification: "tools",
            types.PromptListChangedNotification: "prompts",
            types.ResourceListChangedNotification: "resources",
        }
        for cls, kind in kinds.items():
            if isinstance(message, cls):
                self.add(kind)
        if isinstance(message, types.ResourceUpdatedNotification):
            self.add(f"updated {message.params.uri}")

    async def wait_for(self, kind: str, count: int = 1) -> None:
        with anyio.fail_after(WAIT):
            while self.seen.count(kind) < count:
                self._event.clear()
                await self._event.wait()


@dataclass
class Host:
    transport: str
    era: str
    client: Client
    changes: Changes
    logs: Path

    async def pages(self, method: Callable[..., Any], field_name: str) -> list[Any]:
        """Every item of a paginated list, following nextCursor (each page at most 2 items)."""
        items: list[Any] = []
        cursor: str | None = None
        for _ in range(200):
            result = await method(cursor=cursor, cache_mode="bypass")
            chunk = getattr(result, field_name)
            assert len(chunk) <= 2
            items += chunk
            cursor = result.next_cursor
            if cursor is None:
                return items
        raise AssertionError("endless pagination")

    async def tool_names(self) -> list[str]:
        return [tool.name for tool in await self.pages(self.client.list_tools, "tools")]

    async def route_settled(self, arguments: dict[str, Any]) -> types.CallToolResult:
        """Route, and when that exposed new tools, wait for the tools/list_changed it causes (its
        notification may travel apart from the answer), so later counts only see later changes."""
        listed = set(await self.tool_names())
        before = self.changes.seen.count("tools")
        result = await self.client.call_tool("route", arguments)
        if {t.get("direct_name") for t in result.structured_content["tools"]} - listed - {None}:
            await self.changes.wait_for("tools", before + 1)
        return result


@contextlib.asynccontextmanager
async def _listening(client: Client, changes: Changes, resources: list[str] | None = None) -> AsyncIterator[None]:
    """2026-07-28: open a subscriptions/listen stream in a task: for the three list kinds, or for
    updates of ``resources``."""
    ready = asyncio.Event()
    failure: list[BaseException] = []
    wanted: dict[str, Any] = (
        {"resource_subscriptions": resources}
        if resources
        else {"tools_list_changed": True, "prompts_list_changed": True, "resources_list_changed": True}
    )

    async def listen() -> None:
        try:
            async with client.listen(**wanted) as sub:
                ready.set()
                async for event in sub:
                    name = type(event).__name__
                    if name == "ResourceUpdated":
                        changes.add(f"updated {event.uri}")
                        continue
                    changes.add("tools" if "Tools" in name else "prompts" if "Prompts" in name else "resources")
        except BaseException as error:  # noqa: BLE001 -- reported by the fixture
            failure.append(error)
            ready.set()
            raise

    task = asyncio.create_task(listen())
    with anyio.fail_after(60):
        await ready.wait()
    if failure:
        raise failure[0]
    try:
        yield
    finally:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError, Exception):
            await task


@dataclass
class Served:
    root: Path
    servers: Path
    home: Path
    http: HttpCopilot | None = None
    url: str = ""


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def served(built_index: Path, tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[Served]:  # noqa: F811
    root = tmp_path_factory.mktemp("proxy")
    home = copy_home(built_index, root / "home")
    servers = write_servers(root / "servers.json", {"alpha": fixture_entry("alpha"), "jotter": changing_entry("jotter")})
    port = free_port()
    env = copilot_env(home, COPILOT_LOG_DIR=str(root / "http-logs"), COPILOT_HTTP_TOKEN=TOKEN, **SETTINGS)
    http = HttpCopilot(["--servers", str(servers), "--http", "--port", str(port)], env, root, root / "http-stderr.log")
    await http.start()
    try:
        yield Served(root, servers, home, http, f"http://127.0.0.1:{port}/mcp")
    finally:
        await http.stop()


@pytest_asyncio.fixture(scope="module", loop_scope="module", params=HOSTS, ids=["-".join(h) for h in HOSTS])
async def host(request: pytest.FixtureRequest, served: Served) -> AsyncIterator[Host]:
    transport, era = request.param
    changes = Changes()
    mode = "legacy" if era == "legacy" else "auto"
    if transport == "stdio":
        logs = served.root / f"stdio-{era}-logs"
        env = copilot_env(copy_home(served.home, served.root / f"home-{era}"), COPILOT_LOG_DIR=str(logs), **SETTINGS)
        connect = stdio_client_for(
            served.servers, env, served.root / f"stdio-{era}.log", mode=mode, message_handler=changes.message_handler
        )
    else:
        logs = served.root / "http-logs"
        connect = http_client_for(served.url, token=TOKEN, mode=mode, message_handler=changes.message_handler)
    running = RunningClient(connect)
    client = await running.start()
    try:
        assert (client.protocol_version == MODERN) == (era == MODERN)
        async with contextlib.AsyncExitStack() as stack:
            if era == MODERN:
                await stack.enter_async_context(_listening(client, changes))
            yield Host(transport, era, client, changes, logs)
    finally:
        await running.stop()


# -- capabilities and protocol errors ---------------------------------------------------------------
async def test_capabilities_are_what_the_copilot_really_does(host: Host) -> None:
    capabilities = host.client.server_capabilities
    assert capabilities.tools is not None and capabilities.tools.list_changed  # routed mode
    assert capabilities.prompts is not None and capabilities.prompts.list_changed
    assert capabilities.resources is not None and capabilities.resources.list_changed
    assert capabilities.resources.subscribe
    assert capabilities.completions is not None


async def test_an_unknown_tool_is_a_protocol_error_with_suggestions(host: Host) -> None:
    with pytest.raises(MCPError) as caught:
        await host.client.call_tool("exceute", {})
    assert caught.value.code == -32602
    assert "Unknown tool: exceute" in caught.value.message and "execute" in caught.value.message


async def test_an_unknown_prompt_is_invalid_params(host: Host) -> None:
    with pytest.raises(MCPError) as caught:
        await host.client.get_prompt("jotter__greting", {"name": "x"})
    assert caught.value.code == -32602
    assert "Unknown prompt: jotter__greting" in caught.value.message and "jotter__greeting" in caught.value.message


async def test_a_bad_cursor_is_invalid_params(host: Host) -> None:
    with pytest.raises(MCPError) as caught:
        await host.client.list_prompts(cursor="not-a-cursor", cache_mode="bypass")
    assert caught.value.code == -32602


# -- prompts --------------------------------------------------------------------------------------
async def test_prompts_are_listed_under_namespaced_names_and_rendered_by_their_child(host: Host) -> None:
    prompts = {p.name: p for p in await host.pages(host.client.list_prompts, "prompts")}
    assert {"jotter__greeting", "jotter__review_code"} <= set(prompts)
    assert [(a.name, a.required) for a in prompts["jotter__review_code"].arguments or []] == [
        ("code", True),
        ("language", False),
    ]
    result = await host.client.get_prompt("jotter__greeting", {"name": "Ada"})
    assert result.messages[0].content.text == "Hello Ada! How can I help you today?"


async def test_prompt_arguments_complete_through_the_child(host: Host) -> None:
    ref = types.PromptReference(type="ref/prompt", name="jotter__review_code")
    result = await host.client.complete(ref, {"name": "language", "value": "ty"})
    assert result.completion.values == ["typescript"]


async def test_a_completion_over_the_specs_limit_reaches_the_host_cut_to_it(host: Host) -> None:
    """The child offers 150 values; the spec allows 100 in one completion (before: all 150 passed on)."""
    ref = types.PromptReference(type="ref/prompt", name="jotter__review_code")
    result = await host.client.complete(ref, {"name": "code", "value": "x"})
    assert result.completion.values == [f"x{n}" for n in range(100)]
    assert result.completion.has_more is True and result.completion.total == 150


# -- resources --------------------------------------------------------------------------------------
async def test_resources_are_listed_under_copilot_uris_with_the_deny_list_in_force(host: Host) -> None:
    resources = {str(r.uri): r for r in await host.pages(host.client.list_resources, "resources")}
    assert "copilot://jotter/notes://logo" in resources
    assert resources["copilot://jotter/notes://logo"].mime_type == "image/png"
    assert "copilot://jotter/notes://readme" not in resources  # COPILOT_DENY=jotter/readme
    templates = await host.pages(host.client.list_resource_templates, "resource_templates")
    assert "copilot://jotter/notes://items/{item_id}" in [t.uri_template for t in templates]

    logo = await host.client.read_resource("copilot://jotter/notes://logo", cache_mode="bypass")
    assert base64.b64decode(logo.contents[0].blob) == LOGO
    assert str(logo.contents[0].uri) == "copilot://jotter/notes://logo"
    item = await host.client.read_resource("copilot://jotter/notes://items/42", cache_mode="bypass")
    assert item.contents[0].text == "item 42 of jotter"

    with pytest.raises(MCPError) as caught:
        await host.client.read_resource("copilot://jotter/notes://readme", cache_mode="bypass")
    assert caught.value.code == -32002
    with pytest.raises(MCPError) as caught:
        await host.client.read_resource("copilot://nowhere/x://y", cache_mode="bypass")
    assert caught.value.code == -32002


async def test_a_childs_own_error_code_reaches_the_host_with_its_data(host: Host) -> None:
    with pytest.raises(MCPError) as caught:
        await host.client.read_resource(f"copilot://jotter/notes://items/{TEAPOT}", cache_mode="bypass")
    assert caught.value.code == TEAPOT_CODE
    assert caught.value.message == (
        "server 'jotter' answered resources/read with an error: item teapot is brewing, ask again later"
    )
    assert caught.value.error.data == {"retry_after_s": 5}


@pytest.mark.filterwarnings("ignore:resources/(un)?subscribe is removed")
async def test_resource_subscriptions_reach_the_child_and_its_updates_the_host(host: Host) -> None:
    uri = "copilot://jotter/notes://logo"
    touch = {"server_name": "jotter", "tool_name": "touch_resource", "params": {"uri": "notes://logo"}}
    updated = f"updated {uri}"
    if host.era == MODERN:
        async with _listening(host.client, host.changes, resources=[uri]):
            result = await host.client.call_tool("execute", touch)
            assert text_of(result) == "announced notes://logo"  # the copilot subscribed at the child
            await host.changes.wait_for(updated)
        return
    await host.client.subscribe_resource(uri)
    before = host.changes.seen.count(updated)
    assert text_of(await host.client.call_tool("execute", touch)) == "announced notes://logo"
    await host.changes.wait_for(updated, before + 1)
    await host.client.unsubscribe_resource(uri)
    if host.transport == "stdio":  # on HTTP another host may still hold a subscription to it
        assert text_of(await host.client.call_tool("execute", touch)) == "nobody subscribed to notes://logo"
    with pytest.raises(MCPError) as caught:
        await host.client.subscribe_resource("copilot://jotter/notes://readme")  # denied
    assert caught.value.code == -32002


# -- exposure and list_changed ------------------------------------------------------------------------
async def test_routed_tools_join_tools_list_and_are_called_through_executes_checks(host: Host) -> None:
    assert "alpha__add" not in await host.tool_names()
    before = host.changes.seen.count("tools")
    routed = await host.client.call_tool("route", {"query": "add two integers", "server": "alpha"})
    best = routed.structured_content["tools"][0]
    assert (best["server"], best["tool"], best["direct_name"]) == ("alpha", "add", "alpha__add")
    assert "also callable directly as the tool alpha__add" in text_of(routed)
    await host.changes.wait_for("tools", before + 1)

    listed = {tool.name: tool for tool in await host.pages(host.client.list_tools, "tools")}
    assert {"route", "execute", "alpha__add"} <= set(listed)
    assert listed["alpha__add"].input_schema["required"] == ["a", "b"]

    result = await host.client.call_tool("alpha__add", {"a": 2, "b": 40})
    assert text_of(result) == "42" and not result.is_error
    wrong = await host.client.call_tool("alpha__add", {"x": 1})
    assert wrong.is_error and "a" in text_of(wrong) and "b" in text_of(wrong)

    # The call was logged like any execute.
    events = [e for path in sorted(host.logs.glob("*.jsonl")) for e in read_events(path)]
    adds = [e for e in events if e.event == "execute" and e.tool == "add" and e.params == {"a": 2, "b": 40}]
    assert adds and adds[-1].server == "alpha"


async def test_a_session_sees_only_the_tools_it_routed(host: Host, served: Served) -> None:
    if host.transport != "http" or host.era != "legacy":
        pytest.skip("per-session sets need two handshake sessions on one copilot (HTTP)")
    await host.client.call_tool("route", {"query": "echo text back", "server": "alpha"})
    assert "alpha__echo" in await host.tool_names()
    other = RunningClient(http_client_for(served.url, token=TOKEN, mode="legacy"))
    client = await other.start()
    try:
        names = [tool.name for tool in (await client.list_tools()).tools]
        assert "alpha__echo" not in names
        with pytest.raises(MCPError) as caught:
            await client.call_tool("alpha__echo", {"text": "hi"})
        assert caught.value.code == -32602
    finally:
        await other.stop()


async def test_a_child_changing_its_lists_reaches_the_host(host: Host) -> None:
    """The child announces new prompts and tools; the copilot re-lists, re-indexes, tells the host."""
    suffix = f"{host.transport}_{host.era.replace('-', '')}"
    await host.route_settled({"query": "echo text", "server": "jotter"})  # the session uses jotter's tools now
    prompts_before = host.changes.seen.count("prompts")
    tools_before = host.changes.seen.count("tools")

    added = await host.client.call_tool(
        "execute",
        {"server_name": "jotter", "tool_name": "add_prompt", "params": {"name": f"limerick_{suffix}", "text": "A limerick."}},
    )
    assert not added.is_error, text_of(added)
    await host.changes.wait_for("prompts", prompts_before + 1)
    names = [p.name for p in await host.pages(host.client.list_prompts, "prompts")]
    assert f"jotter__limerick_{suffix}" in names

    tool = f"comet_{suffix}"
    added = await host.client.call_tool(
        "execute",
        {"server_name": "jotter", "tool_name": "add_tool", "params": {"name": tool, "description": "Track comets."}},
    )
    assert not added.is_error, text_of(added)
    # Other tools/list_changed may arrive meanwhile (route's description follows the pool): the new
    # tool is routable after one of the notifications that follow the change.
    await host.changes.wait_for("tools", tools_before + 1)
    with anyio.fail_after(WAIT):
        while True:
            heard = host.changes.seen.count("tools")
            routed = await host.client.call_tool("route", {"query": "track comets", "server": "jotter"})
            if tool in [t["tool"] for t in routed.structured_content["tools"]]:
                break
            await host.changes.wait_for("tools", heard + 1)


async def test_route_finds_prompts_and_resources_when_asked(host: Host) -> None:
    prompts = await host.client.call_tool("route", {"query": "greet someone by name", "kind": "prompt"})
    hit = prompts.structured_content["tools"][0]
    assert (hit["kind"], hit["direct_name"]) == ("prompt", "jotter__greeting")
    resources = await host.client.call_tool("route", {"query": "one note item by id", "kind": "resource"})
    uris = [t["uri"] for t in resources.structured_content["tools"]]
    assert "copilot://jotter/notes://items/{item_id}" in uris
    assert "copilot://jotter/notes://readme" not in uris
    tools = await host.client.call_tool("route", {"query": "greet someone by name"})
    assert all(t["kind"] == "tool" for t in tools.structured_content["tools"])
    bad = await host.client.call_tool("route", {"query": "x", "kind": "widgets"})
    assert bad.is_error and "kind must be one of" in text_of(bad)


async def test_list_results_carry_ttls_for_session_less_clients(host: Host) -> None:
    if host.era != MODERN:
        pytest.skip("ttlMs is a 2026-07-28 field")
    tools = await host.client.session.list_tools()
    prompts = await host.client.session.list_prompts()
    assert tools.ttl_ms == 0  # routed mode: the list changes with every route
    assert prompts.ttl_ms and prompts.ttl_ms > 0



async def test_execute_on_a_prompt_or_resource_name_says_what_it_is(served: Served, tmp_path: Path) -> None:
    env = copilot_env(
        copy_home(served.home, tmp_path / "home"), **EXECUTE_ONLY, COPILOT_LOG_DIR=str(tmp_path / "logs"),
    )
    running = RunningClient(stdio_client_for(served.servers, env, tmp_path / "stderr.log", mode="legacy"))
    client = await running.start()
    try:  # jotter is not running: its indexed records answer
        prompt = await client.call_tool("execute", {"server_name": "jotter", "tool_name": "greeting"})
        resource = await client.call_tool("execute", {"server_name": "jotter", "tool_name": "readme"})
    finally:
        await running.stop()
    assert prompt.is_error and "'greeting' on server 'jotter' is a prompt, not a tool" in text_of(prompt)
    assert resource.is_error and "'readme' on server 'jotter' is a resource, not a tool" in text_of(resource)
    assert "Did you mean 'greeting'" not in text_of(prompt)


# -- allow/deny for prompts (a copilot of their own) ------------------------------------------------
@pytest.mark.parametrize(
    "rule", [{"COPILOT_DENY": "jotter/greet*"}, {"COPILOT_ALLOW": "alpha,jotter/review_*"}], ids=["deny", "allow"]
)
async def test_allow_and_deny_globs_hide_a_prompt_and_refuse_it(served: Served, tmp_path: Path, rule: dict[str, str]) -> None:
    env = copilot_env(
        copy_home(served.home, tmp_path / "home"),
        COPILOT_AUTO_INDEX="false",
        COPILOT_LOG_DIR=str(tmp_path / "logs"),
        **rule,
    )
    running = RunningClient(stdio_client_for(served.servers, env, tmp_path / "stderr.log", mode="legacy"))
    client = await running.start()
    try:
        listed = await client.list_prompts(cache_mode="bypass")
        names = [p.name for p in listed.prompts]
        with pytest.raises(MCPError) as caught:
            await client.get_prompt("jotter__greeting", {"name": "Ada"})
        # Words of both prompts, so both would be found whether the model is loaded yet or route is keyword-only.
        routed = await client.call_tool("route", {"query": "greet someone by name; review code", "kind": "prompt"})
    finally:
        await running.stop()
    assert "jotter__review_code" in names and "jotter__greeting" not in names
    assert listed.next_cursor is None  # one page: the prompt is not merely on another
    assert caught.value.code == -32602 and "jotter__greeting" in caught.value.message
    hits = [(t["server"], t["tool"]) for t in routed.structured_content["tools"]]
    assert ("jotter", "review_code") in hits and ("jotter", "greeting") not in hits
