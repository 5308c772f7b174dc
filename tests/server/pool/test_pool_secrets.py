"""What the pool tells the host, keeps in its status and logs holds none of an entry's secrets.

Real children: a 401-answering HTTP server on 127.0.0.1 whose URL carries ``${VAR}`` secrets in
its path and in a query parameter of no secret-looking name, and a stdio child that prints the
literal API key of its ``env`` on stderr before it exits (as real servers do when the key is refused).
"""

from __future__ import annotations

import json
import logging
import sys
from pathlib import Path

import pytest

from index.catalog.servers import parse_servers
from mcp.shared.exceptions import MCPError

from server.errors import ServerUnavailableError
from server.pool.sessions import PoolSettings
from tests.index.children.remote_stub import RemoteStub
from tests.server.pool.pool_support import running_pool, settings  # noqa: F401 -- settings is a fixture

pytestmark = pytest.mark.timeout(90)

PATH_SECRET = "pathsecret-ABCDEF987654"
CODE_SECRET = "codesecret-1234567890"
LITERAL_KEY = "BSA-literal-key-0123456789"


def our_log(caplog: pytest.LogCaptureFixture) -> str:
    """What the copilot's own loggers said (third-party ones are held quiet by the CLIs: tests/index/cli)."""
    return "\n".join(record.getMessage() for record in caplog.records if record.name.startswith(("server.", "index.")))


async def test_a_remote_servers_http_error_names_its_url_without_the_secrets_in_its_path_and_query(
    settings: PoolSettings, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO)
    with RemoteStub(deny=True) as stub:
        text = json.dumps({"mcpServers": {"remote": {"url": stub.origin + "/mcp/${SECRET_PATH}?code=${SECRET_CODE}"}}})
        servers = parse_servers(text, environ={"SECRET_PATH": PATH_SECRET, "SECRET_CODE": CODE_SECRET}).servers
        async with running_pool(servers, settings) as pool:
            with pytest.raises(ServerUnavailableError) as caught:
                await pool.call_tool("remote", "echo", {})
            status = pool.status()["remote"]
        assert stub.paths and PATH_SECRET in stub.paths[0]  # the server did get the real URL
    message = str(caught.value)
    assert "HTTP 401 Unauthorized from " + stub.origin + "/mcp/${SECRET_PATH}?code=${SECRET_CODE}" in message
    assert "failed to start" in our_log(caplog)
    for shown in (message, str(status["last_error"]), our_log(caplog)):
        assert PATH_SECRET not in shown and CODE_SECRET not in shown


def _leaky_child(tmp_path: Path) -> Path:
    script = tmp_path / "leaky_child.py"
    script.write_text(
        "import os, sys\n"
        "print(f\"Error: API key {os.environ['BRAVE_API_KEY']} rejected (401); mode {os.environ['MODE']}, "
        "short key {os.environ['SHORT_TOKEN']}\", file=sys.stderr)\n"
        "sys.exit(1)\n",
        encoding="utf-8",
    )
    return script


async def test_a_literal_api_key_of_the_entrys_env_printed_on_stderr_reaches_no_one(
    settings: PoolSettings, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO)
    entry = {
        "command": sys.executable,
        "args": [str(_leaky_child(tmp_path))],
        # The Claude Desktop form: the key written into the file as it is, no ${VAR}.
        "env": {"BRAVE_API_KEY": LITERAL_KEY, "MODE": "production-mode", "SHORT_TOKEN": "abc"},
    }
    servers = parse_servers(json.dumps({"mcpServers": {"leaky": entry}}), environ={}).servers
    async with running_pool(servers, settings) as pool:
        with pytest.raises(ServerUnavailableError) as caught:
            await pool.call_tool("leaky", "echo", {})
        status = pool.status()["leaky"]
    message = str(caught.value)
    assert "Error: API key <env BRAVE_API_KEY> rejected (401)" in message
    # A value whose name does not look secret, or a short one, is left as it is: masking them garbles messages.
    assert "mode production-mode, short key abc" in message
    assert "failed to start" in our_log(caplog)
    for shown in (message, str(status["last_error"]), our_log(caplog)):
        assert LITERAL_KEY not in shown
    assert LITERAL_KEY in (settings.server_log("leaky")).read_text()  # the child's own log is its own


ERRING = Path(__file__).resolve().parents[2] / "fixtures" / "hostile" / "erring_server.py"


async def test_a_childs_error_quoting_its_key_reaches_no_one(settings: PoolSettings) -> None:  # noqa: F811
    """A child's JSON-RPC error ("upstream 401: invalid key …") went to the model and the host as it was."""
    entry = {"command": sys.executable, "args": [str(ERRING)], "env": {"BRAVE_API_KEY": LITERAL_KEY}}
    servers = parse_servers(json.dumps({"mcpServers": {"erring": entry}}), environ={}).servers
    said = f"upstream 401: invalid key {LITERAL_KEY}"
    async with running_pool(servers, settings) as pool:
        result = await pool.call_tool("erring", "fail", {"code": -32001, "message": said})
        with pytest.raises(MCPError) as raised:
            await pool.request("erring", "test", lambda session: session.call_tool("fail", {"code": -32001, "message": said}))
    [block] = result.content
    assert result.is_error and "upstream 401: invalid key <env BRAVE_API_KEY>" in block.text and LITERAL_KEY not in block.text
    assert raised.value.error.code == -32001 and raised.value.error.message == "upstream 401: invalid key <env BRAVE_API_KEY>"
