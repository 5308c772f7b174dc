"""Values filled into a server's launch line from the environment never reach the model or any log.

A real copilot (``python -m server`` over stdio) starts a child whose launch arguments carry an
API key from ``${VAR}``; the child rejects its arguments and echoes them on stderr, as argparse
does. The key must not appear in the ``execute`` error, the trajectory, the copilot's stderr or the
lines the copilot writes into the child's log; nor may a remote entry's URL credentials.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.server.support.copilot_harness import (
    EXECUTE_ONLY,
    RunningClient,
    copilot_env,
    fixture_entry,
    stdio_client_for,
    text_of,
    write_servers,
)

pytestmark = [pytest.mark.timeout(120)]

API_KEY = "sk-launch-secret-4242"
PASSWORD = "url-pass-9876"


async def test_filled_in_secrets_are_redacted_everywhere_they_could_be_shown(tmp_path: Path) -> None:
    leaky = fixture_entry("leaky")
    leaky["args"] = [*leaky["args"], "--api-key", "${LEAKY_API_KEY}"]  # argparse rejects it and echoes it
    servers = write_servers(
        tmp_path / "servers.json",
        {
            "leaky": leaky,
            "remote": {"url": "http://bot:${LEAKY_PASSWORD}@127.0.0.1:9/mcp?token=${LEAKY_API_KEY}"},
        },
    )
    home = tmp_path / "home"
    trajectory = tmp_path / "trajectory.jsonl"
    env = copilot_env(
        home,
        LEAKY_API_KEY=API_KEY,
        LEAKY_PASSWORD=PASSWORD,
        COPILOT_LOG_FILE=str(trajectory),
        **EXECUTE_ONLY,
    )
    stderr_log = tmp_path / "copilot.stderr.log"
    running = RunningClient(stdio_client_for(servers, env, stderr_log))
    client = await running.start()
    try:
        stdio_error = await client.call_tool("execute", {"server_name": "leaky", "tool_name": "echo"})
        remote_error = await client.call_tool("execute", {"server_name": "remote", "tool_name": "echo"})
    finally:
        await running.stop()

    assert stdio_error.is_error and remote_error.is_error
    shown = text_of(stdio_error)
    assert "--api-key ${LEAKY_API_KEY}" in shown, shown  # the echoed argument is still recognisable
    assert "${LEAKY_PASSWORD}" in text_of(remote_error) or "***" in text_of(remote_error), text_of(remote_error)

    # The child's log holds the child's own stderr verbatim (it knows its arguments anyway); the
    # lines the copilot writes there -- the launch line among them -- must not carry the secret.
    child_log = (home / "logs" / "children" / "leaky.log").read_text(encoding="utf-8")
    copilot_lines = "\n".join(line for line in child_log.splitlines() if line.startswith("[copilot"))
    places = {
        "execute errors": shown + text_of(remote_error),
        "trajectory": trajectory.read_text(encoding="utf-8"),
        "copilot stderr": stderr_log.read_text(encoding="utf-8"),
        "copilot's lines in the child log": copilot_lines,
    }
    assert "starting " in copilot_lines and "--api-key ${LEAKY_API_KEY}" in copilot_lines
    for where, text in places.items():
        assert API_KEY not in text, f"the API key leaked into the {where}"
        assert PASSWORD not in text, f"the URL password leaked into the {where}"
