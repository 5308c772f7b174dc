"""Importing LiveMCPBench's tools.json snapshot into a catalog (and searching it)."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest
from tests.index.index_support import LIVEMCPBENCH_TOOLS, open_index

from index.cli.args import main
from index.errors import CatalogError
from index.catalog.livemcpbench import load_livemcpbench
from index.catalog.records import load_catalog

pytestmark = pytest.mark.timeout(300)

needs_livemcpbench = pytest.mark.skipif(
    not LIVEMCPBENCH_TOOLS.exists(), reason=f"LiveMCPBench data not available at {LIVEMCPBENCH_TOOLS}"
)


def snapshot_entry(name: str, server_key: str, tools: list[dict[str, Any]], **extra: Any) -> dict[str, Any]:
    return {
        "name": name,
        "description": f"{name} server description",
        "category": "Office",
        "config": {"mcpServers": {server_key: {"command": "npx", "args": [server_key]}}},
        "tools": {server_key: {"server_name": server_key, "tools": tools}},
        **extra,
    }


def write_snapshot(path: Path, entries: list[Any]) -> Path:
    path.write_text(json.dumps(entries, ensure_ascii=False, indent=1), encoding="utf-8")
    return path


def test_import_uses_the_server_key_and_keeps_schemas(tmp_path: Path) -> None:
    schema = {"type": "object", "properties": {"q": {"type": "string"}}, "required": ["q"]}
    snapshot = write_snapshot(
        tmp_path / "tools.json",
        [
            snapshot_entry("Bing_CN_MCP", "bing-cn-mcp", [{"name": "bing_search", "description": "必应搜索", "inputSchema": schema, "annotations": None}]),
            snapshot_entry("Time", "time", [{"name": "now", "description": None, "inputSchema": None, "annotations": {"readOnlyHint": True}}]),
        ],
    )
    catalog = load_livemcpbench(snapshot)
    assert sorted(catalog.servers) == ["bing-cn-mcp", "time"]
    search = catalog.tools[0]
    assert (search.server, search.name, search.description) == ("bing-cn-mcp", "bing_search", "必应搜索")
    assert search.input_schema == schema and search.required == ["q"]
    assert search.server_description == "Bing_CN_MCP server description" and search.category == "Office"
    now = catalog.tools[1]
    assert now.description == "" and now.input_schema["type"] == "object" and now.annotations == {"readOnlyHint": True}
    assert catalog.servers["time"].tool_count == 1


@pytest.mark.parametrize(
    ("content", "message"),
    [
        ("{not json", r"tools.json:1: not valid JSON"),
        ('{"a": 1}', "expected a JSON list"),
        ('[{"name": "x", "tools": {"s": {"tools": [{"description": "no name"}]}}}]', r"entry 1 of 1 \(x\): tools\.s\.tools\[0\]\.name is missing\.$"),
        ('[{"name": "x", "tools": {}}, [1, 2]]', r"entry 2 of 2: the entry should be a JSON object, not list\.$"),
        ('[{"name": "y", "tools": {"s": {"tools": "none"}}}]', r"entry 1 of 1 \(y\): tools\.s\.tools should be a JSON list, not str\.$"),
        ('[{"name": "z", "tools": {"s": {"tools": [{"name": 5}]}}}]', r"entry 1 of 1 \(z\): tools\.s\.tools\[0\]\.name input should be a valid string\.$"),
        ('[{"name": "a", "tools": {"s": {"tools": [{"name": "t"}]}}}, {"name": "b", "tools": {"s": {"tools": []}}}]', r"entry 2 of 2 \(b\): server 's' is listed twice\.$"),
        ("[]", "no tools found"),
        # Names the crawl refuses, refused here with the entry (the build failed late, naming none).
        ('[{"name": "e", "tools": {"": {"tools": [{"name": "t"}]}}}]', r"entry 1 of 1 \(e\): a server with an empty name"),
        ('[{"name": "s", "tools": {"a/b": {"tools": [{"name": "t"}]}}}]', r"entry 1 of 1 \(s\): server 'a/b': a name cannot contain '/'"),
        ('[{"name": "c", "tools": {"a\\u0007": {"tools": [{"name": "t"}]}}}]', r"entry 1 of 1 \(c\): server 'a\\x07': a name cannot contain control"),
    ],
)
def test_malformed_snapshots_are_reported_with_where(tmp_path: Path, content: str, message: str) -> None:
    path = tmp_path / "tools.json"
    path.write_text(content, encoding="utf-8")
    with pytest.raises(CatalogError, match=message):
        load_livemcpbench(path)


def test_a_snapshot_saved_with_a_byte_order_mark_is_read(tmp_path: Path) -> None:
    entry = snapshot_entry("Time", "time", [{"name": "now", "description": "Current time", "inputSchema": None}])
    snapshot = tmp_path / "tools.json"
    snapshot.write_text("\ufeff" + json.dumps([entry]), encoding="utf-8")  # Notepad's UTF-8
    assert [(tool.server, tool.name) for tool in load_livemcpbench(snapshot).tools] == [("time", "now")]


def test_import_command_writes_to_copilot_home_by_default(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setenv("COPILOT_HOME", str(tmp_path / "home"))
    snapshot = write_snapshot(tmp_path / "tools.json", [snapshot_entry("T", "t", [{"name": "a"}, {"name": "b"}])])
    assert main(["import-livemcpbench", str(snapshot)]) == 0
    written = tmp_path / "home" / "livemcpbench-catalog.json"
    assert "imported 2 tools from 1 servers" in capsys.readouterr().out
    assert [t.id for t in load_catalog(written).tools] == ["t/a", "t/b"]
    out = tmp_path / "elsewhere.json"
    assert main(["import-livemcpbench", str(snapshot), "--out", str(out)]) == 0 and out.exists()


def test_tools_no_one_could_call_are_skipped_and_lone_surrogates_replaced(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    tools = [
        {"name": "", "description": "no name"},
        {"name": "t\u0000x", "description": "a NUL in its name"},
        {"name": "bad\ud800", "description": "a lone surrogate in its name"},
        {"name": "ok", "description": "bad \ud800 text", "inputSchema": {"type": "object", "title": "x\udc00"}},
    ]
    snapshot = tmp_path / "tools.json"
    # ensure_ascii keeps the lone surrogates as escapes, as a JSON file holds them.
    snapshot.write_text(json.dumps([snapshot_entry("S", "s", tools)]), encoding="utf-8")
    catalog = load_livemcpbench(snapshot)
    assert [tool.name for tool in catalog.tools] == ["ok"]
    assert catalog.tools[0].description == "bad \ufffd text" and catalog.tools[0].input_schema["title"] == "x\ufffd"
    catalog.save(tmp_path / "catalog.json")  # a serializer's traceback before
    skipped = [record.getMessage() for record in caplog.records if "skipping tool" in record.getMessage()]
    assert len(skipped) == 3 and "name: empty or blank" in skipped[0] and "U+0000" in skipped[1] and "surrogate" in skipped[2]


def test_import_refuses_to_write_over_its_snapshot(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    snapshot = write_snapshot(tmp_path / "tools.json", [snapshot_entry("T", "t", [{"name": "a"}])])
    before = snapshot.read_text(encoding="utf-8")
    assert main(["import-livemcpbench", str(snapshot), "--out", str(tmp_path / "." / "tools.json")]) == 2
    assert "is the snapshot being imported; write the catalog to another path" in capsys.readouterr().err
    assert snapshot.read_text(encoding="utf-8") == before


def test_import_command_missing_file_is_a_clear_error(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["import-livemcpbench", str(tmp_path / "missing.json")]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: ") and "file not found" in err and "Traceback" not in err


@needs_livemcpbench
def test_the_published_snapshot_has_527_tools_from_70_servers() -> None:
    catalog = load_livemcpbench(LIVEMCPBENCH_TOOLS)
    assert len(catalog.tools) == 527 and len(catalog.servers) == 70
    assert len({t.id for t in catalog.tools}) == 527
    chinese = [t for t in catalog.tools if re.search(r"[\u4e00-\u9fff]", t.description)]
    assert len(chinese) == 61
    assert {"word-document-server", "mcp-server-chart", "time"} <= set(catalog.servers)


@needs_livemcpbench
def test_search_on_part_of_the_published_snapshot(tmp_path: Path) -> None:
    # A handful of servers keeps the test quick; bench/retrieval.py covers all 527 tools.
    chosen = {"bing-cn-mcp", "word-document-server", "mcp-server-chart", "time", "Bazi", "filesystem"}
    catalog = load_livemcpbench(LIVEMCPBENCH_TOOLS)
    records = [t for t in catalog.tools if t.server in chosen]
    assert {r.server for r in records} == chosen
    index = open_index(tmp_path)
    index.sync(records)
    assert [(h.server, h.tool) for h in index.search("必应搜索", top_k=1)] == [("bing-cn-mcp", "bing_search")]
    assert ("word-document-server", "convert_to_pdf") in [
        (h.server, h.tool) for h in index.search("Convert the Word document report.docx to PDF", top_k=3)
    ]
    cloud = index.search(
        "<tool_assistant>\nserver: chart or data visualisation\ntool: word cloud of frequent words\n</tool_assistant>", top_k=1
    )
    assert (cloud[0].server, cloud[0].tool) == ("mcp-server-chart", "generate_word_cloud_chart")
