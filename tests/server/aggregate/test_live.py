"""Children that change while the copilot runs: the index follows in the background
(``server.aggregate.live`` with the real pool, index and changing fixture server, in-process)."""

from __future__ import annotations

import json
import os
import threading
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import anyio
import mcp.types as types
import pytest

from index.catalog.servers import load_servers
from server.aggregate.service import Aggregation
from server.copilot import Copilot
from server.pool.sessions import RELIST_INTERVAL
from tests.support.processes import hostile_entry
from tests.server.support.copilot_harness import (
    built_index,  # noqa: F401 -- session fixture
    changing_entry,
    copilot_settings,
    copilot_with_aggregation,
    copy_home,
    schema_breaker_entry,
    write_servers,
)

pytestmark = pytest.mark.timeout(180)
WAIT = 120.0


@asynccontextmanager
async def running(
    home: Path, tmp_path: Path, entries: dict[str, Any], *, auto_approve: bool = True
) -> AsyncIterator[tuple[Copilot, Aggregation]]:
    """A copilot with the aggregation; ``auto_approve``: the trust guard accepts the changing
    server's new and changed tools at once (``COPILOT_TRUST_AUTO_APPROVE``), as these tests change
    them on purpose."""
    if auto_approve:
        os.environ["COPILOT_TRUST_AUTO_APPROVE"] = ",".join(entries)
    try:
        async with _running(home, tmp_path, entries) as running_copilot:
            yield running_copilot
    finally:
        os.environ.pop("COPILOT_TRUST_AUTO_APPROVE", None)


@asynccontextmanager
async def _running(home: Path, tmp_path: Path, entries: dict[str, Any]) -> AsyncIterator[tuple[Copilot, Aggregation]]:
    servers = load_servers(write_servers(tmp_path / "servers.json", entries))
    async with copilot_with_aggregation(copilot_settings(home, tmp_path, auto_index=False), servers) as running_copilot:
        yield running_copilot


async def _execute(copilot: Copilot, server: str, tool: str, params: dict[str, Any]) -> types.CallToolResult:
    result = await copilot.execute(server, tool, params, None, None, None)
    assert not result.is_error, result.content
    return result


async def _route_servers_tools(copilot: Copilot, query: str, kind: str = "tool") -> list[tuple[str, str]]:
    result = await copilot.route(query, 5, "jotter", None, kind=kind)
    assert not result.is_error, result.content
    return [(t["server"], t["tool"]) for t in result.structured_content["tools"]]


async def test_a_child_that_adds_a_tool_is_reindexed_and_routable(
    built_index: Path,  # noqa: F811 -- the imported session fixture
    tmp_path: Path,
) -> None:
    home = copy_home(built_index, tmp_path / "home")
    async with running(home, tmp_path, {"jotter": changing_entry("jotter")}) as (copilot, aggregation):
        assert copilot.index.get("jotter", "zorg_weather") is None
        await _execute(
            copilot, "jotter", "add_tool", {"name": "zorg_weather", "description": "Weather report of planet Zorg."}
        )
        with anyio.fail_after(WAIT):
            await aggregation.live.wait_for_updates(1)
        record = copilot.index.get("jotter", "zorg_weather")
        assert record is not None and record.description == "Weather report of planet Zorg."
        assert ("jotter", "zorg_weather") in await _route_servers_tools(copilot, "weather on planet Zorg")
        # The new tool is callable at once (its definition comes from the live listing).
        result = await _execute(copilot, "jotter", "zorg_weather", {"value": "stormy"})
        assert result.content[0].text == "zorg_weather: stormy"


async def test_new_prompts_and_resources_of_a_child_are_indexed(
    built_index: Path,  # noqa: F811
    tmp_path: Path,
) -> None:
    home = copy_home(built_index, tmp_path / "home")
    async with running(home, tmp_path, {"jotter": changing_entry("jotter")}) as (copilot, aggregation):
        await _execute(copilot, "jotter", "add_prompt", {"name": "haiku", "text": "Write a haiku about autumn leaves."})
        with anyio.fail_after(WAIT):
            await aggregation.live.wait_for_updates(1)
        await _execute(copilot, "jotter", "add_resource", {"name": "shopping", "text": "milk, eggs"})
        with anyio.fail_after(WAIT):
            await aggregation.live.wait_for_updates(2)
        assert ("jotter", "haiku") in await _route_servers_tools(copilot, "haiku about autumn", "prompt")
        resources = await _route_servers_tools(copilot, "shopping list note", "resource")
        assert ("jotter", "shopping") in resources
        # The tools were not touched by the prompt/resource updates.
        assert copilot.index.get("jotter", "echo") is not None


async def test_a_change_the_child_announced_is_known_before_its_answer_is(
    built_index: Path,  # noqa: F811
    tmp_path: Path,
) -> None:
    """The child sends list_changed, then answers the call: when the call returns, the pool has
    already heard the change (the answer, taken beside the session, must not overtake it)."""
    from server.pool.interfaces import PoolListener

    class Heard(PoolListener):
        def __init__(self) -> None:
            self.changes: list[tuple[str, str]] = []

        def list_changed(self, server: str, kind: str) -> None:  # type: ignore[override]
            self.changes.append((server, kind))

    home = copy_home(built_index, tmp_path / "home")
    async with running(home, tmp_path, {"jotter": changing_entry("jotter")}) as (copilot, _aggregation):
        heard = Heard()
        copilot.pool.subscribe(heard)
        for number in range(5):
            await _execute(copilot, "jotter", "add_prompt", {"name": f"p{number}", "text": "Say hello."})
            assert heard.changes == [("jotter", "prompts")] * (number + 1)
        await _execute(copilot, "jotter", "add_resource", {"name": "notes", "text": "milk"})
        assert heard.changes[-1] == ("jotter", "resources")


async def test_a_restart_that_lists_different_tools_is_reindexed(
    built_index: Path,  # noqa: F811
    tmp_path: Path,
) -> None:
    home = copy_home(built_index, tmp_path / "home")
    tools_file = tmp_path / "tools.json"
    tools_file.write_text(json.dumps({"moon_phase": "Phase of the moon tonight."}), encoding="utf-8")
    entry = changing_entry("jotter", tools_file=tools_file)
    async with running(home, tmp_path, {"jotter": entry}) as (copilot, aggregation):
        await copilot.pool.list_tools("jotter")  # the first listing: it has a tool the index lacks
        with anyio.fail_after(WAIT):
            await aggregation.live.wait_for_updates(1)
        assert copilot.index.get("jotter", "moon_phase") is not None

        tools_file.write_text(json.dumps({"tide_table": "High and low tides of a harbour."}), encoding="utf-8")
        connection = copilot.pool.connection("jotter")
        assert connection is not None
        connection.kill()
        with anyio.fail_after(WAIT):
            while copilot.pool.is_running("jotter"):
                await anyio.sleep(0.05)
        await _execute(copilot, "jotter", "echo", {"text": "restart"})  # starts a new process
        with anyio.fail_after(WAIT):
            await aggregation.live.wait_for_updates(2)
        assert copilot.index.get("jotter", "tide_table") is not None
        assert copilot.index.get("jotter", "moon_phase") is None


async def test_definitions_the_trust_guard_holds_back_never_reach_the_index(
    built_index: Path,  # noqa: F811
    tmp_path: Path,
) -> None:
    """Without auto-approval, a changed definition (a rug pull) and a new tool wait for a person:
    the index keeps the approved definition and does not learn the new tool."""
    home = copy_home(built_index, tmp_path / "home")
    async with running(home, tmp_path, {"jotter": changing_entry("jotter")}, auto_approve=False) as (
        copilot,
        aggregation,
    ):
        await copilot.pool.list_tools("jotter")  # first use: the definitions are pinned
        before = copilot.index.get("jotter", "echo")
        await _execute(copilot, "jotter", "change_tool", {"name": "echo", "description": "Echo the text back in capitals."})
        await _execute(copilot, "jotter", "add_tool", {"name": "archive", "description": "Archive old notes."})
        # The child announced both changes before answering; this listing sees them.
        await copilot.pool.list_tools("jotter")
        assert copilot.guard.blocked("jotter", "echo") is not None
        assert copilot.guard.blocked("jotter", "archive") is not None
        with anyio.fail_after(WAIT):
            await aggregation.live.settled()
        assert aggregation.live.updates == 0
        assert copilot.index.get("jotter", "echo") == before
        assert copilot.index.get("jotter", "archive") is None
        refused = await copilot.execute("jotter", "echo", {"text": "x"}, None, None, None)
        assert refused.is_error and "changed since it was approved" in refused.content[0].text


async def test_route_answers_while_a_sync_holds_the_index(
    built_index: Path,  # noqa: F811
    tmp_path: Path,
) -> None:
    """A sync (re-indexing a changed server) holds the index lock while it embeds; searches
    keep answering from the snapshot they have instead of waiting for it."""
    home = copy_home(built_index, tmp_path / "home")
    async with running(home, tmp_path, {"jotter": changing_entry("jotter")}) as (copilot, _):
        assert await _route_servers_tools(copilot, "echo text")  # the snapshot is loaded
        index: Any = copilot.index
        held, release = threading.Event(), threading.Event()

        def hold() -> None:
            with index._lock:
                held.set()
                release.wait(60)

        thread = threading.Thread(target=hold)
        thread.start()
        try:
            assert held.wait(30)
            index._checked_at = 0.0  # the periodic freshness check is due, and the lock is taken
            with anyio.fail_after(30):
                assert ("jotter", "echo") in await _route_servers_tools(copilot, "echo text back")
        finally:
            release.set()
            thread.join(30)


async def test_a_flood_of_list_changed_costs_a_few_listings(
    built_index: Path,  # noqa: F811
    tmp_path: Path,
) -> None:
    """500 notifications cost at most one background re-list per RELIST_INTERVAL (plus the first)."""
    home = copy_home(built_index, tmp_path / "home")
    async with running(home, tmp_path, {"jotter": changing_entry("jotter")}) as (copilot, aggregation):

        async def listings() -> int:  # asked through the pool directly: execute itself would list
            return int((await copilot.pool.call_tool("jotter", "list_count", {})).content[0].text)

        await copilot.pool.list_tools("jotter")
        listed = await listings()
        started = time.monotonic()
        await copilot.pool.call_tool("jotter", "flood_list_changed", {"count": 500})
        with anyio.fail_after(WAIT):
            while await listings() == listed:
                await anyio.sleep(0.05)
        relists = await listings() - listed
        assert 1 <= relists <= (time.monotonic() - started) / RELIST_INTERVAL + 2
        assert aggregation.live.updates == 0  # the tools did not change: nothing was re-indexed


@pytest.mark.parametrize("kind", ["prompts", "resources"])
async def test_a_flood_of_prompts_or_resources_list_changed_costs_a_few_listings(
    built_index: Path,  # noqa: F811
    tmp_path: Path,
    kind: str,
) -> None:
    """Three seconds of notifications from the hostile child (which goes on answering meanwhile)
    cost at most one listing of its prompts and resources per RELIST_INTERVAL (before: listings
    back to back while they came)."""
    home = copy_home(built_index, tmp_path / "home")
    async with running(home, tmp_path, {"evil": hostile_entry()}) as (copilot, aggregation):

        async def listings() -> int:  # (prompts/list is sent with every listing of prompts and resources)
            counts = json.loads((await copilot.pool.call_tool("evil", "requests", {})).content[0].text)
            return int(counts.get("prompts/list", 0))

        started = time.monotonic()
        await copilot.pool.call_tool("evil", "storm", {"kind": kind, "count": 5, "seconds": 3})
        with anyio.fail_after(WAIT):
            await aggregation.live.settled()
        assert 1 <= await listings() <= (time.monotonic() - started) / RELIST_INTERVAL + 2


async def _restart(copilot: Copilot, server: str) -> None:
    """Kill ``server``'s child and start a new process with a call (a crash, as the pool sees it)."""
    connection = copilot.pool.connection(server)
    assert connection is not None
    connection.kill()
    with anyio.fail_after(WAIT):
        await connection.closed.wait()
    await _execute(copilot, server, "echo", {"text": "a new process"})


async def test_a_restarted_child_has_its_prompts_and_resources_listed_again(
    built_index: Path,  # noqa: F811
    tmp_path: Path,
) -> None:
    """Prompts and resources a child added at runtime are gone from its next process: after the
    restart the copilot lists them again, re-indexes, and tells hosts; a restart that changes
    nothing is quiet."""
    home = copy_home(built_index, tmp_path / "home")
    async with running(home, tmp_path, {"jotter": changing_entry("jotter")}) as (copilot, aggregation):
        heard: list[str] = []
        aggregation.bus.subscribe(lambda event: heard.append(type(event).__name__))

        def indexed(kind: str) -> set[str]:
            return {r.name for r in copilot.index.records_of({kind}, server="jotter")}

        await _execute(copilot, "jotter", "add_prompt", {"name": "haiku", "text": "Write a haiku."})
        await _execute(copilot, "jotter", "add_resource", {"name": "shopping", "text": "milk, eggs"})
        with anyio.fail_after(WAIT):
            await aggregation.live.settled()
        assert "haiku" in indexed("prompt") and "shopping" in indexed("resource")
        assert {"PromptsListChanged", "ResourcesListChanged"} <= set(heard)

        heard.clear()
        await _restart(copilot, "jotter")  # the new process has only the prompts/resources it starts with
        with anyio.fail_after(WAIT):
            await aggregation.live.settled()
        assert "haiku" not in indexed("prompt") and "greeting" in indexed("prompt")
        assert "shopping" not in indexed("resource") and "readme" in indexed("resource")
        assert sorted(set(heard)) == ["PromptsListChanged", "ResourcesListChanged"]
        prompts = await aggregation.catalog.records({"prompt"})
        assert "haiku" not in {r.name for r in prompts}

        heard.clear()
        updates = aggregation.live.updates
        await _restart(copilot, "jotter")  # the same prompts and resources again: nothing to tell
        with anyio.fail_after(WAIT):
            await aggregation.live.settled()
        assert aggregation.live.updates == updates and heard == []


async def test_the_tools_a_listing_skips_for_broken_definitions_reach_the_index(
    built_index: Path,  # noqa: F811
    tmp_path: Path,
) -> None:
    """A server the index lacks, listed by the pool: its good tools are indexed and its skipped ones
    kept with why, so the next copilot refuses one saying why before it ever lists the server."""
    home = copy_home(built_index, tmp_path / "home")
    breaker = schema_breaker_entry()
    async with running(home, tmp_path, {"breaker": breaker}) as (copilot, aggregation):
        await _execute(copilot, "breaker", "echo", {"text": "hi"})  # unknown to the index: the pool lists it
        with anyio.fail_after(WAIT):
            await aggregation.live.wait_for_updates(1)
        assert copilot.index.get("breaker", "echo") is not None
        skipped = copilot.index.skipped_tools("breaker")
    assert sorted(skipped) == ["", "bad_json_schema", "no_schema_1", "no_schema_2", "no_schema_3", "not_an_object", "nul\x00name", "wrong_type"]
    assert skipped["no_schema_1"] == "inputSchema: Field required"

    servers = load_servers(tmp_path / "servers.json")
    async with Copilot.running(copilot_settings(home, tmp_path, auto_index=False), servers, start_now=True) as later:
        refused = await later.execute("breaker", "no_schema_1", {}, None, None, None)
        assert not later.pool.is_running("breaker")
    assert refused.is_error and "tool 'no_schema_1' of server 'breaker' cannot be used: its definition is broken " in (
        refused.content[0].text
    )


async def test_a_broken_prompt_or_resource_of_a_child_costs_only_itself(
    built_index: Path,  # noqa: F811
    tmp_path: Path,
) -> None:
    """A child the index never had (added since the build), listing prompts, resources and
    templates the MCP schema does not allow among good ones: its prompts and resources are listed
    with its tools (before: only its tools, until it restarted or announced a change), and the
    good ones are indexed (before: each list failed as a whole)."""
    home = copy_home(built_index, tmp_path / "home")
    entry = hostile_entry("--broken-items", "second", "--many-prompts", "2", "--many-resources", "2", "--many-templates", "1")
    async with running(home, tmp_path, {"mixed": entry}) as (copilot, aggregation):
        await _execute(copilot, "mixed", "echo", {"text": "hi"})  # unknown to the index: the pool lists it
        with anyio.fail_after(WAIT):
            await aggregation.live.settled()
        indexed = {(r.kind, r.name) for r in copilot.index.records_of({"prompt", "resource", "resource_template"}, server="mixed")}
        assert indexed == {
            ("prompt", "prompt_0"), ("prompt", "prompt_1"),
            ("resource", "resource_0"), ("resource", "resource_1"), ("resource_template", "template_0"),
        }
