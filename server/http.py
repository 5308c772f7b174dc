"""Serving the copilot over streamable HTTP: bearer token, Origin checks, request limits, uvicorn.

Bound to loopback by default. Binding any other interface requires a bearer token (checked
in constant time on every request). Browsers' cross-site requests are refused by Origin: a
request without Origin (any non-browser client) or from a loopback page is accepted, other
Origins only when listed in ``COPILOT_ALLOWED_ORIGINS``. On loopback the SDK's DNS-rebinding
protection (Host header check) stays on as well.

No client can make the copilot hold unbounded memory or wait forever: a request's line and
headers are capped (:data:`MAX_HEAD_BYTES`, 431) and must arrive within
``COPILOT_HTTP_READ_TIMEOUT`` (408) -- :func:`guarded_http_protocol`, below the ASGI app, where
uvicorn parses them; its body is capped (``COPILOT_HTTP_MAX_BODY_BYTES``, 413) and may not stall
(408) -- :class:`RequestBodyGate`. A POST that is not JSON gets 415, and a handshake-era one that
is not one JSON-RPC message a JSON-RPC error saying why, where the SDK's answer is a dump of
pydantic's errors or, for a request with an unusable ``id``, no answer at all (:class:`EnvelopeCheck`).
"""

from __future__ import annotations

import asyncio
import contextlib
import errno
import hmac
import json
import logging
import signal
import socket
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from types import FrameType
from typing import Any, Literal
from urllib.parse import urlsplit

import anyio
import pydantic_core
from mcp.server.mcpserver import MCPServer
from mcp.server.transport_security import TransportSecuritySettings
from mcp.shared.inbound import MCP_PROTOCOL_VERSION_HEADER
from mcp_types import INVALID_PARAMS, INVALID_REQUEST, PARSE_ERROR, jsonrpc_message_adapter
from mcp_types.version import HANDSHAKE_PROTOCOL_VERSIONS
from pydantic import ValidationError
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from index.errors import ConfigError
from server.bounded import shown_name
from server.relay.disconnect import ClientGoneMiddleware
from server.settings import LOOPBACK_NAMES, ServerSettings

logger = logging.getLogger(__name__)

MCP_PATH = "/mcp"
#: Shortest bearer token accepted: 16 random characters are beyond online guessing; 1 is not.
MIN_TOKEN_LENGTH = 16
_LOOPBACK_ORIGIN_HOSTS = frozenset({"localhost", "127.0.0.1", "[::1]", "::1"})
CONNECTION_CLOSE = (b"connection", b"close")


def origin_allowed(origin: str, extra: list[str]) -> bool:
    """Loopback pages (any port) and the configured Origins (exact, or ``scheme://host:*``)."""
    for allowed in extra:
        if origin == allowed or (allowed.endswith(":*") and origin.startswith(allowed[:-1])):
            return True
    try:
        parts = urlsplit(origin)
    except ValueError:
        return False
    host = (parts.hostname or "").lower()
    return parts.scheme in ("http", "https") and (
        host in _LOOPBACK_ORIGIN_HOSTS or f"[{host}]" in _LOOPBACK_ORIGIN_HOSTS
    )


@dataclass
class Stopping:
    """Why the HTTP copilot stops: ``None`` while it serves, the signal's name once it stops."""

    reason: str | None = None
    #: Request bodies being read (:class:`RequestBodyGate`): a client that stalls one must not
    #: hold the stop up until uvicorn cancels it (an ERROR in the log), so stopping ends them.
    body_reads: set[anyio.CancelScope] = field(default_factory=set)

    def stop(self, reason: str) -> None:
        self.reason = reason
        for reading in list(self.body_reads):
            reading.cancel()

    def shutting_down_message(self) -> str:
        return f"Service Unavailable: the copilot is shutting down ({self.reason}); connect again once it is back."


class StoppingGate:
    """Once the copilot is stopping, answers every new HTTP request 503 and closes its connection.

    The listening socket is closed first, but a client can still send on a kept-alive connection
    (a legacy client reopens its GET stream as soon as the copilot ends it): such a request must not
    start anything a stopping copilot would then wait for.
    """

    def __init__(self, app: ASGIApp, stopping: Stopping) -> None:
        self.app = app
        self._stopping = stopping

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        reason = self._stopping.reason
        if scope["type"] != "http" or reason is None:
            await self.app(scope, receive, send)
            return
        await _reply(send, 503, self._stopping.shutting_down_message(), extra_headers=[CONNECTION_CLOSE])


class GuardMiddleware:
    """Rejects requests with a foreign Origin (403) or without the bearer token (401).

    A refusal closes the connection: its body is never read, and a client without the token must
    not keep a connection open by trickling one (uvicorn would wait for it without end).
    """

    def __init__(
        self, app: ASGIApp, *, token: str | None, allowed_origins: list[str], allowed_hosts: frozenset[str] | None = None
    ) -> None:
        self.app = app
        self._token = token.encode() if token else None
        self._allowed_origins = allowed_origins
        #: On loopback, the Host names a request may carry (DNS rebinding), for every path: the
        #: SDK checks them for /mcp only, not for /metrics beside it.
        self._allowed_hosts = allowed_hosts

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        headers = {k.decode("latin-1").lower(): v.decode("latin-1") for k, v in scope.get("headers", [])}
        if self._allowed_hosts is not None and _host_name(headers.get("host", "")) not in self._allowed_hosts:
            logger.warning("refused a request for Host %r (DNS rebinding?)", headers.get("host", ""))
            await _reply(
                send,
                421,
                "Misdirected Request: invalid Host header (the copilot answers loopback names only).",
                extra_headers=[CONNECTION_CLOSE],
            )
            return
        origin = headers.get("origin")
        if origin is not None and not origin_allowed(origin, self._allowed_origins):
            logger.warning("refused a request from Origin %r", origin)
            await _reply(
                send,
                403,
                "Forbidden: this Origin may not use the copilot (see COPILOT_ALLOWED_ORIGINS).",
                extra_headers=[CONNECTION_CLOSE],
            )
            return
        if self._token is not None:
            scheme, _, presented = headers.get("authorization", "").partition(" ")
            if scheme.lower() != "bearer" or not hmac.compare_digest(presented.strip().encode(), self._token):
                await _reply(
                    send,
                    401,
                    "Unauthorized: send 'Authorization: Bearer <token>' with the copilot's token (COPILOT_HTTP_TOKEN).",
                    extra_headers=[(b"www-authenticate", b'Bearer realm="mcp-copilot"'), CONNECTION_CLOSE],
                )
                return
        await self.app(scope, receive, send)


def _host_name(host: str) -> str:
    """The name in a ``Host`` header, without its port: ``[::1]:8000`` -> ``[::1]``, ``localhost:80`` -> ``localhost``."""
    host = host.strip().lower()
    if host.startswith("["):
        return host[: host.find("]") + 1] if "]" in host else host
    return host.rsplit(":", 1)[0] if host.count(":") == 1 else host


def loopback_host_names(settings: ServerSettings) -> frozenset[str]:
    """The Host names a loopback copilot answers: the loopback names and the address it is bound to."""
    return frozenset({*(name for name in LOOPBACK_NAMES if name != "::1"), url_host(settings.http_host.lower())})


def url_host(host: str) -> str:
    """``host`` as it goes in a URL: an IPv6 address in brackets."""
    return f"[{host}]" if ":" in host and not host.startswith("[") else host


async def _reply(send: Send, status: int, message: str, extra_headers: list[tuple[bytes, bytes]] | None = None) -> None:
    await _send_json(send, status, {"error": message}, extra_headers)


async def _send_json(
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


# --- Request bodies --------------------------------------------------------------------------


@dataclass
class BodyRead:
    """What reading a request's body came to: all of it, or why not."""

    outcome: Literal["complete", "too_large", "stalled", "gone", "stopping"]
    body: bytes = b""


#: Most bytes of a handshake-era POST without ``mcp-session-id``: an ``initialize`` (nothing else
#: opens a session), a few hundred bytes in practice, a few KB with a data-URI icon. The SDK keeps
#: that request, body and parsed message, for as long as the session lasts: 16 MB ones would cost
#: 32 MB per session, for up to COPILOT_HTTP_MAX_SESSIONS sessions.
MAX_OPENING_BYTES = 64 * 1024


@dataclass(frozen=True)
class BodyLimit:
    """The most bytes a request's body may have, and how a refusal explains it."""

    max_bytes: int
    explained: str


class RequestBodyGate:
    """Reads a request's body before the app does: never more than its limit, never waiting forever.

    The SDK would read it itself, but caps it at 4 MiB (below what an ``execute`` may carry to a
    child), answers more with a bare ``Request body too large``, waits forever for a body that
    stalls, and logs a traceback (ERROR) for a client that leaves in the middle of one. Here a body
    over the limit (declared or streamed) is answered 413 at once, one that stalls for
    ``read_timeout`` gets 408 (both close the connection: what the client still sends is dropped
    unread, see ``guarded_http_protocol``), a client gone mid-body gets nothing (nobody is left to
    answer), and a stop ends the wait (503).

    A complete body is handed on as one message, then ``receive`` is the client's again (the SDK's
    event streams wait on it for the disconnect).
    """

    def __init__(self, app: ASGIApp, *, max_bytes: int, read_timeout: float, stopping: Stopping | None = None) -> None:
        self.app = app
        self.max_bytes = max_bytes
        self.read_timeout = read_timeout
        self._stopping = stopping or Stopping()

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        headers = _headers(scope) if scope["type"] == "http" else {}
        if not _has_body(headers):
            # GET, DELETE: nothing to read, and a DELETE whose client does not wait for the answer
            # must still end its session (a read would only see the disconnect).
            await self.app(scope, receive, send)
            return
        limit = self._limit(scope, headers)
        declared = _declared_length(headers)
        if declared is not None and declared > limit.max_bytes:
            await self._refuse_too_large(send, limit, declared)
            return
        read = await self._read(receive, limit.max_bytes)
        if read.outcome != "complete":
            await self._refuse(send, read, limit)
            return
        if _is_mcp_post(scope):
            if (problem := _media_type_problem(headers)) is not None:
                await _send_json(send, 415, problem)
                return
            if _handshake_era(headers):
                send = EnvelopeCheck(send, read.body)
        pending = [{"type": "http.request", "body": read.body, "more_body": False}]
        del read  # the SDK makes its own copies; ours must not live as long as the request

        async def replay() -> Message:
            return pending.pop() if pending else await receive()

        await self.app(scope, replay, send)

    def _limit(self, scope: Scope, headers: dict[str, str]) -> BodyLimit:
        if _opens_session(scope, headers) and self.max_bytes > MAX_OPENING_BYTES:
            return BodyLimit(
                MAX_OPENING_BYTES,
                f"a request without mcp-session-id (an initialize) takes at most {MAX_OPENING_BYTES:,} bytes: "
                "the copilot keeps it as long as the session lasts",
            )
        return BodyLimit(
            self.max_bytes,
            f"the copilot takes at most {self.max_bytes:,} bytes per request (COPILOT_HTTP_MAX_BODY_BYTES); pass "
            "large data by reference (a file path or URL) rather than inline",
        )

    async def _read(self, receive: Receive, max_bytes: int) -> BodyRead:
        chunks: list[bytes] = []
        size = 0
        with anyio.CancelScope() as reading:
            self._stopping.body_reads.add(reading)
            if self._stopping.reason is not None:  # stopped between the StoppingGate and here
                reading.cancel()
            try:
                while True:
                    message = await self._next(receive)
                    if message is None:
                        return BodyRead("stalled")
                    if message["type"] != "http.request":
                        return BodyRead("gone")
                    chunk = message.get("body", b"")
                    size += len(chunk)
                    if size > max_bytes:
                        return BodyRead("too_large")
                    chunks.append(chunk)
                    if not message.get("more_body", False):
                        return BodyRead("complete", b"".join(chunks))
            finally:
                self._stopping.body_reads.discard(reading)
        return BodyRead("stopping")

    async def _next(self, receive: Receive) -> Message | None:
        """The client's next message, or ``None`` when it sent nothing for ``read_timeout``."""
        with anyio.move_on_after(self.read_timeout):
            return await receive()
        return None

    async def _refuse(self, send: Send, read: BodyRead, limit: BodyLimit) -> None:
        if read.outcome == "gone":
            logger.debug("an HTTP client left in the middle of its request's body")
        elif read.outcome == "too_large":
            await self._refuse_too_large(send, limit, None)
        elif read.outcome == "stalled":
            logger.info("answered 408 to an HTTP client that sent nothing of its body for %gs", self.read_timeout)
            message = (
                f"Request Timeout: nothing of the request's body arrived for {self.read_timeout:g}s "
                "(COPILOT_HTTP_READ_TIMEOUT)."
            )
            await _send_json(send, 408, jsonrpc_error(INVALID_REQUEST, message), [CONNECTION_CLOSE])
        else:
            await _reply(send, 503, self._stopping.shutting_down_message(), [CONNECTION_CLOSE])

    async def _refuse_too_large(self, send: Send, limit: BodyLimit, declared: int | None) -> None:
        logger.warning("refused an HTTP request whose body is over %d bytes", limit.max_bytes)
        size = f"this one has {declared:,}" if declared is not None else "this one has more"
        message = f"Request body too large: {limit.explained}; {size}."
        await _send_json(send, 413, jsonrpc_error(INVALID_REQUEST, message), [CONNECTION_CLOSE])


def _headers(scope: Scope) -> dict[str, str]:
    return {k.decode("latin-1").lower(): v.decode("latin-1") for k, v in scope.get("headers", [])}


def _has_body(headers: dict[str, str]) -> bool:
    return "transfer-encoding" in headers or headers.get("content-length", "0").strip() not in ("", "0")


def _is_mcp_post(scope: Scope) -> bool:
    return scope.get("method") == "POST" and scope.get("path") == MCP_PATH


def _handshake_era(headers: dict[str, str]) -> bool:
    """Whether the SDK serves the request on its handshake-era transport (as it decides: by header)."""
    version = headers.get(MCP_PROTOCOL_VERSION_HEADER)
    return version is None or version in HANDSHAKE_PROTOCOL_VERSIONS


def _opens_session(scope: Scope, headers: dict[str, str]) -> bool:
    """A handshake-era POST without a session id: an ``initialize`` (any other gets 400 anyway)."""
    return _is_mcp_post(scope) and "mcp-session-id" not in headers and _handshake_era(headers)


def _declared_length(headers: dict[str, str]) -> int | None:
    try:
        return int(headers.get("content-length", ""))
    except ValueError:
        return None  # absent (chunked), or garbage the HTTP parser refuses itself


def _media_type_problem(headers: dict[str, str]) -> dict[str, Any] | None:
    """The JSON-RPC error for a POST to the MCP path that is not JSON (the SDK's own refusal is a
    plain-text 400 no MCP client shows), else ``None``."""
    content_type = headers.get("content-type", "")
    if content_type.split(";")[0].strip().lower() == "application/json":
        return None
    message = (
        "Unsupported Media Type: POST each JSON-RPC message with 'Content-Type: application/json' "
        f"(this request's is {shown_name(content_type) or 'missing'!r})."
    )
    return jsonrpc_error(INVALID_REQUEST, message)


class EnvelopeCheck:
    """``send`` of a handshake-era POST to the MCP path, correcting the SDK's answer to a body that
    is not one JSON-RPC message.

    The SDK answers such a body (a batch, a bare value, an envelope it cannot validate) with
    ``-32602`` and a dump of pydantic's errors, and a request whose ``id`` is neither a string nor an
    integer (``null``, ``1.5``, ``true``) with 202, taking it for a notification: no answer ever
    comes, and the client waits for one until its own timeout. Only those answers are looked at (a
    400 carrying ``-32602`` without an id; a 202 to a body that names an ``"id"``), and only then is
    the body parsed again: a well-formed request costs nothing more (a second parse of a 3 MB
    ``execute`` takes 0.2 s). The body is let go once the answer has started.

    (The 2026-07-28 entry checks its bodies itself, correctly.)
    """

    def __init__(self, send: Send, body: bytes) -> None:
        self._send = send
        self._body: bytes | None = body
        self._held: Message | None = None  # the start of an answer that may be replaced

    async def __call__(self, message: Message) -> None:
        if self._body is None:
            await self._send(message)
        elif message["type"] == "http.response.start" and message["status"] in (400, 202):
            self._held = message  # decided with the body of the answer, which follows
        elif self._held is not None and message["type"] == "http.response.body" and not message.get("more_body"):
            await self._decide(self._held, message)
        else:
            await self._pass_on(message)

    async def _decide(self, start: Message, answer: Message) -> None:
        body, self._body, self._held = self._body, None, None
        assert body is not None
        problem = _envelope_correction(start["status"], answer.get("body", b""), body)
        if problem is None:
            await self._send(start)
            await self._send(answer)
            return
        logger.debug("answered an HTTP request that is not one JSON-RPC message: %s", problem["error"]["message"])
        kept = [(name, value) for name, value in start["headers"] if name.lower() not in _BODY_HEADERS]
        await _send_json(self._send, 400, problem, kept)

    async def _pass_on(self, message: Message) -> None:
        self._body = None
        if self._held is not None:
            held, self._held = self._held, None
            await self._send(held)
        await self._send(message)


_BODY_HEADERS = frozenset({b"content-type", b"content-length"})


def _envelope_correction(status: int, answer: bytes, body: bytes) -> dict[str, Any] | None:
    """What to answer instead of the SDK's ``status`` and ``answer`` to ``body``, else ``None``."""
    if status == 202:
        # A notification or a response: only a body naming an "id" can be a request the SDK took
        # for a notification (parsing every notification again would cost for nothing).
        return envelope_problem(body) if b'"id"' in body else None
    try:
        error = json.loads(answer)
    except ValueError:
        return None
    if not isinstance(error, dict) or error.get("id") is not None:
        return None
    if not isinstance(error.get("error"), dict) or error["error"].get("code") != INVALID_PARAMS:
        return None  # a parse error (its message is clear), or an answer about something else
    return envelope_problem(body)


def envelope_problem(body: bytes) -> dict[str, Any] | None:
    """The JSON-RPC error for a body that is not one JSON-RPC 2.0 message, else ``None``."""
    try:
        message = pydantic_core.from_json(body)
    except ValueError as error:  # invalid JSON or UTF-8, too deeply nested, a number out of range
        return jsonrpc_error(PARSE_ERROR, f"Parse error: {error}")
    if isinstance(message, list):
        return jsonrpc_error(
            INVALID_REQUEST,
            "Invalid Request: the body is a JSON array (a batch); POST each JSON-RPC message on its own "
            "(MCP has no batches since 2025-06-18).",
        )
    if not isinstance(message, dict):
        shown = f"Invalid Request: the body must be one JSON-RPC message object, not {_json_kind(message)}."
        return jsonrpc_error(INVALID_REQUEST, shown)
    return _message_problem(message)


def _message_problem(message: dict[str, Any]) -> dict[str, Any] | None:
    request_id = message.get("id")
    valid_id = isinstance(request_id, str) or (isinstance(request_id, int) and not isinstance(request_id, bool))
    if message.get("jsonrpc") != "2.0":
        shown_id = request_id if valid_id else None
        return jsonrpc_error(INVALID_REQUEST, 'Invalid Request: "jsonrpc" must be "2.0".', shown_id)
    if "method" in message:
        if "id" in message and not valid_id:
            return jsonrpc_error(
                INVALID_REQUEST,
                f'Invalid Request: "id" must be a string or an integer, not {_json_kind(request_id)} (a message '
                'without "id" is a notification, which gets no answer).',
            )
        if not isinstance(message["method"], str):
            return jsonrpc_error(INVALID_REQUEST, 'Invalid Request: "method" must be a string.', request_id)
        if not isinstance(message.get("params", {}), dict | None):
            return jsonrpc_error(INVALID_PARAMS, 'Invalid params: "params" must be an object.', request_id)
    elif "id" not in message or ("result" in message) == ("error" in message):
        return jsonrpc_error(
            INVALID_REQUEST,
            'Invalid Request: a JSON-RPC message has a "method" (a request, or a notification without "id"), '
            'or an "id" with either a "result" or an "error" (a response).',
        )
    try:
        jsonrpc_message_adapter.validate_python(message, by_name=False)  # as the SDK will
    except ValidationError:
        return jsonrpc_error(INVALID_REQUEST, "Invalid Request: not a valid JSON-RPC 2.0 message.")
    return None


def _json_kind(value: Any) -> str:
    """How a JSON value is named in a message: ``a JSON string``, ``null``, ``1.5``."""
    if value is None or isinstance(value, bool):
        return json.dumps(value)
    if isinstance(value, int | float):
        return shown_name(json.dumps(value))
    kinds = {str: "a JSON string", list: "a JSON array", dict: "a JSON object"}
    return kinds.get(type(value), "a JSON value")


def check_exposure(settings: ServerSettings) -> None:
    """Refuse to serve beyond loopback without a token, and with a guessable one anywhere."""
    if not settings.binds_loopback and not settings.token:
        raise ConfigError(
            f"refusing to listen on {settings.http_host} without a bearer token: anyone who can reach this "
            "address could run tools on this machine. Set COPILOT_HTTP_TOKEN (or --token-file FILE), or bind "
            "127.0.0.1."
        )
    token = settings.token
    if token is not None and len(token) < MIN_TOKEN_LENGTH:
        raise ConfigError(
            f"the bearer token has {len(token)} characters; use at least {MIN_TOKEN_LENGTH} random ones, e.g. "
            "COPILOT_HTTP_TOKEN=$(openssl rand -hex 24)."
        )


def transport_security(settings: ServerSettings) -> TransportSecuritySettings:
    if not settings.binds_loopback:
        # The public Host name is not known here; Origin and the token are checked by GuardMiddleware.
        return TransportSecuritySettings(enable_dns_rebinding_protection=False)
    hosts = sorted(loopback_host_names(settings))
    return TransportSecuritySettings(
        enable_dns_rebinding_protection=True,
        allowed_hosts=[*hosts, *(f"{h}:*" for h in hosts)],
        allowed_origins=[
            *(f"{scheme}://{h}:*" for scheme in ("http", "https") for h in hosts),
            *(f"{scheme}://{h}" for scheme in ("http", "https") for h in hosts),
            *settings.allowed_origins,
        ],
    )


def build_asgi(
    app: MCPServer[Any], settings: ServerSettings, telemetry: Any = None, stopping: Stopping | None = None
) -> ASGIApp:
    """The copilot's ASGI app; with ``stopping``, requests are refused (behind the guard) once it is set."""
    starlette_app: ASGIApp = app.streamable_http_app(
        streamable_http_path=MCP_PATH,
        transport_security=transport_security(settings),
        host=settings.http_host,
        session_idle_timeout=settings.http_session_idle_timeout,
        # RequestBodyGate holds bodies to this already; the SDK's own, lower default would refuse
        # what it lets through.
        max_request_body_size=settings.http_max_body_bytes,
        max_sessions=settings.http_max_sessions,
    )
    if telemetry is not None:
        from server.telemetry.endpoints import ObservabilityRoutes

        starlette_app = ObservabilityRoutes(starlette_app, telemetry)  # /metrics, behind the same guard
    # Behind the guard: a client without the token cannot make the copilot read a body at all.
    inner: ASGIApp = RequestBodyGate(
        ClientGoneMiddleware(starlette_app),
        max_bytes=settings.http_max_body_bytes,
        read_timeout=settings.http_read_timeout,
        stopping=stopping,
    )
    if stopping is not None:
        inner = StoppingGate(inner, stopping)
    return GuardMiddleware(
        inner,
        token=settings.token,
        allowed_origins=settings.allowed_origins,
        allowed_hosts=loopback_host_names(settings) if settings.binds_loopback else None,
    )


# --- Connections (below ASGI) ----------------------------------------------------------------

#: Most bytes of a request's line and headers. Real clients send a few hundred (a bearer token, a
#: session id, a few Mcp-Param headers). Unbounded, uvicorn's httptools parser keeps piling up a
#: header that never ends: 200 MB of one header cost 400 MB and a minute of a busy event loop.
MAX_HEAD_BYTES = 64 * 1024


#: Longest a connection keeps reading (and dropping) a request nobody answers any more, when its
#: client keeps sending: long enough for a refused upload of some hundred MB to end on its own.
MAX_LINGER_SECONDS = 30.0


class _LingeringTransport:
    """A connection's transport as uvicorn sees it: all the real one's, but ``close`` asks the protocol.

    Closing a socket whose client is still sending (a body answered 413 before it was read) makes
    the kernel reset the connection, and a client busy writing may then lose the answer. The
    protocol lingers instead: see :meth:`GuardedHTTPProtocol._close`.
    """

    def __init__(self, transport: asyncio.Transport, close: Any, closing: Any) -> None:
        self._transport = transport
        self.close = close
        self.is_closing = closing

    def __getattr__(self, name: str) -> Any:
        return getattr(self._transport, name)


def guarded_http_protocol(read_timeout: float, max_head_bytes: int = MAX_HEAD_BYTES) -> type[asyncio.Protocol]:
    """uvicorn's HTTP protocol (httptools if installed, else h11), guarding each connection:

    - a request's line and headers over ``max_head_bytes`` get 431, and ones not complete within
      ``read_timeout`` of their first byte (or of the connection) get 408: uvicorn has neither
      bound, so a client sending an endless header grew memory without end, and one that connects
      and sends nothing, or half a head, held its connection (a file descriptor) forever;
    - a connection closed while its client may still be sending lingers (see ``_close``).
    """
    import h11  # uvicorn's own dependency
    from uvicorn.protocols.http.auto import AutoHTTPProtocol

    class GuardedHTTPProtocol(AutoHTTPProtocol):  # type: ignore[misc,valid-type]
        def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
            self._real_transport = transport
            self._head_bytes = 0
            self._body_pending = False  # httptools: between a head's end and its message's end
            self._lingering = False
            self._linger_until = 0.0
            self._no_linger = False
            self._timer: asyncio.TimerHandle | None = None
            super().connection_made(_LingeringTransport(transport, self._close, self._is_closing))
            self._arm_timer(self._head_timed_out)

        def data_received(self, data: bytes) -> None:
            if self._lingering:  # the rest of a request nobody answers any more: read only to be dropped
                if self.loop.time() < self._linger_until:
                    self._arm_timer(self._real_transport.close)  # as long as the client keeps sending
                else:
                    self._real_transport.close()
                return
            cycle, in_body = self.cycle, self._in_body()
            super().data_received(data)
            if self.cycle is not cycle:  # a request's head is complete: the app has it now
                self._head_bytes = 0
                self._cancel_timer()
            elif not (in_body or self._in_body() or self._real_transport.is_closing()):
                self._count_head_bytes(len(data))  # (a chunk ending a body is not: at most one uncounted)

        def _count_head_bytes(self, size: int) -> None:
            self._head_bytes += size
            if self._head_bytes > max_head_bytes:
                logger.warning("refused a request from %s: its head is over %d bytes", _peer(self), max_head_bytes)
                self._refuse(
                    431,
                    "Request Header Fields Too Large",
                    f"Request Header Fields Too Large: the request line and headers exceed {max_head_bytes:,} bytes.",
                )
            elif self._timer is None:
                self._arm_timer(self._head_timed_out)

        # httptools' callbacks (h11 has none: its parser state says the same, see _in_body).
        def on_headers_complete(self) -> None:
            self._body_pending = True
            super().on_headers_complete()

        def on_message_complete(self) -> None:
            self._body_pending = False
            super().on_message_complete()

        def _in_body(self) -> bool:
            """Whether the client is in the middle of a request's body."""
            conn = getattr(self, "conn", None)
            return self._body_pending if conn is None else conn.their_state is h11.SEND_BODY

        def _answering(self) -> bool:
            """Whether a response is being sent (a refusal now would land in the middle of it)."""
            return self.cycle is not None and not self.cycle.response_complete

        def _head_timed_out(self) -> None:
            self._timer = None
            if self._is_closing() or self._real_transport.get_protocol() is not self:
                return  # closed, or handed over (an upgrade)
            if self._head_bytes == 0:  # connected and never sent anything: nothing to answer
                self._real_transport.close()
                return
            logger.info("answered 408 to %s: no complete request head within %gs", _peer(self), read_timeout)
            self._refuse(
                408,
                "Request Timeout",
                f"Request Timeout: no complete request line and headers within {read_timeout:g}s "
                "(COPILOT_HTTP_READ_TIMEOUT).",
            )

        def _refuse(self, status: int, reason: str, message: str) -> None:
            """Answer a head we will not read to its end, and close: unless a response is on its way
            (a pipelined head during a long one), which only the closing can then interrupt."""
            if not self._answering():
                body = json.dumps(jsonrpc_error(INVALID_REQUEST, message)).encode()
                head = (
                    f"HTTP/1.1 {status} {reason}\r\ncontent-type: application/json\r\n"
                    f"content-length: {len(body)}\r\nconnection: close\r\n\r\n"
                )
                self._real_transport.write(head.encode("ascii") + body)
            self._close()

        def _close(self) -> None:
            """Close the connection; while its client may still be sending, linger first.

            Lingering: end our side (the client reads the whole answer, then end of stream), and
            keep reading and dropping what the client still sends until it closes too, pauses for
            ``read_timeout``, or :data:`MAX_LINGER_SECONDS` have passed. Closing at once would make
            the kernel reset the connection over the unread bytes, and a client still writing could
            lose the answer with them.
            """
            if self._lingering or self._real_transport.is_closing():
                return
            self._cancel_timer()
            sending = self._head_bytes > 0 or self._in_body()
            if not sending or self._no_linger or not self._real_transport.can_write_eof():
                self._real_transport.close()
                return
            self._lingering = True
            self._linger_until = self.loop.time() + max(read_timeout, MAX_LINGER_SECONDS)
            self._real_transport.resume_reading()  # uvicorn may have paused it (flow control)
            self._real_transport.write_eof()
            self._arm_timer(self._real_transport.close)

        def _is_closing(self) -> bool:
            return self._lingering or self._real_transport.is_closing()

        def shutdown(self) -> None:
            # Stopping: nothing lingers (uvicorn would wait for the connection, then log an ERROR).
            self._no_linger = True
            if self._lingering:
                self._real_transport.close()
                return
            super().shutdown()

        def connection_lost(self, exc: Exception | None) -> None:
            self._cancel_timer()
            super().connection_lost(exc)

        def _arm_timer(self, callback: Any) -> None:
            self._cancel_timer()
            self._timer = self.loop.call_later(read_timeout, callback)

        def _cancel_timer(self) -> None:
            if self._timer is not None:
                self._timer.cancel()
                self._timer = None

    return GuardedHTTPProtocol


def _peer(protocol: Any) -> str:
    client = getattr(protocol, "client", None)
    return f"{client[0]}:{client[1]}" if client else "a client"


def bind_listener(settings: ServerSettings) -> socket.socket:
    """The listening socket, bound before anything is started or announced.

    A port in use is one line saying so and how to pick another, rather than uvicorn's
    ``[Errno 98]`` after a "serving on" line. Port 0 picks a free port (the log names it).
    """
    host, port = settings.http_host, settings.http_port
    family = socket.AF_INET6 if ":" in host else socket.AF_INET  # as uvicorn itself would bind
    listener = socket.socket(family, socket.SOCK_STREAM)
    try:
        listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        listener.bind((host.strip("[]"), port))
        listener.listen(2048)
    except OSError as error:
        listener.close()
        if error.errno == errno.EADDRINUSE:
            raise ConfigError(
                f"port {port} on {host} is already in use (another copilot still running?); serve on another "
                "port with --port N or COPILOT_HTTP_PORT=N (make run PORT=N)."
            ) from None
        if error.errno == errno.EACCES:
            raise ConfigError(f"not allowed to listen on {host}:{port}; use a port above 1023 (--port N).") from None
        reason = error.strerror or str(error)
        raise ConfigError(f"cannot listen on {host}:{port} ({reason}); check --host / COPILOT_HTTP_HOST.") from None
    listener.setblocking(False)
    return listener


#: uvicorn's bound on its shutdown: what still runs then is cancelled mid-response (logged as an ERROR).
GRACEFUL_SHUTDOWN_TIMEOUT = 5
#: How long a stop waits for the requests it cancelled to be answered: well within uvicorn's bound.
DRAIN_TIMEOUT = 2.0


def close_event_streams(app: MCPServer[Any]) -> None:
    """End the GET event stream of every handshake-era session.

    An open GET stream is a response that never completes, so uvicorn would wait for it until its
    timeout and then cut it off. The SDK's own ``close_standalone_sse_stream`` completes it cleanly;
    the session itself ends with the lifespan. The session manager keeps no public list of its
    sessions, hence the private attribute (read defensively).
    """
    sessions: dict[str, Any] = getattr(app.session_manager, "_server_instances", {})
    for transport in list(sessions.values()):
        transport.close_standalone_sse_stream()
    logger.debug("closed the event streams of %d HTTP session(s)", len(sessions))


async def drain(app: MCPServer[Any], stopping: Stopping, reason: str) -> None:
    """Answer every request in flight and end every open stream, refusing anything new meanwhile."""
    from server.app import in_flight_requests  # not at the top: binding the port must stay light

    stopping.stop(reason)
    left = await in_flight_requests(app).stop(reason, DRAIN_TIMEOUT)
    if left:
        logger.warning("%d request(s) still running %gs after they were cancelled", left, DRAIN_TIMEOUT)
    close_event_streams(app)


#: Signals that stop the HTTP server: SIGHUP too (a closed terminal or a service manager's stop),
#: whose default action would kill the copilot without stopping its children.
STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)


async def serve_http(
    app: MCPServer[Any],
    settings: ServerSettings,
    on_signal: Any,
    telemetry: Any = None,
    listener: socket.socket | None = None,
) -> None:
    """Serve until SIGTERM, SIGINT or SIGHUP; ``on_signal(name)`` records why we stopped.

    A second signal during the shutdown SIGKILLs every child's tree at once and lets the shutdown
    finish (uvicorn's own handling would skip the lifespan's cleanup on a second SIGINT, and
    re-raise the signals at the end, killing the process before its logs are closed).
    """
    import uvicorn

    from index.children.guard import child_guard

    class Server(uvicorn.Server):
        #: Why it stops: the signal's name.
        stop_reason = "shutdown"

        @contextlib.contextmanager
        def capture_signals(self) -> Iterator[None]:
            if threading.current_thread() is not threading.main_thread():
                yield
                return
            original = {signum: signal.signal(signum, self.handle_exit) for signum in STOP_SIGNALS}
            try:
                yield
            finally:
                for signum, handler in original.items():
                    signal.signal(signum, handler)

        def handle_exit(self, sig: int, frame: FrameType | None) -> None:
            name = signal.Signals(sig).name
            if self.should_exit:
                logger.warning("received %s during shutdown: killing every child now, then finishing", name)
                child_guard().kill_all()
                return
            logger.info("received %s, shutting down", name)
            on_signal(name)
            self.stop_reason = name
            self.should_exit = True

        async def shutdown(self, sockets: list[socket.socket] | None = None) -> None:
            # Stop listening before answering what is in flight (uvicorn closes them again,
            # harmlessly), so no new connection arrives while the copilot drains.
            for server in self.servers:
                server.close()
            await drain(app, stopping, self.stop_reason)
            await super().shutdown(sockets=sockets)

        async def startup(self, sockets: list[socket.socket] | None = None) -> None:
            await super().startup(sockets=sockets)
            if not self.should_exit:  # accepting requests now (uvicorn is silent about given sockets)
                logger.info("serving MCP over streamable HTTP on http://%s:%d%s", url_host(settings.http_host), port, MCP_PATH)

    check_exposure(settings)
    if listener is None:
        listener = bind_listener(settings)
    stopping = Stopping()
    config = uvicorn.Config(
        build_asgi(app, settings, telemetry, stopping),
        host=settings.http_host,
        port=settings.http_port,
        log_level=settings.log_level.lower(),
        lifespan="on",
        timeout_graceful_shutdown=GRACEFUL_SHUTDOWN_TIMEOUT,
        access_log=False,
        http=guarded_http_protocol(settings.http_read_timeout),
    )
    port = listener.getsockname()[1]
    await Server(config).serve(sockets=[listener])
