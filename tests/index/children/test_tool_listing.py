"""Which input schemas ``index.children.tool_listing`` takes for broken (listing a real server: see
``tests/index/catalog/test_crawl.py`` and ``tests/server/pool/test_pool.py``)."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import anyio
import pytest

from index.catalog.servers import ServerConfig
from index.children.connect import open_session
from index.children.tool_listing import input_schema_problem, list_all_tools

SCHEMA_BREAKER = Path(__file__).resolve().parents[2] / "fixtures" / "schema_breaking_server.py"


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


@pytest.mark.timeout(90)
async def test_a_listing_taken_tool_by_tool_leaves_the_session_as_list_tools_would(tmp_path: Path) -> None:
    # The session keeps per-tool state from a listing (output schemas, x-mcp-header maps); without it,
    # the SDK's call_tool lists the tools again to check a result -- and that listing fails as a whole.
    config = ServerConfig(name="breaker", command=sys.executable, args=[str(SCHEMA_BREAKER)])
    async with open_session(config, workdir=tmp_path / "work") as connection:
        skipped: dict[str, str] = {}
        with anyio.fail_after(30):
            tools = await list_all_tools(connection, [], skipped)
            assert [tool.name for tool in tools] == ["fine", "echo"] and len(skipped) == 6
            result = await connection.session.call_tool("echo", {"text": "hi"})
        assert not result.is_error and "echo ran with" in result.content[0].text  # type: ignore[union-attr]
