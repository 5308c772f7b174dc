"""One child call's link to the host request(s) it serves: progress, log messages, questions.

The pool registers a :class:`CallRelay` on the child for as long as the call is in flight. What the
child sends meanwhile goes through it:

- ``notifications/progress`` for the call's own progress token go to the host's request (the host
  only gets a token on the child request when it sent one on ``execute``);
- ``notifications/message`` go to the host at the level it asked for (and always to the child's
  log file, which the pool writes);
- ``elicitation/create``, ``sampling/createMessage`` and ``roots/list`` are answered by the host
  when it declared the capability -- asked directly (legacy era) or through the ``input_required``
  round trip (2026-07-28, :mod:`server.relay.suspended`) -- and refused with a clear message
  otherwise (``roots/list`` then answers the known roots, see :mod:`server.relay.roots`). A
  question for the user, or a model request, names the server that asks (:func:`attributed`).

The time the host takes to answer does not count against the call's timeout.

While the call waits to reach its child -- the child starting (a first ``npx``/``uvx`` start
installs for minutes), or a free call slot -- the copilot itself reports progress on the call's
token every ``COPILOT_WAIT_PROGRESS_EVERY`` seconds (:meth:`CallRelay.waiting`), so a host that
resets its timeout on progress keeps waiting, and its user reads why. One relay serves the whole
``execute`` request, from the checks that may start the server to the call's result.

A child may not flood the host: at most :data:`MAX_WAITING_QUESTIONS` of a call's requests wait for
the host at once (more are refused at once, saying why), a legacy host is asked for its roots once
per connection (and again after it says they changed), and the texts of progress and log messages
are cut to :data:`MAX_PROGRESS_CHARS` and :data:`MAX_LOG_CHARS`. Their number is bounded too
(:class:`~server.relay.rate.Rate`, per call):

- progress: :data:`PROGRESS_BURST` at once, then :data:`PROGRESS_PER_SECOND`. A newer progress
  notification supersedes an older one, so those in between are merged into the latest, which a
  task (started only then) writes as soon as the rate allows; the latest one held back is written
  before the call's result (:meth:`CallRelay.finish`), or before a 2026-07-28 round's
  ``input_required`` (:meth:`CallRelay.flush`), never after them;
- log messages: :data:`LOG_BURST` at once, then :data:`LOG_PER_SECOND`; the others are not
  forwarded, and one more message before the result says how many (the child's log file, which the
  pool writes, has them all).

Between the rounds of a 2026-07-28 call (a round answered ``input_required``, the host has not
retried yet) no request of the host waits: what the child sends then would go to a request the host
has finished with, and be lost. So it is held for the next round (:meth:`CallRelay.resume`), which
writes it on its own request first: the latest progress, and the log messages within the same
bounds (at most :data:`LOG_BURST` held, the others counted as not forwarded). A call that ends
before the host comes back drops them (:meth:`CallRelay.discard`).

Children's requests carry no reference to the call they belong to. With one call in flight on the
child, or several from the same legacy host connection, who to ask is clear; with calls from
different hosts it is not, and the child is refused rather than risk asking the wrong user. A
request asked on behalf of several calls of one connection belongs to each of them until it is
answered: the host's time stops every one's timeout clock, and it is withdrawn only when the last
of them ends (the first to end cannot know it was not the one asking).
"""

from __future__ import annotations

import logging
import math
from collections import deque
from collections.abc import Iterator, Sequence
from contextlib import ExitStack, contextmanager
from typing import TYPE_CHECKING, Any

import anyio
import anyio.abc
import mcp_types as types

from server.bounded import cap_for_log, cut_text, shown_name
from server.relay.host import HostLink, level_rank, request_kind
from server.relay.rate import Rate
from server.relay.roots import Roots

if TYPE_CHECKING:
    from server.relay.suspended import SuspendedCall

logger = logging.getLogger(__name__)


#: Requests of one call's child that may wait for the host at once. Each may be a question to the
#: user or a model run the host pays for; a child sending hundreds at once must not get them.
MAX_WAITING_QUESTIONS = 4
#: Characters of a child's progress message passed to the host (the rest is cut, saying how much).
MAX_PROGRESS_CHARS = 1000
#: Characters of a child's log message passed to the host, in all its strings.
MAX_LOG_CHARS = 10_000
#: Characters of a child's question to the user (an elicitation's message) passed to the host.
MAX_QUESTION_CHARS = 10_000
#: Progress notifications of one call written to the host at once, then how many a second: enough
#: for a progress bar, while a child sending 100,000 does not have the host read 100,000.
PROGRESS_BURST = 20
PROGRESS_PER_SECOND = 20.0
#: Log messages of one call forwarded to the host at once, then how many a second (the rest are
#: counted, and are in the child's log file).
LOG_BURST = 50
LOG_PER_SECOND = 10.0
#: Seconds the end of a call waits for the progress notification being written to the host.
FLUSH_WAIT = 5.0

Progress = tuple[float, float | None, str | None]
#: A log message as it goes to the host: level, data (already cut), logger name.
Log = tuple[types.LoggingLevel, Any, str]


def refusal(message: str) -> types.ErrorData:
    return types.ErrorData(code=types.INVALID_REQUEST, message=message)


class _Waiting:
    """A child's request waiting for the host, and the calls in flight it may belong to."""

    def __init__(self, owners: Sequence[CallRelay]) -> None:
        self.scope = anyio.CancelScope()
        self.owners = list(owners)

    def release(self, owner: CallRelay) -> None:
        """``owner`` ended: the request is withdrawn once none of the calls it may belong to runs."""
        if owner in self.owners:
            self.owners.remove(owner)
        if not self.owners:
            self.scope.cancel()


class CallRelay:
    """See the module docstring; ``host`` is replaced on each round of a suspended call."""

    def __init__(
        self,
        server: str,
        host: HostLink,
        roots: Roots,
        *,
        input_timeout: float,
        suspended: SuspendedCall | None = None,
        task_group: anyio.abc.TaskGroup | None = None,
    ) -> None:
        self.server = server
        self.host = host
        self.roots = roots
        self.input_timeout = input_timeout
        self.suspended = suspended
        #: The pool's timeout scope for this call (paused while the host answers).
        self.timeout_scope: anyio.CancelScope | None = None
        self._paused = 0
        self._remaining = 0.0
        self._asking: set[_Waiting] = set()
        #: Where the task writing held-back progress runs (none: held progress waits for the end).
        self._task_group = task_group
        self._progress_rate = Rate(PROGRESS_BURST, PROGRESS_PER_SECOND)
        self._log_rate = Rate(LOG_BURST, LOG_PER_SECOND)
        #: The latest progress value passed on, the child's or the copilot's (later ones must be larger).
        self._last_progress: float | None = None
        #: Progress notifications of the copilot's own while the call waited (see :meth:`waiting`).
        self._waits = 0
        #: The latest progress not written yet (it supersedes any older one).
        self._held: Progress | None = None
        #: A task writes held progress: every other progress is held for it.
        self._writing = False
        self._written: anyio.Event | None = None  # set when that task ends
        self._waiting: anyio.CancelScope | None = None  # that task waiting for the rate
        self._hurry = False
        #: The call's result is coming: later progress would follow it, so it is dropped.
        self._ended = False
        self._logs_held_back = 0
        self._logs_held_back_level: types.LoggingLevel = "debug"
        #: Log messages the child sent between two rounds of a suspended call, for the next one.
        self._held_logs: deque[Log] = deque()

    @property
    def _between_rounds(self) -> bool:
        """A suspended call none of whose host's requests waits now (it must retry first)."""
        return self.suspended is not None and not self.suspended.in_round

    @property
    def progress(self) -> Any:
        """The progress callback to put on the child request (``None`` when the host wants none).

        A call kept across 2026-07-28 rounds always gets one: each round is a request of its own, and
        a host that sent no progress token with the first may send one with a retry. Without a token
        on the child's request from the start, no round could ever get the child's progress.
        """
        return self._progress if self.host.wants_progress or self.suspended is not None else None

    async def _progress(self, progress: float, total: float | None, message: str | None) -> None:
        if self._ended:
            return
        # What the host gets must be valid MCP: a number (a child's NaN or Infinity is not JSON) that
        # increases with each notification, as the spec asks of the sender -- now the copilot.
        if not math.isfinite(progress) or (self._last_progress is not None and progress <= self._last_progress):
            return
        self._last_progress = progress
        if total is not None and not math.isfinite(total):
            total = None
        if message is not None:
            message = cut_text(message, MAX_PROGRESS_CHARS)
        await self._pass_on((progress, total, message))

    async def waiting(self, message: str) -> None:
        """The copilot's own progress while the call waits to reach its child (its start, a call slot).

        A host that resets its request's timeout on progress keeps waiting, and its user reads why.
        The values are the copilot's, on the same progress token as the child's, so they must stay
        below any the child may send next: -1, -1/2, -1/3, ... The child's own values then pass
        unchanged -- a first progress of 0 included -- rather than shifted past the copilot's.
        """
        if self._ended or not self.host.wants_progress:
            return
        self._waits += 1
        value = -1.0 / self._waits
        if self._last_progress is not None and value <= self._last_progress:
            return  # the child reported already (a later round of its call): the host knows it runs
        self._last_progress = value
        await self._pass_on((value, None, cut_text(message, MAX_PROGRESS_CHARS)))

    async def _pass_on(self, progress: Progress) -> None:
        """Write a progress notification now, or hold it as the latest (rate, a write under way, between rounds)."""
        if self._between_rounds:
            self._held = progress  # for the next round (resume)
            return
        if self._writing or not self._progress_rate.take(anyio.current_time()):
            self._held = progress
            self._write_held_later()
            return
        self._held = None  # this one is newer
        await self._write_progress(progress)

    def _write_held_later(self) -> None:
        if self._writing or self._task_group is None:
            return
        self._writing = True
        self._written = anyio.Event()
        self._task_group.start_soon(self._write_held, name=f"progress of a call to {self.server}")

    async def _write_held(self) -> None:
        """Write the latest held progress whenever the rate allows, until none is held."""
        try:
            while self._held is not None:
                if not self._hurry:
                    # Once the call ended, only finish() writes: it ended without a result to write it
                    # before (crash, timeout, cancellation), or finish() is about to hurry this task.
                    if self._ended:
                        return
                    delay = self._progress_rate.delay(anyio.current_time())
                    if delay > 0:
                        with anyio.CancelScope() as self._waiting:
                            await anyio.sleep(delay)
                        self._waiting = None
                    if self._ended and not self._hurry:
                        return
                if self._between_rounds:
                    return  # the round ended while this waited: the next round's request gets it
                if not await self._write_latest():
                    return
                if self._hurry:
                    return
        finally:
            self._writing = False
            self._waiting = None
            if self._written is not None:
                self._written.set()

    async def _write_progress(self, progress: Progress) -> None:
        try:
            await self.host.progress(*progress)
        except (anyio.BrokenResourceError, anyio.ClosedResourceError):
            logger.debug("host went away; progress of server '%s' dropped", self.server)
        except Exception:  # noqa: BLE001 -- a failed write costs this notification, not the call
            logger.warning("could not relay progress of server '%s' to the host", self.server, exc_info=True)

    async def flush(self) -> None:
        """Write the latest held-back progress now (before a result, or a round's ``input_required``)."""
        if self._between_rounds:
            return  # no request of the host waits: it stays held for the next round
        written = self._written
        if self._writing and written is not None:
            self._hurry = True
            if self._waiting is not None:
                self._waiting.cancel()
            try:
                with anyio.move_on_after(FLUSH_WAIT):
                    await written.wait()
            finally:
                self._hurry = False
            if self._writing:
                return  # the host does not read what was written before: do not pile up more
        await self._write_latest()

    async def _write_latest(self) -> bool:
        """Write the held progress now, whatever the rate (it is spent all the same); False: none held."""
        held, self._held = self._held, None
        if held is None:
            return False
        self._progress_rate.spend(anyio.current_time())
        await self._write_progress(held)
        return True

    async def finish(self) -> None:
        """The call's result comes next: what was held back for the host goes first.

        That is the latest progress notification and, when log messages were not forwarded, one
        message saying how many. Not for a cancelled call (nothing follows it).
        """
        self._ended = True
        await self.flush()
        if self._logs_held_back and not self._between_rounds:
            await self._log_held_back()

    async def resume(self) -> None:
        """A new round's request waits now: what the child sent while none did goes to it first.

        The held progress is written under the writer's flag, so newer progress of the child (it may
        have its answers already) waits behind it; log messages arriving meanwhile queue behind the
        held ones. A call that ended between the rounds also gets its count of unforwarded messages.
        """
        if self._held is not None and not self._writing:
            self._writing = True
            written = self._written = anyio.Event()
            try:
                await self._write_latest()
            finally:
                self._writing = False
                written.set()
            if self._held is not None and not self._ended:
                self._write_held_later()  # newer progress came while this was written
        while self._held_logs:
            level, data, name = self._held_logs[0]
            try:
                await self.host.log(level, data, name)
            finally:
                self._held_logs.popleft()  # only now: a message coming meanwhile queues behind it
        if self._ended and self._logs_held_back:
            await self._log_held_back()

    def discard(self) -> None:
        """The call ended while no round's request waited: what was held for the next round is dropped."""
        dropped: list[str] = []
        if self._held is not None:
            dropped.append(f"progress {self._held[0]:g}")
        if self._held_logs:
            dropped.append(f"{len(self._held_logs)} log message(s)")
        if self._logs_held_back:
            dropped.append(f"the count of {self._logs_held_back} log message(s) not forwarded")
        self._held, self._logs_held_back = None, 0
        self._held_logs.clear()
        if dropped:
            logger.debug(
                "call of server '%s' ended while its host had not come back for the next round; dropped %s",
                self.server,
                ", ".join(dropped),
            )

    async def log(self, params: types.LoggingMessageNotificationParams) -> None:
        if not self.host.takes_log(params.level):  # between rounds: the levels of the last round
            return
        # Behind held ones (a round is writing them), or between rounds: held, within the same bounds.
        holding = self._between_rounds or bool(self._held_logs)
        if (holding and len(self._held_logs) >= LOG_BURST) or not self._log_rate.take(anyio.current_time()):
            self._logs_held_back += 1
            if level_rank(params.level) > level_rank(self._logs_held_back_level):
                self._logs_held_back_level = params.level
            return
        name = f"{self.server}/{params.logger}" if params.logger else self.server
        data, _ = cap_for_log(params.data, field_chars=MAX_LOG_CHARS, total_chars=MAX_LOG_CHARS)
        if holding:
            self._held_logs.append((params.level, data, shown_name(name)))
            return
        await self.host.log(params.level, data, shown_name(name))

    async def _log_held_back(self) -> None:
        count, self._logs_held_back = self._logs_held_back, 0
        server = shown_name(self.server)
        text = (
            f"{count:,} log message{'s' if count != 1 else ''} of server '{server}' during this call "
            f"{'were' if count != 1 else 'was'} not forwarded to the host: MCP Copilot forwards at most {LOG_BURST} "
            f"of a call at once, then {LOG_PER_SECOND:g} a second. Every message was written to the server's log file, "
            f"{server}.log in COPILOT_CHILD_LOG_DIR (by default $COPILOT_HOME/logs/children); for a remote server, in "
            "the copilot's own log."
        )
        await self.host.log(self._logs_held_back_level, text, server)

    @contextmanager
    def host_time(self) -> Iterator[None]:
        """Stop the call's timeout clock while the host answers (the user may take their time)."""
        scope = self.timeout_scope
        if scope is None:
            yield
            return
        if self._paused == 0:
            self._remaining = max(scope.deadline - anyio.current_time(), 0.0)
            scope.deadline = math.inf
        self._paused += 1
        try:
            yield
        finally:
            self._paused -= 1
            if self._paused == 0:
                scope.deadline = anyio.current_time() + self._remaining

    async def answer(
        self, request: types.InputRequest, *, sharing: Sequence[CallRelay] = ()
    ) -> types.InputResponse | types.ErrorData:
        """The answer to a child's elicitation, sampling or roots request made during this call, or
        during one of ``sharing`` (other calls of the same legacy host connection on the same child)."""
        kind = request_kind(request)
        if kind == "roots" and self.roots.fixed:
            return types.ListRootsResult(roots=self.roots.current())
        host = self.host
        declared = host.can_answer(request)
        if not declared or (host.era == "modern" and self.suspended is None):
            if kind == "roots":
                return types.ListRootsResult(roots=self.roots.current())
            return refusal(_cannot_answer(self.server, kind, host, declared=declared))
        # Roots of a legacy host are asked once and kept, so requests for them cost the host nothing.
        owners = [self, *(call for call in sharing if call is not self)]
        waiting_now = max(len(call._asking) for call in owners)
        if (kind != "roots" or self.suspended is not None) and waiting_now >= MAX_WAITING_QUESTIONS:
            return refusal(
                f"server '{self.server}' already has {waiting_now} requests waiting for {host.describe} in "
                f"this call; MCP Copilot relays at most {MAX_WAITING_QUESTIONS} at once. Ask again once they are "
                "answered."
            )
        request = attributed(request, self.server)
        response: types.InputResponse | types.ErrorData | None = None
        waiting = _Waiting(owners)
        with waiting.scope as asking, ExitStack() as clocks:
            for call in owners:
                clocks.enter_context(call.host_time())
                call._asking.add(waiting)
            try:
                if self.suspended is not None:
                    response = await self.suspended.ask(request)
                else:
                    with anyio.move_on_after(self.input_timeout):
                        if kind == "roots":
                            listed = await self.roots.of_host(host)
                            return types.ListRootsResult(roots=listed if listed is not None else self.roots.current())
                        response = await host.ask(request)
            finally:
                for call in owners:
                    call._asking.discard(waiting)
        if response is None:
            if asking.cancelled_caught:
                if len(owners) > 1:
                    return refusal(
                        f"the {len(owners)} calls of server '{self.server}' that this {kind} request may belong to "
                        "have all ended."
                    )
                return refusal(f"the call of server '{self.server}' that this {kind} request belongs to has ended.")
            return refusal(
                f"{host.describe} did not answer this {kind} request within {self.input_timeout:g}s "
                "(COPILOT_INPUT_TIMEOUT)."
            )
        if isinstance(response, types.ListRootsResult):
            self.roots.remember(host, response.roots)
        return response

    def close(self) -> None:
        """The call ended: requests of the child still waiting for the host are answered now, and its
        later progress is dropped (the latest held back waits for :meth:`finish`)."""
        self._ended = True
        if self._waiting is not None:
            self._waiting.cancel()
        for waiting in list(self._asking):
            waiting.release(self)


def attributed(request: types.InputRequest, server: str) -> types.InputRequest:
    """A child's question to the user, or its model request, as the host shows it: naming the server.

    The host sees only the copilot, and the spec asks clients to make clear which server requests
    information; only the copilot knows which child it is, so its message says so. A sampling
    request says it in its system prompt, first: the person who reviews it sees who asks, and the
    host's model that the messages come from a tool server, not from its user.

    A question longer than :data:`MAX_QUESTION_CHARS` is cut, saying so. A model request asks for
    no context of the host's conversation: to the host, "this server" and "all servers" are the
    copilot, so either would give one child what the user said to every other.
    """
    if isinstance(request, types.ElicitRequest):
        params = request.params
        message = f"Server '{server}' asks: {cut_text(params.message, MAX_QUESTION_CHARS)}"
        return request.model_copy(update={"params": params.model_copy(update={"message": message})})
    if isinstance(request, types.CreateMessageRequest):
        sampling = request.params
        note = f"This request comes from the tool server '{server}' (through MCP Copilot), not from the user."
        system = f"{note}\n\n{sampling.system_prompt}" if sampling.system_prompt else note
        update: dict[str, object] = {"system_prompt": system}
        if sampling.include_context not in (None, "none"):
            update["include_context"] = "none"
        return request.model_copy(update={"params": sampling.model_copy(update=update)})
    return request


def _cannot_answer(server: str, kind: str, host: HostLink, *, declared: bool) -> str:
    what = {
        "elicitation": "ask the user this question (elicitation)",
        "sampling": "run this model request (sampling)",
        "roots": "list its roots",
    }[kind]
    if declared:
        # A 2026-07-28 host gets a server's questions back in a tool call's input_required result;
        # a prompts/get, resources/read or completion/complete the copilot forwards has no such round trip.
        why = (
            f"{host.describe} speaks MCP 2026-07-28, where the copilot passes a server's questions on only in "
            "execute's input_required results, not during a prompt, resource or completion request"
        )
    else:
        why = f"{host.describe} did not declare that it supports {kind}"
    return (
        f"MCP Copilot cannot {what} for server '{server}': {why}. Continue without it: use a default, or tell "
        "the user what is needed."
    )


def pick(calls: Sequence[CallRelay]) -> CallRelay | None:
    """The call a child's request belongs to, when that is clear (see the module docstring)."""
    if len(calls) == 1:
        return calls[0]
    if not calls:
        return None
    first = calls[0].host
    if first.era == "legacy" and all(c.host.era == "legacy" and c.host.connection_key == first.connection_key for c in calls):
        return calls[0]
    return None


async def answer_child(
    server: str, calls: Sequence[CallRelay], request: types.InputRequest, roots: Roots, *, others: int = 0
) -> types.InputResponse | types.ErrorData:
    """What the pool answers a child's request with (see :class:`CallRelay.answer`).

    ``others`` counts the child's requests in flight for hosts that no relay stands for (a resource
    subscription): the request may come from one of those, so it is shown to no call's host. It was
    given to the one tool call in flight, so a question asked while serving session B's prompt went
    to session A's user, and A's answer back into B's prompt.
    """
    kind = request_kind(request)
    call = pick(calls) if not others else None
    if call is not None:
        return await call.answer(request, sharing=calls)
    if kind == "roots":
        return types.ListRootsResult(roots=roots.current())
    if others and calls:
        return refusal(
            f"MCP Copilot cannot tell whether this {kind} request of server '{server}' belongs to its tool call "
            f"in flight or to {others} other request(s) it is answering (a resource subscription), so "
            "it is not shown to anyone. Retry when the other requests finished."
        )
    if not calls:
        return refusal(
            f"MCP Copilot relays {kind} requests only during a tool call of server '{server}', and none is in "
            "flight; ask from inside a tool call."
        )
    one_client = len({c.host.connection_key for c in calls}) == 1
    why = "each call's questions go back in that call's own result" if one_client else "from different clients"
    return refusal(
        f"MCP Copilot cannot tell which of {len(calls)} calls in flight on server '{server}' ({why}) this {kind} "
        "request belongs to, so it is not shown to anyone. Retry when the other calls finished."
    )


async def log_from_child(
    calls: Sequence[CallRelay], params: types.LoggingMessageNotificationParams, *, others: int = 0
) -> None:
    """Forward a child's log message to the host of its call, when there is exactly one such host
    and no other request in flight on the child (``others``) could be the one it is about."""
    call = pick(calls) if not others else None
    if call is not None:
        await call.log(params)
