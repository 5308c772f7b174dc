"""Input providers read from the catalog (index.search.providers) and lifted in a ranking (index.search.ranking)."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from index.catalog.records import ToolRecord
from index.search.providers import Provision, ServerLinks, input_providers, provider_positions
from index.search.ranking import with_providers


def _tool(server: str, name: str, description: str, *required: str, **described: str) -> ToolRecord:
    properties: dict[str, Any] = {p: {"type": "string"} for p in required}
    properties.update({p: {"type": "string", "description": text} for p, text in described.items()})
    return ToolRecord(
        server=server, name=name, description=description, input_schema={"type": "object", "properties": properties, "required": list(required)}
    )


GEO = _tool("maps", "geocode_address", "Convert an address to coordinates: latitude and longitude.", "address")
PARKING = _tool("maps", "find_parking", "Parking lots near a point.", "latitude", "longitude")
REVERSE = _tool("maps", "reverse_geocode", "The address at a latitude and longitude.", "latitude", "longitude")


def test_a_handle_parameter_is_provided_by_the_sibling_that_describes_it_without_taking_it() -> None:
    found = input_providers([GEO, PARKING, REVERSE])
    # reverse_geocode also mentions latitude, but takes it: it provides nothing to find_parking
    assert found["maps/find_parking"] == [Provision("maps/find_parking", "maps/geocode_address", "latitude")]
    assert found["maps/reverse_geocode"] == [Provision("maps/reverse_geocode", "maps/geocode_address", "latitude")]
    assert "maps/geocode_address" not in found  # an address is typed by people, not a handle


def test_ids_and_codes_are_handles_and_ordinary_inputs_are_not() -> None:
    story = _tool("hn", "getComments", "Comments of a story.", "storyId")
    stories = _tool("hn", "getTopStories", "The top stories, each with its id and story title.")
    writer = _tool("fs", "write_file", "Write content to a file.", "path", "content")
    reader = _tool("fs", "read_file", "Read a file's content.", "path")
    kill = _tool("os", "kill_process", "Stop a process.", "pid")
    processes = _tool("os", "list_processes", "Running processes with their pid and command.")
    compare = _tool("arxiv", "compare_papers", "Compare several papers.", "paperIds")
    search = _tool("arxiv", "search_papers", "Find papers by keyword.", "keyword")
    found = input_providers([story, stories, writer, reader, kill, processes, compare, search])
    assert found == {
        "hn/getComments": [Provision("hn/getComments", "hn/getTopStories", "storyId")],
        "os/kill_process": [Provision("os/kill_process", "os/list_processes", "pid")],  # an ...id name is a handle too
        "arxiv/compare_papers": [Provision("arxiv/compare_papers", "arxiv/search_papers", "paperIds")],  # and ...ids
    }


def test_a_tool_named_in_a_description_is_a_provider_when_its_name_reads_as_an_identifier() -> None:
    tickets = _tool(
        "trains", "get-tickets", "查询余票信息。如果用户提供相对日期，请先调用get-current-date接口。", "fromStation",
        toStation="到达地的 `station_code`，由 `get-station-code-of-citys` 查询得到。",
    )
    codes = _tool("trains", "get-station-code-of-citys", "城市名查询 station code。", "citys")
    today = _tool("trains", "get-current-date", "get-current-date 返回今天的日期。")  # names itself: no link
    search = _tool("trains", "search", "Search trains.", "q")
    fetch = _tool("trains", "fetch_page", "Fetch a page found by search.", "url")
    elsewhere = _tool("other", "get-current-date", "Another server's date.")
    found = input_providers([tickets, codes, today, search, fetch, elsewhere])
    assert found["trains/get-tickets"] == [
        Provision("trains/get-tickets", "trains/get-current-date"),
        Provision("trains/get-tickets", "trains/get-station-code-of-citys"),
    ]
    # "search" is a word as well as a tool's name: saying it names nothing; other servers are never linked
    assert set(found) == {"trains/get-tickets"}


def test_a_tool_named_as_an_alternative_provides_nothing() -> None:
    old = _tool("fs", "read_file", "Read a file. DEPRECATED: Use read_text_file instead.", "path")
    new = _tool("fs", "read_text_file", "Read a file as text.", "path")
    listing = _tool("dc", "list_directory", "List a folder. Use this instead of 'execute_command' with ls/dir commands.", "path")
    shell = _tool("dc", "execute_command", "Run a shell command.", "command")
    articles = _tool("bio", "article_searcher", "Search articles. For variant records, use variant_searcher rather than this.", "q")
    variants = _tool("bio", "variant_searcher", "Search variants.", "q")
    # ... while a sentence that names a tool to call first still links it.
    tickets = _tool("trains", "get-tickets", "Tickets. Call get_station_code first; it is deprecated to guess codes.", "q")
    codes = _tool("trains", "get_station_code", "Station codes of a city.", "city")
    found = input_providers([old, new, listing, shell, articles, variants, tickets, codes])
    assert found == {"trains/get-tickets": [Provision("trains/get-tickets", "trains/get_station_code")]}


def test_prompts_and_resources_neither_need_nor_provide() -> None:
    prompt = ToolRecord(server="maps", name="plan_trip", kind="prompt", description="Uses geocode_address.",
                        input_schema={"type": "object", "properties": {"latitude": {}}, "required": ["latitude"]})
    assert input_providers([GEO, prompt]) == {}


def test_positions_follow_the_ids_and_skip_providers_not_searched() -> None:
    found = input_providers([GEO, PARKING, REVERSE])
    ids = ["maps/find_parking", "maps/geocode_address", "maps/reverse_geocode"]
    assert provider_positions(ids, found) == ((1,), (), (1,))
    assert provider_positions(["maps/find_parking"], found) == ((),)


def test_providers_of_the_best_tools_are_lifted_just_below_them() -> None:
    providers = ((3,), (), (), (), (1,))
    scores = np.array([2.0, 0.5, 1.0, -1.0, -2.0])
    lifted = with_providers(scores, providers, depth=2, gap=0.1)
    assert lifted.tolist() == [2.0, 0.5, 1.0, 1.9, -2.0]  # tool 0's provider placed under it; tool 4 is not in the top 2
    assert scores.tolist() == [2.0, 0.5, 1.0, -1.0, -2.0]  # the caller's scores are not changed
    assert with_providers(scores, providers, depth=5, gap=0.1)[1] == 0.5  # never lowered: 0.5 > -2.0 - 0.1
    higher = np.array([2.0, 0.5, 1.0, 3.0, -2.0])
    assert with_providers(higher, providers, depth=2, gap=0.1) is higher  # a provider already above stays put
    # only tools within the mask count as the best ones
    masked = with_providers(scores, providers, np.array([False, True, True, True, True]), depth=2, gap=0.1)
    assert masked.tolist() == scores.tolist()


def test_several_providers_of_one_tool_keep_their_own_order_a_step_apart() -> None:
    providers = ((1, 2, 3), (), (), ())
    scores = np.array([5.0, -1.0, 0.5, 4.95])
    lifted = with_providers(scores, providers, depth=1, gap=0.1)
    # 3 was already above 4.9 and stays; 2 (0.5) goes before 1 (-1.0)
    assert lifted.tolist() == pytest.approx([5.0, 4.899, 4.9, 4.95])


def test_a_tool_with_many_providers_has_only_its_best_scoring_few_lifted() -> None:
    providers = ((1, 2, 3, 4), (), (), (), ())
    scores = np.array([5.0, 0.1, 0.4, 0.3, 0.2])
    lifted = with_providers(scores, providers, depth=1, gap=0.1, cap=2)
    assert lifted.tolist() == pytest.approx([5.0, 0.1, 4.9, 4.899, 0.2])
    assert with_providers(scores, providers, depth=1, gap=0.1).tolist() == pytest.approx([5.0, 0.1, 4.9, 4.899, 4.898])


def test_links_found_server_by_server_equal_the_whole_catalogs_and_read_only_that_server() -> None:
    other = _tool("weather", "get_forecast", "The forecast for a latitude.", "latitude")
    city = _tool("weather", "find_city", "A city's latitude and longitude.", "name")
    prompt = ToolRecord(server="maps", name="plan_trip", kind="prompt", description="Uses geocode_address.")
    records = [GEO, other, PARKING, prompt, city, REVERSE]
    servers = [0, 1, 0, 0, 1, 0]
    read: list[int] = []

    def reader(position: int) -> ToolRecord:
        read.append(position)
        return records[position]

    links = ServerLinks(servers, [r.kind for r in records], reader)
    assert read == [] and len(links) == 6  # nothing is read before a route needs it
    assert links[2] == (0,) and links.of(2) == ((0, Provision("maps/find_parking", "maps/geocode_address", "latitude")),)
    assert sorted(read) == [0, 2, 5]  # the maps tools only: not the weather tools, not the prompt
    assert links[0] == () and links[5] == (0,) and sorted(read) == [0, 2, 5]  # found once per server
    assert links[1] == (4,) and sorted(read) == [0, 1, 2, 4, 5]
    ids = [r.id for r in records]
    assert tuple(links[i] for i in range(6)) == provider_positions(ids, input_providers(records))


def test_a_tool_that_cannot_be_read_is_left_out_of_its_servers_links() -> None:
    records = [GEO, PARKING]
    links = ServerLinks([0, 0], ["tool", "tool"], lambda position: None if position == 0 else records[position])
    assert links[1] == () and links[0] == ()
