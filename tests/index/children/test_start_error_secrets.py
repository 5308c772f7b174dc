"""Errors of a child that cannot be started or reached name its launch without the entry's secrets.

``${VAR}`` values filled into ``command``, ``cwd`` or ``url`` are shown as their placeholders again
(real processes and a real HTTP server on 127.0.0.1, no mocks).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from index.catalog.servers import parse_servers
from index.children.connect import ChildStartError, open_session
from index.children.errors import CommandNotFoundError, RemoteConnectError
from index.errors import ConfigError
from tests.index.children.remote_stub import RemoteStub

pytestmark = pytest.mark.timeout(60)

BIN_SECRET = "bin-SECRET-3a7f9c"
DIR_SECRET = "dir-SECRET-4b8e1d"


def entry(**keys: object) -> dict[str, object]:
    return {"mcpServers": {"x": keys}}


async def start_error(tmp_path: Path, keys: dict[str, object], environ: dict[str, str]) -> ChildStartError:
    config = parse_servers(json.dumps(entry(**keys)), environ=environ).servers["x"]
    with pytest.raises(ChildStartError) as caught:
        async with open_session(config, workdir=tmp_path / "work", stderr_path=tmp_path / "x.log", init_timeout=10):
            pass
    return caught.value


async def test_a_command_not_found_is_named_with_its_placeholder(tmp_path: Path) -> None:
    error = await start_error(tmp_path, {"command": "/opt/${BIN}/server"}, {"BIN": BIN_SECRET})
    assert isinstance(error, CommandNotFoundError)
    assert "command '/opt/${BIN}/server' not found" in str(error) and BIN_SECRET not in str(error)


async def test_a_missing_working_directory_is_named_with_its_placeholder(tmp_path: Path) -> None:
    error = await start_error(tmp_path, {"command": "/bin/true", "cwd": "/nonexistent/${DIR}"}, {"DIR": DIR_SECRET})
    assert "working directory '/nonexistent/${DIR}' does not exist" in str(error) and DIR_SECRET not in str(error)


async def test_a_program_that_cannot_be_run_is_named_with_its_placeholder(tmp_path: Path) -> None:
    directory = tmp_path / BIN_SECRET
    directory.mkdir()
    script = directory / "server.sh"
    script.write_text("echo no shebang line\n")  # exec fails: Exec format error
    script.chmod(0o755)
    error = await start_error(tmp_path, {"command": str(tmp_path) + "/${BIN}/server.sh"}, {"BIN": BIN_SECRET})
    assert f"cannot start '{tmp_path}/${{BIN}}/server.sh'" in str(error) and BIN_SECRET not in str(error)


async def test_an_http_error_names_the_url_with_its_placeholders(tmp_path: Path) -> None:
    secrets = {"TOKEN_PATH": "pathsecret-ABCDEF987654", "CODE": "codesecret-1234567890"}
    with RemoteStub(deny=True) as stub:
        url = stub.origin + "/mcp/${TOKEN_PATH}?code=${CODE}"
        error = await start_error(tmp_path, {"url": url}, secrets)
    assert isinstance(error, RemoteConnectError)
    assert f"HTTP 401 Unauthorized from {url};" in str(error)
    assert not any(secret in str(error) for secret in secrets.values())


def test_a_rejected_url_is_quoted_without_the_secrets_it_was_filled_with() -> None:
    environ = {"MCP_URL": "wss://alice:pw-SECRET-1@mcp.example/x?token=tok-SECRET-2"}
    with pytest.raises(ConfigError) as caught:
        parse_servers(json.dumps(entry(url="${MCP_URL}")), "servers.json", environ)
    message = str(caught.value)
    assert "'url' must be an http:// or https:// address of an MCP endpoint (got '${MCP_URL}')" in message
    assert "SECRET" not in message
    # Filled into part of the URL, the rest is shown; a secret past the 80 characters shown is not cut in two.
    environ = {"KEY": "k" * 70 + "-SECRET-tail"}
    with pytest.raises(ConfigError) as caught:
        parse_servers(json.dumps(entry(url="ftp://example.test/${KEY}")), "servers.json", environ)
    assert "got 'ftp://example.test/${KEY}'" in str(caught.value) and "k" * 20 not in str(caught.value)
