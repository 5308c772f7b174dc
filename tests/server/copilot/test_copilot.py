"""``Copilot`` in-process, with the real index and child pool: background indexing of servers the
index does not know, and edits of the servers file while running (server.copilot).
"""

from __future__ import annotations

import json
import math
import os
import sys
import threading
from collections.abc import Awaitable, Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import anyio
import pytest

import index.search.model_loading as model_loading
import server.copilot as copilot_module
from index.catalog.crawl import crawl_servers
from index.catalog.records import ToolRecord
from index.catalog.servers import ServersFile, load_servers
from index.children.listing_limits import LISTING_CUT, MAX_TOOLS
from index.search.tool_index import ToolIndex
from index.settings import CopilotSettings
from index.trust.review import TrustReviewer
from index.trust.store import TrustData, TrustStore
from index.usage.learning import learn_usage
from index.usage.prior import write_usage_prior
from server.copilot import Copilot
from server.route.indexing import STATE_FILE_NAME
from server.trajectory.session_log import SessionLog, SessionLogs
from tests.index.index_support import index_with_broken_model
from tests.server.support.copilot_harness import (
    BROKEN_WRONG_TYPE,
    built_index,  # noqa: F401 -- session fixture
    changing_entry,
    copilot_settings,
    copy_home,
    crawl_into,
    fixture_entry,
    read_events,
    schema_breaker_entry,
    write_servers,
)
from tests.fixtures.hostile.hostile_server import TOOLS as HOSTILE_TOOLS
from tests.support.processes import hostile_entry

MAPS_SERVER = Path(__file__).resolve().parents[2] / "fixtures" / "maps_server.py"

pytestmark = pytest.mark.timeout(120)


def _alpha_only(built_index: Path, tmp_path: Path) -> tuple[Path, ServersFile]:
    """A copy of the built home and a servers file of the one fixture server ``alpha``."""
    home = copy_home(built_index, tmp_path / "home")
    return home, load_servers(write_servers(tmp_path / "servers.json", {"alpha": fixture_entry("alpha")}))


def _copilot_of(built_index: Path, tmp_path: Path, entries: dict[str, Any]) -> Any:
    """A running copilot (started now, no background indexing) on a copy of the built home and a
    servers file of ``entries``."""
    home = copy_home(built_index, tmp_path / "home")
    servers = load_servers(write_servers(tmp_path / "servers.json", entries))
    return Copilot.running(copilot_settings(home, tmp_path, auto_index=False), servers, start_now=True)


def _servers_of(result: Any) -> set[str]:
    return {tool["server"] for tool in result.structured_content["tools"]}


async def test_servers_unknown_to_the_index_are_crawled_and_indexed_in_the_background(
    built_index: Path,  # noqa: F811 -- the imported session fixture
    tmp_path: Path,
) -> None:
    home = copy_home(built_index, tmp_path / "home")
    servers_path = write_servers(
        tmp_path / "servers.json",
        {
            "alpha": fixture_entry("alpha"),
            "delta": fixture_entry("delta", tools=["echo", "structured"]),
            "broken": fixture_entry("broken", "crash-at-start"),
        },
    )
    servers = load_servers(servers_path)
    async with Copilot.running(copilot_settings(home, tmp_path), servers, start_now=True) as copilot:
        with anyio.fail_after(90):
            await copilot.indexer.done.wait()
        status = copilot.indexer.status()
        assert not status.in_progress
        assert "broken" in status.failed_servers and "delta" not in status.failed_servers

        record = copilot.index.get("delta", "structured")
        assert record is not None and record.input_schema["required"] == ["city"]
        routed = await copilot.route("structured weather report for a city", 3, "delta", None)
        assert not routed.is_error
        assert _servers_of(routed) == {"delta"}
        failed = await copilot.route("echo the given text back", 3, "broken", None)
        assert failed.is_error and "server 'broken' is in the servers file, but its tools are not indexed: its crawl failed" in (
            failed.content[0].text
        )

    state = json.loads((home / STATE_FILE_NAME).read_text())
    assert state["delta"] == {"launch_hash": servers.servers["delta"].launch_hash(), "tools": 2}
    assert "broken" not in state
    # The background crawl's children log and work where the pool's children do.
    assert (home / "logs" / "children" / "broken.log").is_file()
    assert (home / "work" / "delta").is_dir()


async def test_servers_removed_from_the_file_disappear_from_route(
    built_index: Path,  # noqa: F811 -- the imported session fixture
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(copilot_module, "SERVERS_FILE_CHECK_INTERVAL", 0.0)
    home = copy_home(built_index, tmp_path / "home")
    servers_path = write_servers(
        tmp_path / "servers.json", {"alpha": fixture_entry("alpha"), "beta": fixture_entry("beta")}
    )
    settings = copilot_settings(home, tmp_path, auto_index=False)
    async with Copilot.running(settings, load_servers(servers_path), start_now=True) as copilot:
        before = await copilot.route("echo the given text back", 10, None, None)
        assert _servers_of(before) == {"alpha", "beta"}

        write_servers(servers_path, {"alpha": fixture_entry("alpha")})
        stat = servers_path.stat()
        os.utime(servers_path, ns=(stat.st_atime_ns, stat.st_mtime_ns + 1_000_000_000))
        after = await copilot.route("echo the given text back", 10, None, None)
        assert _servers_of(after) == {"alpha"}

        gone = await copilot.execute("beta", "echo", {"text": "x"}, None, None, None)
        assert gone.is_error
        assert "Unknown server 'beta'" in gone.content[0].text


async def test_a_route_before_start_up_indexing_has_run_says_to_wait_and_how_to_build_for_good(tmp_path: Path) -> None:
    servers = load_servers(write_servers(tmp_path / "servers.json", {"alpha": fixture_entry("alpha")}))
    # Not started (no session yet): the start-up work, indexing included, has not begun.
    async with Copilot.running(copilot_settings(tmp_path / "fresh", tmp_path), servers) as copilot:
        routed = await copilot.route("echo the given text back", 3, None, None)
        text = routed.content[0].text
        assert routed.is_error and "building its tool index in the background; search again in a minute." in text
        # The background build ends with the copilot: a host that starts one per script never sees
        # it finish, and the README promises the command that builds the index.
        assert "(That build ends with this copilot; to build the index for good, " in text
        assert f"COPILOT_HOME={tmp_path / 'fresh'}" in text and "-m index build" in text
    # Without background indexing the index must be built by hand, and route says how.
    async with Copilot.running(copilot_settings(tmp_path / "fresh-2", tmp_path, auto_index=False), servers) as copilot:
        routed = await copilot.route("echo the given text back", 3, None, None)
        assert routed.is_error and "python -m index" in routed.content[0].text


async def test_a_kind_no_server_offers_is_named_with_the_kinds_there_are(
    built_index: Path,  # noqa: F811 -- the imported session fixture
    tmp_path: Path,
) -> None:
    """Not "Nothing matched. Rephrase": no wording finds a prompt in a pool without prompts."""
    home, servers = _alpha_only(built_index, tmp_path)
    async with Copilot.running(copilot_settings(home, tmp_path, auto_index=False), servers, start_now=True) as copilot:
        prompts = await copilot.route("a prompt to greet people", 3, None, None, kind="prompt")
        resources = await copilot.route("the readme notes", 3, None, None, kind="resource")
    assert prompts.structured_content["tools"] == [] == resources.structured_content["tools"]
    text = prompts.content[0].text
    assert "No server in the pool offers prompts" in text and 'tools (' in text and 'kind="tool"' in text
    assert "Nothing matched" not in text and "server filter" not in text
    assert "No server in the pool offers resources" in resources.content[0].text

    # With a server filter: that server has none, others do.
    both = write_servers(tmp_path / "both.json", {"alpha": fixture_entry("alpha"), "jotter": changing_entry("jotter")})
    async with Copilot.running(copilot_settings(home, tmp_path, auto_index=False), load_servers(both), start_now=True) as copilot:
        filtered = await copilot.route("a prompt to greet people", 3, "alpha", None, kind="prompt")
        unfiltered = await copilot.route("a prompt to greet people", 3, None, None, kind="prompt")
    assert filtered.structured_content["tools"] == []
    assert "Server 'alpha' offers no prompts" in filtered.content[0].text
    assert "drop the server filter" in filtered.content[0].text
    assert {(t["server"], t["kind"]) for t in unfiltered.structured_content["tools"]} == {("jotter", "prompt")}


async def test_a_server_filter_whose_matches_are_all_denied_says_they_may_not_be_used(
    built_index: Path,  # noqa: F811 -- the imported session fixture
    tmp_path: Path,
) -> None:
    """The server offers tools, the search finds them, and the deny list hides every one: route says
    the settings leave them out (it asked the model to rephrase, which cannot help)."""
    home = copy_home(built_index, tmp_path / "home")
    entries = {"alpha": fixture_entry("alpha"), "slow": fixture_entry("slow", tools=["sleep", "echo"])}
    servers = load_servers(write_servers(tmp_path / "servers.json", entries))
    # route_model_wait: an answer by keywords only explains an empty answer in its own words.
    settings = copilot_settings(home, tmp_path, auto_index=False, deny=["slow/sleep", "slow/echo"], route_model_wait=60)
    async with Copilot.running(settings, servers, start_now=True) as copilot:
        filtered = await copilot.route("echo the given text back", 3, "slow", None)
        unfiltered = await copilot.route("echo the given text back", 3, None, None)
    assert not filtered.is_error and filtered.structured_content["tools"] == []
    assert filtered.structured_content["ranking"] == "hybrid"
    assert filtered.structured_content["note"] == (
        "The 2 best match(es) on server 'slow' may not be used: the copilot's settings (COPILOT_DENY, COPILOT_ALLOW) "
        "leave them out. Search for another way to do the task, or ask the user to change those settings."
    )
    assert _servers_of(unfiltered) == {"alpha"}


async def test_a_long_query_is_echoed_cut_and_says_what_was_searched(
    built_index: Path,  # noqa: F811 -- the imported session fixture
    tmp_path: Path,
) -> None:
    home, servers = _alpha_only(built_index, tmp_path)
    query = "echo the given text back " + "".join(f"then step {n} of the pasted plan, " for n in range(400))
    query = query[:5000]
    async with Copilot.running(copilot_settings(home, tmp_path, auto_index=False), servers, start_now=True) as copilot:
        routed = await copilot.route(query, 3, None, None)
    assert not routed.is_error
    text, answer = routed.content[0].text, routed.structured_content
    assert query[:2000] not in text and len(text) < 4000
    assert f'for "{query[:200].rstrip()}… (5,000 characters)"' in text
    assert "only its first 2,000 were searched" in text and "one operation per query" in text
    assert answer["query"] == query[:200].rstrip() + "… (5,000 characters)"
    assert (answer["query_chars"], answer["searched_chars"]) == (5000, 2000)
    assert answer["tools"] and answer["tools"][0]["server"] == "alpha"


async def test_a_model_that_fails_to_load_is_reported_and_keyword_answers_go_on(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """It used to say "still loading" forever; now route says why, what to do, and answers by keywords."""
    model, home = index_with_broken_model(tmp_path)
    monkeypatch.setattr(model_loading, "RETRY_SECONDS", (3600.0,))  # no retry during the test
    servers = load_servers(write_servers(tmp_path / "servers.json", {"weather": fixture_entry("weather")}))
    settings = copilot_settings(home, tmp_path, auto_index=False, warm_index=False, embedding_model=str(model))
    async with Copilot.running(settings, servers, start_now=True) as copilot:
        await copilot._warm_in_background()  # noqa: SLF001 -- the start-up warm-up, awaited rather than raced
        # Status counts the tools although the model failed (it said "? tools" until a route came).
        counted = copilot.index_info()
        routed = await copilot.route("air quality", 5, None, None)
        # A keyword-only answer is too rough a guess to start its servers for (a real host's first
        # queries started unrelated servers while the model loaded).
        assert copilot.pool.status()["weather"]["state"] == "stopped"
        nothing = await copilot.route("zzqx", 5, None, None)
    assert counted is not None and counted.get("tool_count", 0) > 0, counted
    assert not routed.is_error
    answer, text = routed.structured_content, routed.content[0].text
    assert answer["ranking"] == "lexical-fallback" and "still loading" not in text
    assert f"cannot load the embedding model from {model}" in answer["model_error"]
    assert "embedding model failed to load (cannot load the embedding model" in text
    assert "COPILOT_EMBEDDING_MODEL" in text and "keyword matching only" in text
    assert answer["model_retry_seconds"] > 3000
    assert [(t["server"], t["tool"]) for t in answer["tools"]] == [("weather", "get_air_quality")]
    assert nothing.structured_content["tools"] == [] and "no tool shares a word" in nothing.content[0].text


async def test_execute_refuses_a_tool_with_a_broken_definition_and_runs_the_servers_other_tools(tmp_path: Path) -> None:
    # A tool the crawl leaves out for its broken inputSchema is refused by execute with the same reason;
    # before, the one broken tool made every call to the server fail with a pydantic error.
    servers = load_servers(write_servers(tmp_path / "servers.json", {"breaker": schema_breaker_entry()}))
    async with Copilot.running(copilot_settings(tmp_path / "home", tmp_path, auto_index=False), servers) as copilot:
        with anyio.fail_after(60):
            refused = await copilot.execute("breaker", "wrong_type", {}, None, None, None)  # starts the server
            echoed = await copilot.execute("breaker", "echo", {"text": "hi"}, None, None, None)
            checked = await copilot.execute("breaker", "echo", {"txt": "hi"}, None, None, None)
            invalid = await copilot.execute("breaker", "bad_json_schema", {"count": 1}, None, None, None)
    assert refused.is_error and refused.content[0].text == BROKEN_WRONG_TYPE
    assert not echoed.is_error and echoed.content[0].text == 'echo ran with {"text": "hi"}'
    assert checked.is_error and "missing required parameter 'text' (string)" in checked.content[0].text
    assert invalid.is_error and (
        "its definition is broken (inputSchema.properties.count.minimum is not valid JSON Schema: 'zero' is not of "
        "type 'number')"
    ) in invalid.content[0].text


@pytest.fixture
def crawled_breaker(built_index: Path, tmp_path: Path) -> tuple[Path, Path]:  # noqa: F811
    """(home, servers file): the test index plus the schema-breaking child, crawled for real."""
    home = copy_home(built_index, tmp_path / "home")
    servers_path = write_servers(tmp_path / "servers.json", {"breaker": schema_breaker_entry()})
    crawl_into(home, servers_path, tmp_path / "crawl")
    return home, servers_path


async def test_a_tool_the_crawl_skipped_is_refused_with_its_reason_before_the_pool_ever_listed_it(
    crawled_breaker: tuple[Path, Path], tmp_path: Path
) -> None:
    # The index held no trace of the skipped tools: until the pool had listed the server in this run,
    # execute said "Unknown tool 'wrong_type'" with the server's tool list, hiding why.
    home, servers_path = crawled_breaker
    settings = copilot_settings(home, tmp_path, auto_index=False)
    async with Copilot.running(settings, load_servers(servers_path), start_now=True) as copilot:
        log = copilot.sessions.open("test", None)
        with anyio.fail_after(60):
            refused = await copilot.execute("breaker", "wrong_type", {}, None, None, log)
            assert not copilot.pool.is_running("breaker")  # answered from the index: nothing started for it
            routed = await copilot.route("a tool of the wrong type without a schema", 10, "breaker", None)
            echoed = await copilot.execute("breaker", "echo", {"text": "hi"}, None, None, log)  # the pool lists it now
            again = await copilot.execute("breaker", "wrong_type", {}, None, None, log)
        assert refused.is_error and refused.content[0].text == BROKEN_WRONG_TYPE
        assert {tool["tool"] for tool in routed.structured_content["tools"]} <= {"fine", "echo"}
        assert not echoed.is_error and again.is_error and again.content[0].text == BROKEN_WRONG_TYPE

        # A record of it from before it broke (an index built earlier) is not routed to once the pool
        # knows better: execute would refuse it.
        await anyio.to_thread.run_sync(
            lambda: copilot.index.sync(
                [ToolRecord(server="breaker", name="wrong_type", description="Convert a value to the wrong type.")],
                servers=[],
            )
        )
        stale = await copilot.route("convert a value to the wrong type", 10, "breaker", None)
        assert "wrong_type" not in {tool["tool"] for tool in stale.structured_content["tools"]}
        assert "its definition is broken (inputSchema.type" in stale.structured_content["note"]
        log_path = log.path
    kinds = [(event.tool, event.error_kind) for event in read_events(log_path) if event.event == "execute"]
    assert kinds == [("wrong_type", "server_unavailable"), ("echo", None), ("wrong_type", "server_unavailable")]


def _past_the_cut(tool: str, more: str, hint: str = "") -> str:
    """What execute answers for ``tool`` of the hostile child ``many``, whose listing was cut at the cap."""
    return (
        f"tool '{tool}' of server 'many' cannot be used: the server listed more than {MAX_TOOLS:,} tools and the "
        f"copilot reads only the first {MAX_TOOLS:,} ({more} left out), and '{tool}' is not among them, so if the "
        f"server has it, it is past that cut.{hint} Use one of the server's first {MAX_TOOLS:,} tools or another "
        "server's (route finds alternatives); to reach this one, the server has to list fewer tools (its author or "
        "its configuration)."
    )


async def test_execute_of_a_tool_past_the_listing_cap_says_so_and_what_to_do(tmp_path: Path) -> None:
    # Before: the copilot answered "Unknown tool 'filler_1200' on server 'many'", as if the server had no such tool.
    entry = hostile_entry("--many-tools", str(MAX_TOOLS + 500))
    servers = load_servers(write_servers(tmp_path / "servers.json", {"many": entry}))
    async with Copilot.running(copilot_settings(tmp_path / "home", tmp_path, auto_index=False), servers) as copilot:
        log = copilot.sessions.open("test", None)
        with anyio.fail_after(60):
            refused = await copilot.execute("many", "filler_1200", {}, None, None, log)  # starts and lists the server
            echoed = await copilot.execute("many", "echo", {"text": "kept"}, None, None, log)
        log_path = log.path
    hint = " Did you mean 'filler_100' or 'filler_120' or 'filler_200'?"
    assert refused.is_error and refused.content[0].text == _past_the_cut("filler_1200", f"{500 + len(HOSTILE_TOOLS)} more", hint)
    assert not echoed.is_error and echoed.content[0].text == "kept"
    kinds = [(event.tool, event.error_kind) for event in read_events(log_path) if event.event == "execute"]
    assert kinds == [("filler_1200", "unknown_tool"), ("echo", None)]


async def test_a_tool_past_the_cap_of_a_crawled_listing_is_refused_without_starting_its_server(
    built_index: Path, tmp_path: Path  # noqa: F811
) -> None:
    # The crawl's record of the cut reaches the index (as a broken tool's reason does): before, execute
    # found no trace of it and answered "Unknown tool" with the server's indexed tools.
    home = copy_home(built_index, tmp_path / "home")
    servers_path = write_servers(tmp_path / "servers.json", {"many": hostile_entry("--many-tools", str(MAX_TOOLS + 500))})
    servers = load_servers(servers_path).servers
    with anyio.fail_after(60):
        report = await crawl_servers(servers, timeout=60, log_dir=tmp_path / "logs", progress=False)
    assert set(report.skipped_tools["many"]) == {LISTING_CUT}
    # Two of its records are enough for the test (embedding a thousand would cost a minute).
    kept = [record for record in report.records if record.name in ("echo", "counter")]
    index = ToolIndex.open(CopilotSettings(home=home))
    await anyio.to_thread.run_sync(lambda: index.sync(kept, servers=["many"], skipped=report.skipped_tools))
    settings = copilot_settings(home, tmp_path, auto_index=False)
    async with Copilot.running(settings, load_servers(servers_path), start_now=True) as copilot:
        with anyio.fail_after(60):
            refused = await copilot.execute("many", "filler_1200", {}, None, None, None)
            assert not copilot.pool.is_running("many")  # answered from the index: nothing started for it
            echoed = await copilot.execute("many", "echo", {"text": "kept"}, None, None, None)
    assert refused.is_error and refused.content[0].text == _past_the_cut("filler_1200", f"{500 + len(HOSTILE_TOOLS)} more")
    assert not echoed.is_error and echoed.content[0].text == "kept"


async def test_the_usage_prior_learned_from_a_session_s_trajectory_lifts_its_tool_in_the_next(
    built_index: Path,  # noqa: F811 -- the imported session fixture
    tmp_path: Path,
) -> None:
    home, servers = _alpha_only(built_index, tmp_path)
    settings = copilot_settings(home, tmp_path, auto_index=False)
    async with Copilot.running(settings, servers, start_now=True) as copilot:
        logs = SessionLogs(settings, copilot_version="test", index_info=copilot.index_info)
        first = logs.open("first", None)
        before = await copilot.route("echo some text back", 5, None, first)
        result = await copilot.execute("alpha", "echo", {"text": "hi"}, None, None, first)
        assert not result.is_error
        await copilot.execute("alpha", "add", {"a": "x", "b": 1}, None, None, first)  # a wrong call: not counted
        learned = learn_usage([settings.logs_dir])
        assert learned.prior.tools == {"alpha": {"echo": 1}}
        write_usage_prior(learned.prior, settings.usage_prior_file)
        second = logs.open("second", None)
        after = await copilot.route("echo some text back", 5, None, second)
        status_index = copilot.index_info()  # what status shows, without reading the file on the event loop
    scores = [{(t["server"], t["tool"]): t["score"] for t in r.structured_content["tools"]} for r in (before, after)]
    assert scores[1][("alpha", "echo")] == pytest.approx(scores[0][("alpha", "echo")] + 0.5 * math.log(2), abs=1e-3)
    assert "usage_prior" not in read_events(first.path)[0].index  # each session has its own file
    assert read_events(second.path)[0].index["usage_prior"] == status_index["usage_prior"] == {
        "file": str(settings.usage_prior_file), "trajectories": 1, "tools": 1, "weight": 0.5,
    }


async def test_route_lifts_the_servers_its_session_ran_a_tool_of_and_logs_them(
    built_index: Path,  # noqa: F811 -- the imported session fixture
    tmp_path: Path,
) -> None:
    """Two servers with the same ``echo``: once a session has run alpha's without error, its route
    lifts alpha's tools by the session prior's weight, says so, and logs it; a failed call, another
    session and a log clients share lift nothing."""
    home = copy_home(built_index, tmp_path / "home")
    servers = load_servers(write_servers(tmp_path / "servers.json", {"alpha": fixture_entry("alpha"), "beta": fixture_entry("beta")}))
    settings = copilot_settings(home, tmp_path, auto_index=False)
    query = "echo the given text back"

    def scores(result: Any) -> dict[tuple[str, str], float]:
        return {(t["server"], t["tool"]): t["score"] for t in result.structured_content["tools"]}

    async with Copilot.running(settings, servers, start_now=True) as copilot:
        logs = SessionLogs(settings, copilot_version="test", index_info=copilot.index_info)
        session, other, shared = logs.open("session", None), logs.open("other", None), logs.open("shared", None, private=False)
        before = await copilot.route(query, 10, None, session)
        failed = await copilot.execute("beta", "add", {"a": "x", "b": 1}, None, None, session)  # an error: not counted
        assert failed.is_error
        assert (await copilot.route(query, 10, None, session)).structured_content["session_servers"] == []
        for log in (session, other, shared):
            if log is not other:
                assert not (await copilot.execute("alpha", "echo", {"text": "hi"}, None, None, log)).is_error
        after = await copilot.route(query, 10, None, session)
        elsewhere = await copilot.route(query, 10, None, other)
        in_shared = await copilot.route(query, 10, None, shared)
    assert after.structured_content["session_servers"] == ["alpha"]
    lifted = {key: score - scores(before)[key] for key, score in scores(after).items()}
    assert lifted[("alpha", "echo")] == pytest.approx(2.0, abs=1e-3)  # the default weight
    assert lifted[("beta", "echo")] == pytest.approx(0.0, abs=1e-3)
    assert [t["server"] for t in after.structured_content["tools"][:1]] == ["alpha"]
    for unlifted in (elsewhere, in_shared):
        assert unlifted.structured_content["session_servers"] == [] and scores(unlifted) == pytest.approx(scores(before))
    routes = [e for e in read_events(session.path) if e.event == "route"]
    assert [e.session_servers for e in routes] == [None, None, ["alpha"]]
    # a weight of 0 turns it off
    async with Copilot.running(copilot_settings(home, tmp_path, auto_index=False, session_prior_weight=0), servers, start_now=True) as copilot:
        log = SessionLogs(settings, copilot_version="test", index_info=copilot.index_info).open("off", None)
        await copilot.execute("alpha", "echo", {"text": "hi"}, None, None, log)
        off = await copilot.route(query, 10, None, log)
    assert off.structured_content["session_servers"] == [] and scores(off) == pytest.approx(scores(before))


async def test_route_puts_the_tool_giving_an_input_right_after_the_tool_needing_it_and_says_so(tmp_path: Path) -> None:
    """A real child whose ``find_parking`` takes coordinates only ``geocode_address`` gives: the agent
    asking for parking gets the geocoder next to it, told to call it first, and the chain works."""
    servers_path = write_servers(tmp_path / "servers.json", {"maps": {"command": sys.executable, "args": [str(MAPS_SERVER)]}})
    home = tmp_path / "home"
    await anyio.to_thread.run_sync(lambda: crawl_into(home, servers_path, tmp_path / "crawl"))
    query = "<tool_assistant>\nserver: maps\ntool: find parking near the Forbidden City\n</tool_assistant>"
    async with Copilot.running(copilot_settings(home, tmp_path, auto_index=False), load_servers(servers_path), start_now=True) as copilot:
        routed = await copilot.route(query, 3, None, None)
        tools = routed.structured_content["tools"]
        assert [t["tool"] for t in tools[:2]] == ["find_parking", "geocode_address"]
        assert tools[1]["score"] == pytest.approx(tools[0]["score"] - 0.1, abs=1e-3)  # lifted, not ranked there
        assert tools[1]["input_for"] == [{"tool": "find_parking", "parameter": "latitude"}]
        assert tools[0]["input_for"] == [] and "call it first for: find_parking (its latitude)" in routed.content[0].text
        assert tools[0]["input_from"] == [] and "needs first" not in routed.content[0].text  # the geocoder is right there
        place = json.loads((await copilot.execute("maps", "geocode_address", {"address": "Forbidden City"}, None, None, None)).content[0].text)
        lots = await copilot.execute("maps", "find_parking", {k: place[k] for k in ("latitude", "longitude")}, None, None, None)
        assert lots.content[0].text == "2 parking lots within 500 m of 39.9163,116.3972"
        # asked for one tool, the answer still says where its latitude comes from
        alone = await copilot.route(query, 1, None, None)
        assert alone.structured_content["tools"][0]["input_from"] == [{"tool": "geocode_address", "parameter": "latitude"}]
        assert "needs first (not in this answer): geocode_address (gives its latitude)" in alone.content[0].text
    # a tool the answer holds back is no reason to call another first, nor one to point at
    hidden = copilot_settings(home, tmp_path, auto_index=False, deny=["maps/find_parking"])
    async with Copilot.running(hidden, load_servers(servers_path), start_now=True) as copilot:
        routed = await copilot.route(query, 3, None, None)
    assert all(t["input_for"] == [] for t in routed.structured_content["tools"])
    assert "call it first" not in routed.content[0].text
    no_geocoder = copilot_settings(home, tmp_path, auto_index=False, deny=["maps/geocode_address"])
    async with Copilot.running(no_geocoder, load_servers(servers_path), start_now=True) as copilot:
        routed = await copilot.route(query, 1, None, None)
    assert routed.structured_content["tools"][0]["tool"] == "find_parking"
    assert routed.structured_content["tools"][0]["input_from"] == [] and "needs first" not in routed.content[0].text
    # in read-only mode only a tool the mode permits is pointed at (the fixture declares no readOnlyHint)
    geocoder = [{"tool": "geocode_address", "parameter": "latitude"}]
    for allowed, expected in ((["maps/find_parking"], []), (["maps/find_parking", "maps/geocode_address"], geocoder)):
        read_only = copilot_settings(home, tmp_path, auto_index=False, read_only=True, read_only_allow=allowed)
        async with Copilot.running(read_only, load_servers(servers_path), start_now=True) as copilot:
            routed = await copilot.route(query, 1, None, None)
        assert [(t["tool"], t["input_from"]) for t in routed.structured_content["tools"]] == [("find_parking", expected)]
    # a geocoder held back since it changed (a rug pull waiting for approval) is not pointed at either
    def tamper(data: TrustData) -> bool:
        data.pins_of("tool")["maps/geocode_address"].approved.hash = "approved-before-a-change"
        return True

    store = TrustStore.in_home(home)
    store.update(tamper)
    geocode = ToolIndex.open(CopilotSettings(home=home)).get("maps", "geocode_address")
    assert geocode is not None and TrustReviewer(store).review("maps", [geocode]).blocked  # now waiting as "changed"
    async with Copilot.running(copilot_settings(home, tmp_path, auto_index=False), load_servers(servers_path), start_now=True) as copilot:
        routed = await copilot.route(query, 1, None, None)
        refused = await copilot.execute("maps", "geocode_address", {"address": "Forbidden City"}, None, None, None)
    assert refused.is_error and "changed" in refused.content[0].text
    assert [(t["tool"], t["input_from"]) for t in routed.structured_content["tools"]] == [("find_parking", [])]
    assert "needs first" not in routed.content[0].text


async def test_a_server_filter_that_is_not_text_is_refused_not_ignored(
    built_index: Path,  # noqa: F811 -- the imported session fixture
    tmp_path: Path,
) -> None:
    home, servers = _alpha_only(built_index, tmp_path)
    async with Copilot.running(copilot_settings(home, tmp_path, auto_index=False), servers, start_now=True) as copilot:
        for server in (["alpha"], 5, {"name": "alpha"}):
            routed = await copilot.route("echo the given text back", 3, server, None)
            shown = f"{type(server).__name__} {str(server)!r}"
            assert routed.is_error
            assert routed.content[0].text.endswith(
                f"server must be one server's name as text, got {shown}; leave it out to search every server."
            ), routed.content[0].text


async def test_the_server_filter_takes_the_label_routes_description_shows(
    built_index: Path,  # noqa: F811 -- the imported session fixture
    tmp_path: Path,
) -> None:
    # Before: the description lists "yahoo finance" for yahoo-finance-mcp, and route(server="yahoo
    # finance") answered "Unknown server".
    entries = {"alpha": fixture_entry("alpha"), "yahoo-finance-mcp": fixture_entry("yf"), "finance-server": fixture_entry("fs")}
    async with _copilot_of(built_index, tmp_path, entries) as copilot:
        assert "yahoo finance" in copilot.route_description()
        by_label = await copilot.route("stock price", 3, "Yahoo  Finance", None)
        unknown = await copilot.route("stock price", 3, "yahoo", None)
    # Resolved to the server (which this index has not crawled: it says so by its name).
    assert "'yahoo-finance-mcp'" in by_label.content[0].text and "Unknown server" not in by_label.content[0].text
    assert unknown.is_error and "Unknown server 'yahoo'" in unknown.content[0].text


async def test_a_label_several_servers_share_is_refused_not_resolved_to_one_of_them(
    built_index: Path,  # noqa: F811 -- the imported session fixture
    tmp_path: Path,
) -> None:
    # "yahoo finance" labels both servers: searching only one of them would silently drop the other's tools.
    entries = {"yahoo-finance-mcp": fixture_entry("yf"), "yahoo-finance-server": fixture_entry("ys")}
    async with _copilot_of(built_index, tmp_path, entries) as copilot:
        by_label = await copilot.route("stock price", 3, "yahoo finance", None)
        by_name = await copilot.route("stock price", 3, "yahoo-finance-server", None)
    assert by_label.is_error and "Unknown server 'yahoo finance'" in by_label.content[0].text
    # Its name still picks it (not crawled by this index: it says so by its name).
    assert "'yahoo-finance-server'" in by_name.content[0].text and "Unknown server" not in by_name.content[0].text


async def test_a_top_k_out_of_range_is_clamped_with_a_short_note(
    built_index: Path,  # noqa: F811 -- the imported session fixture
    tmp_path: Path,
) -> None:
    home, servers = _alpha_only(built_index, tmp_path)
    async with Copilot.running(copilot_settings(home, tmp_path, auto_index=False), servers, start_now=True) as copilot:
        notes = [
            (await copilot.route("echo the given text back", top_k, None, None)).structured_content["note"]
            for top_k in (0, 1000, 1e300)
        ]
    limit = copilot.settings.max_top_k
    assert notes[:2] == [f"top_k=0 is outside 1..{limit}; using 1.", f"top_k=1000 is outside 1..{limit}; using {limit}."]
    # 1e300 is an int of 301 digits: it was echoed whole.
    assert notes[2] == f"top_k=100000…(301 digits) is outside 1..{limit}; using {limit}."


async def test_names_that_differ_only_in_case_are_not_guessed_and_a_missing_query_is_logged_empty(
    built_index: Path,  # noqa: F811 -- the imported session fixture
    tmp_path: Path,
) -> None:
    # Before: "DUP" quietly ran "dup", the last of two servers "Dup" and "dup"; and a route whose
    # query was missing (a misspelt argument) was logged as the query "None".
    home = copy_home(built_index, tmp_path / "home")
    entries = {"Dup": fixture_entry("alpha"), "dup": fixture_entry("beta")}
    servers = load_servers(write_servers(tmp_path / "servers.json", entries))
    settings = copilot_settings(home, tmp_path, auto_index=False)
    async with Copilot.running(settings, servers, start_now=True) as copilot:
        guessed = await copilot.execute("DUP", "echo", {"text": "x"}, None, None, None)
        log = SessionLogs(settings, copilot_version="test", index_info=copilot.index_info).open("s", None)
        missing = await copilot.route(None, 5, None, log)
        log_path = log.path
    assert guessed.is_error and "differs only in letter case from 'Dup', 'dup'" in guessed.content[0].text
    assert missing.is_error
    [route] = [event for event in read_events(log_path) if event.event == "route"]
    assert route.query == ""


async def test_the_results_left_out_are_counted_within_top_k(
    built_index: Path,  # noqa: F811 -- the imported session fixture
    tmp_path: Path,
) -> None:
    home, servers = _alpha_only(built_index, tmp_path)
    settings = copilot_settings(home, tmp_path, auto_index=False, route_model_wait=60)
    async with Copilot.running(settings, servers, start_now=True) as copilot:
        routed = [await copilot.route("echo the given text back", k, None, None) for k in (2, 3, 6)]
    # The trust guard makes route fetch 3 x top_k; the note counted every trimmed hit of those.
    assert [(len(answer.structured_content["tools"]), answer.structured_content["omitted"]) for answer in routed] == [
        (2, 0), (2, 1), (2, 4)
    ]
    assert "(4 more result(s) scored far below these and were left out.)" in routed[2].content[0].text


@contextmanager
def _index_details_held(copilot: Copilot) -> Iterator[anyio.Event]:
    """The first call of a session waits for the index's details (``begin_session``); held (in the
    worker thread that reads them) until the block ends. The event is set once the wait began."""
    waiting, release = anyio.Event(), threading.Event()

    def held(load: bool = False) -> None:
        anyio.from_thread.run_sync(waiting.set)
        release.wait(60)

    copilot.index_info = held  # type: ignore[method-assign]
    try:
        yield waiting
    finally:
        release.set()


async def _cancelled_once_waiting(
    copilot: Copilot, settings: Any, call: Callable[[SessionLog], Awaitable[Any]], waiting: anyio.Event
) -> Path:
    """Run ``call`` with a fresh session log, cancel it once ``waiting`` is set; the log's path."""
    log = SessionLogs(settings, copilot_version="test", index_info=copilot.index_info).open("s", None)
    with anyio.fail_after(30):
        async with anyio.create_task_group() as group:
            group.start_soon(call, log)
            await waiting.wait()
            group.cancel_scope.cancel()
    return log.path


async def test_an_execute_cancelled_while_its_session_starts_is_logged_and_counted_as_cancelled(
    built_index: Path,  # noqa: F811 -- the imported session fixture
    tmp_path: Path,
) -> None:
    # The first call of a session waits for the index's details (session_start); a host cancelling
    # it then left no trajectory entry, and status counted it as a success.
    home, servers = _alpha_only(built_index, tmp_path)
    settings = copilot_settings(home, tmp_path, auto_index=False)
    async with Copilot.running(settings, servers, start_now=True) as copilot:
        with _index_details_held(copilot) as waiting:
            path = await _cancelled_once_waiting(
                copilot, settings, lambda log: copilot.execute("alpha", "echo", {"text": "hi"}, None, None, log), waiting
            )
        counts = dict(copilot.telemetry.counts)
    events = read_events(path)
    assert [event.event for event in events] == ["session_start", "execute"]
    assert events[1].error_kind == "cancelled" and (events[1].server, events[1].tool) == ("alpha", "echo")
    assert (counts["execute"], counts["execute_errors"]) == (1, 1)


@pytest.mark.parametrize("while_", ["session_start", "search"])
async def test_a_route_the_host_cancels_is_logged_and_counted_as_cancelled(
    built_index: Path,  # noqa: F811 -- the imported session fixture
    tmp_path: Path,
    while_: str,
) -> None:
    # A cancelled route left no trajectory entry: the agent's search vanished from its log.
    home, servers = _alpha_only(built_index, tmp_path)
    settings = copilot_settings(home, tmp_path, auto_index=False)
    searching = anyio.Event()

    async def stuck(*args: Any, **kwargs: Any) -> None:
        searching.set()
        await anyio.sleep_forever()

    def route(log: SessionLog) -> Awaitable[Any]:
        return copilot.route("echo some text", 3, None, log)

    async with Copilot.running(settings, servers, start_now=True) as copilot:
        if while_ == "session_start":
            with _index_details_held(copilot) as waiting:
                path = await _cancelled_once_waiting(copilot, settings, route, waiting)
        else:
            copilot._route = stuck  # type: ignore[method-assign]
            path = await _cancelled_once_waiting(copilot, settings, route, searching)
        counts = dict(copilot.telemetry.counts)
    events = read_events(path)
    assert [event.event for event in events] == ["session_start", "route"]
    assert events[1].query == "echo some text" and events[1].results == []
    assert events[1].error == "Route cancelled: the host cancelled it."
    assert counts["route"] == 1


async def test_tools_of_a_server_that_failed_to_start_come_after_the_others_and_say_why(
    built_index: Path,  # noqa: F811 -- the imported session fixture
    tmp_path: Path,
) -> None:
    # A real host was steered to a server that could not run: route kept ranking it first, as "starts
    # on first call", after its start had failed.
    entries = {"alpha": fixture_entry("alpha", "crash-at-start"), "beta": fixture_entry("beta")}
    async with _copilot_of(built_index, tmp_path, entries) as copilot:
        before = await copilot.route("add two integers and return the sum", 2, None, None)
        ranked = [(tool["server"], tool["tool"]) for tool in before.structured_content["tools"]]
        assert sorted(ranked) == [("alpha", "add"), ("beta", "add")]  # the same tool on both: a tie
        failed = await copilot.execute("alpha", "add", {"a": 1, "b": 2}, None, None, None)
        assert failed.is_error and "exited with exit code 3 before answering initialize" in failed.content[0].text
        after = await copilot.route("add two integers and return the sum", 2, None, None)
    first, second = after.structured_content["tools"]
    assert (first["server"], second["server"]) == ("beta", "alpha")
    assert first["server_start_failed"] is None
    # The outcome survives however long the command line (a long checkout path cut it off at first).
    reason = second["server_start_failed"]
    assert reason.startswith("(") and reason.endswith("exited with exit code 3 before answering initialize.")
    assert len(reason) <= 300
    assert f"its server failed to start last time: {reason}" in after.content[0].text
