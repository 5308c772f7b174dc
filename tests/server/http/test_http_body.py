"""The request gate's deadline for a whole body (``server.http.body``), driven as the ASGI app it is."""

from __future__ import annotations

import json
from typing import Any

import anyio
import anyio.lowlevel
import pytest

import server.http.body as body_module
from server.http.body import RequestBodyGate

pytestmark = pytest.mark.timeout(30)


async def refused(receive: Any) -> tuple[int, list[tuple[bytes, bytes]], str]:
    """(status, headers, error message) of the gate's answer to a 100-byte POST whose body comes
    from ``receive`` (pause limit 0.2 s); the app behind it must never be reached."""
    sent: list[dict[str, Any]] = []

    async def app(scope: Any, receive: Any, send: Any) -> None:
        raise AssertionError("an incomplete body reached the app")

    async def send(message: dict[str, Any]) -> None:
        sent.append(message)

    gate = RequestBodyGate(app, max_bytes=64 * 1024, read_timeout=0.2)
    scope = {
        "type": "http", "method": "POST", "path": "/mcp",
        "headers": [(b"content-type", b"application/json"), (b"content-length", b"100"), (b"mcp-session-id", b"s")],
    }
    with anyio.fail_after(10):
        await gate(scope, receive, send)
    return sent[0]["status"], sent[0]["headers"], json.loads(sent[1]["body"])["error"]["message"]


async def test_a_body_trickled_within_every_pause_still_ends_at_its_deadline(monkeypatch: pytest.MonkeyPatch) -> None:
    # Each message arrives at once, so the pause limit (COPILOT_HTTP_READ_TIMEOUT) never fires; before,
    # such a client held its request for as long as it went on sending.
    monkeypatch.setattr(body_module, "MIN_BODY_RATE", 1024)  # 100 declared bytes: 0.1 s after the pause

    async def trickle() -> dict[str, Any]:
        await anyio.lowlevel.checkpoint()
        return {"type": "http.request", "body": b"", "more_body": True}  # never the end of the body

    status, headers, message = await refused(trickle)
    assert status == 408 and (b"connection", b"close") in headers
    assert message == (
        "Request Timeout: the request's body did not arrive within 0.3s (a pause of up to 0.2s, "
        "COPILOT_HTTP_READ_TIMEOUT, then at least 1 KiB/s)."
    )


async def test_a_body_that_stops_after_its_first_bytes_is_stalled_however_small(monkeypatch: pytest.MonkeyPatch) -> None:
    # The pause limit and the whole body's deadline were two timers: for a small body they fell
    # microseconds apart, and which fired first decided between "stalled" and "too slow"
    # (tests/server/http/test_http_robustness.py saw both under load).
    monkeypatch.setattr(body_module, "MIN_BODY_RATE", 10**12)  # the deadline is the pause, to the nanosecond
    first = [{"type": "http.request", "body": b'{"jsonrpc":', "more_body": True}]

    async def receive() -> dict[str, Any]:
        if first:
            return first.pop()
        await anyio.Event().wait()  # the client sends nothing more
        raise AssertionError("unreachable")

    status, _, message = await refused(receive)
    assert status == 408
    assert message == "Request Timeout: nothing of the request's body arrived for 0.2s (COPILOT_HTTP_READ_TIMEOUT)."
