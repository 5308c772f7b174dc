"""The thinnest proxy the mcp SDK allows: the relay benchmark's floor, not a product.

``python -m bench.proxy.bare_proxy --servers FILE`` serves one tool, ``execute(server_name, tool_name,
params)``, that forwards to the first server of ``FILE`` through the SDK ``Client`` and relays its
progress, over stdio. No checks, limits, logs or telemetry: what ``bench relay`` measures for it is
the cost of one more SDK hop (an SDK server for the host plus an SDK client for the child), which
every proxy built on the SDK pays before doing anything of its own.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

from mcp import Client
from mcp.client.stdio import StdioServerParameters, stdio_client
from mcp.server.mcpserver import Context, MCPServer
from mcp_types import CallToolResult


def build(servers_file: Path) -> MCPServer:
    entry = next(iter(json.loads(servers_file.read_text(encoding="utf-8"))["mcpServers"].values()))
    child = StdioServerParameters(command=entry["command"], args=list(entry.get("args") or []))
    session: dict[str, Client] = {}

    @asynccontextmanager
    async def lifespan(_: MCPServer) -> AsyncIterator[None]:
        async with Client(stdio_client(child, errlog=sys.stderr)) as client:
            session["child"] = client
            yield

    app = MCPServer("bare-proxy", lifespan=lifespan)

    @app.tool(description="Call tool_name on the child server with params.")
    async def execute(server_name: str, tool_name: str, ctx: Context, params: dict[str, Any] | None = None) -> CallToolResult:
        async def relay(progress: float, total: float | None, message: str | None) -> None:
            await ctx.report_progress(progress, total, message)

        return await session["child"].call_tool(tool_name, params or {}, progress_callback=relay)

    return app


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.proxy.bare_proxy", description=__doc__.splitlines()[0])
    parser.add_argument("--servers", type=Path, required=True)
    args = parser.parse_args(argv)
    build(args.servers).run("stdio")
    return 0


if __name__ == "__main__":
    sys.exit(main())
