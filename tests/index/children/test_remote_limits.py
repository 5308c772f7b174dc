"""A remote (streamable HTTP) server's messages are held to the copilot's message limit, as a stdio
child's are: a flood fails its call naming the limit, and a reply under the limit is read even in
an SSE event larger than the MCP SDK's own 1 MiB."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import anyio
import pytest
from mcp.shared.exceptions import MCPError

from index.children.connect import open_session
from index.catalog.servers import ServerConfig
from tests.support.processes import wait_for_file

pytestmark = pytest.mark.timeout(60)

FLOODING_SERVER = Path(__file__).resolve().parents[2] / "fixtures" / "hostile" / "flooding_http_server.py"


@pytest.fixture
def flooding_server(tmp_path: Path) -> Iterator[Path]:
    port_file = tmp_path / "port"
    server = subprocess.Popen([sys.executable, str(FLOODING_SERVER), str(port_file)], stdin=subprocess.DEVNULL)
    try:
        yield port_file
    finally:
        server.kill()
        server.wait(10)


async def _config(port_file: Path) -> ServerConfig:
    port = await wait_for_file(port_file, 30)
    return ServerConfig(name="flooding", url=f"http://127.0.0.1:{port}/mcp")


async def test_a_remote_reply_over_the_message_limit_fails_its_call_naming_the_limit(flooding_server: Path) -> None:
    with anyio.fail_after(40):
        config = await _config(flooding_server)
        async with open_session(config, init_timeout=20, max_message_bytes=1024 * 1024) as connection:
            with pytest.raises(MCPError) as caught:
                await connection.session.call_tool("flood", {})
            assert "server 'flooding' sent a message over the 1048576-byte limit (COPILOT_MAX_MESSAGE_BYTES)" in str(
                caught.value
            )
            echoed = await connection.session.call_tool("echo", {})
            assert echoed.content[0].text == "echo"  # type: ignore[union-attr]


async def test_a_remote_reply_under_the_limit_is_read_from_an_sse_event_over_one_mib(flooding_server: Path) -> None:
    with anyio.fail_after(40):
        config = await _config(flooding_server)
        async with open_session(config, init_timeout=20) as connection:
            result = await connection.session.call_tool("big_event", {})
            assert len(result.content[0].text) == 2 * 1024 * 1024  # type: ignore[union-attr]
