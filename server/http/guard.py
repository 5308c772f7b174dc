"""Who may talk to the HTTP copilot: bearer token, Origin and Host checks, and the gate a stop closes.

Bound to loopback by default. Binding any other interface requires a bearer token (checked
in constant time on every request). Browsers' cross-site requests are refused by Origin: a
request without Origin (any non-browser client) or from a loopback page is accepted, other
Origins only when listed in ``COPILOT_ALLOWED_ORIGINS``. On loopback the SDK's DNS-rebinding
protection (Host header check) stays on as well. A request from one of the copilot's own child
servers is refused, token or not (:mod:`server.http.peers`).
"""

from __future__ import annotations

import hmac
import logging
from dataclasses import dataclass, field
from urllib.parse import urlsplit

import anyio
from mcp.server.transport_security import TransportSecuritySettings
from starlette.types import ASGIApp, Receive, Scope, Send

from index.errors import ConfigError
from server.http.common import CONNECTION_CLOSE, reply
from server.http.peers import ChildPeers
from server.settings import LOOPBACK_NAMES, ServerSettings

logger = logging.getLogger(__name__)


#: Shortest bearer token accepted: 16 random characters are beyond online guessing; 1 is not.
MIN_TOKEN_LENGTH = 16
_LOOPBACK_ORIGIN_HOSTS = frozenset({"localhost", "127.0.0.1", "[::1]", "::1"})


def origin_allowed(origin: str, extra: list[str]) -> bool:
    """Loopback pages (any port) and the configured Origins (exact, or ``scheme://host:*``), in any case."""
    origin = origin.lower()
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
        await reply(send, 503, self._stopping.shutting_down_message(), extra_headers=[CONNECTION_CLOSE])


class GuardMiddleware:
    """Rejects requests with a foreign Origin (403), from the copilot's own child servers (403,
    :mod:`server.http.peers`) or without the bearer token (401).

    A refusal closes the connection: its body is never read, and a client without the token must
    not keep a connection open by trickling one (uvicorn would wait for it without end).
    """

    def __init__(
        self,
        app: ASGIApp,
        *,
        token: str | None,
        allowed_origins: list[str],
        allowed_hosts: frozenset[str] | None = None,
        child_peers: ChildPeers | None = None,
    ) -> None:
        self.app = app
        self._child_peers = child_peers
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
            await reply(
                send,
                421,
                "Misdirected Request: invalid Host header (the copilot answers loopback names only).",
                extra_headers=[CONNECTION_CLOSE],
            )
            return
        origin = headers.get("origin")
        if origin is not None and not origin_allowed(origin, self._allowed_origins):
            logger.warning("refused a request from Origin %r", origin)
            await reply(
                send,
                403,
                "Forbidden: this Origin may not use the copilot (see COPILOT_ALLOWED_ORIGINS).",
                extra_headers=[CONNECTION_CLOSE],
            )
            return
        child = await self._child_at_the_other_end(scope)
        if child is not None:
            logger.warning("refused a request from pid %d, a process of one of the copilot's own child servers", child)
            await reply(
                send,
                403,
                "Forbidden: the copilot's own child servers may not use it (a server calling the copilot would reach "
                "the other servers' tools outside the user's session).",
                extra_headers=[CONNECTION_CLOSE],
            )
            return
        if self._token is not None:
            scheme, _, presented = headers.get("authorization", "").partition(" ")
            if scheme.lower() != "bearer" or not hmac.compare_digest(presented.strip().encode(), self._token):
                await reply(
                    send,
                    401,
                    "Unauthorized: send 'Authorization: Bearer <token>' with the copilot's token (COPILOT_HTTP_TOKEN).",
                    extra_headers=[(b"www-authenticate", b'Bearer realm="mcp-copilot"'), CONNECTION_CLOSE],
                )
                return
        await self.app(_normalized(scope) if _to_normalize(scope, headers) else scope, receive, send)

    async def _child_at_the_other_end(self, scope: Scope) -> int | None:
        # Any address, not only loopback: a child reaches a copilot bound beyond it through the
        # machine's own addresses too.
        peers, client, server = self._child_peers, scope.get("client"), scope.get("server")
        if peers is None or not client or not server:
            return None
        return await peers.child_at((client[0], int(client[1])), (server[0], int(server[1])))


def _to_normalize(scope: Scope, headers: dict[str, str]) -> bool:
    """Whether :func:`_normalized` would change the request (most pass as they came)."""
    host, origin = headers.get("host", ""), headers.get("origin", "")
    media_type = headers.get("content-type", "").partition(";")[0]
    resumes = "last-event-id" in headers and scope.get("method") == "GET"
    return resumes or host != host.lower() or origin != origin.lower() or media_type != media_type.lower()


def _normalized(scope: Scope) -> Scope:
    """The request as the SDK's transport reads it right.

    The SDK compares ``Host``, ``Origin`` and the ``Content-Type`` media type case-sensitively
    (``LOCALHOST:8765`` got 421, ``http://LOCALHOST:3000`` a plain-text 403, ``APPLICATION/JSON``
    415), where HTTP says all three are case-insensitive and this guard already checked the host
    and the origin; and a GET carrying ``Last-Event-ID`` asks to resume a stream from an
    event store the copilot does not keep, which the SDK answered with nothing (a 500): without the
    header the GET opens a new stream, as a server without resumption may answer it.
    """
    headers: list[tuple[bytes, bytes]] = []
    for name, value in scope.get("headers", []):
        lowered = name.lower()
        if lowered == b"last-event-id" and scope.get("method") == "GET":
            continue
        if lowered in (b"host", b"origin"):
            value = value.lower()
        elif lowered == b"content-type":
            media_type, separator, parameters = value.partition(b";")
            value = media_type.lower() + separator + parameters
        headers.append((name, value))
    return {**scope, "headers": headers}


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


def check_exposure(settings: ServerSettings) -> None:
    """Refuse to serve beyond loopback without a token, and with a guessable one anywhere."""
    if not settings.binds_loopback and not settings.token:
        raise ConfigError(
            f"refusing to listen on {settings.http_host} without a bearer token: anyone who can reach this "
            "address could run tools on this machine. Set COPILOT_HTTP_TOKEN (or --token-file FILE), or bind "
            "127.0.0.1."
        )
    token = settings.token
    odd = next((character for character in token or "" if not "!" <= character <= "~"), None)
    if odd is not None:
        # A header carries bytes the guard reads as latin-1: a space (a CRLF file's "\r", an
        # indented line) or a non-ASCII letter would leave a token no client can ever present.
        raise ConfigError(
            f"the bearer token holds {odd!r} at position {token.index(odd) + 1}; use visible ASCII characters "  # type: ignore[union-attr]
            "only, no spaces, e.g. COPILOT_HTTP_TOKEN=$(openssl rand -hex 24)."
        )
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
