"""``python -m bench speed``'s rows on what input links cost (the rest runs on LiveMCPBench's index only)."""

from __future__ import annotations

from pathlib import Path

from tests.index.index_support import open_index

from bench.speed import link_rows
from index.catalog.records import ToolRecord


def _tool(server: str, name: str, description: str, *required: str) -> ToolRecord:
    properties = {p: {"type": "string"} for p in (*required, "address")}
    return ToolRecord(server=server, name=name, description=description,
                      input_schema={"type": "object", "properties": properties, "required": list(required)})


def test_the_links_a_route_first_needs_are_timed_against_finding_all_at_load(tmp_path: Path) -> None:
    records = [
        record
        for server in ("maps", "atlas", "roads")
        for record in (
            _tool(server, "geocode_address", "An address to its latitude."),
            _tool(server, "find_parking", "Parking near a point.", "latitude"),
        )
    ]
    index = open_index(tmp_path)
    index.sync(records, catalog="tests", catalog_digest="three maps")
    up_front, first = link_rows(index, routes=3, depth=2)  # it checks the two ways find the same links
    assert up_front.startswith("input links of 6 tools, found up front at load") and up_front.rstrip().endswith(" s")
    assert "a route's first need (2 tools of servers not met yet, p50 of 3)" in first
    assert first.split()[-1].endswith("x") and " s up front" in first
