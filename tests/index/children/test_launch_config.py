"""How an entry's 'cwd' and late placeholders reach a real child."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import anyio
import pytest

from index.catalog.servers import parse_servers
from index.children.connect import open_session

FIXTURE = Path(__file__).resolve().parents[2] / "fixtures" / "fixture_server.py"

pytestmark = pytest.mark.timeout(60)


def text_of(result: object) -> str:
    return result.content[0].text  # type: ignore[attr-defined]


async def test_a_relative_command_starts_in_a_relative_cwd(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # A relative cwd is under the copilot's working directory; the relative command is found in it.
    script = tmp_path / "proj" / "bin" / "serve"
    script.parent.mkdir(parents=True)
    script.write_text(f'#!/bin/sh\nexec "{sys.executable}" "{FIXTURE}" --name rel "$@"\n', encoding="utf-8")
    script.chmod(0o755)
    monkeypatch.chdir(tmp_path)
    text = json.dumps({"mcpServers": {"rel": {"command": "bin/serve", "cwd": "proj"}}})
    config = parse_servers(text, environ={}).servers["rel"]
    with anyio.fail_after(30):
        async with open_session(config, workdir=tmp_path / "work") as connection:
            written = text_of(await connection.session.call_tool("write_file", {"path": "note.txt", "text": "x"}))
    assert Path(written) == (tmp_path / "proj" / "note.txt").resolve()


async def test_late_placeholders_with_a_default_reach_the_child_filled_in(tmp_path: Path) -> None:
    dump = tmp_path / "env.json"
    text = json.dumps({"mcpServers": {"fx": {
        "command": sys.executable, "args": [str(FIXTURE), "--name", "fx", "--dump-env", str(dump)],
        "env": {"SDD": "${COPILOT_SERVER_DIR:-/unused}", "RTD": "${COPILOT_ROOT:-/fallback}", "SD": "${COPILOT_SERVER_DIR}"},
    }}})
    config = parse_servers(text, environ={}).servers["fx"]
    workdir = tmp_path / "work" / "fx"
    with anyio.fail_after(30):
        async with open_session(config, workdir=workdir):
            pass
    env = json.loads(dump.read_text(encoding="utf-8"))["env"]
    assert (env["SDD"], env["RTD"], env["SD"]) == (str(workdir), "/fallback", str(workdir))
