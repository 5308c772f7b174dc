"""How an entry's 'cwd' and late placeholders reach a real child."""

from __future__ import annotations

import json
import os
import subprocess
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


# Run under LC_ALL=C with PYTHONUTF8=0 (the filesystem encoding is ASCII); the source is ASCII too.
_START_UNDER_AN_ASCII_LOCALE = """
import json, sys
import anyio
from index.catalog.servers import parse_servers
from index.children.connect import open_session

async def main():
    with open(sys.argv[1], encoding="utf-8") as handle:
        config = parse_servers(handle.read(), environ={}).servers["fx"]
    with anyio.fail_after(30):
        async with open_session(config, workdir=None) as connection:
            print(json.dumps(await connection.session.call_tool("echo", {"text": "ok"}) is not None))

anyio.run(main)
"""


def test_a_child_gets_text_its_locale_cannot_encode_as_utf8(tmp_path: Path) -> None:
    # Starting a server whose arguments or environment hold Chinese failed with a UnicodeEncodeError
    # under an ASCII filesystem encoding; the child now gets the UTF-8 bytes (read back here in UTF-8 mode).
    dump = tmp_path / "env.json"
    servers = tmp_path / "servers.json"
    servers.write_text(json.dumps({"mcpServers": {"fx": {
        "command": sys.executable, "args": [str(FIXTURE), "--name", "北京", "--dump-env", str(dump)],
        "env": {"CITY": "北京 café", "PYTHONUTF8": "1"},
    }}}, ensure_ascii=False), encoding="utf-8")
    project = Path(__file__).resolve().parents[3]
    legacy = {**os.environ, "LC_ALL": "C", "PYTHONUTF8": "0", "PYTHONPATH": str(project)}
    ran = subprocess.run(
        [sys.executable, "-c", _START_UNDER_AN_ASCII_LOCALE, str(servers)],
        env=legacy, capture_output=True, text=True, timeout=60, check=False,
    )
    assert ran.returncode == 0 and ran.stdout.strip() == "true", ran.stdout + ran.stderr[-2000:]
    report = json.loads(dump.read_text(encoding="utf-8"))
    assert report["env"]["CITY"] == "北京 café" and report["argv"][:2] == ["--name", "北京"]
