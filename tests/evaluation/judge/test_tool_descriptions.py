"""``--tools``: a catalog snapshot or LiveMCPBench's tools.json; anything else is one clear error."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from evaluation.judge.tool_descriptions import load_tool_descriptions
from index.errors import CatalogError
from index.catalog.records import Catalog, ToolRecord
from index.settings import livemcpbench_dir

pytestmark = pytest.mark.timeout(30)

TOOLS_JSON = livemcpbench_dir() / "tools" / "LiveMCPTool" / "tools.json"


def test_both_shapes_give_descriptions_by_server_and_tool(tmp_path: Path) -> None:
    catalog = Catalog(tools=[ToolRecord(server="fx", name="echo", description="Echo text.")]).save(tmp_path / "c.json")
    assert load_tool_descriptions(catalog) == {("fx", "echo"): "Echo text."}
    snapshot = tmp_path / "tools.json"
    snapshot.write_text(json.dumps([
        {"name": "Clock", "tools": {"clock-srv": {"server_name": "clock-srv", "tools": [{"name": "now", "description": "The time."}]}}},
    ]))
    assert load_tool_descriptions(snapshot) == {("clock-srv", "now"): "The time."}
    with pytest.raises(CatalogError, match="tool list not found"):
        load_tool_descriptions(tmp_path / "missing.json")


@pytest.mark.parametrize(
    ("content", "message"),
    [
        ({}, "not a tool list (got an object with keys none); expected a copilot catalog snapshot"),
        ({"mcpServers": {"x": {}}}, "not a tool list (got an object with keys mcpServers)"),
        ("tools", "not a tool list (got str)"),
        ({"tools": [{"name": "x"}]}, "not a catalog snapshot (tools.0.server: Field required)"),
        ({"tools": []}, "the tool list holds no tools"),
        ([], "no tools found"),
        ([{"name": "srv", "tools": {"s": {"tools": [3]}}}], "entry 1 of 1 (srv): tools.s.tools[0] should be a JSON object, not int."),
        ([{"name": "srv", "tools": {"s": 5}}], "entry 1 of 1 (srv): tools.s should be a JSON object, not int."),
    ],
)
def test_a_file_of_the_wrong_shape_names_the_file_and_the_entry(tmp_path: Path, content, message) -> None:
    path = tmp_path / "tools.json"
    path.write_text(json.dumps(content))
    with pytest.raises(CatalogError) as error:
        load_tool_descriptions(path)
    assert str(error.value).startswith(f"{path}: ") and message in str(error.value)
    assert "\n" not in str(error.value)


@pytest.mark.skipif(not TOOLS_JSON.is_file(), reason=f"LiveMCPBench tools.json not present at {TOOLS_JSON}")
def test_the_published_tools_json_is_read_in_place() -> None:
    descriptions = load_tool_descriptions(TOOLS_JSON)
    assert len(descriptions) == 527 and all(server and tool for server, tool in descriptions)
