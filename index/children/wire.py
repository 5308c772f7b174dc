"""A stdio child's stdout: newline-delimited JSON-RPC, read defensively.

:class:`StdoutReader` splits the child's stdout into lines and delivers the JSON-RPC messages to
the client session. Whatever else a child prints costs nothing, and no malformed reply leaves a
call waiting for its timeout:

- a line that is not a message (a banner, a JSON log line) is logged and skipped;
- text glued before a message without a newline (``Loading... {"jsonrpc": …}``) is cut off and
  the message read;
- a reply the SDK cannot read -- a lone UTF-16 surrogate escape, JSON nested deeper than 200
  levels, a JSON object that is not JSON-RPC -- fails the request it answers (found by its id) at
  once, saying what was wrong with the line; when its id cannot be found, every pending request
  fails, since none of them can be answered any more;
- a reply whose id matches no request the copilot sent fails the pending requests the same way
  (a late reply to a request the copilot already gave up on is not an error);
- a single line over ``max_bytes`` is discarded while it streams in (memory stays bounded) and
  the request it belonged to gets an error naming the limit; when the line began with text and a
  message follows (megabytes of output glued before a reply), the text is dropped and the message
  read;
- requests of the child's own are read while fewer than :data:`MAX_CHILD_REQUESTS` of them wait for
  the copilot's answer (:class:`ChildRequests`); beyond that the reader waits for answers to be
  written: a child that sends requests and never reads the answers cannot make the copilot hold
  more (each request is a task with its answer, waiting for the child's stdin). A request reusing
  the id of one still unanswered is dropped.

:class:`PendingRequests` is fed by the stdin writer, so the reader knows which ids are awaited.
Errors made up here carry ``data={"origin": "mcp-copilot"}`` (:data:`COPILOT_ORIGIN`), so callers
can tell them from errors the child itself sent.
"""

from __future__ import annotations

import json
import logging
import re
from collections import OrderedDict
from collections.abc import Callable, Iterable, Mapping
from typing import TYPE_CHECKING, Any

import anyio
import anyio.abc
import mcp.types as types
from anyio.streams.memory import MemoryObjectSendStream
from mcp.shared.dispatcher import coerce_request_id
from mcp.shared.message import SessionMessage
from pydantic import ValidationError

if TYPE_CHECKING:
    from index.children.direct import DirectRequests
    from index.children.process import ChildProcess

logger = logging.getLogger(__name__)

#: ``ErrorData.data`` of the errors the copilot makes up for a child's unreadable replies.
COPILOT_ORIGIN = {"origin": "mcp-copilot"}
#: Lines of one kind of a child's misbehaviour (non-protocol stdout lines, unreadable replies,
#: requests reusing an unanswered id) written to the stderr log per session; the rest are only counted.
JUNK_LINES_LOGGED = 20
_READ_CHUNK = 64 * 1024
_SNIPPET = 4096
#: Bytes of a discarded line kept to find a message start split between two reads.
_CARRY = 64
_SHOWN = 120
#: Ids of requests already answered or given up on, remembered to tell a late reply from a wrong one.
_FINISHED_REMEMBERED = 1024
# Where a message's top-level id can be read without the whole line: among the short members its
# object begins with (``{"jsonrpc":"2.0","id":7,…}`` from Python SDKs, ``{"method":"x","id":7,…}``)
# or ends with (``…,"id":7}`` from JSON.stringify in the TS SDK, ``…,"id":7,"jsonrpc":"2.0"}``).
# Only short scalar members may stand between it and the object's edge, so an "id" nested in the
# params never matches (its object's closing brace would be followed by more).
_SCALAR = rb'(?:"(?:[^"\\]|\\.)*"|-?\d+(?:\.\d+)?(?:[eE][-+]?\d+)?|true|false|null)'
_MEMBER = rb'"(?:[^"\\]|\\.)*"\s*:\s*' + _SCALAR
_ID_VALUE = rb'(-?\d+|"(?:[^"\\]|\\.)*")'
_ID_AT_HEAD = re.compile(rb'^\{\s*(?:' + _MEMBER + rb'\s*,\s*)*?"id"\s*:\s*' + _ID_VALUE + rb'\s*[,}]')
_ID_AT_TAIL = re.compile(rb'"id"\s*:\s*' + _ID_VALUE + rb'\s*(?:,\s*' + _MEMBER + rb'\s*)*\}\s*$')
_MESSAGE_START = re.compile(rb'\{\s*"jsonrpc"\s*:')
#: A high surrogate escape not followed by a low one, or a low one not preceded by a high one.
LONE_SURROGATE = re.compile(
    rb"\\u[dD][89abAB][0-9a-fA-F]{2}(?!\\u[dD][c-fC-F])|(?<![89abAB][0-9a-fA-F]{2})\\u[dD][c-fC-F]"
)

RequestId = int | str
#: Requests of the child that may wait for the copilot's answer at once (questions for the host
#: are fewer: ``server.relay.call.MAX_WAITING_QUESTIONS`` per call).
MAX_CHILD_REQUESTS = 64


class ChildRequests:
    """The child's requests the copilot has not answered yet, by id: at most ``limit`` are read."""

    def __init__(self, limit: int = MAX_CHILD_REQUESTS) -> None:
        self.limit = limit
        self.open: set[RequestId] = set()
        self._room = anyio.Event()
        self.closed = False
        #: How often the reader waited for room.
        self.pauses = 0

    def is_open(self, request_id: RequestId) -> bool:
        return coerce_request_id(request_id) in self.open

    def asked(self, request_id: RequestId) -> None:
        self.open.add(coerce_request_id(request_id))

    def answered(self, request_id: RequestId | None) -> None:
        """The copilot answered ``request_id`` (or the child cancelled it: it gets no answer)."""
        if request_id is None:
            return
        self.open.discard(coerce_request_id(request_id))
        if len(self.open) < self.limit:
            self._room.set()

    def sent(self, message: types.JSONRPCMessage) -> None:
        """Note a message written to the child's stdin (an answer frees room)."""
        if isinstance(message, types.JSONRPCResponse | types.JSONRPCError):
            self.answered(message.id)

    @property
    def full(self) -> bool:
        return len(self.open) >= self.limit and not self.closed

    async def room(self) -> None:
        """Until fewer than ``limit`` wait (or the session closed)."""
        while self.full:
            self._room = anyio.Event()
            await self._room.wait()

    def close(self) -> None:
        self.closed = True
        self._room.set()


class PendingRequests:
    """Requests sent to the child that await an answer, by (coerced) id."""

    def __init__(self) -> None:
        self.pending: dict[RequestId, str] = {}  # id -> method
        self._finished: OrderedDict[RequestId, None] = OrderedDict()

    def sent(self, message: types.JSONRPCMessage) -> None:
        """Note a message written to the child's stdin."""
        if isinstance(message, types.JSONRPCRequest):
            self.pending[coerce_request_id(message.id)] = message.method
        elif isinstance(message, types.JSONRPCNotification) and message.method == "notifications/cancelled":
            request_id = (message.params or {}).get("requestId")
            if isinstance(request_id, int | str):
                self._finish(coerce_request_id(request_id))

    def expect(self, request_id: RequestId, method: str) -> None:
        """Note a request written to the child outside the session (``index.children.direct``)."""
        self.pending[coerce_request_id(request_id)] = method

    def cancelled(self, request_id: RequestId) -> None:
        """The copilot gave up on ``request_id`` (a reply to it is late, not wrong)."""
        self._finish(coerce_request_id(request_id))

    def answered(self, request_id: RequestId) -> str:
        """``pending`` (now answered), ``late`` (answered or given up on before) or ``unknown``."""
        key = coerce_request_id(request_id)
        if key in self.pending:
            self._finish(key)
            return "pending"
        return "late" if key in self._finished else "unknown"

    def _finish(self, key: RequestId) -> None:
        self.pending.pop(key, None)
        self._finished[key] = None
        while len(self._finished) > _FINISHED_REMEMBERED:
            self._finished.popitem(last=False)


def jsonrpc_line(message: Mapping[str, Any]) -> bytes:
    """One JSON-RPC message as a line, for messages written beside the SDK (``index.children.direct``,
    ``server.stdio.fast``); what the JSON module refuses (NaN) takes the SDK's serializer, and a lone
    surrogate (no UTF-8 for it) is replaced."""
    try:
        text = json.dumps(message, ensure_ascii=False, separators=(",", ":"), allow_nan=False)
    except (TypeError, ValueError):
        model = types.jsonrpc_message_adapter.validate_python(dict(message), by_name=False)
        text = model.model_dump_json(by_alias=True, exclude_unset=True)
    return text.encode("utf-8", "replace") + b"\n"


def _shown(line: bytes) -> str:
    text = line[:_SHOWN].decode("utf-8", "replace")
    return repr(text + ("…" if len(line) > _SHOWN else ""))


def _raw_id(raw: bytes) -> RequestId:
    return int(raw) if not raw.startswith(b'"') else raw[1:-1].decode("utf-8", "replace")


def loose_parse(line: bytes) -> Any:
    """The line as Python's own JSON reader sees it (it accepts lone surrogates), or ``None``."""
    try:
        return json.loads(line)
    except (ValueError, RecursionError):
        return None


def request_id_of(line: bytes, parsed: Any = None) -> RequestId | None:
    """The id of a JSON-RPC message the SDK could not read, from ``parsed`` (:func:`loose_parse`) or the text."""
    if isinstance(parsed, dict):
        found = parsed.get("id")
        return found if isinstance(found, int | str) and not isinstance(found, bool) else None
    match = _ID_AT_HEAD.match(line[:_SNIPPET]) or _ID_AT_TAIL.search(line[-_SNIPPET:])
    return _raw_id(match.group(1)) if match else None


def error_at(loc: Iterable[Any], message: str) -> str:
    """``where: message`` for a validation error at ``loc`` (``params.name``); ``message`` alone at the top."""
    where = ".".join(str(part) for part in loc)
    return f"{where}: {message}" if where else message


def describe_unreadable(line: bytes, error: ValidationError) -> str:
    """What is wrong with a line the SDK's JSON-RPC reader rejected, in words a person can act on."""
    detail = error.errors()[0] if error.errors() else {}
    message = str(detail.get("msg", error))
    if detail.get("type") == "json_invalid":
        if "recursion limit" in message:
            return "its JSON is nested deeper than the 200 levels the copilot reads"
        if LONE_SURROGATE.search(line):
            return "it contains a lone UTF-16 surrogate escape (such as \\ud800), which is not valid Unicode"
        return f"it is not valid JSON ({message.removeprefix('Invalid JSON: ')})"
    parsed = loose_parse(line)
    if isinstance(parsed, dict) and parsed.get("jsonrpc") != "2.0":
        return 'it is not a JSON-RPC 2.0 message ("jsonrpc": "2.0" is missing)'
    return f"it is not a valid JSON-RPC message ({error_at(detail.get('loc', ()), message)})"


def note_dropped(child: ChildProcess) -> None:
    """At a session's end: how many of each kind of misbehaviour went past the log's cap."""
    for count, what in (
        (child.junk_lines, "non-protocol stdout lines"),
        (child.unreadable_lines, "unreadable replies"),
        (child.duplicate_requests, "requests reusing the id of an unanswered one"),
    ):
        if count > JUNK_LINES_LOGGED:
            child.note(f"{count} {what} were dropped in this session")


class StdoutReader:
    """Splits the child's stdout into lines and delivers its JSON-RPC messages; see the module docstring.

    Memory stays bounded by ``max_bytes``: a longer line is discarded while it streams in, keeping
    only its head and tail to answer the request it belonged to with an error.
    """

    def __init__(
        self,
        child: ChildProcess,
        server: str,
        stdout: anyio.abc.ByteReceiveStream,
        deliver: MemoryObjectSendStream[SessionMessage | Exception],
        max_bytes: int,
        on_close: Callable[[], None],
        requests: PendingRequests | None = None,
        asked: ChildRequests | None = None,
    ) -> None:
        self.child = child
        self.server = server
        self.stdout = stdout
        self.deliver = deliver
        self.max_bytes = max_bytes
        self.on_close = on_close
        self.requests = requests if requests is not None else PendingRequests()
        #: The child's requests awaiting the copilot's answers (the stdin writer notes the answers).
        self.asked = asked if asked is not None else ChildRequests()
        self.delivering = True
        #: Takes answers and progress of the copilot's own requests before the session sees them.
        self.direct: DirectRequests | None = None

    async def run(self) -> None:
        buffer = bytearray()
        discarding = False
        #: The line being discarded began with text, not a message: a message start in what
        #: follows is a reply glued to that text, read from there (the text is dropped).
        junk_first = False
        head = b""
        tail = b""
        dropped = 0
        try:
            while True:
                try:
                    chunk = await self.stdout.receive(_READ_CHUNK)
                except (anyio.EndOfStream, anyio.ClosedResourceError, anyio.BrokenResourceError, OSError):
                    break
                start = 0
                while True:
                    newline = chunk.find(b"\n", start)
                    piece = chunk[start:] if newline < 0 else chunk[start:newline]
                    if discarding and junk_first:
                        window = tail[-_CARRY:] + piece  # a message start may straddle two reads
                        found = _MESSAGE_START.search(window)
                        if found is not None:
                            self._dropped_glued_text(dropped + found.start() - min(len(tail), _CARRY))
                            discarding = False
                            buffer = bytearray(window[found.start() :])
                            piece = b""
                    if discarding:
                        dropped += len(piece)
                        tail = (tail + piece)[-_SNIPPET:]
                    else:
                        buffer += piece
                        if len(buffer) > self.max_bytes:
                            junk_first = not bytes(buffer[:_SNIPPET]).lstrip().startswith(b"{")
                            found = _MESSAGE_START.search(buffer) if junk_first else None
                            if found is not None:
                                self._dropped_glued_text(found.start())
                                del buffer[: found.start()]
                                junk_first = False
                        if len(buffer) > self.max_bytes:
                            discarding = True
                            dropped = len(buffer)
                            head, tail = bytes(buffer[:_SNIPPET]), bytes(buffer[-_SNIPPET:])
                            buffer = bytearray()
                    if newline < 0:
                        # What a timeout reports: a child that wrote its reply without the newline.
                        self.child.unterminated_bytes = dropped if discarding else len(buffer)
                        self.child.unterminated_head = head[:_SHOWN] if discarding else bytes(buffer[:_SHOWN])
                        break
                    start = newline + 1
                    if discarding:
                        discarding = False
                        await self._oversized(head, tail, dropped)
                    else:
                        line = bytes(buffer)
                        buffer.clear()
                        await self._line(line)
        finally:
            self.asked.close()
            if self.direct is not None:
                self.direct.close()
            self.on_close()

    # -- delivering -------------------------------------------------------------------------------
    async def _send(self, item: SessionMessage) -> None:
        if self.direct is not None and await self.direct.route(item.message):
            return
        if not self.delivering:
            return
        try:
            await self.deliver.send(item)
        except (anyio.ClosedResourceError, anyio.BrokenResourceError):
            # The session is gone; keep draining so a child flushing output can still exit.
            self.delivering = False

    async def _fail(self, request_id: RequestId, message: str) -> None:
        """Answer a pending request with an error made up by the copilot."""
        self.requests.answered(request_id)
        error = types.ErrorData(code=types.PARSE_ERROR, message=message, data=dict(COPILOT_ORIGIN))
        await self._send(SessionMessage(types.JSONRPCError(jsonrpc="2.0", id=request_id, error=error)))

    async def _fail_pending(self, message: str) -> None:
        for request_id in list(self.requests.pending):
            await self._fail(request_id, message)

    async def _admit(self, message: types.JSONRPCRequest) -> bool:
        """Whether to deliver a request of the child's: one at a time past :data:`MAX_CHILD_REQUESTS`
        unanswered ones (the reader waits), none reusing the id of an unanswered one."""
        if self.asked.is_open(message.id):
            self.child.duplicate_requests += 1
            shown = _shown(json.dumps(message.id).encode())
            self._note_capped(
                self.child.duplicate_requests,
                f"sent a request with id {shown} while its earlier request with that id was unanswered; dropped it",
                "further requests reusing an unanswered id are dropped without logging",
            )
            return False
        if self.asked.full:
            self.child.paused_requests = len(self.asked.open)
            self.asked.pauses += 1
            if self.asked.pauses == 1:  # a child that reads slowly pauses again and again: said once
                self.child.note(
                    f"has {len(self.asked.open)} requests waiting for the copilot's answers (it may not read its "
                    "stdin); its output is read again once one is answered"
                )
                waiting = len(self.asked.open)
                logger.warning("%s: %d requests unanswered; reading its output waits", self.server, waiting)
            await self.asked.room()
            self.child.paused_requests = 0
        self.asked.asked(message.id)
        return True

    async def _deliver(self, message: types.JSONRPCMessage) -> None:
        if isinstance(message, types.JSONRPCRequest):
            if not self.delivering or not await self._admit(message):
                return  # (no session any more: nobody would answer it)
        elif isinstance(message, types.JSONRPCNotification) and message.method == "notifications/cancelled":
            request_id = (message.params or {}).get("requestId")
            if isinstance(request_id, int | str) and not isinstance(request_id, bool):
                self.asked.answered(request_id)  # a cancelled request is not answered
        if isinstance(message, types.JSONRPCResponse | types.JSONRPCError):
            if message.id is None:
                assert isinstance(message, types.JSONRPCError)
                self.child.note(f"answered a request it could not identify: {message.error.message}")
                await self._fail_pending(
                    f"server '{self.server}' answered with an error that names no request (it may not have "
                    f"understood the copilot's): {message.error.code}: {message.error.message}"
                )
                return
            if self.requests.answered(message.id) == "unknown":
                self.child.note(f"sent a reply with id {message.id!r}, which no request of the copilot had")
                if self.requests.pending:
                    waiting = ", ".join(repr(key) for key in self.requests.pending)
                    await self._fail_pending(
                        f"server '{self.server}' sent a reply with id {message.id!r}, but the copilot's pending "
                        f"request has id {waiting}: the server's replies cannot be matched to requests"
                    )
                return
        await self._send(SessionMessage(message))

    # -- reading lines ----------------------------------------------------------------------------
    async def _line(self, line: bytes) -> None:
        line = line.strip()
        if not line:
            return
        prefix = b""
        if not line.startswith(b"{"):
            found = _MESSAGE_START.search(line)
            if found is None:
                self._junk(line)
                return
            prefix, line = line[: found.start()], line[found.start() :]
        try:
            message = types.jsonrpc_message_adapter.validate_json(line, by_name=False)
        except ValidationError as error:
            await self._unreadable(prefix + line, line, error)
            return
        if prefix:
            self.child.note(f"wrote {len(prefix)} bytes of text before a message, without a newline: {_shown(prefix)}")
        await self._deliver(message)

    async def _unreadable(self, whole: bytes, line: bytes, error: ValidationError) -> None:
        parsed = loose_parse(line)
        if isinstance(parsed, dict):
            if "method" in parsed or not ({"result", "error"} & parsed.keys() or "jsonrpc" in parsed):
                self._junk(whole)  # a request or notification of the child's, or a JSON log line
                return
        elif parsed is not None or b'"jsonrpc"' not in line[:_SNIPPET] or b'"method"' in line[:200]:
            self._junk(whole)
            return
        request_id = request_id_of(line, parsed)
        what = describe_unreadable(line, error)
        self.child.unreadable_lines += 1
        if self._note_capped(
            self.child.unreadable_lines,
            f"sent a reply the copilot cannot read ({len(line)} bytes): {what}: {_shown(line)}",
            "further unreadable replies are counted without logging",
        ):
            logger.warning("%s: unreadable reply: %s", self.server, what)
        message = (
            f"server '{self.server}' sent a reply the copilot cannot read: {what}. "
            f"The line ({len(line)} bytes) starts {_shown(line)}"
        )
        if request_id is not None and coerce_request_id(request_id) in self.requests.pending:
            await self._fail(request_id, message)
        elif self.requests.pending:
            await self._fail_pending(message + "; it names no pending request, so every pending one fails")

    def _junk(self, line: bytes) -> None:
        self.child.junk_lines += 1
        if self._note_capped(
            self.child.junk_lines,
            f"ignored a non-protocol line on stdout ({len(line)} bytes): {_shown(line)}",
            "further non-protocol stdout lines are dropped without logging",
        ):
            logger.debug("%s: ignored non-protocol stdout line: %s", self.server, _shown(line))

    def _note_capped(self, count: int, text: str, further: str) -> bool:
        """Note the ``count``-th of one kind of misbehaviour in the child's log while under
        :data:`JUNK_LINES_LOGGED` (a child may repeat it nonstop: the rest are counted, see
        :func:`note_dropped`); whether it was noted."""
        if count > JUNK_LINES_LOGGED:
            return False
        self.child.note(text)
        if count == JUNK_LINES_LOGGED:
            self.child.note(further)
        return True

    def _dropped_glued_text(self, size: int) -> None:
        self.child.oversized_lines += 1
        self.child.note(
            f"wrote {size} bytes of text before a message without a newline (over the {self.max_bytes}-byte limit "
            "of a line); dropped them and read the message"
        )
        logger.warning("%s: dropped %d bytes of text glued before a message", self.server, size)

    async def _oversized(self, head: bytes, tail: bytes, size: int) -> None:
        self.child.oversized_lines += 1
        self.child.note(f"dropped a {size}-byte stdout line (limit {self.max_bytes} bytes)")
        logger.warning("%s: dropped a %d-byte stdout line (limit %d bytes)", self.server, size, self.max_bytes)
        # Answer the request it was the response to, so the caller hears why instead of timing out.
        match = _ID_AT_HEAD.match(head) or _ID_AT_TAIL.search(tail)
        if match is None or b'"method"' in head[:200]:
            return
        await self._fail(
            _raw_id(match.group(1)),
            f"the server's response was {size} bytes, over the {self.max_bytes}-byte message limit "
            "(COPILOT_MAX_MESSAGE_BYTES); ask the tool for less data",
        )
