"""No command line logs a remote server's URL with its secrets, at any level, nor a child's text raw.

HTTP clients log every request's full URL at INFO, the MCP SDK's client the endpoint it connects to
at DEBUG; ``index.cli.log_setup.quiet_noisy_loggers`` holds them at WARNING in every CLI. Real
processes: ``python -m index crawl`` and the copilot over stdio against an HTTP MCP server on 127.0.0.1.
"""

from __future__ import annotations

import json
import logging
import os
import subprocess
import sys
from pathlib import Path

import anyio
import pytest
from mcp import ClientSession, StdioServerParameters
from mcp.client.stdio import stdio_client

from index.cli.log_setup import CLI_LOG_FORMAT, LineSafeFormatter
from tests.index.children.remote_stub import RemoteStub

pytestmark = pytest.mark.timeout(120)

PROJECT = Path(__file__).resolve().parents[3]
TOKEN = "sk-live-SUPERSECRET-0123456789"
PATH_SECRET = "pathsecret-ABCDEF987654"


def _environment(home: Path, **extra: str) -> dict[str, str]:
    env = {key: value for key, value in os.environ.items() if not key.startswith("COPILOT_")}
    env.update({"COPILOT_HOME": str(home), "PYTHONPATH": str(PROJECT), "SECRET_TOKEN": TOKEN, "SECRET_PATH": PATH_SECRET})
    env.update(extra)
    return env


def _servers(tmp_path: Path, stub: RemoteStub) -> Path:
    path = tmp_path / "servers.json"
    url = stub.origin + "/mcp/${SECRET_PATH}?access_token=${SECRET_TOKEN}"
    path.write_text(json.dumps({"mcpServers": {"remote": {"url": url}}}), encoding="utf-8")
    return path


@pytest.mark.parametrize("verbose", [[], ["-v"]], ids=["info", "debug"])
def test_crawl_logs_no_remote_url_secrets(tmp_path: Path, verbose: list[str]) -> None:
    with RemoteStub() as stub:
        command = [sys.executable, "-m", "index", *verbose, "crawl", "--servers", str(_servers(tmp_path, stub)),
                   "--out", str(tmp_path / "catalog.json"), "--log-dir", str(tmp_path / "logs")]
        done = subprocess.run(command, env=_environment(tmp_path / "home"), cwd=PROJECT, capture_output=True,
                              text=True, timeout=90, check=False)
        assert stub.paths and TOKEN in stub.paths[0]  # the server was reached with the real URL
    assert done.returncode == 0, done.stderr
    assert "echo" in (tmp_path / "catalog.json").read_text()
    for stream in (done.stdout, done.stderr):
        assert TOKEN not in stream and PATH_SECRET not in stream


async def test_the_copilots_debug_log_names_no_remote_url_secrets(tmp_path: Path) -> None:
    home = tmp_path / "home"
    env = _environment(home, COPILOT_LOG_LEVEL="DEBUG", COPILOT_AUTO_INDEX="false", COPILOT_WARM_INDEX="false",
                       COPILOT_PIN_TOOLS="false", COPILOT_CONFIRM="never")
    errlog = tmp_path / "copilot.stderr"
    with RemoteStub() as stub:
        params = StdioServerParameters(command=sys.executable, args=["-m", "server", "--servers", str(_servers(tmp_path, stub))],
                                       env=env, cwd=str(PROJECT))
        with errlog.open("w") as err:
            with anyio.fail_after(90):
                async with stdio_client(params, errlog=err) as (read, write), ClientSession(read, write) as session:
                    await session.initialize()
                    result = await session.call_tool("execute", {"server_name": "remote", "tool_name": "echo", "params": {}})
        assert stub.paths and TOKEN in stub.paths[0]
    assert not result.is_error and "echoed" in result.content[0].text  # type: ignore[union-attr]
    logged = errlog.read_text()
    assert "DEBUG" in logged  # the level took effect
    assert TOKEN not in logged and PATH_SECRET not in logged


def test_a_record_quoting_a_child_shows_its_control_characters_and_forges_no_line() -> None:
    formatter = LineSafeFormatter(CLI_LOG_FORMAT)
    child_text = "bad\x1b]0;PWNED\x07\x1b[2J\nWARNING server: forged line\n  indented\r"
    record = logging.LogRecord("server.pool", logging.WARNING, __file__, 1, "server %r: %s", ("evil", child_text), None)
    assert formatter.format(record).split("\n") == [
        "WARNING server.pool: server 'evil': bad\\x1b]0;PWNED\\x07\\x1b[2J",
        "  WARNING server: forged line",  # no line after a record's first starts at the margin
        "  indented\\r",
    ]


async def test_the_copilots_log_shows_a_crashed_childs_stderr_escaped_and_indented(tmp_path: Path) -> None:
    # The last stderr lines of a child that died before initialize reached the copilot's log raw:
    # escape sequences for the terminal showing it, and lines that read as the copilot's own.
    forged = "2099-01-01 00:00:00,000 INFO server.pool.sessions: server alpha started"
    script = f"printf 'boom \\033]0;PWNED\\007\\n{forged}\\n' >&2; exit 2"
    servers = tmp_path / "servers.json"
    servers.write_text(json.dumps({"mcpServers": {"evil": {"command": "/bin/sh", "args": ["-c", script]}}}), encoding="utf-8")
    env = _environment(tmp_path / "home", COPILOT_AUTO_INDEX="false", COPILOT_WARM_INDEX="false")
    params = StdioServerParameters(command=sys.executable, args=["-m", "server", "--servers", str(servers)], env=env, cwd=str(PROJECT))
    errlog = tmp_path / "copilot.stderr"
    with errlog.open("w") as err:
        with anyio.fail_after(90):
            async with stdio_client(params, errlog=err) as (read, write), ClientSession(read, write) as session:
                await session.initialize()
                result = await session.call_tool("execute", {"server_name": "evil", "tool_name": "x", "params": {}})
    assert result.is_error
    logged = errlog.read_text()
    assert "boom \\x1b]0;PWNED\\x07" in logged and "\x1b" not in logged and "\x07" not in logged
    assert f"  {forged}" in logged and f"\n{forged}" not in logged
