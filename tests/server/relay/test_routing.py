"""Which call a child's request belongs to, what a host without the capability answers, and roots.

(server.relay.call, server.relay.roots) -- pure decisions; the end-to-end behaviour is in
``tests/server/relay/test_relay_execute.py`` and ``test_relay_http.py``.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

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
