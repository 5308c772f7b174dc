"""Which input schemas ``index.children.tool_listing`` takes for broken, and how a listing past the
cap is cut (listing a real server: see also ``tests/index/catalog/test_crawl.py``,
``tests/server/pool/test_pool.py`` and ``test_pool_hostile.py``)."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import anyio
import pytest

from index.catalog.servers import ServerConfig
from index.children.connect import open_session
from index.children.listing_limits import LISTING_CUT, MAX_TOOLS
from index.children.tool_listing import input_schema_problem, list_all_tools
from tests.fixtures.hostile.hostile_server import TOOLS as HOSTILE_TOOLS
from tests.support.processes import hostile_entry

SCHEMA_BREAKER = Path(__file__).resolve().parents[2] / "fixtures" / "hostile" / "schema_breaking_server.py"


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
            assert [tool.name for tool in tools] == ["fine", "echo"] and len(skipped) == 8
            result = await connection.session.call_tool("echo", {"text": "hi"})
        assert not result.is_error and "echo ran with" in result.content[0].text  # type: ignore[union-attr]


@pytest.mark.timeout(90)
async def test_a_listing_past_the_cap_reads_the_first_tools_only_and_asks_for_no_further_page(tmp_path: Path) -> None:
    # Before: the whole page was checked (the broken tool past the cap reported as skipped for its
    # definition) before the cap cut it, and the cut was only a warning.
    flags = ("--many-tools", str(MAX_TOOLS + 500), "--broken-tool", "--endless-pages")
    config = ServerConfig(name="many", **hostile_entry(*flags))
    async with open_session(config, workdir=tmp_path / "work") as connection:
        skipped: dict[str, str] = {}
        warnings: list[str] = []
        with anyio.fail_after(30):
            tools = await list_all_tools(connection, warnings, skipped)
            counts = json.loads((await connection.session.call_tool("requests", {})).content[0].text)  # type: ignore[union-attr]
    assert len(tools) == MAX_TOOLS and warnings == []
    assert skipped == {
        LISTING_CUT: f"the server listed more than {MAX_TOOLS:,} tools and the copilot reads only the first "
        f"{MAX_TOOLS:,} ({len(HOSTILE_TOOLS) + 500 + 1} more and further pages left out)"
    }
    assert counts["tools/list"] == 1  # its every page has a next cursor: none was asked for past the cap
