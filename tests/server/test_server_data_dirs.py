"""Servers that persist data get a directory of their own per copilot (per task in benchmark runs).

``${COPILOT_SERVER_DIR}`` in a server entry is the child's own work directory
(``$COPILOT_WORKDIR/<server>``), filled in when the child starts: never from the environment, and
never left pointing into a package cache that every copilot and every task would share.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import anyio
import pytest

from index.catalog.servers import load_servers, parse_servers
from server.pool.sessions import ChildPool, PoolSettings

FIXTURE = Path(__file__).resolve().parents[1] / "fixtures" / "fixture_server.py"
PROJECT_SERVERS = Path(__file__).resolve().parents[2] / "servers.json"

pytestmark = pytest.mark.timeout(90)


def _servers(**env: str) -> str:
    entry = {"command": sys.executable, "args": [str(FIXTURE), "--name", "keeper"], "env": env}
    return json.dumps({"mcpServers": {"keeper": entry}})


def test_the_placeholder_is_kept_until_the_child_starts_and_never_disables_the_entry() -> None:
    config = parse_servers(_servers(DATA_FILE="${COPILOT_SERVER_DIR}/data.json"), environ={}).servers["keeper"]
    assert config.is_enabled, config.reason
    assert config.env["DATA_FILE"] == "${COPILOT_SERVER_DIR}/data.json"
    filled = config.for_workdir(Path("/copilot/work/keeper"))
    assert filled.env["DATA_FILE"] == "/copilot/work/keeper/data.json"
    # The environment cannot redirect it (it names the child's own directory, nothing else).
    spoofed = parse_servers(_servers(DATA_FILE="${COPILOT_SERVER_DIR}/x"), environ={"COPILOT_SERVER_DIR": "/tmp"})
    assert spoofed.servers["keeper"].for_workdir(Path("/w")).env["DATA_FILE"] == "/w/x"


async def test_each_copilot_gives_the_child_its_own_data_directory(tmp_path: Path) -> None:
    config = parse_servers(_servers(DATA_FILE="${COPILOT_SERVER_DIR}/data.json"), environ={}).servers["keeper"]
    seen = []
    for copilot in ("first", "second"):
        settings = PoolSettings(home=tmp_path / copilot, shutdown_grace=0.5)
        with anyio.fail_after(60):
            async with ChildPool({"keeper": config}, settings) as pool:
                result = await pool.call_tool("keeper", "get_env", {"name": "DATA_FILE"})
        seen.append(result.content[0].text)
    assert seen == [
        str(tmp_path / "first" / "work" / "keeper" / "data.json"),
        str(tmp_path / "second" / "work" / "keeper" / "data.json"),
    ]


@pytest.mark.parametrize(
    ("server", "variable"),
    [("memory", "MEMORY_FILE_PATH"), ("taskmanager", "TASK_MANAGER_FILE_PATH")],
)
def test_bundled_servers_that_persist_data_keep_it_in_their_own_directory(server: str, variable: str) -> None:
    # Without these the memory graph lives inside the shared npx package directory and the task
    # list in the user's ~/Documents: one session's data would show up in the next, and across tasks.
    config = load_servers(PROJECT_SERVERS).servers[server]
    assert config.env[variable].startswith("${COPILOT_SERVER_DIR}/"), config.env
