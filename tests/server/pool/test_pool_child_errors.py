"""A child's own JSON-RPC error -32000 is its answer, not a crash (a real fixture process).

-32000 is the usual code of a server's generic error and also the code the MCP SDK fails pending
requests with when a connection ends. Before, the pool read the code alone: it told the host the
healthy child "crashed", killed it (losing its state) and dropped the child's own message.
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from index.catalog.servers import ServerConfig
from server.errors import ServerUnavailableError
from server.pool.sessions import PoolSettings
from tests.server.pool.pool_support import running_pool, settings  # noqa: F401 -- settings is a fixture

ERRING = Path(__file__).resolve().parents[2] / "fixtures" / "hostile" / "erring_server.py"

pytestmark = pytest.mark.timeout(90)


def erring(*flags: str) -> ServerConfig:
    return ServerConfig(name="erring", command=sys.executable, args=[str(ERRING), *flags])


async def test_a_call_answered_with_error_32000_passes_the_childs_message_on_and_keeps_the_child(
    settings: PoolSettings,
) -> None:
    async with running_pool({"erring": erring()}, settings) as pool:
        assert (await pool.call_tool("erring", "counter", {})).content[0].text == "1"
        pid = pool.status()["erring"]["pid"]
        failed = await pool.call_tool("erring", "fail", {"message": "quota exceeded, retry in 60 s"})
        assert failed.is_error
        assert failed.content[0].text == (
            "server 'erring' answered 'fail' with error -32000: quota exceeded, retry in 60 s"
        )
        # The same words the SDK uses when a connection ends: still the child's answer.
        said = await pool.call_tool("erring", "fail", {"message": "Connection closed"})
        assert said.content[0].text == "server 'erring' answered 'fail' with error -32000: Connection closed"
        kept = await pool.call_tool("erring", "counter", {})
        assert kept.content[0].text == "2"  # the same process, its state kept
        status = pool.status()["erring"]
        assert status["pid"] == pid and status["restarts"] == 0


async def test_a_tool_listing_answered_with_error_32000_is_a_listing_failure_not_a_crash(
    settings: PoolSettings,
) -> None:
    async with running_pool({"erring": erring("--fail", "tools/list")}, settings) as pool:
        with pytest.raises(ServerUnavailableError) as caught:
            await pool.list_tools("erring")
        assert str(caught.value) == "server 'erring' failed to list its tools: error -32000: Connection closed"
        assert "crashed" not in str(caught.value)
