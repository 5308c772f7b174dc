"""The catalog-growth study (``python -m bench.retrieval.studies.scale``): Python libraries made into
distractor tools, and the catalogs they grow (the study itself needs LiveMCPBench and the model)."""

from __future__ import annotations

from bench.retrieval.studies.scale import library_tools, rankers, with_distractors
from index.catalog.records import Catalog, CatalogServer, ToolRecord


def test_a_library_s_documented_functions_become_tools_of_its_module_s_server() -> None:
    tools, servers = library_tools(["json", "no_such_module_for_the_scale_study"])
    assert set(servers) == {"py-json"}  # a module that does not import only makes the family smaller
    assert servers["py-json"].description.startswith("JSON (JavaScript Object Notation)")
    by_name = {t.name: t for t in tools}
    dumps = by_name["json_dumps"]
    assert dumps.server == "py-json" and "JSON formatted" in dumps.description and "\n\n" not in dumps.description
    assert list(dumps.input_schema["properties"])[:2] == ["obj", "skipkeys"]
    assert len(dumps.input_schema["properties"]) <= 6
    assert not any(name.startswith("json__") for name in by_name)  # private names left out
    assert [t.id for t in tools] == sorted(t.id for t in tools)
    assert library_tools(["json"])[0] == tools  # the same every time


def test_a_grown_catalog_keeps_its_tools_and_adds_the_same_prefix_at_every_size() -> None:
    base = Catalog(
        servers={"maps": CatalogServer(description="Maps")},
        tools=[ToolRecord(server="maps", name="geocode", description="Address to coordinates.")],
    )
    tools, servers = library_tools(["json", "base64"])
    small = with_distractors(base, tools, servers, 3)
    large = with_distractors(base, tools, servers, 6)
    assert small.tools[0] == base.tools[0] and len(small.tools) == 4 and len(large.tools) == 7
    assert large.tools[:4] == small.tools
    assert set(small.servers) == {"maps"} | {t.server for t in small.tools[1:]}
    assert len(base.tools) == 1  # the original catalog is left as it was


def test_the_unbounded_z_sum_is_the_reference_and_the_shipped_bound_is_compared() -> None:
    labels = list(rankers())
    assert labels[0] == "unbounded z-sum" and "bounded at 10 (shipped)" in labels and labels[-1] == "dense alone"
