"""What the copilot answers a message that is not one valid JSON-RPC request: the same on every transport.

The SDK refuses such a message in its own words per transport (over HTTP a ``-32602`` with a dump of
pydantic's errors, or a 202 for a request whose ``id`` it cannot take, or on its 2026-07-28 entry one
message and no id for all; over stdio nothing at all), so the stdio transport (``server.stdio.serve``)
and the HTTP one (``server.http.body``, both its entries) hand what the SDK refused to
:func:`message_problem`, and answer with the :class:`EnvelopeProblem` it finds: one code and one
message per kind of malformed message, whichever way it came.

The codes are JSON-RPC 2.0's: ``-32700`` (Parse error) for what is not JSON (or not UTF-8, which
MCP's JSON-RPC messages are), ``-32600`` (Invalid Request) for JSON that is not a valid request
object -- a batch (MCP has none since 2025-06-18), a bare value, no ``"jsonrpc": "2.0"``, an ``id``
that is neither a string nor an integer, a ``method`` that is not a string, ``params`` that are not
an object. MCP's ``JSONRPCRequest`` carries its params as an object only, so other params make the
envelope invalid, not merely the params of one method (``-32602``, which the dispatcher answers once
a message was read).

Only messages the SDK refused get here: a valid request costs nothing. Except on the SDK's
2026-07-28 HTTP entry, which reads bodies with Python's ``json.loads``: that takes some the SDK's
other reader (``pydantic_core``, on stdio and the handshake entry) refuses, which
:func:`lenient_read_problem` finds.
"""

from __future__ import annotations

import json
from typing import Any

import pydantic_core
from mcp_types import INVALID_REQUEST, PARSE_ERROR, RequestId, jsonrpc_message_adapter
from pydantic import BaseModel, ConfigDict, ValidationError

from index.children.wire import LONE_SURROGATE, error_at, loose_parse, request_id_of
from server.bounded import shown_name

_BYTE_ORDER_MARK = b"\xef\xbb\xbf"
#: Longest JSON value repeated in a message (an odd id, a bare value).
_SHOWN_VALUE = 40


class EnvelopeProblem(BaseModel):
    """The JSON-RPC error answering a malformed message."""

    model_config = ConfigDict(frozen=True)

    code: int
    message: str
    #: The request's id when the message still shows a valid one (the host's pending call then
    #: fails at once), else ``None`` (``"id": null``, as JSON-RPC prescribes).
    request_id: RequestId | None = None
    #: Whether JSON-RPC answers the message: not when it reads as a notification or a response. Over
    #: stdio such a message is not answered; over HTTP every POST is (with a status).
    wants_answer: bool = True

    def as_jsonrpc(self) -> dict[str, Any]:
        """The error as a JSON-RPC message."""
        return {"jsonrpc": "2.0", "id": self.request_id, "error": {"code": self.code, "message": self.message}}


def parse_error(why: str, request_id: RequestId | None = None, *, wants_answer: bool = True) -> EnvelopeProblem:
    """``-32700``: ``why`` says what about the message is not JSON."""
    return EnvelopeProblem(
        code=PARSE_ERROR, message=f"Parse error: {why}.", request_id=request_id, wants_answer=wants_answer
    )


def invalid_request(why: str, request_id: RequestId | None = None, *, wants_answer: bool = True) -> EnvelopeProblem:
    """``-32600``: ``why`` says what about the message is not a valid request."""
    return EnvelopeProblem(
        code=INVALID_REQUEST, message=f"Invalid Request: {why}.", request_id=request_id, wants_answer=wants_answer
    )


def message_problem(raw: bytes) -> EnvelopeProblem | None:
    """What is wrong with ``raw``, one message as the SDK read it (its bytes as UTF-8), else ``None``."""
    try:
        value = pydantic_core.from_json(raw)  # the SDK's JSON reader, on either transport
    except ValueError as error:  # invalid JSON or UTF-8, too deeply nested, a number out of range
        return _parse_problem(raw, str(error))
    return value_problem(value)


def lenient_read_problem(raw: bytes) -> EnvelopeProblem | None:
    """Why the SDK's JSON reader refuses ``raw`` when Python's ``json.loads`` reads it, else ``None``.

    ``json.loads`` takes lone surrogate escapes, surrogates encoded as UTF-8, a byte order mark,
    UTF-16 and UTF-32, and nesting past 200 levels; the SDK's reader refuses each. Reading the body
    with the SDK's reader costs less than scanning it for those would (some 0.4 ms for a 3 MB body,
    against 3-5 ms for byte scans); what else ``json.loads`` refuses, the SDK's reader refuses too,
    and it is answered here as :func:`message_problem` answers it.
    """
    try:
        pydantic_core.from_json(raw)
    except ValueError as error:
        return _parse_problem(raw, str(error))
    return None


def value_problem(value: Any) -> EnvelopeProblem | None:
    """What is wrong with ``value``, a JSON value read as one message, else ``None``."""
    if isinstance(value, list):
        return invalid_request(
            "the message is a JSON array (a batch); send each JSON-RPC message on its own "
            "(MCP has no batches since 2025-06-18)"
        )
    if not isinstance(value, dict):
        return invalid_request(f"the message must be one JSON-RPC message object, not {_shown(value)}")
    return _object_problem(value)


def _parse_problem(raw: bytes, error: str) -> EnvelopeProblem:
    text = raw.strip()
    # Python's own reader takes what the SDK's does not (lone surrogates, a byte order mark skipped
    # here, invalid UTF-8 replaced here): the id of a request with one of those is found, and a
    # notification is still one; else the id is looked for in the text.
    unmarked = text.removeprefix(_BYTE_ORDER_MARK)
    loose = loose_parse(unmarked)
    if loose is None and (replaced := unmarked.decode("utf-8", "replace").encode()) != unmarked:
        loose = loose_parse(replaced)
    request_id = request_id_of(text, loose)
    if text.startswith(_BYTE_ORDER_MARK):
        why = "the message begins with a byte order mark (U+FEFF), which must not precede a JSON-RPC message"
    elif "recursion limit" in error:
        why = "the message's JSON is nested deeper than the 200 levels the copilot reads"
    elif "escape" in error and LONE_SURROGATE.search(text):
        why = "the message contains a lone UTF-16 surrogate escape (such as \\ud800), which is not valid Unicode"
    elif b"\x00" in text[:2]:
        why = "the message is not UTF-8, which MCP's messages are (it begins with NUL bytes, as UTF-16 does)"
    else:
        try:
            raw.decode("utf-8")
        except UnicodeDecodeError as bad:
            why = f"the message is not valid UTF-8 (at byte {bad.start:,})"
        else:
            why = f"the message is not valid JSON ({error})"
    return parse_error(why, request_id, wants_answer=not isinstance(loose, dict) or _wants_answer(loose))


def _object_problem(message: dict[str, Any]) -> EnvelopeProblem | None:
    request_id = message.get("id")
    shown_id = request_id if _is_request_id(request_id) else None
    if message.get("jsonrpc") != "2.0":
        found = "it is missing" if "jsonrpc" not in message else f"not {_shown(message['jsonrpc'])}"
        return invalid_request(f'"jsonrpc" must be "2.0" ({found})', shown_id, wants_answer=_wants_answer(message))
    if "method" in message:
        method = message["method"]
        if not isinstance(method, str):
            why = f'"method" must be a string, not {_shown(method)}'
            return invalid_request(why, shown_id, wants_answer=_wants_answer(message))
        if "id" in message and shown_id is None and not method.startswith("notifications/"):
            # The SDK reads it as a notification: without this answer the host would wait forever.
            return invalid_request(
                f'"id" must be a string or an integer, not {_shown(request_id)} (a message without "id" is a '
                "notification, which gets no answer)"
            )
        if not isinstance(message.get("params"), dict | None):
            why = f'"params" must be an object (MCP passes parameters by name), not {_shown(message["params"])}'
            return invalid_request(why, shown_id, wants_answer=_wants_answer(message))
    elif "id" not in message or ("result" in message) == ("error" in message):
        return invalid_request(
            'a JSON-RPC message has a "method" (a request, or a notification without "id"), '
            'or an "id" with either a "result" or an "error" (a response)',
            shown_id,
            wants_answer=False,
        )
    try:
        jsonrpc_message_adapter.validate_python(message, by_name=False)  # as the SDK does
    except ValidationError as error:
        why = f"the message is not a valid JSON-RPC 2.0 message ({_detail(error, message)})"
        return invalid_request(why, shown_id, wants_answer=_wants_answer(message))
    return None


def _wants_answer(message: dict[str, Any]) -> bool:
    """A request (``method`` and ``id``) is answered; a notification or a response is not. A
    ``notifications/`` method with an id no request can have reads as a notification, as the SDK
    reads it."""
    if "method" not in message or "id" not in message:
        return False
    method = message["method"]
    return _is_request_id(message["id"]) or not (isinstance(method, str) and method.startswith("notifications/"))


def _is_request_id(value: Any) -> bool:
    return isinstance(value, str) or (isinstance(value, int) and not isinstance(value, bool))


def _detail(error: ValidationError, message: dict[str, Any]) -> str:
    """The first of ``error``'s complaints about the kind of message ``message`` looks like."""
    # (The members of the SDK's union of message models.)
    if "method" in message:
        member = "JSONRPCRequest" if "id" in message else "JSONRPCNotification"
    else:
        member = "JSONRPCError" if "error" in message else "JSONRPCResponse"
    details = [d for d in error.errors() if d.get("loc", ())[:1] == (member,)] or error.errors()
    if not details:
        return str(error)
    return error_at(details[0].get("loc", ())[1:], details[0].get("msg", ""))


def _shown(value: Any) -> str:
    """A JSON value as a message names it: ``null``, ``1.5``, ``"1.0"``, ``a JSON array``."""
    if isinstance(value, dict):
        return "a JSON object"
    if isinstance(value, list):
        return "a JSON array"
    return shown_name(json.dumps(value, ensure_ascii=False), _SHOWN_VALUE)


__all__ = [
    "EnvelopeProblem",
    "invalid_request",
    "lenient_read_problem",
    "message_problem",
    "parse_error",
    "value_problem",
]
