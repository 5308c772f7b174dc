"""route before any index exists: the command it names must build the index of the copilot's own
servers file (``--servers``/``COPILOT_SERVERS``), not the project's pool.
"""

from __future__ import annotations

import shlex
import subprocess
from pathlib import Path

import anyio
import pytest

from index.catalog.servers import load_servers
from index.settings import CopilotSettings
from index.search.tool_index import ToolIndex
from server.copilot import Copilot
from server.settings import ServerSettings
from tests.server.support.copilot_harness import fixture_entry, write_servers
from tests.support.cli import PROJECT, cli_env

pytestmark = pytest.mark.timeout(300)

_ADVICE = "crawl the servers, then build: "


async def test_the_command_route_names_crawls_and_builds_the_copilots_own_servers(tmp_path: Path) -> None:
    servers_path = write_servers(tmp_path / "my servers.json", {"delta": fixture_entry("delta", tools=["echo"])})
    settings = ServerSettings(
        home=tmp_path / "home", catalog=tmp_path / "catalog.json", servers=servers_path,
        log_dir=tmp_path / "logs", auto_index=False, warm_index=False,
    )
    async with Copilot.running(settings, load_servers(servers_path), start_now=True) as copilot:
        with anyio.fail_after(60):
            answer = await copilot.route("echo some text back", 3, None, None)
    text = answer.content[0].text
    assert answer.is_error and _ADVICE in text, text
    command = text.split(_ADVICE, 1)[1].strip()
    assert f"COPILOT_SERVERS={shlex.quote(str(servers_path))}" in command

    # The user pastes it into a shell that has none of the copilot's settings.
    built = subprocess.run(
        command, shell=True, cwd=PROJECT, env=cli_env(), stdin=subprocess.DEVNULL,
        capture_output=True, text=True, timeout=240, check=False,
    )
    assert built.returncode == 0, built.stderr
    index = ToolIndex.open(CopilotSettings(home=tmp_path / "home", catalog=tmp_path / "catalog.json"))
    assert {record.server for record in index.records().values()} == {"delta"}


def test_a_relative_servers_path_is_shown_absolute(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from index.cli.hints import index_command

    monkeypatch.chdir(tmp_path)
    command = index_command(CopilotSettings(home=Path("home"), servers=Path("servers.json")), "crawl")
    assert f"COPILOT_HOME={tmp_path / 'home'}" in command
    assert f"COPILOT_SERVERS={tmp_path / 'servers.json'}" in command
