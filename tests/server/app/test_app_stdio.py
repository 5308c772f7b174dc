"""The copilot over stdio, end to end: a real MCP client, the real ``python -m server`` process,
real fixture child servers and a real index. One copilot process serves the whole module.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import anyio
import psutil
import pytest
import pytest_asyncio
from mcp import Client

from tests.server.support.copilot_harness import (
    SECRET_NAME,
    RunningClient,
    built_index,  # noqa: F401 -- session fixture
    copilot_env,
    copy_home,
    find_copilot,
    fixture_entry,
    read_events,
    stdio_client_for,
    text_of,
    write_servers,
)

pytestmark = [pytest.mark.asyncio(loop_scope="module"), pytest.mark.timeout(120)]

TASK_ID = "task-7"
QUESTION = "What is 2 + 3?"


@dataclass
class Copilot:
    client: Client
    process: psutil.Process
    log_file: Path
    home: Path
    #: Anything on the copilot's stdout that is not a JSON-RPC message (the client reports it).
    stdout_junk: list[Exception]

    async def route(self, query: str, **extra: Any) -> Any:
        return await self.client.call_tool("route", {"query": query, **extra})

    async def execute(self, server: str, tool: str, params: Any = None, **extra: Any) -> Any:
        arguments: dict[str, Any] = {"server_name": server, "tool_name": tool, **extra}
        if params is not None:
            arguments["params"] = params
        return await self.client.call_tool("execute", arguments)


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def copilot(built_index: Path, tmp_path_factory: pytest.TempPathFactory) -> Any:  # noqa: F811
    root = tmp_path_factory.mktemp("stdio-copilot")
    home = copy_home(built_index, root / "home")
    servers = write_servers(
        root / "servers.json",
        {
            "alpha": fixture_entry("alpha"),
            "beta": fixture_entry("beta", trusted=False),
            "crashy": fixture_entry("crashy"),
            "slow": fixture_entry("slow", tools=["sleep", "echo"], timeout=5),
            "broken": fixture_entry("broken", "crash-at-start"),
            "late": fixture_entry("late", "hang-at-start"),
            "off": fixture_entry("off", enabled=False, reason="needs an API key"),
        },
    )
    log_file = root / "trajectory.jsonl"
    env = copilot_env(
        home,
        COPILOT_DENY="alpha/write_file",
        COPILOT_MAX_TOP_K="40",  # with the deny list, route over-fetches three times that
        COPILOT_MAX_RESULT_CHARS="5000",
        COPILOT_CRAWL_TIMEOUT="600",
        COPILOT_LOG_FILE=str(log_file),
        COPILOT_TASK_ID=TASK_ID,
        COPILOT_QUESTION=QUESTION,
        COPILOT_LIVEMCPBENCH_ALIAS="true",  # as the benchmark runner launches it
        # Routes wait (bounded) for the embedding model: without it, whether a route here ranked by
        # keywords alone or by the hybrid depended on how fast the model loaded on this machine.
        COPILOT_ROUTE_MODEL_WAIT="90",
    )
    junk: list[Exception] = []

    async def on_message(message: Any) -> None:
        if isinstance(message, Exception):
            junk.append(message)

    running = RunningClient(stdio_client_for(servers, env, root / "copilot.stderr.log", message_handler=on_message))
    client = await running.start()
    try:
        yield Copilot(client, find_copilot(str(servers)), log_file, home, junk)
    finally:
        await running.stop()


def structured(result: Any) -> dict[str, Any]:
    assert result.structured_content is not None, text_of(result)
    return result.structured_content


async def test_publishes_route_execute_and_the_paper_alias_when_asked(copilot: Copilot) -> None:
    tools = {tool.name: tool for tool in (await copilot.client.list_tools()).tools}
    assert set(tools) == {"route", "execute", "execute-tool"}
    assert "<tool_assistant>" in tools["route"].description
    # Generated from the pool: its servers by category, and how to ask.
    assert "by category" in tools["route"].description and "alpha" in tools["route"].description
    assert "one operation per query" in tools["route"].description
    assert tools["route"].output_schema is not None
    assert tools["execute"].input_schema["required"] == ["server_name", "tool_name"]
    assert tools["execute-tool"].input_schema == tools["execute"].input_schema


async def test_route_then_execute(copilot: Copilot) -> None:
    routed = await copilot.route("add two integers and return the sum")
    assert not routed.is_error, text_of(routed)
    best = structured(routed)["tools"][0]
    assert best["tool"] == "add"
    assert best["required"] == ["a", "b"]
    assert set(best["input_schema"]["properties"]) == {"a", "b"}
    assert f"server: {best['server']}  tool: add" in text_of(routed)

    result = await copilot.execute(best["server"], "add", {"a": 2, "b": 3})
    assert not result.is_error, text_of(result)
    assert text_of(result) == "5"
    assert result.structured_content == {"result": 5}


async def test_route_shows_which_tools_return_structured_output(copilot: Copilot) -> None:
    # Here, not in the relay tests: their copilots never search, so they never load the embedding model.
    found = await copilot.route("add two integers; weather report for a city", server="alpha", top_k=20)
    tools = {t["tool"]: t for t in structured(found)["tools"]}
    assert tools["add"]["structured_output"] is True
    assert tools["structured"]["structured_output"] is False
    assert "returns structured content" in text_of(found)


async def test_route_accepts_the_tool_assistant_form(copilot: Copilot) -> None:
    query = "<tool_assistant>\nserver: a test server\ntool: echo the given text back unchanged\n</tool_assistant>"
    routed = await copilot.route(query, top_k=3)
    names = [t["tool"] for t in structured(routed)["tools"]]
    assert names[0] == "echo", names
    assert len(names) == 3


async def test_route_says_which_operations_of_a_packed_query_it_searched(copilot: Copilot) -> None:
    query = "<tool_assistant>\nserver: a test server\ntool: echo text back + add two integers\n</tool_assistant>"
    # One server: across the pool four servers offer echo, and the hybrid ranks all four above any add.
    answer = structured(await copilot.route(query, top_k=4, server="alpha"))
    assert answer["operations"] == ["echo text back", "add two integers"]
    assert {"echo", "add"} <= {t["tool"] for t in answer["tools"]}, answer["tools"]
    assert "lists 2 operations (echo text back; add two integers)" in text_of(await copilot.route(query, top_k=3))
    single = structured(await copilot.route("echo the given text back unchanged"))
    assert single["operations"] == []


async def test_route_filters_by_server_and_suggests_unknown_ones(copilot: Copilot) -> None:
    routed = await copilot.route("increment a counter", server="beta")
    assert {t["server"] for t in structured(routed)["tools"]} == {"beta"}

    unknown = await copilot.route("increment a counter", server="bta")
    assert unknown.is_error
    assert "Did you mean 'beta'?" in text_of(unknown)


async def test_route_never_returns_servers_missing_from_the_servers_file(copilot: Copilot) -> None:
    # "gamma" is in the index but not in this copilot's servers file; "off" is disabled.
    routed = await copilot.route("echo the given text back", top_k=20)
    servers = {t["server"] for t in structured(routed)["tools"]}
    assert servers <= {"alpha", "beta", "crashy", "slow"}, servers
    assert "gamma" not in servers


async def test_a_large_top_k_with_filters_is_answered(copilot: Copilot) -> None:
    # Filters make route fetch three times top_k from the index, which takes at most 100: 40 failed
    # with "top_k must be between 1 and 100, not 120".
    routed = structured(await copilot.route("echo the given text back", top_k=40))
    assert routed["tools"] and all(t["tool"] != "write_file" or t["server"] != "alpha" for t in routed["tools"])


async def test_route_empty_query_is_a_helpful_error(copilot: Copilot) -> None:
    result = await copilot.route("   ")
    assert result.is_error
    assert "The query is empty" in text_of(result)
    for not_text in (123, ["time"], {"q": "time"}):
        result = await copilot.route(not_text)
        assert result.is_error and "query must be a string" in text_of(result), not_text
    for not_count in (2.5, True, "three"):
        result = await copilot.route("echo the given text back", top_k=not_count)
        assert result.is_error and "top_k must be an integer between 1 and" in text_of(result), not_count
    assert not (await copilot.route("echo the given text back", top_k=3.0)).is_error


async def test_argument_names_route_and_execute_do_not_take_are_named_with_what_was_meant(copilot: Copilot) -> None:
    misspelled = await copilot.client.call_tool("route", {"qeury": "echo the given text back"})
    assert misspelled.is_error
    assert text_of(misspelled) == (
        "route has no argument 'qeury' (did you mean 'query'?). route takes: query (required), top_k, server, kind."
    )
    # The tool's own arguments beside params, not in it: the copilot says where they go and calls nothing.
    beside = await copilot.execute("alpha", "echo", text="hello")
    assert beside.is_error
    assert text_of(beside).startswith("execute has no argument 'text'. execute takes: server_name (required)")
    assert "go inside params" in text_of(beside)
    short = await copilot.client.call_tool("execute", {"server": "alpha", "tool": "echo", "params": {"text": "x"}})
    assert "'server' (did you mean 'server_name'?), 'tool' (did you mean 'tool_name'?)" in text_of(short)
    assert "go inside params" not in text_of(short)
    assert not (await copilot.execute("alpha", "echo", {"text": "hello"})).is_error


async def test_route_reports_background_indexing_in_progress(copilot: Copilot) -> None:
    # "late" is not in the index and hangs at start, so its crawl stays in progress once it has
    # begun (the first session starts the background work; run alone, this test may come first).
    with anyio.fail_after(60):
        while not structured(routed := await copilot.route("sleep for a while"))["indexing"]["in_progress"]:
            pass
    indexing = structured(routed)["indexing"]
    assert "late" in indexing["pending_servers"]
    assert "background indexing" in text_of(routed)
    pending = await copilot.route("sleep for a while", server="late")
    assert pending.is_error and "server 'late' is being indexed in the background" in text_of(pending)


async def test_denied_tools_are_neither_routed_nor_executed(copilot: Copilot) -> None:
    routed = await copilot.route("write text to a file", top_k=10)
    pairs = {(t["server"], t["tool"]) for t in structured(routed)["tools"]}
    assert ("alpha", "write_file") not in pairs
    assert ("crashy", "write_file") in pairs

    result = await copilot.execute("alpha", "write_file", {"path": "x.txt", "text": "no"})
    assert result.is_error
    assert "deny list" in text_of(result)


async def test_state_is_kept_across_calls(copilot: Copilot) -> None:
    first = await copilot.execute("alpha", "counter", {"step": 2})
    second = await copilot.execute("alpha", "counter", {"step": 3})
    assert int(text_of(second)) == int(text_of(first)) + 3


async def test_unknown_server_suggests_the_nearest_names(copilot: Copilot) -> None:
    result = await copilot.execute("alpah", "add", {"a": 1, "b": 2})
    assert result.is_error
    message = text_of(result)
    assert "Unknown server 'alpah'. Did you mean 'alpha'?" in message
    assert "gamma" not in message


async def test_unknown_tool_suggests_names_on_the_server_and_other_servers(copilot: Copilot) -> None:
    result = await copilot.execute("alpha", "ad", {"a": 1, "b": 2})
    assert result.is_error
    assert "Unknown tool 'ad' on server 'alpha'. Did you mean 'add'?" in text_of(result)

    elsewhere = await copilot.execute("slow", "add", {"a": 1, "b": 2})
    assert elsewhere.is_error
    message = text_of(elsewhere)
    assert "Unknown tool 'add' on server 'slow'" in message
    assert "A tool named 'add' exists on: alpha, beta, crashy." in message


async def test_bad_params_name_the_problems_and_the_expected_parameters(copilot: Copilot) -> None:
    result = await copilot.execute("alpha", "add", {"a": "two", "c": 1})
    assert result.is_error
    message = text_of(result)
    assert "missing required parameter 'b' (integer)" in message
    assert "'a' should be integer, got string \"two\"" in message
    assert "unknown parameter 'c'" in message
    assert "Expected parameters: a (integer, required); b (integer, required)" in message


async def test_params_as_a_json_string_are_accepted(copilot: Copilot) -> None:
    result = await copilot.execute("alpha", "add", '{"a": 40, "b": 2}')
    assert text_of(result) == "42"


async def test_a_child_crash_mid_call_is_reported_and_the_child_restarts(copilot: Copilot) -> None:
    # A call first, whatever earlier tests did: whether the crashed process had served calls decides
    # the restart note (an earlier route -> execute of 'add' may or may not have picked crashy's).
    assert (await copilot.execute("crashy", "echo", {"text": "up"})).content[-1].text == "up"
    crashed = await copilot.execute("crashy", "crash")
    assert crashed.is_error
    assert "server 'crashy' crashed during" in text_of(crashed)

    again = await copilot.execute("crashy", "echo", {"text": "back again"})
    assert not again.is_error, text_of(again)
    note, answer = again.content
    assert answer.text == "back again"
    assert "Server 'crashy' was restarted since its last call: it crashed (exit code 7)" in note.text


async def test_a_call_hanging_past_its_timeout_is_reported(copilot: Copilot) -> None:
    warm = await copilot.execute("slow", "echo", {"text": "up"})
    assert text_of(warm) == "up"
    hung = await copilot.execute("slow", "sleep", {"seconds": 60})
    assert hung.is_error
    assert "did not finish the call to 'sleep' within 5s" in text_of(hung)
    after = await copilot.execute("slow", "echo", {"text": "alive"})
    note, answer = after.content
    assert answer.text == "alive"
    assert "Server 'slow' was restarted since its last call: the call to 'sleep' did not finish" in note.text


async def test_a_huge_result_is_capped_with_a_note(copilot: Copilot) -> None:
    result = await copilot.execute("alpha", "huge", {"size": 20_000})
    assert not result.is_error
    assert result.content[0].text == "x" * 5000
    note = result.content[-1].text
    assert "cut to the first 5,000 of 20,000 characters" in note


async def test_a_tool_error_passes_through_unchanged(copilot: Copilot) -> None:
    result = await copilot.execute("alpha", "fail", {"reason": "nope"})
    assert result.is_error
    assert "nope" in text_of(result)


async def test_the_copilots_secrets_do_not_reach_a_child(copilot: Copilot) -> None:
    secret = await copilot.execute("alpha", "get_env", {"name": SECRET_NAME})
    assert text_of(secret) == "<unset>"
    path = await copilot.execute("alpha", "get_env", {"name": "PATH"})
    assert text_of(path) not in ("", "<unset>")


async def test_destructive_tool_needs_a_confirm_token_bound_to_the_call(copilot: Copilot) -> None:
    first = await copilot.execute("alpha", "delete_item", {"item_id": "42"})
    assert first.is_error
    assert "Confirmation required" in text_of(first)
    token = structured(first)["confirm"]
    assert f'confirm="{token}"' in text_of(first)

    other = await copilot.execute("alpha", "delete_item", {"item_id": "43"}, confirm=token)
    assert other.is_error and "different call" in text_of(other)

    confirmed = await copilot.execute("alpha", "delete_item", {"item_id": "42"}, confirm=token)
    assert not confirmed.is_error, text_of(confirmed)
    assert text_of(confirmed) == "deleted 42"

    replay = await copilot.execute("alpha", "delete_item", {"item_id": "42"}, confirm=token)
    assert replay.is_error and "already used" in text_of(replay)


async def test_unannotated_tools_of_untrusted_servers_need_confirmation(copilot: Copilot) -> None:
    result = await copilot.execute("beta", "echo", {"text": "hi"})
    assert result.is_error
    assert "untrusted server" in text_of(result)


async def test_execute_tool_alias_behaves_like_execute(copilot: Copilot) -> None:
    result = await copilot.client.call_tool(
        "execute-tool", {"server_name": "alpha", "tool_name": "echo", "params": {"text": "paper"}}
    )
    assert text_of(result) == "paper"


async def test_disabled_and_broken_servers_give_clear_errors(copilot: Copilot) -> None:
    off = await copilot.execute("off", "echo", {"text": "x"})
    assert off.is_error
    assert "disabled" in text_of(off) and "needs an API key" in text_of(off)

    broken = await copilot.execute("broken", "echo", {"text": "x"})
    assert broken.is_error
    assert "'broken'" in text_of(broken) and "fixture configured to crash at start" in text_of(broken)


async def test_missing_arguments_are_reported_not_raised(copilot: Copilot) -> None:
    result = await copilot.client.call_tool("execute", {"tool_name": "echo"})
    assert result.is_error
    assert "'server_name' is required" in text_of(result)


async def test_trajectory_records_the_session(copilot: Copilot) -> None:
    await copilot.route("trajectory marker: add numbers")
    await copilot.execute("alpha", "echo", {"text": "trajectory marker"})
    await copilot.execute("alpha", "add", {"a": "x", "b": 1})
    await copilot.execute("trajectory-marker-server", "echo", {"text": "nowhere"})
    events = read_events(copilot.log_file)

    start = events[0]
    assert start.event == "session_start"
    assert start.task_id == TASK_ID and start.question == QUESTION
    assert start.client == {"name": "copilot-tests", "version": "1.0"}
    assert start.copilot_version
    assert start.index and start.index["model"] and start.index["tool_count"] > 0

    routes = [e for e in events if e.event == "route" and e.query == "trajectory marker: add numbers"]
    assert len(routes) == 1
    assert routes[0].results and routes[0].results[0].tool == "add"
    assert routes[0].latency_ms is not None and routes[0].latency_ms > 0
    assert routes[0].ranking == "hybrid"  # this module's copilot waits for the model (COPILOT_ROUTE_MODEL_WAIT)

    echo = [e for e in events if e.event == "execute" and e.params == {"text": "trajectory marker"}]
    assert len(echo) == 1
    assert echo[0].server == "alpha" and echo[0].tool == "echo"
    assert echo[0].result.content[0]["text"] == "trajectory marker"
    assert echo[0].error is None

    bad = [e for e in events if e.event == "execute" and e.params == {"a": "x", "b": 1}]
    assert bad[0].error_kind == "invalid_params"
    assert bad[0].result.is_error is True
    assert "missing required parameter" not in bad[0].error and "'a' should be integer" in bad[0].error

    unknown = [e for e in events if e.event == "execute" and e.server == "trajectory-marker-server"]
    assert unknown[0].error_kind == "unknown_server"
    assert "Unknown server" in unknown[0].error


async def test_stdout_carries_only_protocol_while_the_index_loads_and_searches(copilot: Copilot) -> None:
    # The copilot loads the embedding model, Chroma and jieba in its own process: none may print to
    # stdout. A hybrid answer means the model was in before this check (not still loading meanwhile).
    routed = await copilot.route("<tool_assistant>\nserver: 测试服务器\ntool: 把文字原样返回 echo\n</tool_assistant>")
    assert not routed.is_error, text_of(routed)
    assert structured(routed)["ranking"] == "hybrid", text_of(routed)
    assert copilot.stdout_junk == []
