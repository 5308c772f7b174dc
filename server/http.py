"""Serving the copilot over streamable HTTP: bearer token, Origin checks, uvicorn.

Bound to loopback by default. Binding any other interface requires a bearer token (checked
in constant time on every request). Browsers' cross-site requests are refused by Origin: a
request without Origin (any non-browser client) or from a loopback page is accepted, other
Origins only when listed in ``COPILOT_ALLOWED_ORIGINS``. On loopback the SDK's DNS-rebinding
protection (Host header check) stays on as well.
"""

from __future__ import annotations

import contextlib
import errno
import hmac
import json
import logging
import signal
import socket
import threading
from collections.abc import Iterator
from dataclasses import dataclass
from types import FrameType
from typing import Any
from urllib.parse import urlsplit

from mcp.server.mcpserver import MCPServer
from mcp.server.transport_security import TransportSecuritySettings
from starlette.types import ASGIApp, Receive, Scope, Send

from index.errors import ConfigError
from server.relay.disconnect import ClientGoneMiddleware
from server.settings import LOOPBACK_NAMES, ServerSettings

logger = logging.getLogger(__name__)

MCP_PATH = "/mcp"
#: Shortest bearer token accepted: 16 random characters are beyond online guessing; 1 is not.
MIN_TOKEN_LENGTH = 16
_LOOPBACK_ORIGIN_HOSTS = frozenset({"localhost", "127.0.0.1", "[::1]", "::1"})


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
        await _reply(
            send,
            503,
            f"Service Unavailable: the copilot is shutting down ({reason}); connect again once it is back.",
            extra_headers=[(b"connection", b"close")],
        )


class GuardMiddleware:
    """Rejects requests with a foreign Origin (403) or without the bearer token (401)."""

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
            await _reply(send, 421, "Misdirected Request: invalid Host header (the copilot answers loopback names only).")
            return
        origin = headers.get("origin")
        if origin is not None and not origin_allowed(origin, self._allowed_origins):
            logger.warning("refused a request from Origin %r", origin)
            await _reply(send, 403, "Forbidden: this Origin may not use the copilot (see COPILOT_ALLOWED_ORIGINS).")
            return
        if self._token is not None:
            scheme, _, presented = headers.get("authorization", "").partition(" ")
            if scheme.lower() != "bearer" or not hmac.compare_digest(presented.strip().encode(), self._token):
                await _reply(
                    send,
                    401,
                    "Unauthorized: send 'Authorization: Bearer <token>' with the copilot's token (COPILOT_HTTP_TOKEN).",
                    extra_headers=[(b"www-authenticate", b'Bearer realm="mcp-copilot"')],
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
    body = json.dumps({"error": message}).encode()
    headers = [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())]
    await send({"type": "http.response.start", "status": status, "headers": headers + (extra_headers or [])})
    await send({"type": "http.response.body", "body": body})


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
    )
    if telemetry is not None:
        from server.telemetry.endpoints import ObservabilityRoutes

        starlette_app = ObservabilityRoutes(starlette_app, telemetry)  # /metrics, behind the same guard
    inner: ASGIApp = ClientGoneMiddleware(starlette_app)
    if stopping is not None:
        inner = StoppingGate(inner, stopping)
    return GuardMiddleware(
        inner,
        token=settings.token,
        allowed_origins=settings.allowed_origins,
        allowed_hosts=loopback_host_names(settings) if settings.binds_loopback else None,
    )


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

    stopping.reason = reason
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
    )
    port = listener.getsockname()[1]
    await Server(config).serve(sockets=[listener])
