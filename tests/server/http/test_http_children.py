"""An HTTP copilot refuses its own child servers: one that found the token (a token file, a
``.env``, a host's config: all readable by the copilot's user) would otherwise call the other
servers' tools through it, outside the user's session."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from tests.server.support.copilot_harness import RunningClient, http_client_for, start_http_copilot, text_of
from tests.support.processes import hostile_entry

pytestmark = [
    pytest.mark.timeout(120),
    pytest.mark.skipif(not sys.platform.startswith("linux"), reason="finds a connection's other end in Linux's /proc"),
]

TOKEN = "children-test-token-0123456789"


def _socket_diagnostics_work() -> bool:
    """Whether the kernel answers the netlink socket diagnostics the copilot asks (a container may refuse them)."""
    import socket

    from server.http.peers import connection_inode

    with socket.socket() as listener:
        listener.bind(("127.0.0.1", 0))
        listener.listen()
        with socket.create_connection(listener.getsockname()) as client:
            accepted, _ = listener.accept()
            with accepted:
                return connection_inode(client.getsockname(), listener.getsockname()) is not None


pytestmark.append(
    pytest.mark.skipif(
        sys.platform.startswith("linux") and not _socket_diagnostics_work(),
        reason="the kernel's socket diagnostics (netlink SOCK_DIAG) are not available here",
    )
)


@pytest.mark.parametrize("knocker", ["self", "daemon"])
async def test_a_child_server_that_knows_the_token_is_refused(tmp_path: Path, knocker: str) -> None:
    """From the server itself, and from a daemon it double-forked (orphaned at once: its server's
    guardian adopts it, so it is still among the copilot's descendants)."""
    copilot = await start_http_copilot(tmp_path, TOKEN, {"evil": hostile_entry()})
    try:
        assert copilot.url is not None
        running = RunningClient(http_client_for(copilot.url, token=TOKEN))
        client = await running.start()  # this process is no child of the copilot: it is served
        try:
            knock = {"url": copilot.url, "token": TOKEN, "from": knocker}
            result = await client.call_tool("execute", {"server_name": "evil", "tool_name": "knock", "params": knock})
            assert not result.is_error, text_of(result)
            answer = json.loads(text_of(result))
        finally:
            await running.stop()
    finally:
        await copilot.stop()
    assert answer["status"] == 403, answer
    assert "the copilot's own child servers may not use it" in answer["body"]
    log = (tmp_path / "stderr.log").read_text(encoding="utf-8")
    assert "refused a request from pid" in log and "one of the copilot's own child servers" in log


async def test_the_other_end_of_a_connection_is_found_among_descendants_only(caplog: pytest.LogCaptureFixture) -> None:
    import socket
    import subprocess

    from server.http.peers import ChildPeers

    with socket.socket() as listener:
        listener.bind(("127.0.0.1", 0))
        listener.listen()
        port = listener.getsockname()[1]
        code = (
            f"import socket, sys; s = socket.create_connection(('127.0.0.1', {port})); print(1, flush=True); "
            "sys.stdin.read()"
        )
        child = subprocess.Popen([sys.executable, "-c", code], stdin=subprocess.PIPE, stdout=subprocess.PIPE)
        try:
            accepted, from_child = listener.accept()
            assert child.stdout is not None and child.stdout.readline()
            with socket.create_connection(("127.0.0.1", port)):
                served, from_self = listener.accept()
                peers = ChildPeers()
                assert await peers.child_at(from_child, ("127.0.0.1", port)) == child.pid
                assert await peers.child_at(from_self, ("127.0.0.1", port)) is None  # this process: not a descendant
                assert caplog.records == []
                assert await peers.child_at(("127.0.0.1", 1), ("127.0.0.1", port)) is None  # no such connection
                assert await peers.child_at(("127.0.0.1", 2), ("127.0.0.1", port)) is None
                # A loopback connection the kernel cannot find means the check does not work: said once.
                said = [record.getMessage() for record in caplog.records]
                assert len(said) == 1 and said[0].startswith("cannot tell which process is at the other end of a")
                served.close()
            accepted.close()
        finally:
            child.kill()
            child.wait(30)


@pytest.mark.parametrize(
    ("host", "loopback"),
    [
        ("127.0.0.1", True), ("::1", True), ("[::1]", True), ("::ffff:127.0.0.1", True),
        ("::ffff:10.0.0.1", False), ("x", False),
    ],  # fmt: skip
)
def test_an_ipv4_peer_of_a_dual_stack_socket_is_loopback_when_its_address_is(host: str, loopback: bool) -> None:
    from server.settings import is_loopback_host

    assert is_loopback_host(host) is loopback
