"""HTTP routes beside ``/mcp``: ``GET /metrics`` (Prometheus text format).

Mounted inside the copilot's :class:`~server.http.guard.GuardMiddleware`, so the same bearer token
and Origin checks apply as for ``/mcp``.
"""

from __future__ import annotations

from starlette.types import ASGIApp, Receive, Scope, Send

from server.telemetry.hub import Telemetry

METRICS_PATH = "/metrics"


class ObservabilityRoutes:
    """Answers ``/metrics`` from the copilot's telemetry and passes everything else on."""

    def __init__(self, app: ASGIApp, telemetry: Telemetry) -> None:
        self.app = app
        self.telemetry = telemetry

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or scope.get("path") != METRICS_PATH:
            await self.app(scope, receive, send)
            return
        if scope.get("method") not in ("GET", "HEAD"):
            await _respond(send, 405, b"use GET /metrics\n", "text/plain; charset=utf-8", [(b"allow", b"GET, HEAD")])
            return
        body, content_type = self.telemetry.metrics.render()
        await _respond(send, 200, b"" if scope.get("method") == "HEAD" else body, content_type)


async def _respond(
    send: Send, status: int, body: bytes, content_type: str, extra: list[tuple[bytes, bytes]] | None = None
) -> None:
    headers = [(b"content-type", content_type.encode()), (b"content-length", str(len(body)).encode()), *(extra or [])]
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": body})
