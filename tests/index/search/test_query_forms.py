"""Route queries as agents really send them (index.search.query): fields on one line, newlines escaped
once too often, several ``<tool_assistant>`` blocks in one query, commas inside quotes or names.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from index.errors import QueryError
from index.search.query import parse_query
from index.search.tool_index import ToolIndex
from tests.index.index_support import make_records, open_index

#: The module's index is built with the real model: slow on a busy machine.
pytestmark = pytest.mark.timeout(300)


@pytest.mark.parametrize(
    ("query", "tool", "server"),
    [
        # Both fields on one line, tagged and untagged.
        ("<tool_assistant>server: weather service tool: forecast</tool_assistant>", "forecast", "weather service"),
        ("server: maps tool: driving directions", "driving directions", "maps"),
        # The block JSON-encoded once too often: its newlines arrive as the two characters "\n".
        ("<tool_assistant>\\nserver: maps\\ntool: driving directions\\n</tool_assistant>", "driving directions", "maps"),
        ("<tool_assistant>\\r\\nserver: maps\\r\\ntool: directions\\r\\n</tool_assistant>", "directions", "maps"),
        # ... but a backslash-n that is not next to a field or tag is data (a Windows path).
        ("<tool_assistant>\\nserver: files\\ntool: open C:\\new\\n</tool_assistant>", "open C:\\new", "files"),
        ("tool: open C:\\new folder", "open C:\\new folder", None),
        # A server value that merely contains "server:" is not split.
        ("<tool_assistant>\nserver: restart the web server: nginx\n</tool_assistant>", "restart the web server: nginx", "restart the web server: nginx"),
        # A sentence mentioning "server:" and "tool:" mid-line stays plain text.
        ("I need a server: one that converts units tool: x", "I need a server: one that converts units tool: x", None),
    ],
)
def test_fields_on_one_line_and_escaped_newlines(query: str, tool: str, server: str | None) -> None:
    parsed = parse_query(query)
    assert (parsed.tool, parsed.server) == (tool, server)


def test_every_block_of_a_query_with_several_is_searched() -> None:
    query = (
        "<tool_assistant>\nserver: office\ntool: convert Word to PDF\n</tool_assistant>\n"
        "<tool_assistant>\nserver: mail\ntool: send an email\n</tool_assistant>"
    )
    parsed = parse_query(query)
    assert parsed.operations == ["convert Word to PDF", "send an email"]
    assert parsed.tool == "convert Word to PDF + send an email"
    assert parsed.server == "office; mail"
    # An unclosed first block does not swallow the second block's tag into its tool text.
    unclosed = parse_query("<tool_assistant>\nserver: a\ntool: read a file\n<tool_assistant>\nserver: a\ntool: plot a chart")
    assert unclosed.operations == ["read a file", "plot a chart"] and unclosed.server == "a"
    # One block followed by chatter is still one operation.
    single = parse_query("<tool_assistant>\ntool: get weather\n</tool_assistant>\nThanks!")
    assert (single.tool, single.operations) == ("get weather", [])


@pytest.mark.parametrize(
    ("query", "operations"),
    [
        # Commas inside quotes are part of one operation.
        ("<tool_assistant>\nserver: web search\ntool: search for 'rock, paper, scissors' rules\n</tool_assistant>", []),
        ('tool: search the web for "cats, dogs and birds"', []),
        # A place after a comma is not an operation.
        ("tool: get weather for Paris, France", []),
        ("tool: hotels in Springfield, Illinois + flights to Tokyo, Japan", ["hotels in Springfield, Illinois", "flights to Tokyo, Japan"]),
        # Real lists still split, an apostrophe is not a quote.
        ("server: audio\ntool: beat tracking, MFCC extraction, chroma CQT calculation", ["beat tracking", "MFCC extraction", "chroma CQT calculation"]),
        ("tool: get today's news, weather", ["get today's news", "weather"]),
        ("tool: read Excel + Word", ["read Excel", "Word"]),
    ],
)
def test_commas_in_quotes_and_names_do_not_split(query: str, operations: list[str]) -> None:
    assert parse_query(query).operations == operations


@pytest.fixture(scope="module")
def index(tmp_path_factory: pytest.TempPathFactory) -> ToolIndex:
    home: Path = tmp_path_factory.mktemp("route-audit-index")
    open_index(home).sync(make_records(), catalog="tests", catalog_digest="abc")
    opened = open_index(home)
    opened.warm()
    return opened


def test_route_finds_the_tool_of_every_block(index: ToolIndex) -> None:
    query = (
        "<tool_assistant>\nserver: office documents\ntool: convert a Word document to PDF\n</tool_assistant>\n"
        "<tool_assistant>\nserver: maps\ntool: driving directions between two places\n</tool_assistant>"
    )
    found = index.route(query, top_k=5)
    tools = [hit.tool for hit in found.hits]
    assert "convert_to_pdf" in tools and "get_directions" in tools
    assert found.operations == ["convert a Word document to PDF", "driving directions between two places"]


def test_route_reads_a_one_line_block_like_the_multi_line_one(index: ToolIndex) -> None:
    one_line = index.route("<tool_assistant>server: maps tool: driving directions</tool_assistant>", top_k=3)
    escaped = index.route("<tool_assistant>\\nserver: maps\\ntool: driving directions\\n</tool_assistant>", top_k=3)
    proper = index.route("<tool_assistant>\nserver: maps\ntool: driving directions\n</tool_assistant>", top_k=3)
    expected = [(hit.tool, hit.score) for hit in proper.hits]
    assert [(hit.tool, hit.score) for hit in one_line.hits] == expected
    assert [(hit.tool, hit.score) for hit in escaped.hits] == expected


@pytest.mark.parametrize("query", ["погода в Москве", "طقس", "météo à Paris", "<tool_assistant>\nserver: погода\ntool: прогноз\n</tool_assistant>"])
def test_queries_in_any_script_are_searched(query: str) -> None:
    # Letters outside Latin and CJK used to be refused as "no words to search for".
    assert parse_query(query).tool


def test_a_query_the_pool_cannot_read_is_a_weak_match_not_an_error(index: ToolIndex) -> None:
    found = index.route("погода в Москве", top_k=3)
    assert found.weak and found.related_servers
    lexical = index.route("прогноз погоды", top_k=3, method="bm25")
    assert lexical.hits == [] or all(hit.score == 0 for hit in lexical.hits)


def test_a_block_sent_twice_is_one_operation() -> None:
    block = "<tool_assistant>\nserver: maps\ntool: driving directions\n</tool_assistant>\n"
    parsed = parse_query(block * 2)
    assert (parsed.tool, parsed.server, parsed.operations) == ("driving directions", "maps", [])


def test_a_lone_surrogate_is_searched_as_a_replacement_character(index: ToolIndex) -> None:
    # Argv bytes that are not UTF-8 (surrogateescape) and JSON's "\ud800" reach route as lone
    # surrogates; the tokenizer refused them with a TypeError. (Encoded to compare: a failure is then
    # an encoding error, not a diff of text no report can print.)
    assert parse_query("time zone \udcff").tool.encode("utf-8") == "time zone \ufffd".encode("utf-8")
    found = index.route("<tool_assistant>\nserver: time\ntool: convert between time zones \ud800\n</tool_assistant>", top_k=3)
    assert found.hits[0].tool == "convert_time"
    with pytest.raises(QueryError, match="no words to search for"):
        parse_query("\ud800 \udcff")


@pytest.mark.parametrize(
    ("query", "tool", "server", "operations"),
    [
        # Tool first on one line, inside a block; in free text a "server:" in the operation stays in it.
        ("<tool_assistant>tool: directions server: maps</tool_assistant>", "directions", "maps", []),
        ("tool: restart the web server: nginx", "restart the web server: nginx", None, []),
        # Markdown's third bullet and the typographic ones.
        ("<tool_assistant>\n+ server: maps\n+ tool: directions\n</tool_assistant>", "directions", "maps", []),
        ("<tool_assistant>\n• server: maps\n• tool: directions\n</tool_assistant>", "directions", "maps", []),
        ("· server: maps\n· tool: directions", "directions", "maps", []),
        # A first block that names only a server does not hide the next block's tool.
        (
            "<tool_assistant>\nserver: maps\n</tool_assistant>\n"
            "<tool_assistant>\nserver: weather service\ntool: get the forecast\n</tool_assistant>",
            "get the forecast", "weather service", [],
        ),
        ("<tool_assistant></tool_assistant><tool_assistant>server: weather\ntool: forecast</tool_assistant>", "forecast", "weather", []),
        # A JSON "query" is plain text: its commas do not list operations; a "tool" field's do.
        ('{"query": "restaurants in Berlin, cheap"}', "restaurants in Berlin, cheap", None, []),
        ('{"tool": "beat tracking, MFCC extraction"}', "beat tracking, MFCC extraction", None, ["beat tracking", "MFCC extraction"]),
        # A line that starts another field ends the tool's value: its words and its ";" were read
        # as the tool's ("Your query lists 2 operations"); a URL or a "name: value" inside a line is no field.
        (
            "<tool_assistant>\nserver: finance\ntool: get the stock price\nparams: ticker=AAPL; period=1y\n</tool_assistant>",
            "get the stock price", "finance", [],
        ),
        ("<tool_assistant>\nserver: papers\ntool: search arxiv\n- reason: need sources\n</tool_assistant>", "search arxiv", "papers", []),
        ("<tool_assistant>\nserver: web\ntool: fetch a page\nhttps://example.com/a\n</tool_assistant>", "fetch a page https://example.com/a", "web", []),
        ("<tool_assistant>\nserver: files\ntool: read file: notes.txt\n</tool_assistant>", "read file: notes.txt", "files", []),
        # The tag as agents vary it: its closing tag was read as the tool's words.
        ('<tool_assistant id="1">\nserver: finance\ntool: get the stock price\n</tool_assistant>', "get the stock price", "finance", []),
        ("<tool-assistant>\nserver: finance\ntool: get the stock price\n</tool-assistant>", "get the stock price", "finance", []),
    ],
)
def test_more_forms_agents_write(query: str, tool: str, server: str | None, operations: list[str]) -> None:
    parsed = parse_query(query)
    assert (parsed.tool, parsed.server, parsed.operations) == (tool, server, operations)


def test_a_query_listing_more_operations_than_are_searched_says_how_many_it_lists() -> None:
    parsed = parse_query("a + b + c + d + e + f read file")
    assert parsed.operations == ["a", "b", "c", "d"] and parsed.operations_listed == 6


@pytest.mark.timeout(20)
@pytest.mark.parametrize(
    "query",
    ["<tool_assistant>" + "\n\t" * 991 + "x", "<tool_assistant>" + " \t\n" * 661 + "x"],
    ids=["tabbed-lines-in-a-block", "spaced-lines-in-a-block"],
)
def test_a_query_of_blank_lines_is_parsed_at_once(query: str) -> None:
    # Each took over 40 s before (neighbouring \s* at every line start: cubic in the query's length,
    # 2,000 characters at most); now well under a millisecond. The bound is the test's timeout.
    assert parse_query(query).tool == "x"
