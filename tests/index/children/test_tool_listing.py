"""Which input schemas ``index.children.tool_listing`` takes for broken (listing a real server: see
``tests/index/catalog/test_crawl.py`` and ``tests/server/pool/test_pool.py``)."""

from __future__ import annotations

from typing import Any

import pytest

from index.children.tool_listing import input_schema_problem


@pytest.mark.parametrize(
    "schema",
    [
        {"type": "object"},
        {"type": "object", "properties": {"n": {"type": "integer", "minimum": 0}}, "required": ["n"]},
        # Draft-04 forms that newer drafts reject: older servers still write them.
        {"type": "object", "properties": {"n": {"type": "number", "minimum": 0, "exclusiveMinimum": True}}},
        {"$schema": "http://json-schema.org/draft-07/schema#", "type": "object", "properties": {"a": {"type": "string"}}},
        {"type": "object", "properties": {"a": {"$ref": "#/$defs/nowhere"}}},  # unresolved is not invalid
    ],
)
def test_schemas_some_draft_accepts_are_usable(schema: dict[str, Any]) -> None:
    assert input_schema_problem(schema) is None


@pytest.mark.parametrize(
    ("schema", "problem"),
    [
        (
            {"type": "object", "properties": {"count": {"type": "integer", "minimum": "zero"}}},
            "inputSchema.properties.count.minimum is not valid JSON Schema: 'zero' is not of type 'number'",
        ),
        (
            {"type": "object", "properties": {"a": {"type": "text"}}},
            "inputSchema.properties.a.type is not valid JSON Schema: 'text' is not valid under any of the given schemas",
        ),
        (
            # Declared draft-07: checked as draft-07 only, where a boolean exclusiveMinimum is wrong.
            {"$schema": "http://json-schema.org/draft-07/schema#", "type": "object", "exclusiveMinimum": True},
            "inputSchema.exclusiveMinimum is not valid JSON Schema: True is not of type 'number'",
        ),
    ],
)
def test_a_schema_no_draft_accepts_is_named_with_where_and_what(schema: dict[str, Any], problem: str) -> None:
    assert input_schema_problem(schema) == problem
