"""The relay benchmark's floor is a working proxy: it relays the call and its progress."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import anyio
from mcp import Client
from mcp.client.stdio import StdioServerParameters, stdio_client

REPO = Path(__file__).resolve().parents[3]
RELAY_SERVER = REPO / "tests" / "fixtures" / "relay_server.py"


async def test_bare_proxy_relays_calls_and_progress(tmp_path: Path) -> None:
    servers = tmp_path / "servers.json"
    servers.write_text(json.dumps({"mcpServers": {"fixture": {"command": sys.executable, "args": [str(RELAY_SERVER)]}}}))
    proxy = StdioServerParameters(command=sys.executable, args=["-m", "bench.proxy.bare_proxy", "--servers", str(servers)], cwd=str(REPO))
    seen: list[str | None] = []

    async def on_progress(progress: float, total: float | None, message: str | None) -> None:
        seen.append(message)

    with anyio.fail_after(60), (tmp_path / "stderr.log").open("w") as errlog:
        async with Client(stdio_client(proxy, errlog=errlog)) as client:
            arguments = {"server_name": "fixture", "tool_name": "echo", "params": {"text": "hi"}}
            echoed = await client.call_tool("execute", arguments)
            progressed = await client.call_tool(
                "execute", {**arguments, "tool_name": "progress", "params": {"steps": 2}}, progress_callback=on_progress
            )
    assert [block.text for block in echoed.content] == ["hi"]  # type: ignore[union-attr]
    assert [block.text for block in progressed.content] == ["done"]  # type: ignore[union-attr]
    assert seen == ["step 1 of 2", "step 2 of 2"]
