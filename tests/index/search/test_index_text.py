"""Tokenizer and query parsing: identifiers split, Chinese segmented, bad queries refused clearly."""

from __future__ import annotations

import pytest
from tests.index.index_support import make_records

from index.errors import QueryError
from index.search.query import MAX_OPERATIONS, MAX_QUERY_CHARS, REFUSED_QUERY_CHARS, check_top_k, parse_query
from index.search.text import humanize, split_identifier, tokenize, tool_document


@pytest.mark.parametrize(
    ("name", "words"),
    [
        ("get_weather_forecast", ["get", "weather", "forecast"]),
        ("getCurrentConditions", ["get", "Current", "Conditions"]),
        ("get-weread-rank", ["get", "weread", "rank"]),
        ("HTTPRequestTool", ["HTTP", "Request", "Tool"]),
        ("read_file2", ["read", "file2"]),
    ],
)
def test_split_identifier(name: str, words: list[str]) -> None:
    assert split_identifier(name) == words


def test_tokenize_lowercases_splits_identifiers_and_drops_stopwords() -> None:
    assert tokenize("Use getCurrentConditions for the weather_forecast of Paris") == [
        "use", "get", "current", "condition", "weather", "forecast", "paris",
    ]


def test_tokenize_segments_chinese_into_words() -> None:
    tokens = tokenize("使用必应搜索指定的关键词")
    assert "搜索" in tokens and "关键词" in tokens and "指定" in tokens
    assert set(tokenize("必应搜索")) <= set(tokens)  # a query segments the same way as the description
    assert "的" not in tokens  # a stopword
    assert "使用必应搜索指定的关键词" not in tokens


def test_tokenize_mixed_scripts_and_punctuation() -> None:
    assert tokenize("PDF转换：convert_to_pdf!!") [:1] == ["pdf"]
    assert "convert" in tokenize("PDF转换：convert_to_pdf!!")
    assert tokenize("?!... ---") == []


def test_tool_document_names_the_tool_in_words_and_its_parameters() -> None:
    record = next(r for r in make_records() if r.name == "getCurrentConditions")
    document = tool_document(record)
    assert document.startswith("get current conditions (weather)")
    assert "Current temperature" in document and "parameters: location" in document
    assert humanize("search_nearby_places") == "search nearby places"


def test_plain_query() -> None:
    parsed = parse_query("  convert a Word document to PDF  ")
    assert parsed.tool == "convert a Word document to PDF" and parsed.server is None
    assert parsed.server_text == parsed.tool


def test_tool_assistant_query() -> None:
    parsed = parse_query(
        "<tool_assistant>\nserver: office productivity platform\ntool: add a paragraph\n</tool_assistant>"
    )
    assert parsed.server == "office productivity platform"
    assert parsed.tool == "add a paragraph"


def test_tool_assistant_query_variants() -> None:
    # Unclosed block, uppercase keys, multi-line values, full-width colon.
    parsed = parse_query("<tool_assistant>\nServer： maps\nTOOL: find parking\nnear the museum")
    assert parsed.server == "maps" and parsed.tool == "find parking near the museum"
    only_server = parse_query("<tool_assistant>\nserver: weather service\n</tool_assistant>")
    assert only_server.server == "weather service" and only_server.tool == "weather service"
    free_text = parse_query("<tool_assistant>find a chart tool</tool_assistant>")
    assert free_text.server is None and free_text.tool == "find a chart tool"


@pytest.mark.parametrize("query", ["", "   \n\t ", "?!?", "<tool_assistant>\nserver:\ntool:\n</tool_assistant>", "\x00\x01"])
def test_unusable_queries_are_refused_with_a_hint(query: str) -> None:
    with pytest.raises(QueryError, match="describe the tool you need"):
        parse_query(query)


def test_non_text_query_is_refused() -> None:
    with pytest.raises(QueryError, match="must be text"):
        parse_query(42)


def test_long_query_is_truncated_and_absurd_one_refused() -> None:
    parsed = parse_query("weather " * 1000)
    assert parsed.truncated and len(parsed.text) == MAX_QUERY_CHARS
    with pytest.raises(QueryError, match="characters long"):
        parse_query("x" * (REFUSED_QUERY_CHARS + 1))


def test_check_top_k() -> None:
    assert check_top_k(5) == 5
    for bad in (0, -1, 1000, True, "5", 2.5):
        with pytest.raises(QueryError, match="top_k"):
            check_top_k(bad)


@pytest.mark.parametrize(
    ("query", "tool", "server"),
    [
        # The paper's block, and what agents send instead of it.
        ("<tool_assistant>\nserver: maps\ntool: driving directions\n</tool_assistant>", "driving directions", "maps"),
        ("server: maps\ntool: driving directions", "driving directions", "maps"),
        ("- server name: maps\n- tool name: driving directions", "driving directions", "maps"),
        ('{"server": "maps", "tool": "driving directions"}', "driving directions", "maps"),
        ('{"query": "driving directions"}', "driving directions", None),
        ("```\n<tool_assistant>\nserver: maps\ntool: driving directions\n</tool_assistant>\n```", "driving directions", "maps"),
        ("<TOOL_ASSISTANT>\nSERVER：地图\nTOOL：导航\n", "导航", "地图"),
        # Several operations packed into one query stay one tool part (route's guidance asks for one).
        ("<tool_assistant>\nserver: office\ntool: create slides + save presentation\n</tool_assistant>", "create slides + save presentation", "office"),
        # Plain text that merely mentions "server:" is plain text; so is JSON without the keys.
        ("I need a server: one that converts units", "I need a server: one that converts units", None),
        ('{"a": 1}', '{"a": 1}', None),
    ],
)
def test_query_forms(query: str, tool: str, server: str | None) -> None:
    parsed = parse_query(query)
    assert (parsed.tool, parsed.server) == (tool, server)
    assert parsed.server_text == (server or tool)


@pytest.mark.parametrize(
    ("query", "operations"),
    [
        # The paper's agent lists operations with "+" (and inside a tool field with commas).
        ("<tool_assistant>\nserver: office\ntool: create slides + save presentation\n</tool_assistant>", ["create slides", "save presentation"]),
        ("server: audio\ntool: beat tracking, MFCC extraction, chroma CQT calculation", ["beat tracking", "MFCC extraction", "chroma CQT calculation"]),
        ('{"tool": "read a sheet; plot a chart"}', ["read a sheet", "plot a chart"]),
        ("create directory + file operations + mkdir", ["create directory", "file operations", "mkdir"]),
        ("a + b + c + d + e + f", ["a", "b", "c", "d"]),  # at most MAX_OPERATIONS
        # One operation: plain-text commas, a "+" inside a word, repeats and empty pieces.
        ("weather in Paris, France", []),
        ("<tool_assistant>find a chart tool, bar or pie</tool_assistant>", []),
        ("compile C++ code", []),
        ("save file + save file", []),
        ("convert a document to pdf +  ", []),
        ("convert a Word document to PDF", []),
    ],
)
def test_operations_listed_in_one_query(query: str, operations: list[str]) -> None:
    parsed = parse_query(query)
    assert parsed.operations == operations
    assert len(operations) <= MAX_OPERATIONS


def test_english_gloss_of_chinese_descriptions() -> None:
    from index.search.gloss import english_gloss, has_chinese

    gloss = english_gloss("获取指定公历时间（默认今天）的黄历信息。")
    assert "almanac" in gloss and "information" in gloss
    assert english_gloss("Get the weather forecast") == "" and not has_chinese("weather")
    record = next(r for r in make_records() if r.name == "getChineseCalendar")
    assert "English: " in tool_document(record) and "almanac" in tool_document(record)
    english_only = next(r for r in make_records() if r.name == "get_weather_forecast")
    assert "English:" not in tool_document(english_only)
