"""Calls kept across 2026-07-28 ``input_required`` rounds (server.relay.suspended), without processes.

The "child call" here is a coroutine that asks questions through the suspended call the way the
relay does for a real child; everything waits on events, every wait is bounded.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

import anyio
import mcp_types as types
import pytest
from server.relay.call import LOG_BURST, CallRelay
from server.relay.host import LOG_LEVELS, HostLink
from server.relay.roots import Roots
from server.relay.suspended import Finished, SuspendedCall, SuspendedCalls, decode_state, encode_state


def _question(text: str) -> types.ElicitRequest:
    return types.ElicitRequest(
        params=types.ElicitRequestFormParams(message=text, requested_schema={"type": "object", "properties": {}})
    )


def _result(text: str) -> types.CallToolResult:
    return types.CallToolResult(content=[types.TextContent(type="text", text=text)])


def _answer(name: str) -> types.ElicitResult:
    return types.ElicitResult(action="accept", content={"name": name})


def _cancelled(call: SuspendedCall) -> Finished:
    return Finished(_result("expired" if call.expired else "cancelled"), "cancelled", "cancelled")


async def _start(
    group: Any, calls: SuspendedCalls, body: Callable[[SuspendedCall], Any], ended: list[Finished]
) -> SuspendedCall:
    return calls.start(group, body, _cancelled, ended.append)


def test_state_round_trips_and_ignores_foreign_state() -> None:
    assert decode_state(encode_state(call="abc")) == {"v": 1, "call": "abc"}
    assert decode_state(None) == {} and decode_state("not json") == {} and decode_state('{"v": 99}') == {}


async def test_questions_go_back_as_input_requests_until_the_result_comes() -> None:
    ended: list[Finished] = []

    async def body(call: SuspendedCall) -> Finished:
        first = await call.ask(_question("first?"))
        second = await call.ask(_question("second?"))
        return Finished(_result(f"{first.content['name']} then {second.content['name']}"))

    with anyio.fail_after(10):
        async with anyio.create_task_group() as group:
            calls = SuspendedCalls(input_timeout=60)
            call = await _start(group, calls, body, ended)
            round_one = await call.next_round()
            assert isinstance(round_one, types.InputRequiredResult)
            [(key, request)] = round_one.input_requests.items()
            assert request.params.message == "first?"
            assert decode_state(round_one.request_state) == {"v": 1, "call": call.id}
            assert calls.get(call.id) is call

            call.deliver({key: _answer("Ada")})
            round_two = await call.next_round()
            assert isinstance(round_two, types.InputRequiredResult)
            [(key_two, request_two)] = round_two.input_requests.items()
            assert key_two != key and request_two.params.message == "second?"

            call.deliver({"unknown-key": _answer("ignored"), key_two: _answer("Grace")})
            final = await call.next_round()
    assert isinstance(final, types.CallToolResult) and final.content[0].text == "Ada then Grace"
    assert [f.result.content[0].text for f in ended] == ["Ada then Grace"]  # reported once
    assert calls.get(call.id) is None and len(calls) == 0


async def test_an_unanswered_question_is_asked_again() -> None:
    async def body(call: SuspendedCall) -> Finished:
        answer = await call.ask(_question("still there?"))
        return Finished(_result(answer.content["name"]))

    with anyio.fail_after(10):
        async with anyio.create_task_group() as group:
            call = await _start(group, SuspendedCalls(60), body, [])
            first = await call.next_round()
            call.deliver({})  # the host retried without answering
            again = await call.next_round()
            assert again.input_requests.keys() == first.input_requests.keys()
            call.deliver({next(iter(again.input_requests)): _answer("yes")})
            assert (await call.next_round()).content[0].text == "yes"


async def test_a_host_that_does_not_come_back_has_its_call_cancelled_and_reported() -> None:
    ended: list[Finished] = []
    child_cancelled = anyio.Event()

    async def body(call: SuspendedCall) -> Finished:
        try:
            await call.ask(_question("anyone?"))
        except anyio.get_cancelled_exc_class():
            child_cancelled.set()
            raise
        return Finished(_result("unreachable"))

    with anyio.fail_after(10):
        async with anyio.create_task_group() as group:
            calls = SuspendedCalls(input_timeout=0.05)
            call = await _start(group, calls, body, ended)
            assert isinstance(await call.next_round(), types.InputRequiredResult)
            await child_cancelled.wait()
    assert call.expired and [f.result.content[0].text for f in ended] == ["expired"]
    assert calls.get(call.id) is None


async def test_a_call_ended_between_rounds_waits_for_the_retry_then_is_let_go() -> None:
    ended: list[Finished] = []
    give_up = anyio.Event()

    async def body(call: SuspendedCall) -> Finished:
        async with anyio.create_task_group() as asking:
            asking.start_soon(call.ask, _question("in time?"))
            await give_up.wait()
            asking.cancel_scope.cancel()  # the child stops waiting for its answer
        return Finished(_result("gave up"))

    with anyio.fail_after(10):
        async with anyio.create_task_group() as group:
            calls = SuspendedCalls(input_timeout=60)
            call = await _start(group, calls, body, ended)
            assert isinstance(await call.next_round(), types.InputRequiredResult)
            give_up.set()
            while not ended:  # reported when it ended, though no round waits for it
                await anyio.sleep(0)
            assert calls.get(call.id) is call  # kept for the host's retry ...
            final = await call.next_round()  # ... which gets its result
            assert isinstance(final, types.CallToolResult) and final.content[0].text == "gave up"
    assert [f.result.content[0].text for f in ended] == ["gave up"] and len(calls) == 0

    ended.clear()
    give_up = anyio.Event()
    with anyio.fail_after(10):
        async with anyio.create_task_group() as group:
            # 1 s: the body must end (a few event-loop turns) before the host's time runs out.
            calls = SuspendedCalls(input_timeout=1.0)
            call = await _start(group, calls, body, ended)
            assert isinstance(await call.next_round(), types.InputRequiredResult)
            give_up.set()
    # A host that never retries: the finished call is let go after input_timeout, reported once.
    assert [f.result.content[0].text for f in ended] == ["gave up"] and not call.expired
    assert calls.get(call.id) is None


async def test_a_cancelled_round_cancels_the_call() -> None:
    ended: list[Finished] = []
    asked = anyio.Event()

    async def body(call: SuspendedCall) -> Finished:
        asked.set()
        await anyio.sleep_forever()
        return Finished(_result("unreachable"))

    with anyio.fail_after(10):
        async with anyio.create_task_group() as group:
            call = await _start(group, SuspendedCalls(60), body, ended)
            with anyio.CancelScope() as round_scope:
                await asked.wait()
                round_scope.cancel()
                await call.next_round()  # the host gave up on this round
    assert not call.expired and [f.result.content[0].text for f in ended] == ["cancelled"]


async def test_what_the_child_sends_between_rounds_is_dropped_when_the_host_never_comes_back(
    caplog: pytest.LogCaptureFixture,
) -> None:
    # A 2026-07-28 host that wants progress and every log level; nothing may be written to it
    # between rounds (its session is None: a write would fail).
    host = HostLink(
        session=None,  # type: ignore[arg-type]
        era="modern",
        request_id=1,
        capabilities=None,
        connection_key="modern",
        wants_progress=True,
        modern_log_levels=frozenset(LOG_LEVELS),
    )
    child_cancelled = anyio.Event()

    async def body(call: SuspendedCall) -> Finished:
        call.relay = CallRelay("chatty", host, Roots(), input_timeout=60, suspended=call)
        try:
            await call.ask(_question("anyone?"))
        except anyio.get_cancelled_exc_class():
            child_cancelled.set()
            raise
        return Finished(_result("unreachable"))

    caplog.set_level(logging.DEBUG, logger="server.relay.call")
    with anyio.fail_after(10):
        async with anyio.create_task_group() as group:
            call = await _start(group, SuspendedCalls(input_timeout=0.05), body, [])
            assert isinstance(await call.next_round(), types.InputRequiredResult)
            relay = call.relay
            # The child reports while no round waits: held (the latest progress; logs within the bounds).
            await relay.progress(1.0, None, "older")
            await relay.progress(2.0, None, "latest")
            for number in range(LOG_BURST + 10):
                await relay.log(types.LoggingMessageNotificationParams(level="info", data=f"message {number}"))
            await child_cancelled.wait()
    assert call.expired
    [dropped] = [r.getMessage() for r in caplog.records if "host had not come back" in r.getMessage()]
    assert dropped.endswith(
        f"dropped progress 2, {LOG_BURST} log message(s), the count of 10 log message(s) not forwarded"
    )


async def test_a_second_retry_takes_the_call_over_and_the_first_is_answered_at_once() -> None:
    # Before: each waiting round replaced the event the call sets, so the first retry waited for
    # ever (kept alive by the stream's pings) while the second got the result.
    ended: list[Finished] = []
    go = anyio.Event()

    async def body(call: SuspendedCall) -> Finished:
        answer = await call.ask(_question("name?"))
        await go.wait()  # the child works on after the answer: the retries wait
        return Finished(_result(answer.content["name"]))

    outcomes: dict[str, Any] = {}
    with anyio.fail_after(10):
        async with anyio.create_task_group() as group:
            call = await _start(group, SuspendedCalls(60), body, ended)
            asked = await call.next_round()
            [key] = asked.input_requests
            call.deliver({key: _answer("Ada")})

            async def retry(name: str) -> None:
                outcomes[name] = await call.next_round()

            group.start_soon(retry, "first")
            await anyio.wait_all_tasks_blocked()
            assert call.in_round and "first" not in outcomes
            group.start_soon(retry, "second")
            await anyio.wait_all_tasks_blocked()
            assert outcomes["first"].is_error and "took it over" in outcomes["first"].content[0].text
            assert call.in_round and "second" not in outcomes  # the first leaving does not end the second's round
            go.set()
    assert outcomes["second"].content[0].text == "Ada"
    assert [f.result.content[0].text for f in ended] == ["Ada"]  # reported once


async def test_an_answer_of_another_kind_is_not_delivered_and_said_why() -> None:
    async def body(call: SuspendedCall) -> Finished:
        answer = await call.ask(_question("name?"))
        return Finished(_result(answer.content["name"]))

    sampled = types.CreateMessageResult(role="assistant", content=types.TextContent(type="text", text="hi"), model="m")
    with anyio.fail_after(10):
        async with anyio.create_task_group() as group:
            call = await _start(group, SuspendedCalls(60), body, [])
            [key] = (await call.next_round()).input_requests
            assert call.deliver({key: sampled}) == [
                f"inputResponses[{key!r}] answers an elicitation question with a sampling result"
            ]
            again = await call.next_round()  # still asked: the child never saw the wrong answer
            assert list(again.input_requests) == [key]
            assert call.deliver({key: _answer("Grace")}) == []
            assert (await call.next_round()).content[0].text == "Grace"
