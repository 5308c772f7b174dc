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
from tests.server.copilot_harness import (
    built_index,  # noqa: F401 -- session fixture
    text_of,
)
from tests.server.relay_harness import Host, execute_args, host_project, relay_copilot
from tests.support.processes import hostile_entry

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
        {"evil": hostile_entry()},
        "stdio",
        host,
        mode="legacy",
        log_level="debug",
        COPILOT_CALL_TIMEOUT="120",
        COPILOT_TRUST_AUTO_APPROVE="evil",
    ) as (client, _):
        yield Flooded(client, host)


async def _execute(flooded: Flooded, tool: str, params: dict[str, Any], **options: Any) -> Any:
    with anyio.fail_after(120):
        result = await flooded.client.call_tool("execute", execute_args("evil", tool, params), **options)
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
