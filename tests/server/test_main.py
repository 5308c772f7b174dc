"""``python -m server``: a user's mistake is one ``error:`` line and a non-zero exit, before serving.

Every test runs the real program the way ``make run`` or a host does, with stdin closed and
``COLUMNS=40`` (see ``tests.support.cli``).
"""

from __future__ import annotations

import socket
import subprocess
import sys
from pathlib import Path

import anyio
import pytest

from index.settings import CopilotSettings
from server.pool.settings import PoolSettings
from tests.server.support.copilot_harness import (
    HttpCopilot,
    RunningClient,
    built_index,  # noqa: F401 -- session fixture
    copilot_env,
    copy_home,
    descendants,
    find_copilot,
    fixture_entry,
    http_client_for,
    stdio_client_for,
    text_of,
    write_servers,
)
from tests.support.cli import cli_env, line_with, run_cli, single_error

pytestmark = pytest.mark.timeout(120)

#: A bad value for every constrained pool setting (server/pool/settings.py), as a user would type them;
#: the test fails when a new setting is added without one.
BAD_POOL_SETTINGS = {
    "COPILOT_CALL_TIMEOUT": "-5",
    "COPILOT_INIT_TIMEOUT": "0",
    "COPILOT_INSTALL_TIMEOUT": "0",
    "COPILOT_IDLE_TIMEOUT": "soon",
    "COPILOT_MAX_LIVE_CHILDREN": "abc",
    "COPILOT_PER_SERVER_CONCURRENCY": "0",
    "COPILOT_RESTART_BACKOFF": "-1",
    "COPILOT_SHUTDOWN_GRACE": "forever",
    "COPILOT_MAX_MESSAGE_BYTES": "10",
    "COPILOT_CHILD_LOG_MAX_BYTES": "1kb",
    "COPILOT_WARM_MAX_START": "-1",
    "COPILOT_WAIT_PROGRESS_EVERY": "0",
}


def _serve(tmp_path: Path, *args: str, **settings: str) -> object:
    servers = write_servers(tmp_path / "servers.json", {"alpha": fixture_entry("alpha")})
    env = cli_env(COPILOT_HOME=str(tmp_path / "home"), **settings)
    return run_cli("server", "--servers", str(servers), *args, env=env, cwd=tmp_path, timeout=90)


def test_every_pool_setting_is_named_by_its_variable_when_wrong(tmp_path: Path) -> None:
    # the constrained ones of its own (the shared ones, index/settings.py, are tested in tests/index/test_settings.py)
    fields = {name for name, info in PoolSettings.model_fields.items() if info.metadata and name not in CopilotSettings.model_fields}
    assert {f"COPILOT_{name.upper()}" for name in fields} <= set(BAD_POOL_SETTINGS), "a pool setting is untested"
    result = _serve(tmp_path, "--http", "--port", "0", **BAD_POOL_SETTINGS)
    line = single_error(result)
    assert result.returncode == 2
    for variable, value in BAD_POOL_SETTINGS.items():
        assert f"{variable}: " in line and repr(value) in line, (variable, line)
    assert "call_timeout" not in line  # never the field name
    assert "serving" not in result.stderr and result.stdout == ""


@pytest.mark.parametrize(
    ("args", "settings", "expected"),
    [
        # The issue's own examples, in HTTP mode where the traceback used to follow "serving on".
        (["--http", "--port", "0"], {"COPILOT_MAX_LIVE_CHILDREN": "abc"},
         "error: COPILOT_MAX_LIVE_CHILDREN: should be a valid integer, unable to parse string as an integer (got 'abc')"),
        ([], {"COPILOT_CALL_TIMEOUT": "0"}, "error: COPILOT_CALL_TIMEOUT: should be greater than 0 (got '0')"),
        # The server's own settings and the shared ones go through the same check.
        ([], {"COPILOT_MAX_TOP_K": "0"}, "error: COPILOT_MAX_TOP_K: should be greater than or equal to 1 (got '0')"),
        (["--http"], {"COPILOT_HTTP_PORT": "eighty"}, "error: COPILOT_HTTP_PORT: should be a valid integer"),
        ([], {"COPILOT_READ_ONLY": "maybe"}, "error: COPILOT_READ_ONLY: should be a valid boolean"),
        ([], {"COPILOT_LOG_LEVEL": "loud"}, "error: COPILOT_LOG_LEVEL: must be one of DEBUG, INFO, WARNING"),
        ([], {"COPILOT_ALLOW": '["time"'}, "error: COPILOT_ALLOW: "),
        # A value from a flag is named by the flag.
        (["--http", "--port", "70000"], {}, "error: --port: should be less than or equal to 65535 (got 70000)"),
    ],
)
def test_a_bad_setting_is_one_line_naming_the_variable_or_flag(
    tmp_path: Path, args: list[str], settings: dict[str, str], expected: str
) -> None:
    # Also reports the modules it imported: the MCP SDK (~1.5 s of CPU) is not needed to say this.
    profiled = _serve(tmp_path, *args, PYTHONPROFILEIMPORTTIME="1", **settings)
    imported = {line.rsplit("|", 1)[1].strip() for line in profiled.stderr.splitlines() if line.startswith("import time:")}
    assert "server.pool.settings" in imported  # the profile was written
    assert not {"mcp", "mcp_types"} & imported, "a settings error is reported only after importing the MCP SDK"
    stderr = "".join(line for line in profiled.stderr.splitlines(keepends=True) if not line.startswith("import time:"))
    result = subprocess.CompletedProcess(profiled.args, profiled.returncode, profiled.stdout, stderr)
    assert single_error(result).startswith(expected)
    assert result.returncode == 2 and "serving" not in result.stderr and result.stdout == ""


def test_misspelt_variables_in_the_environment_and_in_dotenv_are_named_at_start(tmp_path: Path) -> None:
    # A .env file's names were not checked: a typo there was ignored without a word.
    (tmp_path / ".env").write_text(
        "# settings\nCOPILOT_CALL_TIMOUT=5\nexport COPILOT_LOG_LEVEL='info'\nCOPILOT_FROBNICATE=\"x\"\n", encoding="utf-8"
    )
    result = _serve(tmp_path, COPILOT_SERVERS_DIR="/x")
    dotenv = (tmp_path / ".env").resolve()
    assert line_with(result.stderr, f"COPILOT_CALL_TIMOUT is set in {dotenv} but no setting").endswith(
        "did you mean COPILOT_CALL_TIMEOUT?"
    )
    assert line_with(result.stderr, f"COPILOT_FROBNICATE is set in {dotenv} but no setting of that name exists")
    assert line_with(result.stderr, "COPILOT_SERVERS_DIR is set but no setting of that name exists")
    assert "COPILOT_LOG_LEVEL" not in result.stderr and "Traceback" not in result.stderr


@pytest.mark.parametrize("variable", ["COPILOT_WORKDIR", "COPILOT_CHILD_LOG_DIR"])
def test_an_unusable_child_directory_is_one_line_at_start(tmp_path: Path, variable: str) -> None:
    occupied = tmp_path / "a-file"
    occupied.write_text("not a directory")
    result = _serve(tmp_path, **{variable: str(occupied / "below")})
    assert single_error(result) == (
        f"error: {variable}: cannot use {occupied / 'below'} for the children's "
        f"{'working directories' if variable == 'COPILOT_WORKDIR' else 'logs'} (Not a directory); "
        f"set {variable} to a writable directory."
    )
    assert result.returncode == 2 and result.stdout == ""


@pytest.mark.parametrize(
    ("variable", "what"),
    [
        ("COPILOT_LOG_DIR", "the trajectory logs (Not a directory); set COPILOT_LOG_DIR to a writable directory."),
        (
            "COPILOT_LOG_FILE",
            "the trajectory log's directory (Not a directory); set COPILOT_LOG_FILE to a writable directory.",
        ),
    ],
)
def test_an_unusable_trajectory_log_is_one_line_at_start(tmp_path: Path, variable: str, what: str) -> None:
    occupied = tmp_path / "a-file"
    occupied.write_text("not a directory")
    target = occupied / "below" / ("t.jsonl" if variable == "COPILOT_LOG_FILE" else "")
    result = _serve(tmp_path, **{variable: str(target)})
    shown = target.parent if variable == "COPILOT_LOG_FILE" else target
    assert single_error(result) == f"error: {variable}: cannot use {shown} for {what}"
    assert result.returncode == 2 and result.stdout == ""


def test_a_port_in_use_is_one_line_saying_how_to_pick_another(tmp_path: Path) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        result = _serve(tmp_path, "--http", "--port", str(port))
    line = single_error(result)
    assert line == (
        f"error: port {port} on 127.0.0.1 is already in use (another copilot still running?); serve on another "
        "port with --port N or COPILOT_HTTP_PORT=N (make run PORT=N)."
    )
    assert "serving" not in result.stderr and "Errno" not in result.stderr


def _warnings_about(stderr: str, name: str) -> list[str]:
    return [line for line in stderr.splitlines() if f"skipping server '{name}'" in line]


async def test_the_copilots_own_entry_in_a_desktop_config_is_skipped_with_one_warning(
    built_index: Path,  # noqa: F811 -- the imported session fixture
    tmp_path: Path,
) -> None:
    # A Claude Desktop config as the README invites users to pass it: the copilot's own entry
    # (this interpreter with -m server, and the console script) beside a real server.
    servers = write_servers(
        tmp_path / "claude_desktop_config.json",
        {
            "copilot": {"command": sys.executable, "args": ["-m", "server"], "env": {"COPILOT_SERVERS": "x.json"}},
            "copilot-script": {"command": str(Path(sys.executable).with_name("mcp-copilot"))},
            "alpha": fixture_entry("alpha"),
        },
    )
    home = copy_home(built_index, tmp_path / "home")
    env = copilot_env(home, COPILOT_WARM_INDEX="false", COPILOT_AUTO_INDEX="false", COLUMNS="40")
    stderr_log = tmp_path / "stderr.log"
    running = RunningClient(stdio_client_for(servers, env, stderr_log))
    client = await running.start()
    try:
        refused = await client.call_tool("execute", {"server_name": "copilot", "tool_name": "route", "params": {}})
        assert refused.is_error and "unknown server 'copilot'" in text_of(refused).lower()
        echo = await client.call_tool("execute", {"server_name": "alpha", "tool_name": "echo", "params": {"text": "hi"}})
        assert text_of(echo) == "hi"
        copilot = find_copilot(str(servers))
        nested = [p for p in descendants(copilot) if "server" in p.cmdline() and "-m" in p.cmdline()]
        assert nested == []  # no nested copilot was ever started
    finally:
        await running.stop()
    stderr = stderr_log.read_text(encoding="utf-8")
    for name in ("copilot", "copilot-script"):
        [warning] = _warnings_about(stderr, name)
        assert "it is this copilot" in warning and "cannot be one of its own servers" in warning


async def test_an_http_entry_pointing_at_the_copilot_itself_is_recognised_at_the_handshake(
    built_index: Path,  # noqa: F811 -- the imported session fixture
    tmp_path: Path,
) -> None:
    with socket.socket() as probe:  # the entry must name the port before the copilot binds it
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    url = f"http://127.0.0.1:{port}/mcp"
    servers = write_servers(tmp_path / "servers.json", {"myself": {"url": url}, "alpha": fixture_entry("alpha")})
    home = copy_home(built_index, tmp_path / "home")
    env = copilot_env(home, COPILOT_WARM_INDEX="false", COPILOT_AUTO_INDEX="true", COLUMNS="40")
    process = HttpCopilot(["--servers", str(servers), "--http", "--port", str(port)], env, tmp_path, tmp_path / "stderr.log")
    await process.start()
    try:
        running = RunningClient(http_client_for(url, token=None))
        client = await running.start()
        try:
            result = await client.call_tool("execute", {"server_name": "myself", "tool_name": "route", "params": {}})
            assert result.is_error
            assert f"server 'myself' ({url}) is this copilot (it answered initialize as 'mcp-copilot')" in text_of(result)
        finally:
            await running.stop()
        # The background crawl met the same answer: one warning line, the entry is not indexed.
        with anyio.fail_after(60):
            while "could not crawl myself" not in process.stderr_path.read_text(encoding="utf-8"):
                await anyio.sleep(0.1)  # bounded poll of the copilot's log (no other signal)
    finally:
        await process.stop()
    stderr = process.stderr_path.read_text(encoding="utf-8")
    [warning] = [line for line in stderr.splitlines() if "could not crawl myself" in line]
    assert "is this copilot" in warning
    line_with(stderr, "serving MCP over streamable HTTP on " + url)


def test_help_names_the_command_the_user_ran(monkeypatch: pytest.MonkeyPatch) -> None:
    # Before: `mcp-copilot --help` said "usage: python -m server" and pointed to "python -m server status".
    from server.__main__ import build_parser  # noqa: PLC0415

    monkeypatch.setattr(sys, "argv", ["/venv/bin/mcp-copilot", "--help"])
    text = build_parser().format_help()
    assert text.startswith("usage: mcp-copilot ") and "'mcp-copilot status'" in text
    monkeypatch.setattr(sys, "argv", ["/x/server/__main__.py", "--help"])
    assert build_parser().format_help().startswith("usage: python -m server ")
