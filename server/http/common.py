"""What every layer of the HTTP copilot answers with: its path, JSON replies and JSON-RPC errors."""

from __future__ import annotations

import json
from typing import Any

from starlette.types import Send


MCP_PATH = "/mcp"
CONNECTION_CLOSE = (b"connection", b"close")


#: JSON-RPC code of a refusal by the HTTP layer (401, 403, 421, 503): implementation-defined server error.
REFUSED = -32000


async def reply(send: Send, status: int, message: str, extra_headers: list[tuple[bytes, bytes]] | None = None) -> None:
    """A refusal as a JSON-RPC error: MCP clients show such a body's message (see :func:`jsonrpc_error`)."""
    await send_json(send, status, jsonrpc_error(REFUSED, message), extra_headers)


async def send_json(
    send: Send, status: int, payload: dict[str, Any], extra_headers: list[tuple[bytes, bytes]] | None = None
) -> None:
    body = json.dumps(payload).encode()
    headers = [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())]
    await send({"type": "http.response.start", "status": status, "headers": headers + (extra_headers or [])})
    await send({"type": "http.response.body", "body": body})


def jsonrpc_error(code: int, message: str, request_id: str | int | None = None) -> dict[str, Any]:
    """A JSON-RPC error object: MCP clients show its message as the failed call's error (the SDK's
    client reads it from any non-2xx answer; a body of another shape becomes "Server returned an
    error response")."""
    return {"jsonrpc": "2.0", "id": request_id, "error": {"code": code, "message": message}}
