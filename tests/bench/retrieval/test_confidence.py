"""The bench's report on keyword-only answers (bench.retrieval.confidence): what the shipped share
flags on each set, whether flagged first hits are wrong, and the share fitted fold by fold. The
space is the small test catalog; the keyword path reads only its BM25 (the encoder counts, so no
model is loaded for vectors it never reads)."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import numpy as np
import pytest

from bench.retrieval.confidence import weak_keywords_report
from bench.retrieval.lab import EmbeddingCache, Encoder, build_space
from bench.retrieval.sets import Query, QuerySet
from tests.index.index_support import make_catalog


def _space(tmp_path: Path):
    def embed(texts: Sequence[str]) -> np.ndarray:
        return np.array([[len(text), 1.0] for text in texts], dtype=np.float32)

    return build_space(make_catalog(), Encoder("counting", embed, embed, identity="counting v1"), "v3", EmbeddingCache(tmp_path))


def _set(name: str, *queries: tuple[str, str, str]) -> QuerySet:
    return QuerySet(name, [Query(text, frozenset({tool}), task, "Office", "plain") for task, text, tool in queries])


def test_keyword_answers_are_reported_flagged_or_not_with_the_share_fitted_per_fold(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    steps = _set(
        "agent-steps",
        ("t1", "convert a word document to pdf", "convert_to_pdf"),
        ("t2", "air quality of Beijing", "get_air_quality"),
        ("t3", "create an invoice for a client", "create_invoice"),  # only common words match: flagged, wrong
        ("t4", "list the files in a directory", "list_directory"),
        ("t5", "weather forecast for the next days", "get_weather_forecast"),
        ("t6", "zzqx", "read_file"),  # no word in common: not answered at all
        ("t7", "generate a pie chart", "generate_pie_chart"),
    )
    questions = _set("questions", ("t1", "convert my report to a pdf document", "convert_to_pdf"))
    real = _set("real-agent", ("t2", "air quality", "get_air_quality"))
    off = QuerySet("off-catalog", [Query("create an invoice for a client", frozenset(), "", "", "plain")])
    report: dict = {}
    weak_keywords_report(_space(tmp_path), {"agent-steps": steps, "questions": questions, "real-agent": real}, off, report)

    found = report["weak_keywords"]
    assert found["agent-steps"] == {"answered": 6, "weak": pytest.approx(1 / 6), "relevant_flagged": 0, "flagged": 1}
    assert found["questions"]["weak"] == 0.0 and found["real-agent"]["weak"] == 0.0
    assert found["off-catalog"] == {"answered": 1, "weak": 1.0, "relevant_flagged": 0, "flagged": 1}
    out = capsys.readouterr().out
    assert "agent-steps  answered 6/7, flagged weak  16.7%; first hit relevant: 0% of flagged, 100% of the rest" in out
    assert "at 25 tools" in out
    # Five folds over seven tasks: each line is a fitted share, or says it had nothing to fit on.
    folds = out.split("share by 5-fold CV")[1]
    assert [f"fold {n}:" in folds for n in range(5)] == [True] * 5
    assert "share " in folds and "off-catalog 100%" in folds
