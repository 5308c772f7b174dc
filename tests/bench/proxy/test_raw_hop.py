"""The relay benchmark's lower bound is a working hop: a host calls the child through it as directly."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import anyio
from mcp import Client
from mcp.client.stdio import StdioServerParameters, stdio_client

from bench.proxy.relay import hop_share

REPO = Path(__file__).resolve().parents[3]
RELAY_SERVER = REPO / "tests" / "fixtures" / "relay_server.py"


async def test_the_hop_passes_calls_and_progress_through_unchanged(tmp_path: Path) -> None:
    hop = StdioServerParameters(command=sys.executable, args=["-m", "bench.proxy.raw_hop", sys.executable, str(RELAY_SERVER)], cwd=str(REPO))
    seen: list[str | None] = []

    async def on_progress(progress: float, total: float | None, message: str | None) -> None:
        seen.append(message)

    with anyio.fail_after(60), (tmp_path / "stderr.log").open("w") as errlog:
        async with Client(stdio_client(hop, errlog=errlog)) as client:
            names = [tool.name for tool in (await client.list_tools()).tools]
            echoed = await client.call_tool("echo", {"text": "hi"})
            progressed = await client.call_tool("progress", {"steps": 2}, progress_callback=on_progress)
    assert "echo" in names and "progress" in names
    assert [block.text for block in echoed.content] == ["hi"]  # type: ignore[union-attr]
    assert [block.text for block in progressed.content] == ["done"]  # type: ignore[union-attr]
    assert seen == ["step 1 of 2", "step 2 of 2"]


def test_the_end_of_the_hosts_input_reaches_the_child_and_both_exit() -> None:
    done = subprocess.run(
        [sys.executable, "-m", "bench.proxy.raw_hop", sys.executable, str(RELAY_SERVER)],
        cwd=REPO, stdin=subprocess.DEVNULL, capture_output=True, timeout=60,
    )
    assert done.returncode == 0  # the child's own exit code: it saw the end of its input
    assert done.stdout == b""


def test_without_a_command_the_hop_says_how_to_use_it() -> None:
    done = subprocess.run([sys.executable, "-m", "bench.proxy.raw_hop"], cwd=REPO, capture_output=True, text=True, timeout=60)
    assert done.returncode == 2
    assert done.stdout == "" and "usage: python -m bench.proxy.raw_hop COMMAND" in done.stderr


def test_the_summary_splits_the_copilots_time_into_the_hop_and_its_own_work() -> None:
    words = hop_share(0.0014, 0.00006)
    assert "adds 0.060 ms of it" in words and words.endswith("the copilot's own work 1.340 ms")
