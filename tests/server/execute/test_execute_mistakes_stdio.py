"""``execute-tool`` (LiveMCPBench's name for ``execute``) through a real stdio copilot and a real
fixture child: a call with the tool's arguments under another name, or wrapped once too often,
is answered with the one fix that works -- on the fast path the benchmark's calls take."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from tests.server.support.copilot_harness import copilot_env, fixture_entry, raw_stdio_answers, write_servers

pytestmark = pytest.mark.timeout(120)


def _frame(message: dict[str, Any]) -> bytes:
    return json.dumps(message).encode() + b"\n"


def _call(request_id: int, arguments: dict[str, Any]) -> bytes:
    return _frame(
        {"jsonrpc": "2.0", "id": request_id, "method": "tools/call", "params": {"name": "execute-tool", "arguments": arguments}}
    )


async def test_execute_tool_points_misnamed_or_nested_arguments_to_params(tmp_path: Path) -> None:
    servers = write_servers(tmp_path / "servers.json", {"alpha": fixture_entry("alpha")})
    env = copilot_env(
        tmp_path / "home", COPILOT_LOG_DIR=str(tmp_path / "logs"), COPILOT_LIVEMCPBENCH_ALIAS="true", COPILOT_AUTO_INDEX="false"
    )
    initialize = {
        "jsonrpc": "2.0", "id": 0, "method": "initialize",
        "params": {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "raw", "version": "0"}},
    }  # fmt: skip
    call = {"server_name": "alpha", "tool_name": "add"}
    frames = [
        _frame(initialize),
        _frame({"jsonrpc": "2.0", "method": "notifications/initialized"}),
        _call(1, call | {"tool_input": {"a": 1, "b": 2}}),
        _call(2, call | {"params": {"arguments": {"a": 1, "b": 2}}}),
        _call(3, call | {"params": {"a": 1, "b": 2}}),
    ]
    answers = await raw_stdio_answers(servers, env, tmp_path, frames, one_by_one=True, timeout=90)

    def text(request_id: int) -> str:
        result = answers[request_id]["result"]
        return "\n".join(block["text"] for block in result["content"])

    assert answers[1]["result"]["isError"] is True
    assert text(1).startswith("execute-tool has no argument 'tool_input' (did you mean 'params'?).")
    assert answers[2]["result"]["isError"] is True
    assert "nested one level too deep, inside 'arguments': pass them directly as params, e.g. params={\"a\": 1, \"b\": 2}." in text(2)
    assert answers[3]["result"]["isError"] is False and text(3) == "3"
