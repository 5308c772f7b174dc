"""Between host and child through ``execute``: what is particular to streamable HTTP, in both eras.

Every relayed feature runs over HTTP too in ``test_relay_execute.py`` (one host per copilot); here
one copilot process (``python -m server --http``) serves several hosts in turn: the mcp SDK
``Client`` (2025-11-25 sessions and 2026-07-28 per-request clients) without the capabilities to
answer a child, cancelling through the SDK, and -- to close a request without any MCP
cancellation (issue 9 item 7) -- raw HTTP.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import anyio
import httpx2
import pytest
import pytest_asyncio

from tests.server.support.copilot_harness import (
    RunningClient,
    built_index,  # noqa: F401 -- session fixture
    copy_home,
    http_client_for,
    open_raw_session,
    read_events,
    start_http_copilot,
    text_of,
)
from tests.server.support.relay_harness import HTTP_TOKEN, Host, Progress, execute_args, relay_entry

pytestmark = [pytest.mark.asyncio(loop_scope="module"), pytest.mark.timeout(180)]

TOKEN = HTTP_TOKEN
MODES = ["legacy", "2026-07-28"]


@dataclass
class Served:
    url: str
    logs: Path
    root: Path

    async def client(self, mode: str, host: Host | None = None, **options: Any) -> RunningClient:
        if host is not None:
            options.update(host.client_options())
        running = RunningClient(http_client_for(self.url, token=TOKEN, mode=mode, **options))
        await running.start()
        return running

    def execute_events(self, tool: str) -> list[Any]:
        events = []
        for path in sorted(self.logs.glob("*.jsonl")):
            events += [e for e in read_events(path) if e.event == "execute" and e.tool == tool]
        return events


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def served(built_index: Path, tmp_path_factory: pytest.TempPathFactory) -> Any:  # noqa: F811
    root = tmp_path_factory.mktemp("relay-http")
    copy_home(built_index, root / "home")
    process = await start_http_copilot(
        root, TOKEN, {"relay": relay_entry("relay")}, COPILOT_PER_SERVER_CONCURRENCY="1", COPILOT_CALL_TIMEOUT="600"
    )
    assert process.url is not None
    try:
        yield Served(process.url, root / "logs", root)
    finally:
        await process.stop()


@pytest.mark.parametrize("mode", MODES)
async def test_a_host_without_the_capability_gets_the_child_a_clear_refusal(served: Served, mode: str) -> None:
    running = await served.client(mode)
    try:
        asked = await running.client.call_tool("execute", execute_args("relay", "ask_name"))
        sampled = await running.client.call_tool("execute", execute_args("relay", "summarize", {"text": "x"}))
        roots = await running.client.call_tool("execute", execute_args("relay", "roots"))
    finally:
        await running.stop()
    assert text_of(asked).startswith("refused: MCP Copilot cannot ask the user this question (elicitation)")
    assert "did not declare that it supports elicitation" in text_of(asked)
    assert text_of(sampled).startswith("refused: MCP Copilot cannot run this model request (sampling)")
    assert roots.structured_content == {"result": []}  # no roots known: an empty list, not an error


@pytest.mark.parametrize("mode", MODES)
async def test_a_cancelled_call_frees_its_slot_at_once(served: Served, mode: str) -> None:
    label = f"sdk-cancel-{mode}"
    running = await served.client(mode)
    try:
        progress = Progress()
        async with anyio.create_task_group() as group:

            async def blocked() -> None:
                await running.client.call_tool(
                    "execute", execute_args("relay", "block", {"label": label}), progress_callback=progress
                )

            group.start_soon(blocked)
            with anyio.fail_after(60):
                await progress.started.wait()
            # legacy: notifications/cancelled; 2026-07-28: the SDK aborts the request's POST
            group.cancel_scope.cancel()
        with anyio.fail_after(60):
            seen = await running.client.call_tool("execute", execute_args("relay", "cancelled", {"wait_for": label}))
    finally:
        await running.stop()
    assert label in seen.structured_content["result"]
    assert served.execute_events("block")[-1].error_kind == "cancelled"


async def test_a_closed_http_request_cancels_the_child_call_without_any_mcp_cancellation(served: Served) -> None:
    """Issue 9 item 7: a client that just goes away must not keep holding the server's slot."""
    label = "raw-http-close"
    async with httpx2.AsyncClient(timeout=60) as http:
        session = await open_raw_session(http, served.url, TOKEN, version="2025-11-25")
        call = {
            "jsonrpc": "2.0",
            "id": 2,
            "method": "tools/call",
            "params": {"name": "execute", "arguments": execute_args("relay", "block", {"label": label}), "_meta": {"progressToken": "p"}},
        }
        with anyio.fail_after(60):
            async with http.stream("POST", served.url, headers=session, json=call) as response:
                async for line in response.aiter_lines():
                    if line.startswith("data:") and "started" in json.loads(line[5:]).get("params", {}).get("message", ""):
                        break  # the child is blocked in its call: leave without a word
    running = await served.client("legacy")
    try:
        with anyio.fail_after(60):
            seen = await running.client.call_tool("execute", execute_args("relay", "cancelled", {"wait_for": label}))
    finally:
        await running.stop()
    assert label in seen.structured_content["result"]
    cancelled = served.execute_events("block")[-1]
    # Either wording: the transport may cancel the handler before the disconnect itself is seen.
    assert cancelled.error_kind == "cancelled" and "closed" in cancelled.error and "HTTP" in cancelled.error
