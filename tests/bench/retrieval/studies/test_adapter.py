"""The query-adapter study (``python -m bench.retrieval.studies.adapter``): its synthetic queries and its
training, on small hand-made vectors (the study itself needs LiveMCPBench and the model)."""

from __future__ import annotations

import numpy as np

from bench.retrieval.studies.adapter import synthetic_queries, train_adapter
from index.catalog.records import ToolRecord


def test_synthetic_queries_come_from_the_tools_own_definition() -> None:
    record = ToolRecord(
        server="weather",
        name="getForecast",
        description="Get the weather forecast for a city. Covers the next seven days. Ok.",
        input_schema={"type": "object", "properties": {"city_name": {"type": "string"}}},
    )
    assert synthetic_queries(record) == [
        "get forecast",
        "Get the weather forecast for a city.",
        "Covers the next seven days.",
        "get forecast by city name",
    ]


def test_a_chinese_description_gives_an_english_gloss_query() -> None:
    record = ToolRecord(server="calendar", name="getChineseCalendar", description="获取黄历信息", input_schema={"type": "object"})
    queries = synthetic_queries(record)
    assert queries[0] == "get chinese calendar" and len(queries) == 2 and queries[1].isascii()


def test_the_adapter_moves_each_query_towards_its_own_tool() -> None:
    # Three tools and queries that sit nearer a wrong tool than their own: identity ranks them wrong.
    tools = np.eye(3, dtype=np.float32)
    queries = np.asarray([[0.6, 0.8, 0.0], [0.0, 0.6, 0.8], [0.8, 0.0, 0.6]], dtype=np.float32)
    targets = np.asarray([0, 1, 2], dtype=np.int64)
    assert [int(np.argmax(tools @ q)) for q in queries] == [1, 2, 0]
    w = train_adapter(queries, targets, tools, reg=0.001)
    assert [int(np.argmax(tools @ (q @ w))) for q in queries] == [0, 1, 2]
    # A strong penalty keeps it at the identity, where the ranking stays the model's own.
    stiff = train_adapter(queries, targets, tools, reg=100.0)
    assert [int(np.argmax(tools @ (q @ stiff))) for q in queries] == [1, 2, 0]
