"""Child calls that outlive an ``execute`` round: the 2026-07-28 ``input_required`` round trip.

A 2026-07-28 host cannot be sent a request in the middle of a call. When a child asks for
elicitation, sampling or roots during such a call, ``execute`` answers ``input_required``
(SEP-2322): the child's questions as ``inputRequests`` and a ``requestState`` naming the call. The
child's request stays open meanwhile; when the host retries ``execute`` with the same arguments,
its ``inputResponses`` go to the child and the round waits for what comes next -- the result, or
more questions.

Such calls therefore run in the copilot's task group, not in the request handler, and are kept
here between rounds. What the child reports between rounds (progress, log messages) is held by the
call's relay and written on the next round's request before anything else
(:meth:`server.relay.call.CallRelay.resume`), or dropped if that round never comes. A call the
child ends between rounds (it gave up on its question) is kept for the host's retry, which gets its
result, for up to ``input_timeout`` seconds. Only one round waits
at a time: a second retry of the same call (the host gave up on its first request, or sent it
twice) takes over, and the earlier round is answered at once, saying so. A call whose
host does not come back within ``input_timeout`` seconds is cancelled (the child gets
``notifications/cancelled``, its slot is freed) and logged as such; a round the host cancels
cancels the call. ``requestState`` is sealed by the SDK (bound to the tool,
its arguments and the client), so one client cannot answer another's call.
"""

from __future__ import annotations

import itertools
import json
import logging
import secrets
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

import anyio
import anyio.abc
import mcp_types as types

from index.json_text import parse_json
from server.relay.host import answer_kind, request_kind

logger = logging.getLogger(__name__)

#: Version of our ``requestState`` payload (inside the SDK's sealed envelope).
STATE_VERSION = 1


def encode_state(**fields: Any) -> str:
    return json.dumps({"v": STATE_VERSION, **fields}, separators=(",", ":"))


def decode_state(state: str | None) -> dict[str, Any]:
    """Our fields of a ``requestState`` (empty when absent or from another version)."""
    if not state:
        return {}
    try:
        decoded = parse_json(state)
    except ValueError:
        return {}
    return decoded if isinstance(decoded, dict) and decoded.get("v") == STATE_VERSION else {}


@dataclass
class _Question:
    request: types.InputRequest
    answered: anyio.Event = field(default_factory=anyio.Event)
    response: types.InputResponse | types.ErrorData | None = None


@dataclass
class Finished:
    """How a suspended call ended: its result, and the error/kind to log (both ``None`` on success)."""

    result: types.CallToolResult
    error: str | None = None
    kind: str | None = None
    #: What ``server.guard`` found in the result (for the trajectory).
    flags: list[Any] = field(default_factory=list)


class SuspendedCall:
    """One child call of a 2026-07-28 host, kept across ``execute`` rounds (see the module docstring).

    Exactly one party reports how it ended (``on_end``, which writes the trajectory): the round
    that returns the result, or -- when no round is waiting -- the task that ran the call.
    """

    def __init__(self, call_id: str, input_timeout: float, on_end: Callable[[Finished], None]) -> None:
        self.id = call_id
        self.input_timeout = input_timeout
        self._on_end = on_end
        self._questions: dict[str, _Question] = {}
        self._keys = itertools.count(1)
        self._changed = anyio.Event()
        self._returned = anyio.Event()  # a round returned questions: the host must come back
        #: ... and it did: unset only from a round's return of questions until the host's retry.
        self._attached = anyio.Event()
        self._attached.set()
        self.in_round = False
        #: Counts rounds: a round that is no longer the newest was taken over by a later retry.
        self._round = 0
        self.expired = False
        self.finished: Finished | None = None
        self.scope = anyio.CancelScope()
        #: The call's ``CallRelay`` (set when it starts; each round points its ``host`` at itself).
        self.relay: Any = None
        self._ended = False

    # -- the child's side ----------------------------------------------------------------------
    async def ask(self, request: types.InputRequest) -> types.InputResponse | types.ErrorData:
        """Called from the child's request: wait for the host's answer, delivered by a later round."""
        key = f"{request_kind(request)}-{next(self._keys)}"
        question = self._questions[key] = _Question(request)
        self._changed.set()
        try:
            await question.answered.wait()
        finally:
            self._questions.pop(key, None)
        assert question.response is not None
        return question.response

    def finish(self, finished: Finished) -> None:
        if self.finished is None:
            self.finished = finished
        for question in self._questions.values():  # nobody will answer these any more
            if not question.answered.is_set():
                question.response = types.ErrorData(code=types.INVALID_REQUEST, message="the call has ended")
                question.answered.set()
        self._changed.set()

    # -- the host's side -----------------------------------------------------------------------
    def deliver(self, responses: types.InputResponses | None) -> list[str]:
        """Answers from a retried ``execute``; questions left unanswered are asked again.

        An answer of another kind than its question (a sampling result for an elicitation) is not
        delivered: the child could not read it. What was wrong with each is returned.
        """
        problems: list[str] = []
        for key, response in (responses or {}).items():
            question = self._questions.get(key)
            if question is None or question.answered.is_set():
                continue
            asked, answered = request_kind(question.request), answer_kind(response)
            if asked != answered:
                article = "an" if asked == "elicitation" else "a"
                problems.append(f"inputResponses[{key!r}] answers {article} {asked} question with a {answered} result")
                continue
            question.response = response
            question.answered.set()
        return problems

    async def next_round(self) -> types.CallToolResult | types.InputRequiredResult:
        """Wait for the call's result or its next questions; a cancelled round cancels the call."""
        self._round += 1
        this_round = self._round
        if self.in_round:
            self._changed.set()  # the round waiting so far is taken over: it returns now
        self.in_round = True
        self._attached.set()
        flushed = False
        try:
            if self.relay is not None:
                await self.relay.resume()  # what the child sent while no round waited
            while True:
                if this_round != self._round:
                    return _taken_over()
                if self.finished is not None:
                    self.end()
                    return self.finished.result
                pending = {k: q for k, q in self._questions.items() if not q.answered.is_set()}
                if pending and not flushed and self.relay is not None:
                    # Progress the child reported before asking, held back by the rate, goes first.
                    flushed = True
                    await self.relay.flush()
                    continue
                if pending:
                    self._attached = anyio.Event()
                    self._returned.set()
                    return types.InputRequiredResult(
                        input_requests={key: q.request for key, q in pending.items()},
                        request_state=encode_state(call=self.id),
                    )
                self._changed = anyio.Event()
                await self._changed.wait()
        except BaseException:
            if this_round != self._round:
                raise  # a later round waits for the call now
            if self.finished is None:
                self.scope.cancel()  # the host gave up on this round: stop the child's request
            else:
                self.end()
            raise
        finally:
            if this_round == self._round:
                self.in_round = False

    def end(self) -> None:
        """Report how the call ended (once)."""
        if not self._ended and self.finished is not None:
            self._ended = True
            self._on_end(self.finished)

    async def keep_for_retry(self) -> None:
        """The call ended between rounds: wait (bounded) for the host's retry, which gets the result.

        The host asked to be asked again and will retry with its answers; without this the retry
        would find no call and get ``input_expired`` for a call that did finish.
        """
        if self._attached.is_set():
            return  # no round returned questions the host still owes answers to
        with anyio.move_on_after(self.input_timeout):
            await self._attached.wait()

    async def watch_host(self) -> None:
        """Cancel the call when a round returned questions and the host did not retry in time."""
        while True:
            await self._returned.wait()
            self._returned = anyio.Event()
            attached = self._attached
            with anyio.move_on_after(self.input_timeout) as waited:
                await attached.wait()
            if waited.cancelled_caught:
                logger.info("call %s: the host did not answer within %gs; cancelling it", self.id, self.input_timeout)
                self.expired = True
                self.scope.cancel()
                return


def _taken_over() -> types.CallToolResult:
    text = (
        "[copilot] A later retry of this call (the same requestState) took it over; its answer goes to that "
        "request, not this one."
    )
    return types.CallToolResult(content=[types.TextContent(type="text", text=text)], is_error=True)


class SuspendedCalls:
    """The suspended calls of one copilot, by id."""

    def __init__(self, input_timeout: float) -> None:
        self.input_timeout = input_timeout
        self._calls: dict[str, SuspendedCall] = {}

    def __len__(self) -> int:
        return len(self._calls)

    def get(self, call_id: Any) -> SuspendedCall | None:
        return self._calls.get(call_id) if isinstance(call_id, str) else None

    def start(
        self,
        task_group: anyio.abc.TaskGroup,
        run: Callable[[SuspendedCall], Awaitable[Finished]],
        cancelled: Callable[[SuspendedCall], Finished],
        on_end: Callable[[Finished], None],
    ) -> SuspendedCall:
        """Run ``run(call)`` in ``task_group``; ``cancelled(call)`` says how a cancelled call ended."""
        call = SuspendedCall(secrets.token_urlsafe(12), self.input_timeout, on_end)
        self._calls[call.id] = call

        async def runner() -> None:
            try:
                finished: Finished | None = None
                async with anyio.create_task_group() as group:
                    group.start_soon(call.watch_host)
                    with call.scope:
                        finished = await run(call)
                    group.cancel_scope.cancel()
                call.finish(finished if finished is not None else cancelled(call))
                if finished is not None and not call.in_round:
                    call.end()  # the trajectory says when it ended, whether or not the host comes back
                    await call.keep_for_retry()
            finally:
                self._calls.pop(call.id, None)
                if call.finished is None:  # the copilot is shutting down
                    call.finish(cancelled(call))
                if not call.in_round:
                    if call.relay is not None:
                        call.relay.discard()  # held for a round that will not come
                    call.end()

        task_group.start_soon(runner, name=f"suspended call {call.id}")
        return call
