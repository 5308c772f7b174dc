"""The pool against a child that floods it on purpose (the hostile fixture, a real process).

What a child sends is bounded before it costs the copilot memory, time or log lines: its tool
listing (pages, tools, definition size and depth) and its prompts and resources listings (pages,
items), its change notifications (logged once a second; re-listing is bounded in ``test_live.py``,
resource updates in ``test_subscriptions.py``), its own requests (the copilot stops reading a child
that does not read their answers) and its unreadable replies (logged a few times, then counted).
"""

from __future__ import annotations

import json
import logging
import time
from typing import Any

import anyio
import pytest

from index.catalog.kinds import list_other_kinds
from index.catalog.servers import ServerConfig
from index.children.tool_listing import MAX_DEFINITION_CHARS, MAX_PAGES, MAX_SCHEMA_DEPTH, MAX_TOOLS
from index.children.wire import JUNK_LINES_LOGGED, MAX_CHILD_REQUESTS
from server.errors import ChildTimeoutError, ServerUnavailableError
from server.pool.sessions import RELIST_INTERVAL, PoolSettings
from tests.fixtures.hostile_server import TOOLS
from tests.server.pool.pool_support import running_pool, settings  # noqa: F401 -- settings is a fixture
from tests.support.processes import hostile_entry

pytestmark = pytest.mark.timeout(120)

#: The base tools of the hostile fixture (``tools/list`` without extra flags).
BASE_TOOLS = len(TOOLS)


def hostile(name: str, *flags: str) -> ServerConfig:
    return ServerConfig(name=name, **hostile_entry(*flags))


# -- tool listings ------------------------------------------------------------------------------
async def test_a_listing_that_never_ends_stops_at_the_page_limit(settings: PoolSettings) -> None:
    # Before: the pool followed cursors until the call timed out, holding every page's tools.
    settings.call_timeout = 30.0
    async with running_pool({"endless": hostile("endless", "--endless-pages")}, settings) as pool:
        with anyio.fail_after(25):
            tools = await pool.list_tools("endless")
        assert len(tools) == BASE_TOOLS  # the same tools on every page: kept once
        log = settings.server_log("endless").read_text(encoding="utf-8")
        assert f"tools/list still had more pages after {MAX_PAGES}; kept the first {MAX_PAGES}" in log
        assert "listed more than once; kept the first of each" in log
        assert (await pool.call_tool("endless", "echo", {"text": "still served"})).content[0].text == "still served"


async def test_a_listing_of_too_many_tools_keeps_the_first_ones(settings: PoolSettings) -> None:
    async with running_pool({"many": hostile("many", "--many-tools", str(MAX_TOOLS + 500))}, settings) as pool:
        tools = await pool.list_tools("many")
        assert len(tools) == MAX_TOOLS and tools[0].name == "echo"
        log = settings.server_log("many").read_text(encoding="utf-8")
        assert f"tools/list offered more than {MAX_TOOLS:,} tools; kept the first {MAX_TOOLS:,} ({BASE_TOOLS + 500} more left out)" in log


@pytest.mark.parametrize(
    ("flags", "tool", "problem"),
    [
        (
            ["--long-description", str(MAX_DEFINITION_CHARS + 10)],
            "verbose",
            f"over the copilot's limit of {MAX_DEFINITION_CHARS:,} characters",
        ),
        # Before: a RecursionError from the schema check made every call of the server an internal error.
        (["--deep-schema", "97"], "nested", f"inputSchema is nested 195 levels deep, over the copilot's limit of {MAX_SCHEMA_DEPTH}"),
    ],
    ids=["huge-definition", "deep-schema"],
)
async def test_a_definition_too_big_or_too_deep_is_left_out_and_its_calls_refused(
    settings: PoolSettings, flags: list[str], tool: str, problem: str
) -> None:
    async with running_pool({"odd": hostile("odd", *flags)}, settings) as pool:
        names = [listed.name for listed in await pool.list_tools("odd")]
        assert tool not in names and len(names) == BASE_TOOLS
        with pytest.raises(ServerUnavailableError) as caught:
            await pool.call_tool("odd", tool, {})
        assert problem in str(caught.value)
        assert (await pool.call_tool("odd", "echo", {"text": "others work"})).content[0].text == "others work"


async def test_prompts_and_resources_listed_live_are_bounded_and_paging_stops_at_the_cap(settings: PoolSettings) -> None:
    # The live index re-lists a changed child's prompts and resources this way (server.aggregate.live):
    # before, it followed every page and kept every item.
    config = hostile("many", "--many-prompts", str(MAX_TOOLS + 500), "--many-templates", "3", "--list-page-size", "300")
    async with running_pool({"many": config}, settings) as pool:
        await pool.list_tools("many")
        warnings: list[str] = []
        capabilities = pool.capabilities("many")
        records = await pool.request(
            "many", "listing", lambda session: list_other_kinds(session, capabilities, config, "", warnings)
        )
        assert [r.name for r in records if r.kind == "prompt"] == [f"prompt_{n}" for n in range(MAX_TOOLS)]
        assert [r.name for r in records if r.kind == "resource_template"] == ["template_0", "template_1", "template_2"]
        assert warnings == [
            f"prompts/list offered more than {MAX_TOOLS:,} prompts; kept the first {MAX_TOOLS:,} (200 more and "
            "further pages left out)"
        ]
        counts = json.loads((await pool.call_tool("many", "requests", {})).content[0].text)
        assert counts["prompts/list"] == 4  # 1,200 prompts in 4 pages reached the cap: no 5th page was asked for


# -- change notifications -----------------------------------------------------------------------
@pytest.mark.parametrize("kind", ["tools", "prompts", "resources"])
async def test_a_storm_of_list_changed_is_logged_once_a_second_not_per_notification(
    settings: PoolSettings, caplog: pytest.LogCaptureFixture, kind: str
) -> None:
    # Before: one INFO line per notification, on the copilot's stderr (the host's log file).
    caplog.set_level(logging.INFO, logger="server.pool.sessions")
    async with running_pool({"evil": hostile("evil")}, settings) as pool:
        await pool.list_tools("evil")
        started = time.monotonic()
        await pool.call_tool("evil", "storm", {"kind": kind, "count": 3000})
        said = [r for r in caplog.records if f"says its {kind} changed" in r.getMessage()]
        assert 1 <= len(said) <= (time.monotonic() - started) / RELIST_INTERVAL + 2


async def test_a_child_announcing_tool_changes_nonstop_still_goes_idle(settings: PoolSettings) -> None:
    # Before: each re-listing its announcements asked for (one a second) counted as a use, so a
    # child storming tools/list_changed after its last call was never stopped for idleness.
    settings.idle_timeout = 3 * RELIST_INTERVAL
    async with running_pool({"evil": hostile("evil")}, settings) as pool:
        answer = await pool.call_tool("evil", "storm", {"kind": "tools", "count": 1, "seconds": 120, "answer_first": True})
        assert answer.content[0].text == "storming"  # type: ignore[union-attr]
        # The storm goes on for two minutes; idle, the child is stopped after 3 s.
        with anyio.fail_after(40):
            while pool.is_running("evil"):
                await anyio.sleep(0.05)
        assert pool.status()["evil"]["idle_stops"] == 1


# -- the child's own requests and broken replies ------------------------------------------------
async def test_a_child_that_sends_requests_without_reading_their_answers_is_not_read_further(
    settings: PoolSettings,
) -> None:
    # 3,000 requests of 1 KB, sent before reading any answer: far more than the pipes hold. Before,
    # the copilot read them all and kept a task (and its answer) for each until the child read.
    async with running_pool({"evil": hostile("evil")}, settings) as pool:
        with anyio.fail_after(30), pytest.raises(ChildTimeoutError) as caught:
            await pool.call_tool("evil", "ask", {"method": "x/unknown", "count": 3000, "size": 1000}, timeout=3.0)
        message = str(caught.value)
        assert f"It had sent {MAX_CHILD_REQUESTS} requests of its own whose answers it did not read" in message
        assert "stopped reading its output" in message and "without ending the line" not in message
        # A burst the child does read the answers of is answered in full.
        result = await pool.call_tool("evil", "ask", {"method": "x/unknown", "count": 200})
        report: dict[str, Any] = json.loads(result.content[-1].text)
        assert report["answered"] == 200 and report["errors"] == {"Method not found": 200}


async def test_a_flood_of_unreadable_replies_is_logged_a_few_times_then_counted(
    settings: PoolSettings, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.WARNING, logger="index.children.wire")
    async with running_pool({"evil": hostile("evil")}, settings) as pool:
        flooded = await pool.call_tool("evil", "storm", {"kind": "unreadable", "count": 2000})
        assert flooded.is_error and "lone UTF-16 surrogate" in flooded.content[0].text  # the first one failed the call
        with anyio.fail_after(30):  # the replies still in the pipe fail the calls sent meanwhile
            while (after := await pool.call_tool("evil", "echo", {"text": "after"})).is_error:
                pass
        assert after.content[0].text == "after"
    warned = [r for r in caplog.records if "unreadable reply" in r.getMessage()]
    assert len(warned) == JUNK_LINES_LOGGED
    log = settings.server_log("evil").read_text(encoding="utf-8")
    assert "2000 unreadable replies were dropped in this session" in log
