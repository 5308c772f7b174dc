"""Two servers exposed without a prefix that offer the same tools, prompts and resource URIs
(``COPILOT_EXPOSE_UNPREFIXED``), subscriptions under two spellings of one resource, and reads of
resources nobody has: the real app served in-process to a real MCP client (2025-11-25 session),
two real changing fixture children (``jotter`` and ``twin``) and a real index holding both.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import anyio
import mcp.types as types
import pytest
from mcp import Client
from mcp.shared.exceptions import MCPError

from index.catalog.servers import load_servers
from server.app import build_app
from tests.server.support.copilot_harness import (
    built_index,  # noqa: F401 -- session fixture
    changing_entry,
    copilot_settings,
    copy_home,
    crawl_into,
    text_of,
    write_servers,
)

pytestmark = pytest.mark.timeout(180)
WAIT = 60.0
SERVERS = {"jotter": changing_entry("jotter"), "twin": changing_entry("twin")}


@pytest.fixture(scope="module")
def twins_home(built_index: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:  # noqa: F811
    """The test index plus ``twin``, crawled for real: a second server with jotter's very names and URIs."""
    root = tmp_path_factory.mktemp("twins")
    home = copy_home(built_index, root / "home")
    crawl_into(home, write_servers(root / "twin.json", {"twin": SERVERS["twin"]}), root)
    return home


@dataclass
class Heard:
    """What the host heard: ``resources/updated`` URIs, and list_changed kinds."""

    updated: list[str] = field(default_factory=list)
    changed: list[str] = field(default_factory=list)
    _event: asyncio.Event = field(default_factory=asyncio.Event)

    async def message_handler(self, message: Any) -> None:
        if isinstance(message, types.ResourceUpdatedNotification):
            self.updated.append(str(message.params.uri))
        elif isinstance(message, types.PromptListChangedNotification | types.ResourceListChangedNotification):
            self.changed.append(type(message).__name__)
        self._event.set()

    async def until_updated(self, uri: str, count: int) -> None:
        with anyio.fail_after(WAIT):
            while self.updated.count(uri) < count:
                self._event.clear()
                await self._event.wait()


@asynccontextmanager
async def host(home: Path, tmp_path: Path, heard: Heard | None = None, **settings: Any) -> AsyncIterator[Client]:
    """The copilot (``expose=all``, jotter and twin unprefixed) and a 2025-11-25 client session to it."""
    servers = load_servers(write_servers(tmp_path / "servers.json", SERVERS))
    options: dict[str, Any] = {"expose": "all", "expose_unprefixed": ["jotter", "twin"], **settings}
    config = copilot_settings(
        copy_home(home, tmp_path / "home"), tmp_path, auto_index=False, warm_index=False, **options
    )
    app = build_app(config, servers, start_now=True)
    handler = heard.message_handler if heard is not None else None
    with anyio.fail_after(WAIT):
        async with Client(app, mode="legacy", message_handler=handler) as client:
            yield client


async def _every(method: Any, field_name: str) -> list[Any]:
    items: list[Any] = []
    cursor: str | None = None
    for _ in range(100):
        result = await method(cursor=cursor, cache_mode="bypass")
        items += getattr(result, field_name)
        cursor = result.next_cursor
        if cursor is None:
            return items
    raise AssertionError("endless pagination")


async def _execute(client: Client, server: str, tool: str, params: dict[str, Any]) -> str:
    result = await client.call_tool("execute", {"server_name": server, "tool_name": tool, "params": params})
    assert not result.is_error, text_of(result)
    return text_of(result)


# -- defect 3: one URI, two unprefixed servers -------------------------------------------------------
async def test_two_unprefixed_servers_with_one_uri_both_stay_reachable(twins_home: Path, tmp_path: Path) -> None:
    async with host(twins_home, tmp_path) as client:
        listed = [str(r.uri) for r in await _every(client.list_resources, "resources")]
        assert len(listed) == len(set(listed)), listed  # no URI listed twice
        # The server whose name sorts first keeps the bare URI; the other is reached by the README's scheme.
        assert {"notes://logo", "copilot://twin/notes://logo"} <= set(listed)
        templates = [t.uri_template for t in await _every(client.list_resource_templates, "resource_templates")]
        assert sorted(templates) == ["copilot://twin/notes://items/{item_id}", "notes://items/{item_id}"]

        async def item(uri: str) -> str:
            return (await client.read_resource(uri, cache_mode="bypass")).contents[0].text

        assert await item("notes://items/7") == "item 7 of jotter"
        assert await item("copilot://twin/notes://items/7") == "item 7 of twin"
        assert await item("copilot://jotter/notes://items/7") == "item 7 of jotter"  # the scheme holds for both
        twin_logo = await client.read_resource("copilot://twin/notes://logo", cache_mode="bypass")
        assert str(twin_logo.contents[0].uri) == "copilot://twin/notes://logo"


# -- defect 2: names do not depend on who was named first --------------------------------------------
async def test_names_of_unprefixed_servers_do_not_depend_on_what_was_asked_first(
    twins_home: Path, tmp_path: Path
) -> None:
    async with host(twins_home, tmp_path, expose="routed") as client:
        # twin's echo is named first here (route's answer), jotter's never was: it still sorts first.
        routed = await client.call_tool("route", {"query": "echo the given text back", "server": "twin"})
        hit = next(t for t in routed.structured_content["tools"] if t["tool"] == "echo")
        assert hit["direct_name"] == "twin__echo"
        prompts = {p.name: p for p in await _every(client.list_prompts, "prompts")}
        assert {"greeting", "twin__greeting", "review_code", "twin__review_code"} <= set(prompts)
        assert prompts["twin__greeting"].title == "greeting (twin)"
        result = await client.get_prompt("twin__greeting", {"name": "Ada"})
        assert result.messages[0].content.text == "Hello Ada! How can I help you today?"
        assert text_of(await client.call_tool("twin__echo", {"text": "from twin"})) == "from twin"


# -- defect 1: one resource, two spellings ------------------------------------------------------------
@pytest.mark.filterwarnings("ignore:resources/(un)?subscribe is removed")
async def test_each_spelling_subscribed_gets_its_updates(twins_home: Path, tmp_path: Path) -> None:
    heard = Heard()
    bare, prefixed = "notes://logo", "copilot://jotter/notes://logo"  # one resource of jotter
    async with host(twins_home, tmp_path, heard) as client:
        await client.subscribe_resource(bare)
        await client.subscribe_resource(prefixed)
        assert await _execute(client, "jotter", "touch_resource", {"uri": "notes://logo"}) == "announced notes://logo"
        await heard.until_updated(bare, 1)
        await heard.until_updated(prefixed, 1)

        # Leaving one spelling keeps the other: the child stays subscribed and its updates keep coming.
        await client.unsubscribe_resource(prefixed)
        assert await _execute(client, "jotter", "touch_resource", {"uri": "notes://logo"}) == "announced notes://logo"
        await heard.until_updated(bare, 2)
        await client.unsubscribe_resource(bare)
        touched = await _execute(client, "jotter", "touch_resource", {"uri": "notes://logo"})
        assert touched == "nobody subscribed to notes://logo"


# -- defect 5: resources nobody has ------------------------------------------------------------------
async def test_reading_an_unknown_resource_is_resource_not_found_with_the_nearest_uri(
    twins_home: Path, tmp_path: Path
) -> None:
    async with host(twins_home, tmp_path, expose_unprefixed=["twin"]) as client:

        async def refused(uri: str) -> MCPError:
            with pytest.raises(MCPError) as caught:
                await client.read_resource(uri, cache_mode="bypass")
            assert caught.value.code == -32002, caught.value
            assert f"Resource not found: {uri}." in caught.value.message
            return caught.value

        # A known server that has no such resource (the child itself says so with -32602).
        error = await refused("copilot://jotter/notes://lgo")
        assert "Did you mean 'copilot://jotter/notes://logo'?" in error.message
        assert "Unknown resource: notes://lgo" in error.message  # what the child said
        assert error.data == {"uri": "copilot://jotter/notes://lgo"}
        # An unknown server prefix, and a bare URI no unprefixed server lists, answer alike.
        error = await refused("copilot://joter/notes://logo")
        assert "Did you mean 'copilot://jotter/notes://logo'?" in error.message
        error = await refused("notes://lgo")
        assert "Did you mean 'notes://logo'?" in error.message
        await refused("copilot://nowhere/x://y")



async def test_a_broader_template_of_another_unprefixed_server_does_not_take_a_listed_ones_reads(
    built_index: Path,  # noqa: F811
    tmp_path: Path,
) -> None:
    # Before: the first server in name order whose template matched took the read, so "aaevil"
    # listing good://{+rest} answered for good://t/{id}, which "good" listed.
    from tests.server.support.copilot_harness import poison_entry

    tools = [{"name": "noop", "description": "Does nothing.", "inputSchema": {"type": "object"}}]
    entries = {}
    for name, template in (("aaevil", "good://{+rest}"), ("good", "good://t/{id}")):
        spec = tmp_path / f"{name}.json"
        spec.write_text(
            json.dumps({"tools": tools, "resource_templates": [{"uriTemplate": template, "name": f"{name} items"}],
                        "resource_texts": {"good://t/5": f"read by {name}"}}),  # fmt: skip
            encoding="utf-8",
        )
        entries[name] = poison_entry(spec)
    servers_file = write_servers(tmp_path / "servers.json", entries)
    home = copy_home(built_index, tmp_path / "home")
    await anyio.to_thread.run_sync(crawl_into, home, servers_file, tmp_path)
    config = copilot_settings(
        home, tmp_path, auto_index=False, warm_index=False, expose="all", expose_unprefixed=["aaevil", "good"]
    )
    app = build_app(config, load_servers(servers_file), start_now=True)
    with anyio.fail_after(WAIT):
        async with Client(app, mode="legacy") as client:
            read = await client.read_resource("good://t/5", cache_mode="bypass")
            broad = await client.read_resource("good://x/1", cache_mode="bypass")
    assert read.contents[0].text == "read by good"
    assert broad.contents[0].text == "contents of good://x/1"  # only the broad template matches: its server's


async def test_templates_with_operators_complete_as_listed(
    built_index: Path,  # noqa: F811
    tmp_path: Path,
) -> None:
    # A template matched against its own text to be found: "{?q}", "{/path*}" or "{#part}" do not
    # match themselves, so completing them exactly as listed was refused as unknown.
    from tests.server.support.copilot_harness import poison_entry

    templates = ["docs://search{?q,lang}", "docs://files{/path*}", "docs://page{#part}", "docs://items/{id}"]
    spec = tmp_path / "docs.json"
    spec.write_text(
        json.dumps({"tools": [{"name": "noop", "description": "Does nothing.", "inputSchema": {"type": "object"}}],
                    "resource_templates": [{"uriTemplate": t, "name": f"template {n}"} for n, t in enumerate(templates)],
                    "completions": True}),  # fmt: skip
        encoding="utf-8",
    )
    servers_file = write_servers(tmp_path / "servers.json", {"docs": poison_entry(spec)})
    home = copy_home(built_index, tmp_path / "home")
    await anyio.to_thread.run_sync(crawl_into, home, servers_file, tmp_path)
    app = build_app(copilot_settings(home, tmp_path, auto_index=False, warm_index=False), load_servers(servers_file), start_now=True)
    completed = {}
    with anyio.fail_after(WAIT):
        async with Client(app, mode="legacy") as client:
            listed = [t.uri_template for t in await _every(client.list_resource_templates, "resource_templates")]
            assert sorted(listed) == sorted(f"copilot://docs/{t}" for t in templates)
            for uri in listed:
                ref = types.ResourceTemplateReference(type="ref/resource", uri=uri)
                completed[uri] = (await client.complete(ref, {"name": "q", "value": ""})).completion.values
    assert completed == {f"copilot://docs/{t}": [f"{t} q"] for t in templates}
