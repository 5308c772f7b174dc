"""A host's ``prompts/get``, ``resources/read`` and ``completion/complete`` relayed as ``execute``
relays a call.

While the request waits for its child to start, the host hears why (progress, as for a call);
then the child's own progress, log messages and questions reach the host of that request. Before,
a child's progress for the host's token was dropped, its log messages went nowhere and its
questions were refused ("relays only during a tool call"). A real copilot process over stdio, a
real MCP client of each era and the real relay fixture child, crawled into a real index; the child
starts only once the test creates its gate file (``tests/fixtures/slow_start_server.py``).
"""

from __future__ import annotations

from pathlib import Path

import anyio
import mcp_types as types
import pytest
from mcp import Client

from tests.server.support.copilot_harness import (
    built_index,  # noqa: F401 -- session fixture
    copy_home,
    crawl_into,
    write_servers,
)
from tests.server.support.relay_harness import Host, Progress, relay_copilot, slow_relay_entry

pytestmark = [pytest.mark.asyncio(loop_scope="module"), pytest.mark.timeout(180)]
WAIT = 60.0


@pytest.fixture(scope="module")
def crawled(built_index: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:  # noqa: F811
    """A home with the test index plus the relay child's tools, prompts and resources, crawled for real."""
    root = tmp_path_factory.mktemp("served-relay")
    gate = root / "ready"
    gate.touch()
    home = copy_home(built_index, root / "home")
    crawl_into(home, write_servers(root / "servers.json", {"relay": slow_relay_entry("relay", gate)}), root)
    return home


async def get_prompt(client: Client, name: str, progress: Progress | None = None, **arguments: str) -> str:
    request = types.GetPromptRequest(params=types.GetPromptRequestParams(name=name, arguments=arguments))
    result = await client.session.send_request(request, types.GetPromptResult, progress_callback=progress)
    return str(result.messages[0].content.text)  # type: ignore[union-attr]


async def complete(client: Client, value: str, progress: Progress | None = None) -> list[str]:
    """The completions of ``relay__counted``'s ``steps`` argument starting with ``value`` (sent as a
    request of its own: ``Client.complete`` takes no progress callback)."""
    request = types.CompleteRequest(
        params=types.CompleteRequestParams(
            ref=types.PromptReference(name="relay__counted"), argument=types.CompletionArgument(name="steps", value=value)
        )
    )
    result = await client.session.send_request(request, types.CompleteResult, progress_callback=progress)
    return result.completion.values


@pytest.mark.parametrize("mode", ["legacy", "auto"])
async def test_prompt_resource_and_completion_requests_get_the_wait_the_childs_progress_logs_and_questions(
    crawled: Path, tmp_path: Path, mode: str
) -> None:
    gate = tmp_path / "ready"  # not there yet: the child's start waits for it
    host = Host(root=tmp_path)
    async with relay_copilot(
        tmp_path, crawled, {"relay": slow_relay_entry("relay", gate)}, "stdio", host, mode=mode, COPILOT_WAIT_PROGRESS_EVERY="0.05"
    ) as (client, _):
        prompted, texts = Progress(), []

        async def prompt() -> None:
            texts.append(await get_prompt(client, "relay__counted", prompted, steps="2"))

        with anyio.fail_after(WAIT):
            async with anyio.create_task_group() as group:
                group.start_soon(prompt)
                await prompted.waited.wait()  # the host hears why its request waits
                gate.touch()
        assert texts == ["prompt counted 2 steps"]
        starting = r"Server 'relay' is starting \(SECONDS s so far, up to 60 s\)\."
        assert prompted.after_waiting(starting) == [(1.0, 2.0, "prompt step 1 of 2"), (2.0, 2.0, "prompt step 2 of 2")]

        read = Progress()
        request = types.ReadResourceRequest(params=types.ReadResourceRequestParams(uri="copilot://relay/relay://counted/3"))
        result = await client.session.send_request(request, types.ReadResourceResult, progress_callback=read)
        assert [content.text for content in result.contents] == ["resource counted 3 steps"]  # type: ignore[union-attr]
        assert read.seen == [(float(step), 3.0, f"resource step {step} of 3") for step in (1, 2, 3)]

        completed = Progress()
        assert await complete(client, "4", completed) == ["41", "42", "43"]
        assert completed.seen == [(1.0, 2.0, "completion step 1 of 2"), (2.0, 2.0, "completion step 2 of 2")]

        if mode == "legacy":
            await client.set_logging_level("info")
        greeting = await get_prompt(client, "relay__greeting")
        (offered,) = await complete(client, "ask")
    if mode == "legacy":  # the host that sent the request is asked, and gets its log messages
        assert (greeting, offered) == ("Hello (accepted: Ada)", "accepted: Ada")
        assert host.questions == [
            "Server 'relay' asks: Which name should the greeting use?",
            "Server 'relay' asks: Which value should the completion offer?",
        ]
        assert [(log.level, log.logger, log.data) for log in host.logs] == [
            ("info", "relay", "greeting: asking for the name"),
            ("info", "relay", "completion: asking for the value"),
        ]
    else:  # questions go back to a 2026-07-28 host only in execute's input_required results
        for answer in (greeting.removeprefix("Hello ("), offered):
            assert answer.startswith("refused: MCP Copilot cannot ask the user this question (elicitation) for ")
            assert "speaks MCP 2026-07-28, where the copilot passes a server's questions on only in execute's" in answer
        assert host.questions == []
