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
from index.children.listing_limits import LISTING_CUT, MAX_DEFINITION_CHARS, MAX_PAGES, MAX_TOOLS
from index.children.tool_listing import MAX_SCHEMA_DEPTH
from index.children.wire import JUNK_LINES_LOGGED, MAX_CHILD_REQUESTS
from server.errors import ChildTimeoutError, ServerUnavailableError, ToolPastCapError
from server.pool.sessions import RELIST_INTERVAL, PoolSettings
from tests.fixtures.hostile.hostile_server import TOOLS
from tests.server.pool.pool_support import running_pool, settings, wait_until  # noqa: F401 -- settings is a fixture
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


def cut_at_the_cap(more: str) -> str:
    """The entry of a server's skipped tools that says its listing was cut at the cap."""
    return (
        f"the server listed more than {MAX_TOOLS:,} tools and the copilot reads only the first {MAX_TOOLS:,} "
        f"({more} left out)"
    )


async def test_a_listing_of_too_many_tools_keeps_the_first_ones_and_refuses_those_past_them(
    settings: PoolSettings,
) -> None:
    # Before: the cut was only a warning; a call to a tool past it went to the child as if the
    # copilot knew it, and execute answered it as an unknown tool.
    async with running_pool({"many": hostile("many", "--many-tools", str(MAX_TOOLS + 500))}, settings) as pool:
        tools = await pool.list_tools("many")
        last_kept = f"filler_{MAX_TOOLS - BASE_TOOLS - 1}"  # the fillers follow the base tools
        assert len(tools) == MAX_TOOLS and tools[0].name == "echo" and tools[-1].name == last_kept
        cut = cut_at_the_cap(f"{BASE_TOOLS + 500} more")
        assert pool.skipped_tools("many") == {LISTING_CUT: cut}
        assert settings.server_log("many").read_text(encoding="utf-8").count(cut) == 1
        with pytest.raises(ToolPastCapError) as refused:
            await pool.call_tool("many", "filler_1200", {})
        assert str(refused.value) == (
            f"tool 'filler_1200' of server 'many' cannot be used: {cut}, and 'filler_1200' is not among them, so if "
            "the server has it, it is past that cut. Did you mean 'filler_100' or 'filler_120' or 'filler_200'? Use one "
            "of the server's first 1,000 tools or another server's (route finds alternatives); to reach this one, the "
            "server has to list fewer tools (its author or its configuration)."
        )
        assert refused.value.kind == "unknown_tool"
        assert pool.unusable_tool("many", last_kept) is None and pool.unusable_tool("many", LISTING_CUT) is not None
        assert (await pool.call_tool("many", "echo", {"text": "kept"})).content[0].text == "kept"


async def test_tool_pages_stop_once_the_cap_is_reached(settings: PoolSettings) -> None:
    # Before: with exactly 1,000 tools read and a next cursor left, an 11th page was asked for (and thrown away).
    config = hostile("many", "--many-tools", str(MAX_TOOLS + 500), "--tools-page-size", "100")
    async with running_pool({"many": config}, settings) as pool:
        assert len(await pool.list_tools("many")) == MAX_TOOLS
        counts = json.loads((await pool.call_tool("many", "requests", {})).content[0].text)
        assert counts["tools/list"] == 10
        assert pool.skipped_tools("many") == {LISTING_CUT: cut_at_the_cap("further pages")}


async def test_tools_past_the_cap_are_counted_not_checked(settings: PoolSettings) -> None:
    # Before: a page was validated whole, and each of its tools checked, before the cap cut it: a
    # page of a million tiny tools built a million models, and a broken tool past the cap was
    # reported as skipped for its definition. Now the tools past the cap are only counted.
    config = hostile("many", "--many-tools", str(MAX_TOOLS + 500), "--broken-tool", "--deep-schema", "97")
    async with running_pool({"many": config}, settings) as pool:
        assert len(await pool.list_tools("many")) == MAX_TOOLS
        skipped = pool.skipped_tools("many")
        assert skipped is not None and not {"broken", "nested"} & set(skipped)  # never checked
        assert skipped == {LISTING_CUT: cut_at_the_cap(f"{BASE_TOOLS + 500 + 2} more")}
        with pytest.raises(ToolPastCapError):
            await pool.call_tool("many", "broken", {})


async def test_what_a_listing_left_out_is_logged_once_per_change_not_per_listing(
    settings: PoolSettings, caplog: pytest.LogCaptureFixture
) -> None:
    # Before: every listing (the first, and each after the child said its tools changed) wrote each
    # skipped tool to the child's log again.
    caplog.set_level(logging.WARNING, logger="server.pool.sessions")
    # The 1,000th tool is broken, the 1,001st on a page past the cap: a broken tool and a cut.
    flags = ["--many-tools", str(MAX_TOOLS - BASE_TOOLS - 1), "--broken-tool", "--deep-schema", "97"]
    config = hostile("odd", *flags, "--tools-page-size", "500")
    async with running_pool({"odd": config}, settings) as pool:
        await pool.list_tools("odd")
        for _ in range(2):
            # The pool has heard the change when the call returns: the next list_tools lists again.
            await pool.call_tool("odd", "storm", {"kind": "tools", "count": 1})
            await pool.list_tools("odd")
        counts = json.loads((await pool.call_tool("odd", "requests", {})).content[0].text)
        assert counts["tools/list"] >= 3 * 2  # three listings (at least) of two pages each
    log = settings.server_log("odd").read_text(encoding="utf-8")
    assert len([line for line in log.splitlines() if "'broken'" in line and "definition is broken" in line]) == 1
    broken = "skipped tool 'broken', its definition is broken: inputSchema.type: should be 'object' (got 'string')"
    cut = cut_at_the_cap("further pages")
    assert log.count(broken) == 1 and log.count(cut) == 1
    assert [r.getMessage() for r in caplog.records] == [f"server 'odd': {broken}", f"server 'odd': {cut}"]


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


@pytest.mark.parametrize(
    ("shape", "said"),
    [
        ("video", "content[0]: unknown content type 'video' (MCP has 'text', 'image', 'audio', 'resource_link', 'resource')"),
        ("untyped", "content[0]: it has no 'type' (MCP content blocks say which kind they are)"),
        ("listy", "structuredContent: should be a valid dictionary"),
    ],
)
async def test_a_result_mcp_does_not_allow_is_said_in_one_line(settings: PoolSettings, shape: str, said: str) -> None:
    # Before: pydantic's dump, eleven errors and links to its docs for one block of an unknown type.
    async with running_pool({"odd": hostile("odd")}, settings) as pool:
        result = await pool.call_tool("odd", "odd_result", {"shape": shape})
        assert result.is_error
        assert result.content[0].text == f"server 'odd' returned a result for 'odd_result' that could not be read: {said}"
        assert (await pool.call_tool("odd", "echo", {"text": "still here"})).content[0].text == "still here"


async def _listed_live(pool: Any, config: Any, warnings: list[str]) -> list[Any]:
    """The prompts, resources and templates of the running ``many`` child, listed as the live index
    re-lists a changed child's (server.aggregate.live)."""
    await pool.list_tools("many")
    capabilities = pool.capabilities("many")
    return await pool.request("many", "listing", lambda session: list_other_kinds(session, capabilities, config, "", warnings))


async def test_prompts_and_resources_listed_live_are_bounded_and_paging_stops_at_the_cap(settings: PoolSettings) -> None:
    # The live index re-lists a changed child's prompts and resources this way (server.aggregate.live):
    # before, it followed every page and kept every item.
    config = hostile("many", "--many-prompts", str(MAX_TOOLS + 500), "--many-templates", "3", "--list-page-size", "300")
    async with running_pool({"many": config}, settings) as pool:
        warnings: list[str] = []
        records = await _listed_live(pool, config, warnings)
        assert [r.name for r in records if r.kind == "prompt"] == [f"prompt_{n}" for n in range(MAX_TOOLS)]
        assert [r.name for r in records if r.kind == "resource_template"] == ["template_0", "template_1", "template_2"]
        assert warnings == [
            f"prompts/list offered more than {MAX_TOOLS:,} prompts; kept the first {MAX_TOOLS:,} (200 more and "
            "further pages left out)"
        ]
        counts = json.loads((await pool.call_tool("many", "requests", {})).content[0].text)
        assert counts["prompts/list"] == 4  # 1,200 prompts in 4 pages reached the cap: no 5th page was asked for


async def test_an_item_listed_again_and_again_does_not_push_others_out(settings: PoolSettings) -> None:
    # Before: repeats counted toward the cap before they were removed, so a child listing its first
    # prompt 1,500 times kept that one prompt only (and its first resource and template only).
    flags = ["--many-prompts", "5", "--many-resources", "3", "--many-templates", "2", "--list-page-size", "300"]
    config = hostile("many", *flags, "--repeat-first", str(MAX_TOOLS + 500))
    async with running_pool({"many": config}, settings) as pool:
        warnings: list[str] = []
        records = await _listed_live(pool, config, warnings)
    assert [r.name for r in records if r.kind == "prompt"] == [f"prompt_{n}" for n in range(5)]
    assert [r.name for r in records if r.kind == "resource"] == [f"resource_{n}" for n in range(3)]
    assert [r.name for r in records if r.kind == "resource_template"] == ["template_0", "template_1"]
    assert warnings == [
        f"{what} listed {MAX_TOOLS + 501:,} times; kept the first"
        for what in ("prompt 'prompt_0'", "resource 'hostile://item/0'", "resource template 'hostile://t0/{id}'")
    ]


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
class _ExpiringCall:
    """What the pool needs of a call's relay, so the test can end the call's timeout when it chooses."""

    progress = None
    timeout_scope: anyio.CancelScope | None = None

    def close(self) -> None:
        pass


async def test_a_child_that_sends_requests_without_reading_their_answers_is_not_read_further(
    settings: PoolSettings, caplog: pytest.LogCaptureFixture
) -> None:
    # 3,000 requests of 1 KB, sent before reading any answer: far more than the pipes hold. Before,
    # the copilot read them all and kept a task (and its answer) for each until the child read.
    caplog.set_level(logging.WARNING, logger="index.children.wire")
    call = _ExpiringCall()
    errors: list[ChildTimeoutError] = []

    async def ask() -> None:
        try:
            await pool.call_tool("evil", "ask", {"method": "x/unknown", "count": 3000, "size": 1000}, timeout=600, relay=call)
        except ChildTimeoutError as error:
            errors.append(error)

    async with running_pool({"evil": hostile("evil")}, settings) as pool:
        with anyio.fail_after(60):
            async with anyio.create_task_group() as group:
                group.start_soon(ask)
                # The call times out once the copilot stopped reading, not on a timer that a loaded
                # machine may beat to it.
                await wait_until(lambda: any("reading its output waits" in r.getMessage() for r in caplog.records), 50)
                assert call.timeout_scope is not None
                call.timeout_scope.deadline = anyio.current_time()
        [error] = errors
        message = str(error)
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
