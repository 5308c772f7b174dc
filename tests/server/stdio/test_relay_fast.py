"""The stdio fast path (``server.stdio.fast``, ``index.children.direct``) against the SDK path.

Two real copilot processes serve the same servers over stdio: one as shipped (``execute`` served
beside the SDK's dispatcher where that is equivalent), one with ``COPILOT_FAST_RELAY=false`` (every
message through the SDK). A real host (the mcp SDK ``Client``, 2025-11-25 session and 2026-07-28
per-request, neither declaring elicitation, sampling or roots) makes the same calls to both, and
the answers must be the same -- results, structured content, errors, cut results, progress, a
hostile child's broken replies, a crash and a hang -- while the copilot's own log shows which
path served each call. A host that can answer questions keeps its 2026-07-28 calls on the SDK
path; a 2025-11-25 host's fast call still relays the child's question to it.
"""

from __future__ import annotations

import json
import re
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import anyio
import pytest
import pytest_asyncio
from mcp import Client

from tests.server.support.copilot_harness import (
    EXECUTE_ONLY,
    RunningClient,
    built_index,  # noqa: F401 -- session fixture
    copilot_env,
    copy_home,
    fixture_entry,
    raw_stdio_answers,
    read_events,
    stdio_client_for,
    text_of,
    write_servers,
)
from tests.server.support.relay_harness import Host, Progress, execute_args, relay_entry
from tests.support.processes import hostile_entry

pytestmark = [pytest.mark.asyncio(loop_scope="module"), pytest.mark.timeout(180)]

FAST_LINE = re.compile(r"answered execute request (\S+) on the fast path")


@dataclass
class Copilot:
    client: Client
    stderr: Path
    log_file: Path

    async def execute(self, server: str, tool: str, params: dict[str, Any] | None = None, **options: Any) -> Any:
        return await self.client.call_tool("execute", execute_args(server, tool, params), **options)

    def fast_ids(self) -> list[str]:
        return FAST_LINE.findall(self.stderr.read_text(encoding="utf-8"))

    def events(self, tool: str) -> list[Any]:
        return [e for e in read_events(self.log_file) if e.event == "execute" and e.tool == tool]


@dataclass
class Pair:
    fast: Copilot
    sdk: Copilot
    era: str

    async def both(
        self, server: str, tool: str, params: dict[str, Any] | None = None, *, together: bool = False
    ) -> tuple[Any, Any]:
        """The same call through both copilots; the fast one must have served it on its fast path.
        ``together``: both at once (a call that waits out a timeout need not be waited for twice)."""
        before = len(self.fast.fast_ids())
        results: dict[str, Any] = {}

        async def call(name: str, copilot: Any) -> None:
            results[name] = await copilot.execute(server, tool, params)

        if together:
            async with anyio.create_task_group() as group:
                group.start_soon(call, "fast", self.fast)
                group.start_soon(call, "sdk", self.sdk)
        else:
            await call("fast", self.fast)
            await call("sdk", self.sdk)
        assert len(self.fast.fast_ids()) == before + 1, f"{tool}: not served on the fast path"
        assert self.sdk.fast_ids() == []
        return results["fast"], results["sdk"]


def _servers(root: Path) -> Path:
    return write_servers(
        root / "servers.json",
        {
            "relay": relay_entry("relay"),
            "alpha": fixture_entry("alpha"),
            "evil": hostile_entry(),
            "slow": fixture_entry("slow", timeout=5),
        },
    )


@asynccontextmanager
async def _copilot(root: Path, home: Path, servers: Path, era: str, **options: Any) -> AsyncIterator[Copilot]:
    """A real copilot over stdio (debug log: it names each call served on the fast path) and its client."""
    log_file = root / "trajectory.jsonl"
    stderr = root / "copilot.stderr.log"
    settings = {key: value for key, value in options.items() if key.startswith("COPILOT_")}
    client_options = {key: value for key, value in options.items() if not key.startswith("COPILOT_")}
    env = copilot_env(
        home,
        **EXECUTE_ONLY,
        COPILOT_LOG_FILE=str(log_file),
        COPILOT_LOG_LEVEL="DEBUG",
        COPILOT_PER_SERVER_CONCURRENCY="1",
        COPILOT_MAX_RESULT_CHARS="2000",
        COPILOT_MAX_RESULT_BLOCKS="10",
        COPILOT_MAX_RESULT_BYTES="5000",
        **settings,
    )
    running = RunningClient(stdio_client_for(servers, env, stderr, mode=era, **client_options))
    try:
        yield Copilot(await running.start(), stderr, log_file)
    finally:
        await running.stop()


@pytest_asyncio.fixture(scope="module", loop_scope="module", params=["legacy", "auto"])
async def pair(request: pytest.FixtureRequest, built_index: Path, tmp_path_factory: pytest.TempPathFactory) -> Any:  # noqa: F811
    era = request.param
    roots = {name: tmp_path_factory.mktemp(f"fast-{era}-{name}") for name in ("fast", "sdk")}
    homes = {name: copy_home(built_index, root / "home") for name, root in roots.items()}
    async with (
        _copilot(roots["fast"], homes["fast"], _servers(roots["fast"]), era) as fast,
        _copilot(roots["sdk"], homes["sdk"], _servers(roots["sdk"]), era, COPILOT_FAST_RELAY="false") as sdk,
    ):
        yield Pair(fast, sdk, era)


def _same(fast: Any, sdk: Any) -> None:
    assert fast.model_dump(mode="json") == sdk.model_dump(mode="json")


async def test_results_are_the_same_on_both_paths(pair: Pair) -> None:
    calls: list[tuple[str, str, dict[str, Any] | None]] = [
        ("relay", "echo", {"text": "hello ünïcode"}),
        ("relay", "weather", {"city": "Paris"}),  # structured content
        ("relay", "big_weather", {"city": "Oslo", "days": 60, "note_chars": 200}),  # structured, over the cap
        ("relay", "image", {"size": 9000}),  # binary over the cap
        ("relay", "blocks", {"count": 30}),  # blocks over the cap
        ("alpha", "add", {"a": 2, "b": 3}),
        ("alpha", "fail", {"reason": "broken"}),  # the tool's own isError result
        ("alpha", "add", {"a": "two"}),  # invalid params: the copilot's message
        ("alpha", "ad", {"a": 1, "b": 2}),  # unknown tool: suggestions
        ("alpah", "add", {"a": 1, "b": 2}),  # unknown server: suggestions
    ]
    for server, tool, params in calls:
        fast, sdk = await pair.both(server, tool, params)
        _same(fast, sdk)
    assert "Did you mean" in text_of(fast)


async def test_a_hostile_childs_broken_replies_fail_the_call_the_same_way(pair: Pair) -> None:
    for kind in ("surrogate", "wrong_id", "deep", "prefix", "not_jsonrpc"):
        fast, sdk = await pair.both("evil", "bad_reply", {"kind": kind})
        _same(fast, sdk)
    fast, sdk = await pair.both("evil", "echo", {"text": "still answering"})
    _same(fast, sdk)
    assert text_of(fast) == "still answering"


async def test_a_crashing_and_a_hanging_child_fail_the_call_the_same_way(pair: Pair) -> None:
    # Each call waits on a child starting or timing out: the two copilots are asked at once.
    fast, sdk = await pair.both("alpha", "crash", {}, together=True)
    assert fast.is_error and "crashed" in text_of(fast)
    # The messages name the exit; the rest is the same text with that copilot's own log path.
    assert text_of(fast).split(". ")[0] == text_of(sdk).split(". ")[0]
    fast, sdk = await pair.both("alpha", "echo", {"text": "restarted"}, together=True)
    _same(fast, sdk)
    # Started and listed first, so that the limit applies to the call alone.
    fast, sdk = await pair.both("slow", "sleep", {"seconds": 0}, together=True)
    _same(fast, sdk)
    assert not fast.is_error
    fast, sdk = await pair.both("slow", "sleep", {"seconds": 60}, together=True)  # over its 5 s timeout
    _same(fast, sdk)
    assert fast.is_error and "did not finish the call to 'sleep' within 5s" in text_of(fast)


async def test_progress_is_relayed_on_the_fast_path(pair: Pair) -> None:
    seen: dict[str, Progress] = {"fast": Progress(), "sdk": Progress()}
    before = len(pair.fast.fast_ids())
    fast = await pair.fast.execute("relay", "progress", {"steps": 3}, progress_callback=seen["fast"])
    sdk = await pair.sdk.execute("relay", "progress", {"steps": 3}, progress_callback=seen["sdk"])
    assert len(pair.fast.fast_ids()) == before + 1
    _same(fast, sdk)
    assert seen["fast"].seen == seen["sdk"].seen == [(1.0, 3.0, "step 1 of 3"), (2.0, 3.0, "step 2 of 3"), (3.0, 3.0, "step 3 of 3")]


async def test_cancelling_a_fast_call_cancels_the_child_request_and_frees_its_slot(pair: Pair) -> None:
    label = f"fast-{pair.era}"
    progress = Progress()
    async with anyio.create_task_group() as group:

        async def blocked_call() -> None:
            await pair.fast.execute("relay", "block", {"label": label}, progress_callback=progress)

        group.start_soon(blocked_call)
        with anyio.fail_after(60):
            await progress.started.wait()
        group.cancel_scope.cancel()
    # One call per server at a time: without the cancellation this call would wait for the blocked one.
    with anyio.fail_after(60):
        result = await pair.fast.execute("relay", "cancelled", {"wait_for": label})
    assert label in result.structured_content["result"]
    [cancelled] = pair.fast.events("block")[-1:]
    assert cancelled.error_kind == "cancelled" and "the host cancelled it" in cancelled.error


async def test_routes_and_other_requests_stay_on_the_sdk_path(pair: Pair) -> None:
    before = len(pair.fast.fast_ids())
    listed = await pair.fast.client.list_tools()
    assert {"route", "execute"} <= {tool.name for tool in listed.tools}
    # A route the copilot's own route answers without searching: one that searched would load the
    # embedding model (seconds of CPU) in copilots that otherwise never need it.
    found = await pair.fast.client.call_tool("route", {"query": "add two numbers", "kind": "widgets"})
    assert found.is_error and "kind" in text_of(found) and "widgets" in text_of(found)
    assert len(pair.fast.fast_ids()) == before


@pytest.mark.parametrize("era", ["legacy", "auto"])
async def test_a_host_that_answers_questions(era: str, built_index: Path, tmp_path: Path) -> None:  # noqa: F811
    """2025-11-25: the fast call relays the child's question through the SDK; 2026-07-28: the SDK path serves it."""
    home = copy_home(built_index, tmp_path / "home")
    host = Host(root=tmp_path)
    servers = write_servers(tmp_path / "servers.json", {"relay": relay_entry("relay")})
    async with _copilot(tmp_path, home, servers, era, **host.client_options()) as copilot:
        result = await copilot.execute("relay", "ask_name", {"question": "Who are you?"})
        assert text_of(result) == "accepted: Ada" and host.questions == ["Server 'relay' asks: Who are you?"]
        # 2026-07-28: the input_required round trip (which the SDK client drives) stays on the SDK path.
        assert len(copilot.fast_ids()) == (1 if era == "legacy" else 0)


# -- the raw wire: requests an SDK client would not send ------------------------------------------
_ENVELOPE = {
    "io.modelcontextprotocol/protocolVersion": "2026-07-28",
    "io.modelcontextprotocol/clientInfo": {"name": "raw", "version": "0"},
    "io.modelcontextprotocol/clientCapabilities": {},
}


def _modern_call(request_id: int, arguments: dict[str, Any], **meta: Any) -> bytes:
    params = {"name": "execute", "arguments": arguments, "_meta": {**_ENVELOPE, **meta}}
    return (json.dumps({"jsonrpc": "2.0", "id": request_id, "method": "tools/call", "params": params}) + "\n").encode()


async def test_requests_the_kernel_reads_its_own_way_get_the_same_answers(
    built_index: Path,  # noqa: F811 -- the imported session fixture
    tmp_path: Path,
) -> None:
    """A level the spec does not know is refused as the SDK refuses it; arguments the tool's model
    reads (a JSON string for ``params``; a key it does not have, which the copilot refuses by name) are
    read the same way."""
    discover = (json.dumps({"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {"_meta": _ENVELOPE}}) + "\n").encode()
    add = {"server_name": "alpha", "tool_name": "add"}
    lines = [
        discover,  # the SDK serves the stream's first request: the fast path learns the era
        _modern_call(2, {**add, "params": {"a": 1, "b": 2}}),
        _modern_call(3, {**add, "params": {"a": 1, "b": 2}}, **{"io.modelcontextprotocol/logLevel": "loud"}),
        _modern_call(4, {**add, "params": '{"a": 4, "b": 5}'}),
        _modern_call(5, {"server_name": "alpha", "tool_name": "add", "params": {"a": "x"}}),
        _modern_call(6, {**add, "params": {"a": 4, "b": 5}, "unknown_key": True}),
    ]
    answers = {}
    for name, settings in (("fast", {}), ("sdk", {"COPILOT_FAST_RELAY": "false"})):
        root = tmp_path / name
        root.mkdir()
        servers = write_servers(root / "servers.json", {"alpha": fixture_entry("alpha")})
        env = copilot_env(
            copy_home(built_index, root / "home"), **EXECUTE_ONLY,
            COPILOT_LOG_LEVEL="DEBUG", COPILOT_LOG_FILE=str(root / "trajectory.jsonl"), **settings,
        )
        answers[name] = await raw_stdio_answers(servers, env, root, lines, one_by_one=True)
        taken = FAST_LINE.findall((root / "copilot.stderr.log").read_text(encoding="utf-8"))
        assert taken == ([] if name == "sdk" else ["2", "4", "5", "6"])
    assert answers["fast"] == answers["sdk"]
    assert answers["fast"][3]["error"]["code"] == -32602
    assert "9" in json.dumps(answers["fast"][4]["result"]["content"])
    refused = answers["fast"][6]["result"]
    assert refused["isError"] and "execute has no argument 'unknown_key'" in refused["content"][0]["text"]
