"""Between host and child through ``execute``, over stdio and streamable HTTP, in both protocol eras.

A real MCP host (the mcp SDK ``Client``, as a 2025-11-25 session client and as a 2026-07-28
session-less client) talks to the real copilot process -- started by the host over stdio, or
serving streamable HTTP (``python -m server --http``) -- which calls the real relay fixture server:
progress, cancellation, elicitation, sampling, roots, logging, structured output and the caps.
Each (transport, era) gets its own copilot, so what one host taught it (its roots, where a
``works_in: roots`` server runs) never answers for another. HTTP-only behaviour (several clients
on one copilot, a closed request) is in ``test_relay_http.py``.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import anyio
import jsonschema
import mcp_types as types
import pytest
import pytest_asyncio
from mcp import Client

from server.relay.call import MAX_QUESTION_CHARS
from tests.server.support.copilot_harness import (
    built_index,  # noqa: F401 -- session fixture
    fixture_entry,
    read_events,
    text_of,
)
from tests.server.support.relay_harness import (
    HOSTS,
    Host,
    Progress,
    Transport,
    execute_args,
    host_project,
    relay_copilot,
    relay_entry,
    slow_relay_entry,
)
from tests.support.processes import package_runner_script
from tests.support.sockets import SocketDirs

pytestmark = [pytest.mark.asyncio(loop_scope="module"), pytest.mark.timeout(180)]



@dataclass
class Relayed:
    client: Client
    host: Host
    transport: Transport
    era: str
    home: Path
    log_file: Path
    root: Path

    async def execute(self, server: str, tool: str, params: dict[str, Any] | None = None, **options: Any) -> Any:
        return await self.client.call_tool("execute", execute_args(server, tool, params), **options)

    def events(self, tool: str) -> list[Any]:
        return [e for e in read_events(self.log_file) if e.event == "execute" and e.tool == tool]


@pytest_asyncio.fixture(scope="module", loop_scope="module", params=HOSTS, ids=["-".join(h) for h in HOSTS])
async def relayed(request: pytest.FixtureRequest, built_index: Path, tmp_path_factory: pytest.TempPathFactory) -> Any:  # noqa: F811
    transport, era = request.param
    root = tmp_path_factory.mktemp(f"relay-{transport}-{era}")
    project = host_project(root)
    (project / "notes.txt").write_text("notes from the user's project", encoding="utf-8")
    entries = {
        "relay": relay_entry("relay"),
        "files": relay_entry("files", works_in="roots"),
        "alpha": fixture_entry("alpha"),
    }
    log_file = root / "trajectory.jsonl"
    host = Host(root=project)
    async with relay_copilot(
        root,
        built_index,
        entries,
        transport,
        host,
        mode=era,
        log_level="info",
        COPILOT_LOG_FILE=str(log_file),
        COPILOT_PER_SERVER_CONCURRENCY="1",
        COPILOT_CALL_TIMEOUT="600",
        COPILOT_MAX_RESULT_CHARS="2000",
        COPILOT_MAX_RESULT_BLOCKS="10",
        COPILOT_MAX_RESULT_BYTES="5000",
    ) as (client, home):
        yield Relayed(client, host, transport, era, home, log_file, project)


async def test_protocol_era_is_the_one_asked_for(relayed: Relayed) -> None:
    assert relayed.client.protocol_version == ("2025-11-25" if relayed.era == "legacy" else "2026-07-28")


async def test_child_progress_reaches_the_host_on_the_same_request(relayed: Relayed) -> None:
    progress = Progress()
    result = await relayed.execute("relay", "progress", {"steps": 3}, progress_callback=progress)
    assert text_of(result) == "done"
    assert progress.seen == [(1.0, 3.0, "step 1 of 3"), (2.0, 3.0, "step 2 of 3"), (3.0, 3.0, "step 3 of 3")]


async def test_child_questions_are_answered_by_the_host(relayed: Relayed) -> None:
    """Each question names the server that asks: the host sees only the copilot (before: the
    child's message alone)."""
    relayed.host.questions.clear()
    result = await relayed.execute("relay", "ask_name", {"question": "Who is asking?"})
    assert text_of(result) == "accepted: Ada"
    assert relayed.host.questions == ["Server 'relay' asks: Who is asking?"]

    both = await relayed.execute("relay", "ask_twice")
    assert text_of(both) == "accepted: Ada | accepted: Ada"
    assert relayed.host.questions[1:] == [
        "Server 'relay' asks: First question: your name?", "Server 'relay' asks: Second question: your name again?"
    ]
    [logged] = relayed.events("ask_twice")  # one trajectory entry per call, however many rounds
    assert logged.error is None and logged.result is not None


async def test_a_declined_question_reaches_the_child_as_declined(relayed: Relayed) -> None:
    relayed.host.elicit_answer = "decline"
    try:
        result = await relayed.execute("relay", "ask_name")
    finally:
        relayed.host.elicit_answer = "accept"
    assert text_of(result) == "decline"


async def test_a_very_long_question_is_cut_saying_so(relayed: Relayed) -> None:
    # Before: a child's 5 MB question reached the host whole, while its progress and logs were cut.
    relayed.host.questions.clear()
    result = await relayed.execute("relay", "ask_name", {"question": "Q" * (MAX_QUESTION_CHARS + 5000)})
    assert text_of(result) == "accepted: Ada"
    assert relayed.host.questions == [
        f"Server 'relay' asks: {'Q' * MAX_QUESTION_CHARS}…[5,000 characters cut by MCP Copilot]"
    ]


@pytest.mark.parametrize("asked", ["thisServer", "allServers"])
async def test_a_model_request_gets_none_of_the_hosts_context(relayed: Relayed, asked: str) -> None:
    # To the host, "this server" and "all servers" are the copilot: either would hand one child
    # the host's context from every server.
    result = await relayed.execute("relay", "summarize", {"text": "the relay works", "include_context": asked})
    assert text_of(result) == "sampled (host-model): a short summary"
    assert relayed.host.include_contexts[-1] == "none"


async def test_sampling_is_relayed_to_the_host(relayed: Relayed) -> None:
    result = await relayed.execute("relay", "summarize", {"text": "the relay works"})
    assert text_of(result) == "sampled (host-model): a short summary"
    assert relayed.host.prompts[-1] == "Summarize: the relay works"
    # The host sees only the copilot: the request says which server asks, before the child's own system prompt.
    assert relayed.host.system_prompts[-1] == (
        "This request comes from the tool server 'relay' (through MCP Copilot), not from the user.\n\nBe brief."
    )


async def test_roots_list_from_a_child_answers_the_hosts_roots(relayed: Relayed) -> None:
    result = await relayed.execute("relay", "roots")
    assert result.structured_content == {"result": [relayed.root.as_uri()]}


async def test_a_change_of_the_hosts_roots_reaches_running_children(relayed: Relayed) -> None:
    if relayed.era != "legacy":
        pytest.skip("notifications/roots/list_changed is a 2025-11-25 session notification")
    await relayed.execute("relay", "roots")  # the child runs and the host's roots are known
    asked = relayed.host.root_requests
    await relayed.client.send_roots_list_changed()  # pyright: ignore[reportDeprecated]
    with anyio.fail_after(60):
        changes = await relayed.execute("relay", "roots_changes", {"at_least": 1})
    assert changes.structured_content == {"result": 1}
    assert relayed.host.root_requests == asked + 1  # asked again, so children that re-list get the new answer


async def test_a_server_that_works_in_roots_runs_in_the_hosts_root(relayed: Relayed) -> None:
    # Before starting it the copilot asks the host for its roots: directly (legacy), or in the call's
    # input_required round trip (2026-07-28) when no host's roots are known yet.
    assert text_of(await relayed.execute("files", "cwd")) == str(relayed.root)
    read = await relayed.execute("files", "read_relative", {"path": "notes.txt"})
    assert text_of(read) == "notes from the user's project"


async def test_child_logs_reach_the_host_at_its_level_and_the_child_log(relayed: Relayed) -> None:
    if relayed.era == "legacy":
        await relayed.client.set_logging_level("info")  # pyright: ignore[reportDeprecated]
    relayed.host.logs.clear()
    assert text_of(await relayed.execute("relay", "log")) == "logged"
    received = [(log.level, log.logger, log.data) for log in relayed.host.logs]
    assert received == [
        ("info", "relay/fixture", "info message 0"),
        ("warning", "relay/fixture", "warning message 0"),
        ("error", "relay/fixture", "error message 0"),
    ]
    child_log = (relayed.home / "logs" / "children" / "relay.log").read_text(encoding="utf-8")
    for level in ("debug", "info", "warning", "error"):
        assert f"log {level} fixture: {level} message 0" in child_log


async def test_a_risky_call_is_confirmed_by_the_host(relayed: Relayed) -> None:
    relayed.host.questions.clear()
    result = await relayed.execute("alpha", "delete_item", {"item_id": "7"})  # destructiveHint: true
    assert not result.is_error and text_of(result) == "deleted 7"
    [question] = relayed.host.questions  # elicitation/create (legacy) or the input_required round trip
    assert "alpha/delete_item" in question


async def test_cancelling_execute_cancels_the_child_request_and_frees_its_slot(relayed: Relayed) -> None:
    label = f"{relayed.transport}-{relayed.era}"
    progress = Progress()
    async with anyio.create_task_group() as group:

        async def blocked_call() -> None:
            await relayed.execute("relay", "block", {"label": label}, progress_callback=progress)

        group.start_soon(blocked_call)
        with anyio.fail_after(60):
            await progress.started.wait()
        # the SDK sends notifications/cancelled for the execute request (2026-07-28 over HTTP: it
        # aborts the request's POST)
        group.cancel_scope.cancel()

    # One call per server at a time and a 600 s call timeout: without the relayed cancellation this
    # call would wait for the blocked one. The child saw the cancellation of its own request.
    with anyio.fail_after(60):
        result = await relayed.execute("relay", "cancelled", {"wait_for": label})
    assert label in result.structured_content["result"]
    [cancelled] = relayed.events("block")[-1:]
    # A 2026-07-28 host over HTTP cancels by closing the request: the log says so.
    why = "closed" if (relayed.transport, relayed.era) == ("http", "auto") else "the host cancelled it"
    assert cancelled.error_kind == "cancelled" and why in cancelled.error


async def test_structured_output_passes_through_and_matches_the_tools_schema(relayed: Relayed) -> None:
    result = await relayed.execute("relay", "weather", {"city": "Oslo"})
    assert result.structured_content == {"city": "Oslo", "temperature_c": 21.5, "conditions": "sunny"}
    assert json.loads(text_of(result)) == result.structured_content
    schema = await _output_schema(relayed, "weather")
    jsonschema.validate(result.structured_content, schema)


async def test_structured_output_over_the_cap_stays_valid_json_and_says_what_was_cut(relayed: Relayed) -> None:
    result = await relayed.execute("relay", "big_weather", {"city": "Oslo", "days": 300, "note_chars": 3000})
    kept = result.structured_content
    assert len(json.dumps(kept, ensure_ascii=False, separators=(",", ":"))) <= 2000
    assert kept["city"] == "Oslo" and 10 < len(kept["readings"]) < 300 and 100 < len(kept["note"]) < 3000
    jsonschema.validate(kept, await _output_schema(relayed, "big_weather"))
    note = result.content[-1].text
    assert "$.readings kept" in note and "of 300 items" in note and "$.note cut to" in note
    assert result.meta["mcp-copilot/cut"]["structured"]["cut"]


async def test_images_and_blocks_over_the_caps_are_cut_with_a_note(relayed: Relayed) -> None:
    image = await relayed.execute("relay", "image", {"size": 8000})
    assert image.content[0].type == "text" and "image (image/png) of 8,000 bytes dropped" in image.content[0].text
    assert "COPILOT_MAX_RESULT_BYTES" in image.content[-1].text
    small = await relayed.execute("relay", "image", {"size": 400})
    assert small.content[0].type == "image" and len(small.content) == 1

    many = await relayed.execute("relay", "blocks", {"count": 25})
    assert [block.text for block in many.content[:10]] == [f"block {i}" for i in range(10)]
    assert len(many.content) == 11 and "15 text dropped" in many.content[-1].text


async def test_the_2026_round_trip_carries_the_childs_question_as_input_requests(relayed: Relayed) -> None:
    if relayed.era == "legacy":
        pytest.skip("the input_required round trip exists from 2026-07-28 on")
    session = relayed.client.session
    arguments = execute_args("relay", "ask_name", {"question": "Name for the round trip?"})
    first = await session.call_tool("execute", arguments, allow_input_required=True)
    assert isinstance(first, types.InputRequiredResult)
    [(key, request)] = first.input_requests.items()
    assert isinstance(request, types.ElicitRequest) and request.params.message == "Server 'relay' asks: Name for the round trip?"
    answer = types.ElicitResult(action="accept", content={"name": "Grace"})
    final = await session.call_tool(
        "execute", arguments, input_responses={key: answer}, request_state=first.request_state, allow_input_required=True
    )
    assert isinstance(final, types.CallToolResult) and text_of(final) == "accepted: Grace"


async def _asked_then_go(
    relayed: Relayed, socket_dirs: SocketDirs, tool: str, reply: bytes | None = None, **options: Any
) -> tuple[dict[str, Any], types.InputRequiredResult]:
    """A 2026-07-28 call of a fixture ``tool`` that asks a question and then waits for ``go`` on its
    signal socket: sent only once the host got ``input_required``, so what the child does next
    happens between rounds; ``reply`` is what the child says back once it did it."""
    if relayed.era == "legacy":
        pytest.skip("the input_required round trip exists from 2026-07-28 on")
    signal = socket_dirs.mktemp("sock") / "signal.sock"
    arguments = execute_args("relay", tool, {"signal": str(signal)})
    async with await anyio.create_unix_listener(signal) as listener:
        with anyio.fail_after(60):
            asked = await relayed.client.session.call_tool("execute", arguments, allow_input_required=True, **options)
            assert isinstance(asked, types.InputRequiredResult)
            async with await listener.accept() as stream:
                await stream.send(b"go\n")
                if reply is not None:
                    assert await stream.receive() == reply
    return arguments, asked


async def test_what_the_child_sends_between_rounds_reaches_the_hosts_retry(
    relayed: Relayed, socket_dirs: SocketDirs
) -> None:
    session = relayed.client.session
    first, retry = Progress(), Progress()
    # The child reports and logs after "go", and says "sent" once the copilot has read both.
    arguments, asked = await _asked_then_go(
        relayed, socket_dirs, "ask_between", b"sent\n", progress_callback=first
    )
    logs_before = len(relayed.host.logs)
    [key] = asked.input_requests
    with anyio.fail_after(60):
        final = await session.call_tool(
            "execute",
            arguments,
            progress_callback=retry,
            input_responses={key: types.ElicitResult(action="accept", content={"name": "Grace"})},
            request_state=asked.request_state,
            allow_input_required=True,
        )
    assert isinstance(final, types.CallToolResult) and text_of(final) == "accepted: Grace"
    # On the retry's own progress token, before its result (the host drops progress after it); before
    # the fix it went to the first round's token, which the host had finished with.
    assert retry.seen == [(1.0, 2.0, "between rounds"), (2.0, 2.0, "answered")]
    assert first.seen == []
    # Log messages may trail the result (the host handles them in tasks of their own).
    await relayed.host.wait_for_logs(logs_before + 1)
    received = [(log.level, log.logger, log.data) for log in relayed.host.logs[logs_before:]]
    assert received == [("info", "relay/fixture", "between rounds")]


async def test_a_retry_with_a_progress_token_gets_the_childs_progress_though_the_first_round_had_none(
    relayed: Relayed, socket_dirs: SocketDirs
) -> None:
    retry = Progress()
    # The first round asks for no progress; the child reports and logs after "go", then says "sent".
    arguments, asked = await _asked_then_go(relayed, socket_dirs, "ask_between", b"sent\n")
    logs_before = len(relayed.host.logs)
    [key] = asked.input_requests
    with anyio.fail_after(60):
        final = await relayed.client.session.call_tool(
            "execute",
            arguments,
            progress_callback=retry,
            input_responses={key: types.ElicitResult(action="accept", content={"name": "Lin"})},
            request_state=asked.request_state,
            allow_input_required=True,
        )
    assert isinstance(final, types.CallToolResult) and text_of(final) == "accepted: Lin"
    # Before, the child's request carried no progress token (the first round had none), so the
    # child could report nothing to any later round.
    assert retry.seen == [(1.0, 2.0, "between rounds"), (2.0, 2.0, "answered")]
    await relayed.host.wait_for_logs(logs_before + 1)  # not left to trail into the next test


async def test_a_call_the_child_ends_between_rounds_gives_its_result_to_the_hosts_retry(
    relayed: Relayed, socket_dirs: SocketDirs
) -> None:
    session = relayed.client.session
    # After "go" the child gives up on its question and returns.
    arguments, asked = await _asked_then_go(relayed, socket_dirs, "give_up_between")
    # The call has ended, with no round of the host waiting, once its trajectory record is written.
    with anyio.fail_after(60):
        while not relayed.events("give_up_between"):
            await anyio.sleep(0.05)
    [event] = relayed.events("give_up_between")
    assert event.error_kind is None
    [key] = asked.input_requests
    with anyio.fail_after(60):
        final = await session.call_tool(
            "execute",
            arguments,
            input_responses={key: types.ElicitResult(action="accept", content={"name": "Too late"})},
            request_state=asked.request_state,
            allow_input_required=True,
        )
    # Before, the finished call was forgotten and the retry got "no longer waits for an answer".
    assert isinstance(final, types.CallToolResult) and not final.is_error
    assert text_of(final) == "gave up waiting"
    assert len(relayed.events("give_up_between")) == 1  # the retry is not a second call


async def _output_schema(relayed: Relayed, tool: str) -> dict[str, Any]:
    """The tool's own output schema, as the fixture server declares it (built in this process)."""
    from tests.fixtures.relay_server import build

    listed = {t.name: t for t in await build("schema-probe").list_tools()}
    schema = listed[tool].output_schema
    assert schema is not None
    return schema


# -- COPILOT_ROOTS and an unanswered 2026-07-28 question (their own copilot) ------------------------


@pytest.mark.parametrize("transport", ["stdio", "http"])
async def test_roots_setting_and_unanswered_questions(built_index: Path, tmp_path: Path, transport: Transport) -> None:  # noqa: F811
    workspace = tmp_path / "workspace"
    workspace.mkdir()
    (workspace / "task.txt").write_text("the task's input", encoding="utf-8")
    entries = {"relay": relay_entry("relay"), "files": relay_entry("files", works_in="roots")}
    log_file = tmp_path / "trajectory.jsonl"
    host = Host(root=tmp_path)
    async with relay_copilot(
        tmp_path,
        built_index,
        entries,
        transport,
        host,
        COPILOT_LOG_FILE=str(log_file),
        COPILOT_ROOTS=str(workspace),
        COPILOT_INPUT_TIMEOUT="1",
        COPILOT_PER_SERVER_CONCURRENCY="1",
        COPILOT_CALL_TIMEOUT="600",
        mode="auto",
    ) as (client, _):
        # COPILOT_ROOTS wins over the host's roots, for roots/list and for where 'works_in: roots' servers run.
        roots = await client.call_tool("execute", execute_args("relay", "roots"))
        assert roots.structured_content == {"result": [workspace.as_uri()]} and host.root_requests == 0
        assert text_of(await client.call_tool("execute", execute_args("files", "cwd"))) == str(workspace)
        read = await client.call_tool("execute", execute_args("files", "read_relative", {"path": "task.txt"}))
        assert text_of(read) == "the task's input"

        # A question the host never answers: after COPILOT_INPUT_TIMEOUT the child's request is cancelled,
        # its slot freed, the call logged as cancelled, and a late answer told that the call is gone.
        arguments = execute_args("relay", "ask_name", {"question": "Never answered?"})
        first = await client.session.call_tool("execute", arguments, allow_input_required=True)
        assert isinstance(first, types.InputRequiredResult)
        with anyio.fail_after(60):
            gone = await client.call_tool("execute", execute_args("relay", "cancelled", {"wait_for": "ask: Never answered?"}))
        assert "ask: Never answered?" in gone.structured_content["result"]
        [key] = first.input_requests
        late = await client.session.call_tool(
            "execute",
            arguments,
            input_responses={key: types.ElicitResult(action="accept", content={"name": "Late"})},
            request_state=first.request_state,
            allow_input_required=True,
        )
        assert isinstance(late, types.CallToolResult) and late.is_error
        assert "no longer waits for an answer" in text_of(late)
    events = [e for e in read_events(log_file) if e.event == "execute" and e.tool == "ask_name"]
    assert [e.error_kind for e in events] == ["cancelled", "input_expired"]
    assert "did not answer the server's question within 1s" in events[0].error


# -- a call that waits for its server: its first start, a call slot (their own copilot) ----------------


@pytest.mark.parametrize(("transport", "era"), HOSTS, ids=["-".join(h) for h in HOSTS])
async def test_a_call_waiting_for_its_server_sends_the_host_progress_saying_why(
    built_index: Path,  # noqa: F811
    tmp_path: Path,
    transport: Transport,
    era: str,
) -> None:
    """A host that resets its timeout on progress keeps waiting through a first ``npx`` start (minutes).

    The copilot's notes are negative (-1, -1/2, ...), so the child's own progress passes unchanged
    after them, a first 0 included; a call that does not wait gets none. Both servers start once
    their gate file exists: 'alpha' through "npx" (a first start that installs), and in the index
    (the call is checked against its record, then starts it); 'slowpoke' is a plain command the
    index does not know (checking the call starts it).
    """
    gates = {name: tmp_path / f"{name}-ready" for name in ("alpha", "slowpoke")}
    entries = {
        "alpha": {"command": str(package_runner_script(tmp_path)), "args": [str(gates["alpha"]), "--name", "alpha"]},
        "slowpoke": slow_relay_entry("slowpoke", gates["slowpoke"]),
    }
    host = Host(root=host_project(tmp_path))
    async with relay_copilot(
        tmp_path,
        built_index,
        entries,
        transport,
        host,
        mode=era,
        COPILOT_WAIT_PROGRESS_EVERY="0.05",
        COPILOT_PER_SERVER_CONCURRENCY="1",
        COPILOT_CALL_TIMEOUT="600",
    ) as (client, _):
        results: dict[str, Any] = {}

        async def execute(server: str, tool: str, params: dict[str, Any], progress: Progress) -> None:
            arguments = execute_args(server, tool, params)
            results[str(params)] = await client.call_tool("execute", arguments, progress_callback=progress)

        async def block(label: str, progress: Progress, scope: anyio.CancelScope) -> None:
            with scope:
                await execute("slowpoke", "block", {"label": label}, progress)

        echoed = Progress()
        with anyio.fail_after(60):
            async with anyio.create_task_group() as group:
                group.start_soon(execute, "alpha", "echo", {"text": "installed"}, echoed)
                await echoed.waited.wait()
                gates["alpha"].touch()
        assert text_of(results[str({"text": "installed"})]) == "installed"
        installing = (
            r"Server 'alpha' is starting: its first start through npx downloads and installs its package "
            r"\(SECONDS s so far; this call waits up to 60 s of it, the install may take up to 300 s\)\."
        )
        assert echoed.after_waiting(installing) == []
        quick = Progress()
        await execute("alpha", "echo", {"text": "again"}, quick)
        assert quick.seen == []  # a running server with a free call slot: no wait, no note

        # The first call waits for the start; the second, for the one call slot the first holds.
        first, second = Progress(), Progress()
        first_scope, second_scope = anyio.CancelScope(), anyio.CancelScope()
        with anyio.fail_after(60):
            async with anyio.create_task_group() as group:
                group.start_soon(block, "first", first, first_scope)
                await first.waited.wait()
                gates["slowpoke"].touch()
                await first.started.wait()
                group.start_soon(block, "second", second, second_scope)
                await second.waited.wait()
                first_scope.cancel()
                await second.started.wait()
                second_scope.cancel()
        starting = r"Server 'slowpoke' is starting \(SECONDS s so far, up to 60 s\)\."
        assert first.after_waiting(starting) == [(0.0, None, "started first")]
        busy = r"Server 'slowpoke' is busy: this call waits for one of its 1 call slot\(s\) \(SECONDS s so far, up to 600 s\)\."
        assert second.after_waiting(busy) == [(0.0, None, "started second")]
