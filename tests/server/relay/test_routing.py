"""Which call a child's request belongs to, what a host without the capability answers, and roots.

(server.relay.call, server.relay.roots) -- pure decisions; the end-to-end behaviour is in
``tests/server/relay/test_relay_execute.py`` and ``test_relay_http.py``.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import anyio
import mcp_types as types

from server.relay.call import CallRelay, answer_child, pick
from server.relay.host import HostLink
from server.relay.roots import Roots, path_root, root_directory


def _host(era: str = "legacy", connection: Any = 1, capabilities: types.ClientCapabilities | None = None) -> HostLink:
    return HostLink(
        session=None,  # type: ignore[arg-type]  -- never reached by these decisions
        era=era,  # type: ignore[arg-type]
        request_id=1,
        capabilities=capabilities,
        connection_key=connection,
        client_name="test-host",
    )


def _call(host: HostLink, roots: Roots | None = None) -> CallRelay:
    return CallRelay("files", host, roots or Roots(), input_timeout=5)


def test_one_call_or_one_legacy_connection_is_clear_anything_else_is_not() -> None:
    one = _call(_host())
    assert pick([one]) is one and pick([]) is None
    same_host = [_call(_host(connection=7)), _call(_host(connection=7))]
    assert pick(same_host) is same_host[0]
    assert pick([_call(_host(connection=7)), _call(_host(connection=8))]) is None
    assert pick([_call(_host("modern", "modern")), _call(_host("modern", "modern"))]) is None


async def test_requests_nobody_can_answer_get_a_refusal_that_says_why() -> None:
    elicit = types.ElicitRequest(
        params=types.ElicitRequestFormParams(message="name?", requested_schema={"type": "object", "properties": {}})
    )
    refusal = await answer_child("files", [_call(_host())], elicit, Roots())
    assert isinstance(refusal, types.ErrorData) and refusal.code == types.INVALID_REQUEST
    assert "the MCP host (test-host) did not declare that it supports elicitation" in refusal.message

    ambiguous = await answer_child("files", [_call(_host(connection=1)), _call(_host(connection=2))], elicit, Roots())
    assert "cannot tell which of 2 calls" in ambiguous.message
    outside = await answer_child("files", [], elicit, Roots())
    assert "only during a tool call" in outside.message


async def test_a_request_that_may_be_another_requests_is_given_to_no_call(tmp_path: Path) -> None:
    # The child also answers a host's resource subscription (``others``): its question may be that
    # request's, not the one call's in flight -- over HTTP, another session's user was asked.
    elicit = types.ElicitRequest(
        params=types.ElicitRequestFormParams(message="name?", requested_schema={"type": "object", "properties": {}})
    )
    call = _call(_host(capabilities=types.ClientCapabilities(elicitation=types.ElicitationCapability())))
    refused = await answer_child("files", [call], elicit, Roots(), others=1)
    assert isinstance(refused, types.ErrorData)
    assert refused.message.startswith(
        "MCP Copilot cannot tell whether this elicitation request of server 'files' belongs to its tool call in "
        "flight or to 1 other request(s) it is answering"
    )
    roots = await answer_child("files", [call], types.ListRootsRequest(), Roots([tmp_path]), others=1)
    assert isinstance(roots, types.ListRootsResult) and [str(r.uri) for r in roots.roots] == [tmp_path.as_uri()]


async def test_roots_requests_fall_back_to_the_known_roots(tmp_path: Path) -> None:
    roots = Roots([tmp_path])
    answer = await answer_child("files", [], types.ListRootsRequest(), roots)
    assert isinstance(answer, types.ListRootsResult) and [str(r.uri) for r in answer.roots] == [tmp_path.resolve().as_uri()]
    assert await answer_child("files", [], types.ListRootsRequest(), Roots()) == types.ListRootsResult(roots=[])


def test_configured_roots_win_and_only_existing_local_directories_are_working_directories(tmp_path: Path) -> None:
    learned = Roots()
    assert learned.working_directory() is None
    learned.remember(None, [types.Root(uri=(tmp_path / "gone").as_uri()), path_root(tmp_path)])
    assert learned.working_directory() == tmp_path.resolve()
    assert root_directory(types.Root(uri=(tmp_path / "missing").as_uri())) is None

    configured = Roots([tmp_path])
    configured.remember(None, [types.Root(uri="file:///somewhere/else")])
    assert configured.fixed and [str(r.uri) for r in configured.current()] == [tmp_path.resolve().as_uri()]


class _AskedHost(HostLink):
    """A legacy host whose answers the test controls: ``ask`` waits for ``release`` (never, if unset)."""

    def __init__(self, connection: Any, release: anyio.Event | None = None) -> None:
        super().__init__(
            session=None,  # type: ignore[arg-type]  -- ask and progress are replaced below
            era="legacy",
            request_id=1,
            capabilities=types.ClientCapabilities(roots=types.RootsCapability(), elicitation=types.ElicitationCapability()),
            connection_key=connection,
            client_name=f"host-{connection}",
            wants_progress=True,
        )
        self.release = release
        self.asked: list[str] = []
        self.asking = anyio.Event()
        self.progressed: list[tuple[float, float | None, str | None]] = []
        #: The deadlines of the calls' timeout scopes while this host was asked.
        self.deadlines: list[list[float]] = []
        self.scopes: list[anyio.CancelScope] = []

    async def ask(self, request: types.InputRequest) -> types.InputResponse | types.ErrorData:
        self.asked.append(request.method)
        self.deadlines.append([scope.deadline for scope in self.scopes])
        self.asking.set()
        if self.release is None:
            await anyio.sleep_forever()
        else:
            await self.release.wait()
        if isinstance(request, types.ListRootsRequest):
            return types.ListRootsResult(roots=[types.Root(uri="file:///project")])
        return types.ElicitResult(action="accept", content={"name": "Ada"})

    async def progress(self, progress: float, total: float | None, message: str | None) -> None:
        self.progressed.append((progress, total, message))


async def test_a_legacy_host_that_never_lists_its_roots_costs_one_bounded_wait_and_blocks_no_other_host() -> None:
    roots = Roots(ask_timeout=0.5)
    silent, answering = _AskedHost("silent"), _AskedHost("answering", release=anyio.Event())
    answering.release.set()  # type: ignore[union-attr]
    with anyio.fail_after(30):
        async with anyio.create_task_group() as group:
            results: dict[str, Any] = {}

            async def of_host(host: _AskedHost) -> None:
                results[str(host.connection_key)] = await roots.of_host(host)

            group.start_soon(of_host, silent)
            await silent.asking.wait()
            # The other host is asked and answered while the first one's question still waits: the lock
            # was one for the whole copilot, so one silent HTTP client stalled every other.
            await of_host(answering)
            assert "silent" not in results
        assert results == {"silent": None, "answering": [types.Root(uri="file:///project")]}
        # Not asked again (every call to a works_in: roots server would wait the whole timeout) ...
        assert await roots.of_host(silent) is None and silent.asked == ["roots/list"]
    # ... until it says its roots changed.
    roots.forget("silent")
    silent.release = anyio.Event()
    silent.release.set()
    assert await roots.of_host(silent) == [types.Root(uri="file:///project")] and len(silent.asked) == 2


async def test_a_question_of_one_of_several_calls_of_a_connection_is_theirs_until_the_last_ends() -> None:
    # The oldest call took the question: its end withdrew it (the user's answer was lost), and only
    # its clock stopped while the user answered, so the call that asked could time out meanwhile.
    host = _AskedHost(7, release=anyio.Event())
    first, second = _call(host), _call(host)
    with anyio.fail_after(30):
        with anyio.CancelScope(deadline=anyio.current_time() + 600) as first_scope, anyio.CancelScope(
            deadline=anyio.current_time() + 600
        ) as second_scope:
            first.timeout_scope, second.timeout_scope = first_scope, second_scope
            host.scopes = [first_scope, second_scope]
            elicit = types.ElicitRequest(
                params=types.ElicitRequestFormParams(message="name?", requested_schema={"type": "object", "properties": {}})
            )
            answers: list[Any] = []
            async with anyio.create_task_group() as group:

                async def ask() -> None:
                    answers.append(await answer_child("files", [first, second], elicit, Roots()))

                group.start_soon(ask)
                await host.asking.wait()
                assert host.deadlines == [[math.inf, math.inf]]  # both clocks stop
                first.close()  # the oldest call ends: the question still waits for the other
                host.release.set()  # type: ignore[union-attr]
            assert answers == [types.ElicitResult(action="accept", content={"name": "Ada"})]
            assert first_scope.deadline < math.inf and second_scope.deadline < math.inf  # running again

            host.release = anyio.Event()
            async with anyio.create_task_group() as group:
                group.start_soon(ask)
                await host.asking.wait()
                first.close()
                second.close()  # the last one ends: now it is withdrawn
            assert isinstance(answers[-1], types.ErrorData)
            assert answers[-1].message == "the 2 calls of server 'files' that this elicitation request may belong to have all ended."


async def test_a_childs_non_finite_or_decreasing_progress_does_not_reach_the_host() -> None:
    # NaN and Infinity went out as "progress": null (not valid MCP); a smaller value after a larger
    # one went out too, though the spec says progress must increase with each notification.
    host = _AskedHost(1)
    call = _call(host)
    for progress, total in [(1, 10), (math.nan, 10), (math.inf, None), (3, math.inf), (2, 10), (3, 10), (4, math.nan)]:
        await call._progress(progress, total, None)
    assert host.progressed == [(1, 10, None), (3, None, None), (4, None, None)]


async def test_two_calls_of_one_modern_host_are_not_said_to_come_from_different_clients() -> None:
    elicit = types.ElicitRequest(
        params=types.ElicitRequestFormParams(message="name?", requested_schema={"type": "object", "properties": {}})
    )
    one_client = [_call(_host("modern", "stdio")), _call(_host("modern", "stdio"))]
    refused = await answer_child("files", one_client, elicit, Roots())
    assert isinstance(refused, types.ErrorData) and "different clients" not in refused.message
    assert "cannot tell which of 2 calls in flight on server 'files' (each call's questions go back in" in refused.message
