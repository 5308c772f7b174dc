"""route's answer text (server.route.answer): the echoed query, and notes on keyword-only answers."""

from __future__ import annotations

from index.search.providers import InputLink
from server.route.answer import MAX_ECHO_CHARS, RoutedTool, RouteAnswer, echo_query, render_route


def _tool(name: str = "get_air_quality") -> RoutedTool:
    return RoutedTool(server="weather", tool=name, description="Air quality of a city.", score=3.2, server_running=False)


def test_a_long_query_is_echoed_by_its_beginning_and_length() -> None:
    assert echo_query("current time in Tokyo") == "current time in Tokyo"
    exactly = "x" * MAX_ECHO_CHARS
    assert echo_query(exactly) == exactly
    long = "convert a word document " + "y" * 4976
    echoed = echo_query(long)
    assert echoed == long[:MAX_ECHO_CHARS] + "… (5,000 characters)"


def test_a_cut_query_says_only_its_beginning_was_searched_and_how_to_ask() -> None:
    query = "z" * 5000
    answer = RouteAnswer(query=echo_query(query), query_chars=5000, searched_chars=2000, tools=[_tool()])
    text = render_route(answer)
    assert query not in text and "… (5,000 characters)" in text
    assert "only its first 2,000 were searched" in text and "one operation per query" in text
    short = render_route(RouteAnswer(query="air quality", query_chars=11, tools=[_tool()]))
    assert "were searched" not in short


def test_keyword_only_answers_say_why_and_what_to_do() -> None:
    loading = render_route(RouteAnswer(query="air quality", ranking="lexical-startup", tools=[_tool()]))
    assert "still loading its semantic search model" in loading and "keyword matching only" in loading
    nothing = render_route(RouteAnswer(query="zzqx", ranking="lexical-startup"))
    assert nothing.startswith('No tools found for "zzqx".')
    assert "no tool shares a word with this query" in nothing and "search again in a few seconds" in nothing
    assert "Weak match" not in nothing and "Rephrase" not in nothing
    assert "Weak match" not in loading
    # Weak keywords: the tools are probably not it, but semantic search may still find one, so it
    # does not say the pool has no tool for this.
    common = render_route(RouteAnswer(query="create an invoice", ranking="lexical-startup", weak_match=True, tools=[_tool()]))
    assert "Weak match: only words that many tools contain matched" in common and "search again in a few seconds" in common
    assert "may have no tool" not in common and "Closest servers" not in common
    semantic = render_route(RouteAnswer(query="order a pizza", weak_match=True, related_servers=["maps"], tools=[_tool()]))
    assert "the pool may have no tool for it. Closest servers: maps." in semantic and "many tools contain" not in semantic

    failed = render_route(
        RouteAnswer(
            query="air quality",
            ranking="lexical-fallback",
            model_error="cannot load the embedding model from /models/x: header too large",
            model_retry_seconds=60,
            tools=[_tool()],
        )
    )
    assert "still loading" not in failed
    assert "embedding model failed to load (cannot load the embedding model from /models/x: header too large)" in failed
    assert "keyword matching only" in failed and "in about 60 s" in failed and "COPILOT_EMBEDDING_MODEL" in failed
    retrying = render_route(RouteAnswer(query="zzqx", ranking="lexical-fallback", model_error="boom", model_retry_seconds=0))
    assert "no tool shares a word" in retrying and "retrying to load it in the background" in retrying


def test_a_tool_another_hit_needs_first_says_so() -> None:
    codes = _tool("get-station-code-of-citys").model_copy(
        update={"input_for": [InputLink(tool="get-tickets", parameter=None), InputLink(tool="get-train-route", parameter="fromStation")]}
    )
    text = render_route(RouteAnswer(query="train tickets", tools=[_tool("get-tickets"), codes]))
    assert (
        "   call it first for: get-tickets (its description names this tool); get-train-route (its fromStation)\n"
        "   required params: (none)" in text
    )
    assert text.count("call it first") == 1
    parking = _tool("find_parking").model_copy(
        update={"input_from": [InputLink(tool="geocode_address", parameter="latitude"), InputLink(tool="get-tickets")]}
    )
    text = render_route(RouteAnswer(query="parking", tools=[parking]))
    assert (
        "   needs first (not in this answer): geocode_address (gives its latitude); get-tickets (named in its description)\n"
        "   required params: (none)" in text
    )


def test_a_query_listing_more_operations_than_were_searched_says_both_counts() -> None:
    many = RouteAnswer(query="q", tools=[_tool()], operations=["a", "b", "c", "d"], operations_listed=6)
    assert (
        "Your query lists 6 operations; the first 4 (a; b; c; d) were each searched on their own and the tools "
        "fitting any of them are ranked together."
    ) in render_route(many)
    few = RouteAnswer(query="q", tools=[_tool()], operations=["a", "b"], operations_listed=2)
    assert "Your query lists 2 operations (a; b); each was searched on its own and the tools" in render_route(few)
