"""``server.route.arguments``: route's query, top_k and server as the model sent them (the copilot's
tests show the same errors reaching a host through a real copilot)."""

from __future__ import annotations

import pytest

from index.errors import QueryError
from server.route.arguments import DEFAULT_TOP_K, route_query, route_server, route_top_k


def test_a_query_must_be_text_that_says_something() -> None:
    assert route_query("current time in Tokyo") == "current time in Tokyo"
    with pytest.raises(QueryError, match=r"query must be a string describing the task, got list \"\['a'\]\""):
        route_query(["a"])
    for empty in ("", None):
        with pytest.raises(QueryError, match="The query is empty.*<tool_assistant>"):
            route_query(empty)


@pytest.mark.parametrize(("top_k", "expected"), [(None, DEFAULT_TOP_K), (3, 3), (3.0, 3), ("4", 4), (10, 10)])
def test_top_k_in_range_is_taken_as_it_is(top_k: object, expected: int) -> None:
    assert route_top_k(top_k, 10) == (expected, None)


def test_top_k_out_of_range_is_brought_into_it_with_a_note() -> None:
    assert route_top_k(0, 10) == (1, "top_k=0 is outside 1..10; using 1.")
    assert route_top_k(11, 10) == (10, "top_k=11 is outside 1..10; using 10.")
    # a huge number is not echoed whole
    k, note = route_top_k(10**300, 10)
    assert k == 10 and note == "top_k=100000…(301 digits) is outside 1..10; using 10."
    assert route_top_k(-(10**20), 10)[1] == "top_k=-100000…(21 digits) is outside 1..10; using 1."


@pytest.mark.parametrize("top_k", [True, 2.5, "five", [3], float("inf"), float("nan")])
def test_top_k_that_is_no_integer_is_an_error_naming_the_range(top_k: object) -> None:
    with pytest.raises(QueryError, match=r"top_k must be an integer between 1 and 10, got"):
        route_top_k(top_k, 10)


def test_the_server_filter_is_one_name_or_nothing() -> None:
    assert route_server(None) is None
    assert route_server("   ") is None
    assert route_server(" time ") == "time"
    with pytest.raises(QueryError, match=r"server must be one server's name as text, got list \"\['time', 'git'\]\"; leave it out"):
        route_server(["time", "git"])
