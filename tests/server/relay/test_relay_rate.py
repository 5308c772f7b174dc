"""How many of a child's notifications and questions reach the host during one call, end to end.

A real copilot process between a real host (the mcp SDK ``Client``) and real children: the hostile
fixture (``chatter`` floods progress or log notifications) and ``tests/fixtures/asking_server.py``
(floods sampling requests), in all four combinations of transport (stdio, streamable HTTP) and
protocol era (2025-11-25 sessions, 2026-07-28 per-request).

- Progress: a flood reaches the host coalesced (at most ``PROGRESS_BURST`` at once, then
  ``PROGRESS_PER_SECOND``), newest last, and the call's last progress arrives before its result.
- Log messages: at most ``LOG_BURST`` at once, then ``LOG_PER_SECOND``, and one more saying how
  many were not forwarded; the child's log file has every one.
- Questions: a 2026-07-28 host gets at most ``MAX_WAITING_QUESTIONS`` of a call's questions at
  once through the ``input_required`` round trip (the legacy era's test is in test_relay_hostile).
"""

from __future__ import annotations

import json
import re
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import anyio
import mcp_types as types
import pytest
import pytest_asyncio
from mcp import Client

from server.relay.call import (
    LOG_BURST,
    LOG_PER_SECOND,
    MAX_WAITING_QUESTIONS,
    PROGRESS_BURST,
    PROGRESS_PER_SECOND,
)
from tests.server.support.copilot_harness import (
    built_index,  # noqa: F401 -- session fixture
    text_of,
)
from tests.server.support.relay_harness import HOSTS, Host, execute_args, host_project, relay_copilot
from tests.support.processes import hostile_entry
from tests.support.sockets import SocketDirs

pytestmark = [pytest.mark.asyncio(loop_scope="module"), pytest.mark.timeout(300)]

REPO = Path(__file__).resolve().parents[3]
ASKING_SERVER = REPO / "tests" / "fixtures" / "asking_server.py"
#: Notifications the child sends in one call in the flood tests.
FLOOD = 20_000
#: Characters of each flooded log message: unique to the log test, so its lines are told apart.
LOG_SIZE = 17
#: Sampling requests the asking child sends at once.
QUESTIONS = 40
NOT_FORWARDED = re.compile(
    r"^(?P<count>[\d,]+) log messages of server 'evil' during this call were not forwarded to the host: "
    rf"MCP Copilot forwards at most {LOG_BURST} of a call at once, then {LOG_PER_SECOND:g} a second\. "
    r"Every message was written to the server's log file, evil\.log in COPILOT_CHILD_LOG_DIR"
)


@dataclass
class Rated:
    client: Client
    host: Host
    era: str
    home: Path
    sockets: Path


@pytest_asyncio.fixture(scope="module", loop_scope="module", params=HOSTS, ids=["-".join(h) for h in HOSTS])
async def rated(  # noqa: F811
    request: pytest.FixtureRequest, built_index: Path, tmp_path_factory: pytest.TempPathFactory, socket_dirs: SocketDirs
) -> Any:
    transport, era = request.param
    root = tmp_path_factory.mktemp(f"rate-{transport}-{era}")
    entries = {"evil": hostile_entry(), "asker": {"command": sys.executable, "args": [str(ASKING_SERVER)]}}
    host = Host(root=host_project(root))
    async with relay_copilot(
        root,
        built_index,
        entries,
        transport,
        host,
        mode=era,
        log_level="debug",
        COPILOT_CALL_TIMEOUT="120",
        COPILOT_TRUST_AUTO_APPROVE="evil,asker",
    ) as (client, home):
        yield Rated(client, host, era, home, socket_dirs.mktemp("sock"))


async def _execute(rated: Rated, server: str, tool: str, params: dict[str, Any], **options: Any) -> tuple[Any, float]:
    """The call's result and how long it took, as the host saw it (the copilot's window lies within)."""
    started = anyio.current_time()
    with anyio.fail_after(120):
        result = await rated.client.call_tool("execute", execute_args(server, tool, params), **options)
    assert not result.is_error, text_of(result)
    return result, anyio.current_time() - started


async def test_a_progress_flood_reaches_the_host_merged_into_the_latest(rated: Rated) -> None:
    seen: list[tuple[float, str | None]] = []

    async def progress(value: float, total: float | None, message: str | None) -> None:
        seen.append((value, message))

    flood = {"kind": "progress", "count": FLOOD, "size": 5}
    result, took = await _execute(rated, "evil", "chatter", flood, progress_callback=progress)
    assert text_of(result) == f"sent {FLOOD}"
    # The last one arrived before the result: the host drops progress for a request it has its answer to.
    assert seen[-1] == (FLOOD - 1, f"{FLOOD - 1} xxxxx")
    values = [value for value, _ in seen]
    assert values == sorted(set(values))  # never an older one after a newer one
    assert values[:PROGRESS_BURST] == list(range(PROGRESS_BURST))  # the first ones at once, as they came
    assert len(seen) <= PROGRESS_BURST + PROGRESS_PER_SECOND * took + 2  # before: all 20,000


async def test_a_log_flood_reaches_the_host_bounded_and_counted(rated: Rated) -> None:
    host = rated.host
    before = len(host.logs)
    _, took = await _execute(rated, "evil", "chatter", {"kind": "log", "count": FLOOD, "size": LOG_SIZE})
    # Log messages may trail the result (the host handles them in tasks of their own).
    with anyio.fail_after(30):
        while not any(isinstance(p.data, str) and NOT_FORWARDED.match(p.data) for p in host.logs[before:]):
            await host.wait_for_logs(len(host.logs) + 1)
    logs = host.logs[before:]
    [note] = [p for p in logs if isinstance(p.data, str) and NOT_FORWARDED.match(p.data)]
    forwarded = [p for p in logs if p is not note]
    assert all(p.logger == "evil" and p.level == "error" for p in logs)
    assert all(isinstance(p.data, str) and re.fullmatch(rf"\d+ x{{{LOG_SIZE}}}", p.data) for p in forwarded)
    assert len(forwarded) <= LOG_BURST + LOG_PER_SECOND * took + 1  # before: all 20,000, and no note
    match = NOT_FORWARDED.match(str(note.data))
    assert match is not None and int(match["count"].replace(",", "")) == FLOOD - len(forwarded)

    # Every message went to the child's own log file, in order.
    lines = (rated.home / "logs" / "children" / "evil.log").read_text(encoding="utf-8").splitlines()
    numbers = [int(m[1]) for line in lines if (m := re.search(rf"log error: (\d+) x{{{LOG_SIZE}}}$", line))]
    assert numbers == list(range(FLOOD))


async def test_a_2026_host_gets_at_most_the_capped_number_of_questions_at_once(rated: Rated) -> None:
    if rated.era == "legacy":
        pytest.skip("the input_required round trip exists from 2026-07-28 on (legacy: test_relay_hostile)")
    session = rated.client.session
    signal = rated.sockets / "refused.sock"
    refused = QUESTIONS - MAX_WAITING_QUESTIONS
    arguments = execute_args("asker", "flood", {"count": QUESTIONS, "signal": str(signal), "refusals": refused})
    asked: list[str] = []
    async with await anyio.create_unix_listener(signal) as listener:
        with anyio.fail_after(60):
            answer = await session.call_tool("execute", arguments, allow_input_required=True)
            assert isinstance(answer, types.InputRequiredResult)
            assert len(answer.input_requests) <= MAX_WAITING_QUESTIONS
            # Only once the child was refused all the others does the host answer what reached it,
            # so how many got through does not depend on how fast the host answers.
            async with await listener.accept() as stream:
                assert await stream.receive() == f"refused {refused}\n".encode()
    with anyio.fail_after(60):
        while isinstance(answer, types.InputRequiredResult):
            requests = answer.input_requests
            assert 1 <= len(requests) <= MAX_WAITING_QUESTIONS  # before the cap: all 40 in one round
            responses: dict[str, Any] = {}
            for key, request in requests.items():
                assert isinstance(request, types.CreateMessageRequest)
                asked.append(getattr(request.params.messages[0].content, "text", ""))
                responses[key] = types.CreateMessageResult(
                    role="assistant", content=types.TextContent(type="text", text="ok"), model="host-model"
                )
            answer = await session.call_tool(
                "execute",
                arguments,
                input_responses=responses,
                request_state=answer.request_state,
                allow_input_required=True,
            )
    assert isinstance(answer, types.CallToolResult) and not answer.is_error, text_of(answer)
    assert len(asked) == len(set(asked)) == MAX_WAITING_QUESTIONS
    report = json.loads(text_of(answer))
    assert report["results"] == MAX_WAITING_QUESTIONS
    [(refusal, count)] = report["errors"].items()
    assert count == refused
    assert f"relays at most {MAX_WAITING_QUESTIONS} at once" in refusal
