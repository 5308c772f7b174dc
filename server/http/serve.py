"""Serving the copilot over streamable HTTP: the ASGI stack, the listening socket, uvicorn and its stop."""

from __future__ import annotations

import contextlib
import errno
import logging
import signal
import socket
import threading
from collections.abc import Iterator
from types import FrameType
from typing import Any

from mcp.server.mcpserver import MCPServer
from starlette.types import ASGIApp

from index.errors import ConfigError
from server.http.body import RequestBodyGate
from server.http.common import MCP_PATH
from server.http.peers import ChildPeers
from server.http.guard import (
    GuardMiddleware,
    Stopping,
    StoppingGate,
    check_exposure,
    loopback_host_names,
    transport_security,
    url_host,
)
from server.http.protocol import guarded_http_protocol
from server.relay.disconnect import ClientGoneMiddleware
from server.settings import ServerSettings

logger = logging.getLogger(__name__)


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
        max_sessions=settings.http_max_sessions,
    )
    if stopping is not None:
        inner = StoppingGate(inner, stopping)
    return GuardMiddleware(
        inner,
        token=settings.token,
        allowed_origins=settings.allowed_origins,
        allowed_hosts=loopback_host_names(settings) if settings.binds_loopback else None,
        child_peers=ChildPeers(),
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


async def drain(app: MCPServer[Any], stopping: Stopping, reason: str) -> int:
    """Answer every request in flight and end every open stream, refusing anything new meanwhile;
    returns how many requests still ran when the drain gave up on them."""
    from server.app import in_flight_requests  # not at the top: binding the port must stay light

    stopping.stop(reason)
    left = await in_flight_requests(app).stop(reason, DRAIN_TIMEOUT)
    if left:
        logger.warning("%d request(s) still running %gs after they were cancelled", left, DRAIN_TIMEOUT)
    close_event_streams(app)
    return left


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
    from sse_starlette.sse import AppStatus

    from index.children.containment.guard import child_guard

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
            left = await drain(app, stopping, self.stop_reason)
            if left:
                # Streams of handlers that ignored their cancellation get no answer: end them now
                # rather than at uvicorn's timeout.
                AppStatus.should_exit = True
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
    # sse_starlette ends every event stream within 0.5 s of the stop signal (it watches uvicorn's
    # should_exit), racing the drain: a call in flight then lost its "shutting down" answer under
    # load. The drain ends the streams itself, each once its answer is out.
    AppStatus.disable_automatic_graceful_drain()
    try:
        await Server(config).serve(sockets=[listener])
    finally:
        AppStatus.should_exit = False  # process-global: a later server in this process starts afresh
        AppStatus.enable_automatic_graceful_drain_mode()
