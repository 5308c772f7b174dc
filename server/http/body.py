"""Request bodies of the HTTP copilot: capped, never waited for forever, one JSON-RPC message each."""

from __future__ import annotations

import logging
import math
from dataclasses import dataclass
from typing import Any, Literal

import anyio
from mcp.server.streamable_http import check_accept_headers
from mcp.shared.inbound import MCP_PROTOCOL_VERSION_HEADER
from mcp_types import INTERNAL_ERROR, INVALID_PARAMS, INVALID_REQUEST, PARSE_ERROR
from mcp_types.version import HANDSHAKE_PROTOCOL_VERSIONS
from starlette.requests import Request
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from index.json_text import parse_json
from server.bounded import shown_name
from server.envelope import lenient_read_problem, message_problem
from server.http.common import CONNECTION_CLOSE, MCP_PATH, jsonrpc_error, reply, send_json
from server.http.guard import Stopping

logger = logging.getLogger(__name__)


@dataclass
class BodyRead:
    """What reading a request's body came to: all of it, or why not."""

    outcome: Literal["complete", "too_large", "stalled", "too_slow", "gone", "stopping"]
    body: bytes = b""
    #: Seconds the whole body was given (``too_slow``).
    deadline: float = 0.0


#: Slowest a request's body may arrive on average, from its first byte and after a pause of
#: ``read_timeout``: a 16 MiB body gets some 17 minutes, an ``initialize`` a few seconds more than the pause.
MIN_BODY_RATE = 16 * 1024

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

    def __init__(
        self,
        app: ASGIApp,
        *,
        max_bytes: int,
        read_timeout: float,
        stopping: Stopping | None = None,
        max_sessions: int | None = None,
    ) -> None:
        self.app = app
        self.max_bytes = max_bytes
        self.read_timeout = read_timeout
        self._stopping = stopping or Stopping()
        self._max_sessions = max_sessions

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        headers = _headers(scope) if scope["type"] == "http" else {}
        if _opens_session(scope, headers) and self._max_sessions is not None:
            send = SessionCapAnswer(send, self._max_sessions)
        if not _has_body(headers):
            # An empty POST gets the same 415/406 as one with a body (the SDK's are plain text or empty).
            if _is_mcp_post(scope) and (refusal := _header_problem(scope, headers)) is not None:
                await send_json(send, *refusal)
                return
            # GET, DELETE: nothing to read, and a DELETE whose client does not wait for the answer
            # must still end its session (a read would only see the disconnect).
            await self.app(scope, receive, send)
            return
        limit = self._limit(scope, headers)
        declared = _declared_length(headers)
        if declared is not None and declared > limit.max_bytes:
            await self._refuse_too_large(send, limit, declared)
            return
        read = await self._read(receive, limit.max_bytes, self._deadline(declared, limit))
        if read.outcome != "complete":
            await self._refuse(send, read, limit)
            return
        if _is_mcp_post(scope):
            if (refusal := _header_problem(scope, headers)) is not None:
                await send_json(send, *refusal)
                return
            handshake = _handshake_era(headers)
            if not handshake and (unreadable := lenient_read_problem(read.body)) is not None:
                # The SDK's 2026-07-28 entry reads more than its other reader (see EnvelopeCheck): answered here.
                logger.debug("answered an HTTP request that is not one JSON-RPC message: %s", unreadable.message)
                await send_json(send, 400, unreadable.as_jsonrpc())
                return
            send = EnvelopeCheck(send, read.body, handshake=handshake)
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

    def _deadline(self, declared: int | None, limit: BodyLimit) -> float:
        """Seconds a whole body may take from its first byte: the pause allowed, then
        :data:`MIN_BODY_RATE` for its size. A client trickling a byte just within every
        ``read_timeout`` held its request, connection and task for as long as it liked (16 MiB at a
        byte per 29 s: years)."""
        size = limit.max_bytes if declared is None else min(declared, limit.max_bytes)
        return self.read_timeout + size / MIN_BODY_RATE

    async def _read(self, receive: Receive, max_bytes: int, deadline: float) -> BodyRead:
        # One clock for both limits, read when a message arrives: each wait is the pause allowed or
        # what is left of the deadline, whichever is shorter, and the shorter one is the verdict.
        # Two timers raced: a body that stalled after its first bytes got "too slow" or "stalled"
        # depending on which fired first, milliseconds apart for a small body.
        chunks: list[bytes] = []
        size = 0
        ends_at: float | None = None  # set by the first message (before it, only the pause counts)
        with anyio.CancelScope() as reading:
            self._stopping.body_reads.add(reading)
            if self._stopping.reason is not None:  # stopped between the StoppingGate and here
                reading.cancel()
            try:
                arrived = anyio.current_time()
                while True:
                    left = math.inf if ends_at is None else ends_at - arrived
                    message = await self._next(receive, min(self.read_timeout, max(left, 0.0)))
                    if message is None:
                        return BodyRead("stalled") if left >= self.read_timeout else BodyRead("too_slow", deadline=deadline)
                    arrived = anyio.current_time()
                    if ends_at is None:
                        ends_at = arrived + deadline
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

    async def _next(self, receive: Receive, wait: float) -> Message | None:
        """The client's next message, or ``None`` when it sent nothing for ``wait`` seconds."""
        with anyio.move_on_after(wait):
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
            await send_json(send, 408, jsonrpc_error(INVALID_REQUEST, message), [CONNECTION_CLOSE])
        elif read.outcome == "too_slow":
            logger.info("answered 408 to an HTTP client whose body took over %.0fs", read.deadline)
            message = (
                f"Request Timeout: the request's body did not arrive within {round(read.deadline, 1):g}s (a pause of "
                f"up to {self.read_timeout:g}s, COPILOT_HTTP_READ_TIMEOUT, then at least {MIN_BODY_RATE / 1024:g} KiB/s)."
            )
            await send_json(send, 408, jsonrpc_error(INVALID_REQUEST, message), [CONNECTION_CLOSE])
        else:
            await reply(send, 503, self._stopping.shutting_down_message(), [CONNECTION_CLOSE])

    async def _refuse_too_large(self, send: Send, limit: BodyLimit, declared: int | None) -> None:
        logger.warning("refused an HTTP request whose body is over %d bytes", limit.max_bytes)
        size = f"this one has {declared:,}" if declared is not None else "this one has more"
        message = f"Request body too large: {limit.explained}; {size}."
        await send_json(send, 413, jsonrpc_error(INVALID_REQUEST, message), [CONNECTION_CLOSE])


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


def _header_problem(scope: Scope, headers: dict[str, str]) -> tuple[int, dict[str, Any]] | None:
    """The status and JSON-RPC error for a POST to the MCP path its headers already rule out."""
    if (problem := _media_type_problem(headers)) is not None:
        return 415, problem
    if not _handshake_era(headers) and (unacceptable := _accept_problem(scope)) is not None:
        # The SDK's 2026-07-28 entry answers it with an empty 406, which no client can show.
        return 406, unacceptable
    return None


def _accept_problem(scope: Scope) -> dict[str, Any] | None:
    """The JSON-RPC error for a POST whose ``Accept`` leaves out JSON or SSE, read and worded as
    the SDK's handshake entry does, else ``None``."""
    json_ok, sse_ok = check_accept_headers(Request(scope))
    if json_ok and sse_ok:
        return None
    return jsonrpc_error(INVALID_REQUEST, "Not Acceptable: Client must accept both application/json and text/event-stream")


class SessionCapAnswer:
    """``send`` of a request opening a session: the SDK's refusal at the session cap (``503 Too many
    open sessions``, as an internal error) says which limit it is and how a slot frees up."""

    def __init__(self, send: Send, max_sessions: int) -> None:
        self._send = send
        self._max_sessions = max_sessions
        self._held: Message | None = None

    async def __call__(self, message: Message) -> None:
        if message["type"] == "http.response.start" and message["status"] == 503:
            self._held = message
            return
        if self._held is not None and message["type"] == "http.response.body":
            start, self._held = self._held, None
            if b"Too many open sessions" in message.get("body", b""):
                text = (
                    f"Service Unavailable: the copilot has its most open sessions ({self._max_sessions}, "
                    "COPILOT_HTTP_MAX_SESSIONS); end one you no longer use (DELETE with its mcp-session-id), or wait "
                    "for an idle one to be closed (COPILOT_HTTP_SESSION_IDLE_TIMEOUT), then connect again."
                )
                kept = [(name, value) for name, value in start["headers"] if name.lower() not in _BODY_HEADERS]
                await send_json(self._send, 503, jsonrpc_error(INTERNAL_ERROR, text), kept)
                return
            await self._send(start)
        await self._send(message)


class EnvelopeCheck:
    """``send`` of a POST to the MCP path, answering a body that is not one JSON-RPC message as
    ``server.envelope`` says (as over stdio) instead of as the SDK does, on either of its entries.

    The SDK's handshake-era entry answers such a body (a batch, a bare value, an envelope it cannot
    validate) with ``-32602`` and a dump of pydantic's errors, one that is not JSON with a parse
    error in its own words, and a request whose ``id`` is neither a string nor an integer (``null``,
    ``1.5``, ``true``) with 202, taking it for a notification: no answer ever comes, and the client
    waits for one until its own timeout. Its 2026-07-28 entry answers all of them with the right
    codes but one message for each (``Parse error``; ``Body must be a single JSON-RPC request or
    notification object``) and no id. Only those answers are looked at (a 400 without an id carrying
    ``-32602`` or ``-32700``, or on the 2026-07-28 entry ``-32600`` or ``-32700``; a 202 to a body
    that names an ``"id"``), and only then is the body parsed again: a well-formed request costs
    nothing more (a second parse of a 3 MB ``execute`` takes 0.2 s). The body is let go once the
    answer has started.

    The 2026-07-28 entry reads bodies with Python's ``json.loads``, which takes some the SDK's
    other reader refuses (a lone surrogate escape, a byte order mark, nesting past 200 levels): the
    request gate answers those itself (``server.envelope.lenient_read_problem``), before the SDK
    serves them.
    """

    def __init__(self, send: Send, body: bytes, *, handshake: bool = True) -> None:
        self._send = send
        self._body: bytes | None = body
        self._refusals = _HANDSHAKE_REFUSALS if handshake else _MODERN_REFUSALS
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
        problem = _envelope_correction(start["status"], answer.get("body", b""), body, self._refusals)
        if problem is None:
            await self._send(start)
            await self._send(answer)
            return
        logger.debug("answered an HTTP request that is not one JSON-RPC message: %s", problem["error"]["message"])
        kept = [(name, value) for name, value in start["headers"] if name.lower() not in _BODY_HEADERS]
        await send_json(self._send, 400, problem, kept)

    async def _pass_on(self, message: Message) -> None:
        self._body = None
        if self._held is not None:
            held, self._held = self._held, None
            await self._send(held)
        await self._send(message)


_BODY_HEADERS = frozenset({b"content-type", b"content-length"})
#: The codes of the SDK's refusals of a body it cannot read as one message, per entry. (Not the
#: handshake entry's ``-32600``: it refuses a missing or unknown session with it, before the body.)
_HANDSHAKE_REFUSALS = frozenset({INVALID_PARAMS, PARSE_ERROR})
_MODERN_REFUSALS = frozenset({INVALID_REQUEST, PARSE_ERROR})


def _envelope_correction(status: int, answer: bytes, body: bytes, refusals: frozenset[int]) -> dict[str, Any] | None:
    """What to answer instead of the SDK's ``status`` and ``answer`` to ``body``, else ``None``."""
    if status == 202:
        # A notification or a response: only a body naming an "id" can be a request the SDK took
        # for a notification (parsing every notification again would cost for nothing).
        return _problem(body) if b'"id"' in body else None
    try:
        error = parse_json(answer)
    except ValueError:
        return None
    if not isinstance(error, dict) or error.get("id") is not None:
        return None
    if not isinstance(error.get("error"), dict) or error["error"].get("code") not in refusals:
        return None  # an answer about something else
    problem = _problem(body)
    if problem is None and refusals is _MODERN_REFUSALS:
        return _unsolicited_response(body)
    return problem


def _unsolicited_response(body: bytes) -> dict[str, Any] | None:
    """A well-formed JSON-RPC response posted to the 2026-07-28 entry, which the SDK refuses as if
    it were malformed: say why instead. That entry never asks the client anything (a child's
    questions come back as an ``input_required`` result), so no response can be due."""
    try:
        message = parse_json(body)
    except (ValueError, RecursionError):
        return None
    if not isinstance(message, dict) or "method" in message or not ("result" in message or "error" in message):
        return None
    return jsonrpc_error(
        INVALID_REQUEST,
        "Invalid Request: this is a JSON-RPC response, and a 2026-07-28 request (no session) asks the client "
        "nothing it could answer: a server's questions come back as an input_required result; answer them by "
        "calling the same tool again with inputResponses and its requestState.",
    )


def _problem(body: bytes) -> dict[str, Any] | None:
    problem = message_problem(body)
    return None if problem is None else problem.as_jsonrpc()
