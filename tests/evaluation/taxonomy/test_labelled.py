"""The classifier measured against the hand-labelled set (``evaluation/taxonomy/labelled.py`` reads
it; real trajectories): every label right."""

from __future__ import annotations

from pathlib import Path

import pytest

from evaluation.taxonomy.capability import IndexCapabilityCheck
from evaluation.taxonomy.labelled import load_labelled_set, sample_file
from evaluation.taxonomy.measure import measure

pytestmark = pytest.mark.timeout(120)

LABELLED = Path(__file__).resolve().parents[2] / "fixtures" / "trajectories"


@pytest.fixture(scope="module")
def embedder():
    from index.models.embedding import get_embedder  # noqa: PLC0415

    return get_embedder()


def test_our_runs_are_classified_as_labelled(embedder) -> None:
    cases, descriptions = load_labelled_set(LABELLED, with_samples=False)
    assert len(cases) == 6
    result = measure(cases, IndexCapabilityCheck(None, descriptions, embedder))
    assert result.mistakes == []
    retrieve = result.predictions["tx-retrieve"]
    assert retrieve.label == "retrieve" and retrieve.evidence[0].call.startswith("#1 (")


def test_the_published_samples_are_classified_as_labelled(embedder) -> None:
    if not sample_file().is_file():
        pytest.skip(f"LiveMCPBench sample not present at {sample_file()} (set COPILOT_LIVEMCPBENCH_DIR)")
    cases, descriptions = load_labelled_set(LABELLED)
    result = measure(cases, IndexCapabilityCheck(None, descriptions, embedder))
    assert result.n == 9 and result.mistakes == [], result.mistakes
