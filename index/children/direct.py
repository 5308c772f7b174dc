"""Requests the copilot sends a stdio child itself, beside the SDK's ``ClientSession``.

Every message between the copilot and a child normally passes through the ``ClientSession``: a
pydantic model per message, two memory streams, its dispatcher, and a task per progress
notification. For the child pool's tool calls -- the copilot's hot path -- that was most of the
time the copilot spent on a call. :class:`DirectRequests` writes such a request line itself and
takes its answer, and the progress notifications for its token, from the stdout reader
(``index.children.wire``) by id before they would reach the session; everything else the child
says goes to the session as before. The reader still parses and checks every line the same way,
so a child's malformed, oversized or unmatched replies fail a direct request exactly as they
fail the session's (see ``wire``).

The contract is the SDK dispatcher's ``send_raw_request``: the result ``dict`` is returned; the
child's JSON-RPC error, or ``CONNECTION_CLOSED`` when the child went away, raises ``MCPError``; a
caller that gives up (cancellation, its timeout) sends the child ``notifications/cancelled``.
:func:`typed_result` then checks the result as ``ClientSession.send_request`` does.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, TypeVar

import anyio
import mcp.types as types
from mcp.client.session import _clamp_inbound_ttl, _later_revision_fields  # the session's own result checks
from mcp.shared.dispatcher import ProgressFnT, coerce_request_id
from mcp.shared.exceptions import MCPError
from mcp.shared._otel import inject_trace_context
from mcp_types import methods as _methods
from pydantic import BaseModel, ValidationError

from index.children.wire import jsonrpc_line

if TYPE_CHECKING:
    from index.children.wire import PendingRequests

logger = logging.getLogger(__name__)

ModelT = TypeVar("ModelT", bound=BaseModel)
WriteLine = Callable[[bytes], Awaitable[None]]

#: First id of direct requests: far above the session's own counter, so the two never meet.
FIRST_DIRECT_ID = 1_000_000_000
#: Notifications that change what the copilot knows of the child. While a direct request waits
#: they are handled in order on the reader, as the session would before the answer: a tool that
#: announces a change and then answers must not have its answer overtake the announcement.
_CHANGES = frozenset(
    {
        "notifications/tools/list_changed",
        "notifications/prompts/list_changed",
        "notifications/resources/list_changed",
        "notifications/resources/updated",
    }
)
#: Seconds the courtesy ``notifications/cancelled`` may take to write (the SDK's bound).
_CANCEL_WRITE = 5.0
_CLOSED = types.ErrorData(code=types.CONNECTION_CLOSED, message="Connection closed")


@dataclass(eq=False)
class _Waiter:
    on_progress: ProgressFnT | None
    done: anyio.Event = field(default_factory=anyio.Event)
    outcome: dict[str, Any] | types.ErrorData | None = None

    def settle(self, outcome: dict[str, Any] | types.ErrorData) -> None:
        if not self.done.is_set():
            self.outcome = outcome
            self.done.set()


class DirectRequests:
    """See the module docstring; ``write_line`` writes one whole line to the child's stdin."""

    def __init__(self, write_line: WriteLine, requests: PendingRequests) -> None:
        self._write_line = write_line
        self._requests = requests
        self._waiting: dict[types.RequestId, _Waiter] = {}
        self._next_id = FIRST_DIRECT_ID
        self.closed = False
        #: The session's logging callback: while a direct request waits, the child's log messages
        #: take it here, in order, so none arrives after the answer it came before.
        self.on_log: Callable[[types.LoggingMessageNotificationParams], Awaitable[None]] | None = None
        #: The session's message handler: change notifications take it here while a request waits.
        self.on_change: Callable[[Any], Awaitable[None]] | None = None
        #: The version the session negotiated (how its notifications are read).
        self.protocol_version: str | None = None

    async def request(
        self, method: str, params: Mapping[str, Any], *, on_progress: ProgressFnT | None = None
    ) -> dict[str, Any]:
        if self.closed:
            raise MCPError(code=types.CONNECTION_CLOSED, message="Connection closed")
        request_id = self._next_id
        self._next_id += 1
        out = dict(params)
        meta = dict(out.get("_meta") or {})
        if on_progress is not None:
            meta["progressToken"] = request_id  # as the session does: the id doubles as the token
        inject_trace_context(meta)
        if meta:
            out["_meta"] = meta
        line = jsonrpc_line({"jsonrpc": "2.0", "id": request_id, "method": method, "params": out})
        waiter = self._waiting[request_id] = _Waiter(on_progress)
        written = False
        try:
            self._requests.expect(request_id, method)
            written = True
            try:
                await self._write_line(line)
            except (anyio.BrokenResourceError, anyio.ClosedResourceError, OSError):
                raise MCPError(code=types.CONNECTION_CLOSED, message="Connection closed") from None
            await waiter.done.wait()
        except anyio.get_cancelled_exc_class():
            if written and not waiter.done.is_set() and not self.closed:
                await self._cancel(request_id)
            raise
        finally:
            self._waiting.pop(request_id, None)
        outcome = waiter.outcome
        if isinstance(outcome, types.ErrorData):
            raise MCPError(code=outcome.code, message=outcome.message, data=outcome.data)
        assert outcome is not None
        return outcome

    async def _cancel(self, request_id: int) -> None:
        """Tell the child the copilot gave up on ``request_id`` (the session sends the same courtesy)."""
        self._requests.cancelled(request_id)
        line = jsonrpc_line(
            {
                "jsonrpc": "2.0",
                "method": "notifications/cancelled",
                "params": {"requestId": request_id, "reason": "caller cancelled"},
            }
        )
        with anyio.move_on_after(_CANCEL_WRITE, shield=True):
            try:
                await self._write_line(line)
            except (anyio.BrokenResourceError, anyio.ClosedResourceError, OSError):
                logger.debug("could not tell the child that request %r was cancelled", request_id)

    # -- what the reader hands over -------------------------------------------------------------
    async def route(self, message: types.JSONRPCMessage) -> bool:
        """Take ``message`` when it answers a direct request or reports its progress (``True``)."""
        if not self._waiting:
            return False
        if isinstance(message, types.JSONRPCResponse | types.JSONRPCError):
            waiter = self._waiting.get(coerce_request_id(message.id)) if message.id is not None else None
            if waiter is None:
                return False
            waiter.settle(message.result if isinstance(message, types.JSONRPCResponse) else message.error)
            return True
        if isinstance(message, types.JSONRPCNotification):
            if message.method == "notifications/progress":
                return await self._progress(message.params)
            if message.method == "notifications/message" and self.on_log is not None:
                return await self._hand_on(message.method, message.params, self._log)
            if message.method in _CHANGES and self.on_change is not None:
                return await self._hand_on(message.method, message.params, self.on_change)
        return False

    async def _hand_on(self, method: str, params: Mapping[str, Any] | None, deliver: Callable[[Any], Awaitable[None]]) -> bool:
        """A notification read as the session would read it and given to ``deliver`` in order; one
        the session cannot read stays the session's to drop (``False``)."""
        try:
            notification = _methods.parse_server_notification(method, self.protocol_version or "2025-11-25", params)
        except (KeyError, ValidationError):
            return False
        try:
            await deliver(notification)
        except Exception:  # noqa: BLE001 -- as the session: a failing callback costs only this message
            logger.exception("notification callback for %r raised", method)
        return True

    async def _log(self, notification: Any) -> None:
        assert self.on_log is not None
        if isinstance(notification, types.LoggingMessageNotification):
            await self.on_log(notification.params)

    async def _progress(self, params: Mapping[str, Any] | None) -> bool:
        match params:
            case {"progressToken": str() | int() as token, "progress": int() | float() as progress} if (
                not isinstance(token, bool)
                and not isinstance(progress, bool)
                and (waiter := self._waiting.get(coerce_request_id(token))) is not None
                and waiter.on_progress is not None
            ):
                total = params.get("total")
                message = params.get("message")
                try:
                    await waiter.on_progress(
                        float(progress),
                        float(total) if isinstance(total, int | float) else None,
                        message if isinstance(message, str) else None,
                    )
                except Exception:  # noqa: BLE001 -- a relay's failure must not stop the child's reader
                    logger.exception("progress callback raised")
                return True
            case _:
                return False

    def close(self) -> None:
        """The child's output ended: every direct request fails with ``CONNECTION_CLOSED``."""
        self.closed = True
        for waiter in list(self._waiting.values()):
            waiter.settle(_CLOSED)


def typed_result(protocol_version: str | None, method: str, raw: dict[str, Any], result_type: type[ModelT]) -> ModelT:
    """``raw`` checked and typed as ``ClientSession.send_request`` does for the negotiated version.

    Raises ``pydantic.ValidationError`` for a result the version's schema does not allow.
    """
    _clamp_inbound_ttl(raw)
    version = protocol_version or "2025-11-25"
    try:
        surface = _methods.SERVER_RESULTS[(method, version)]
    except KeyError:
        pass
    else:
        # What validate_server_result checks, without the dump it makes and throws away.
        _methods._check_known_version(version)
        _methods._adapter(surface).validate_python(raw, by_name=False)
    if not (foreign := _later_revision_fields(method, version)).isdisjoint(raw):
        raw = {key: value for key, value in raw.items() if key not in foreign}
    return result_type.model_validate(raw, by_name=False)
