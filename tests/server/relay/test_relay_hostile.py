"""A child that floods its host through ``execute``: the real copilot process between a real host
(the mcp SDK ``Client``, a 2025-11-25 session over stdio) and the hostile fixture child.

What reaches the host is bounded: progress and log texts are cut (saying how much), at most
``MAX_WAITING_QUESTIONS`` of a call's questions wait for the host at once (more are refused at
once), and the host is asked for its roots once, however often the child asks for them.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import anyio
import mcp_types as types
import pytest
import pytest_asyncio
from mcp import Client

from server.relay.call import MAX_LOG_CHARS, MAX_PROGRESS_CHARS, MAX_WAITING_QUESTIONS, PROGRESS_BURST
from tests.server.support.copilot_harness import (
    built_index,  # noqa: F401 -- session fixture
    text_of,
)
from tests.server.support.relay_harness import Host, execute_args, host_project, relay_copilot, relay_entry
from tests.support.processes import hostile_entry
from tests.support.sockets import SocketDirs

pytestmark = [pytest.mark.asyncio(loop_scope="module"), pytest.mark.timeout(180)]

#: Child requests sent at once by one call in the flood tests.
FLOOD = 40


class FloodedHost(Host):
    """A host whose sampling answers wait until the test releases them, counting how many wait at once."""

    def __init__(self, root: Path) -> None:
        super().__init__(root=root)
        self.waiting = 0
        self.peak = 0
        self.release = anyio.Event()
        #: When set, questions (elicitation) wait for it; ``questioned`` is set when one arrives.
        self.hold_questions: anyio.Event | None = None
        self.questioned = anyio.Event()

    async def elicitation(self, context: Any, params: types.ElicitRequestParams) -> types.ElicitResult:
        self.questioned.set()
        if self.hold_questions is not None:
            await self.hold_questions.wait()
        return await super().elicitation(context, params)

    async def sampling(self, context: Any, params: types.CreateMessageRequestParams) -> types.CreateMessageResult:
        self.waiting += 1
        self.peak = max(self.peak, self.waiting)
        if self.waiting > MAX_WAITING_QUESTIONS:
            self.release.set()  # the copilot let too many through: nothing to wait for
        try:
            await self.release.wait()
        finally:
            self.waiting -= 1
        return await super().sampling(context, params)


class Flooded:
    def __init__(self, client: Client, host: FloodedHost) -> None:
        self.client = client
        self.host = host


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def flooded(built_index: Path, tmp_path_factory: pytest.TempPathFactory) -> Any:  # noqa: F811
    root = tmp_path_factory.mktemp("relay-hostile")
    host = FloodedHost(host_project(root))
    async with relay_copilot(
        root,
        built_index,
        {"evil": hostile_entry(), "relay": relay_entry("relay")},
        "stdio",
        host,
        mode="legacy",
        log_level="debug",
        COPILOT_CALL_TIMEOUT="120",
        COPILOT_TRUST_AUTO_APPROVE="evil",
    ) as (client, _):
        yield Flooded(client, host)


async def _execute(flooded: Flooded, tool: str, params: dict[str, Any], server: str = "evil", **options: Any) -> Any:
    with anyio.fail_after(120):
        result = await flooded.client.call_tool("execute", execute_args(server, tool, params), **options)
    assert not result.is_error, text_of(result)
    return result


async def test_long_progress_texts_are_cut_before_the_host(flooded: Flooded) -> None:
    seen: list[str | None] = []

    async def progress(value: float, total: float | None, message: str | None) -> None:
        seen.append(message)

    # As many as a call may send at once: every one reaches the host, none merged into a later one.
    count = PROGRESS_BURST
    await _execute(flooded, "chatter", {"kind": "progress", "count": count, "size": 50_000}, progress_callback=progress)
    assert len(seen) == count
    for number, message in enumerate(seen):
        assert message is not None and message.startswith(f"{number} xxx")
        cut = 50_000 + len(f"{number} ") - MAX_PROGRESS_CHARS
        assert message.endswith(f"…[{cut:,} characters cut by MCP Copilot]")
        assert len(message) < MAX_PROGRESS_CHARS + 100


async def test_long_log_messages_are_cut_before_the_host(flooded: Flooded) -> None:
    before = len(flooded.host.logs)
    await _execute(flooded, "chatter", {"kind": "log", "count": 5, "size": 200_000})
    await flooded.host.wait_for_logs(before + 5, timeout=30)
    for params in flooded.host.logs[before:]:
        assert isinstance(params.data, str) and len(params.data) < MAX_LOG_CHARS + 100
        assert params.data.endswith("characters cut]") and params.logger == "evil"


async def test_a_flood_of_sampling_requests_reaches_the_host_a_few_at_a_time(flooded: Flooded) -> None:
    host = flooded.host

    async def progress(value: float, total: float | None, message: str | None) -> None:
        # The child reports each answer: once all but the waiting ones are answered (refused), let
        # the host answer those.
        if value >= FLOOD - MAX_WAITING_QUESTIONS:
            host.release.set()

    result = await _execute(
        flooded, "ask", {"method": "sampling/createMessage", "count": FLOOD, "size": 10}, progress_callback=progress
    )
    report = json.loads(text_of(result))
    assert host.peak == MAX_WAITING_QUESTIONS  # before: all 40 at once
    assert report["answered"] == FLOOD and report["results"] == MAX_WAITING_QUESTIONS
    [(refusal, refused)] = report["errors"].items()
    assert refused == FLOOD - MAX_WAITING_QUESTIONS
    assert f"relays at most {MAX_WAITING_QUESTIONS} at once" in refusal


async def test_the_host_is_asked_for_its_roots_once_however_often_the_child_asks(flooded: Flooded) -> None:
    asked_before = flooded.host.root_requests
    for _ in range(2):
        report = json.loads(text_of(await _execute(flooded, "ask", {"method": "roots/list", "count": FLOOD})))
        assert report == {"answered": FLOOD, "results": FLOOD, "errors": {}}
    assert flooded.host.root_requests - asked_before <= 1  # before: once per request (80)


async def test_a_question_outlives_an_older_call_of_the_same_host_that_ends_first(
    flooded: Flooded, socket_dirs: SocketDirs
) -> None:
    # Two calls of one host on one child: the question of the newer one was filed under the older
    # one, whose end withdrew it -- the user answered, and the child got "the call ... has ended".
    host = flooded.host
    host.hold_questions, host.questioned = anyio.Event(), anyio.Event()
    signal = socket_dirs.mktemp("sock") / "signal.sock"
    results: dict[str, str] = {}
    older_done = anyio.Event()

    async def run(name: str, tool: str, params: dict[str, Any]) -> None:
        results[name] = text_of(await _execute(flooded, tool, params, server="relay"))
        if name == "older":
            older_done.set()

    try:
        async with await anyio.create_unix_listener(signal) as listener:
            with anyio.fail_after(60):
                async with anyio.create_task_group() as group:
                    group.start_soon(run, "older", "wait_signal", {"signal": str(signal)})
                    async with await listener.accept() as stream:  # the older call is running in the child
                        group.start_soon(run, "newer", "ask_name", {"question": "Still there?"})
                        await host.questioned.wait()
                        await stream.send(b"go\n")
                        await older_done.wait()
                    host.hold_questions.set()  # the user answers once the older call is over
    finally:
        host.hold_questions = None
    assert results == {"older": "released", "newer": "accepted: Ada"}
