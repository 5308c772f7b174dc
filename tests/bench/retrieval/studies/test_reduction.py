"""The query-reduction study (``python -m bench.retrieval.studies.reduction``): the catalog's vocabulary and
what a query keeps of itself (the study itself needs LiveMCPBench and the model)."""

from __future__ import annotations

from bench.retrieval.studies.reduction import catalog_vocabulary, reduced
from index.catalog.records import ToolRecord


def _vocabulary() -> frozenset[str]:
    return catalog_vocabulary(
        [
            ToolRecord(server="maps", name="search_nearby", description="Find places near a location."),
            ToolRecord(
                server="excel",
                name="read_sheet",
                description="Read a worksheet.",
                input_schema={"type": "object", "properties": {"filepath": {"type": "string"}}},
            ),
        ]
    )


def test_the_vocabulary_holds_names_descriptions_and_parameters() -> None:
    vocabulary = _vocabulary()
    assert {"search", "nearby", "place", "read", "sheet", "worksheet", "filepath"} <= vocabulary
    assert "trip" not in vocabulary


def test_a_query_keeps_the_catalog_s_words_as_written_and_in_order() -> None:
    vocabulary = _vocabulary()
    assert reduced("I'm planning a trip: find places nearby, then read the Sheet", vocabulary) == "find places nearby, read Sheet"
    # nothing the catalog knows: the query stays whole rather than becoming empty
    assert reduced("a family holiday", vocabulary) == "a family holiday"
