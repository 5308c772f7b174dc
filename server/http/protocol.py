"""Connections below the ASGI app: a request's line and headers capped and timed, refusals drained."""

from __future__ import annotations

import asyncio
import json
import logging
from typing import Any

from mcp_types import INVALID_REQUEST

from server.http.common import jsonrpc_error

logger = logging.getLogger(__name__)


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
            self._head_tail = b""  # the last bytes of the head so far: its end may straddle two reads
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
            if not (in_body or self._real_transport.is_closing()):
                # Checked before the parser sees it: a read that completes an oversized head would
                # otherwise hand it to the app (65-128 KiB heads were served with 200).
                if self._head_bytes + self._head_part(data) > max_head_bytes:
                    self._count_head_bytes(len(data))
                    return
                self._head_tail = (self._head_tail + data)[-3:]
            super().data_received(data)
            if self.cycle is not cycle:  # a request's head is complete: the app has it now
                self._head_bytes = 0
                self._head_tail = b""
                self._cancel_timer()
            elif not (in_body or self._in_body() or self._real_transport.is_closing()):
                self._count_head_bytes(len(data))  # (a chunk ending a body is not: at most one uncounted)

        def _head_part(self, data: bytes) -> int:
            """How many bytes of ``data`` belong to the head being read (all of them until its end)."""
            window = self._head_tail + data
            ends = [found + len(mark) for mark in (b"\r\n\r\n", b"\n\n") if (found := window.find(mark)) >= 0]
            return max(0, min(ends) - len(self._head_tail)) if ends else len(data)

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
