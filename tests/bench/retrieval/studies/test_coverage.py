"""The coverage re-ranking study (``python -m bench.retrieval.studies.coverage``): aspects, xQuAD, PM2, CV.

The study itself needs LiveMCPBench and the model; what is tested here is its logic on small
hand-made score vectors and a small hand-made search space: a query of one aspect keeps the shipped
order, coverage lifts the tool of a need the whole query's head misses, and the cross-validation
measures held-out tasks only.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from bench.retrieval.studies.coverage import DEPTH, Scored, aspects, cross_validate, pm2, rerank_xquad, score_query, xquad
from bench.retrieval.lab import Encoder, Space, fused, parts, top_indices
from bench.retrieval.sets import Query
from index.search.lexical import LexicalIndex
from index.search.ranking import HYBRID, SearchSpace
from index.search.text import tokenize


def shipped_order(scores: np.ndarray) -> list[int]:
    return top_indices(scores, scores.size)


# -- aspects -----------------------------------------------------------------------------------------


def test_a_question_with_a_path_has_a_clause_and_a_file_operation() -> None:
    found = aspects(parts("Find today's LeetCode Daily Challenge and generate a detailed markdown document in /root/markdown/a.md."))
    assert found[0] == "find today's LeetCode Daily Challenge"
    assert "write markdown file" in found


def test_context_clauses_are_not_needs() -> None:
    found = aspects(parts("I'm planning a trip to Paris next week. Find hotels near the Louvre and show the weather forecast."))
    assert found == ["find hotels near Louvre", "show weather forecast"]


def test_a_one_operation_query_has_one_aspect_at_most_and_a_packed_one_has_its_operations() -> None:
    assert aspects(parts("convert a word document to pdf")) == ["convert a word document to pdf"]
    assert aspects(parts("<tool_assistant>\nserver: office tools\ntool: convert a word document to pdf\n</tool_assistant>")) == []
    packed = "<tool_assistant>\nserver: office tools\ntool: add slides + save presentation\n</tool_assistant>"
    assert aspects(parts(packed)) == ["add slides", "save presentation"]


def test_pasted_data_is_not_read_as_a_path() -> None:
    blob = "iVBORw0KGgoAAAANSUhEUgAAAgAAAAIACAYAAAD0eNT6AAAABHNCSVQICAgIfAhkiA/root/AAAN1wAADdcBQiibeAAAABl0RVh0U29mdHdhcmUA"
    assert "list files in directory" not in aspects(parts(f"What does this base64 image mean?\n{blob}"))


# -- greedy selection ------------------------------------------------------------------------------

#: Tools 0-3 serve the dominant need (the whole query's head); tool 5 the second need, ranked 6th.
WHOLE = np.array([5.0, 4.8, 4.6, 4.4, 0.5, 4.0, 0.0, 0.2])
ASPECTS = np.array([
    [5.0, 4.8, 4.6, 4.4, 0.5, 0.3, 0.0, 0.2],  # the dominant need
    [0.1, 0.0, 0.2, 0.1, 0.3, 5.0, 0.0, 0.2],  # the need the head misses
])


def test_without_diversity_the_order_is_the_shipped_one_ties_included() -> None:
    tied = np.array([1.0, 3.0, 3.0, 2.0, 3.0])
    assert xquad(tied, ASPECTS[:, :5], lam=0.0, temperature=1.0, depth=5) == shipped_order(tied)
    assert pm2(tied, ASPECTS[:, :5], lam=0.6, temperature=1.0, mix=0.0, depth=5) == shipped_order(tied)


def test_coverage_lifts_the_tool_of_the_missed_need_into_the_head() -> None:
    assert shipped_order(WHOLE)[:5] == [0, 1, 2, 3, 5]
    chosen = xquad(WHOLE, ASPECTS, lam=0.5, temperature=1.0, depth=5)
    assert chosen[:2] == [0, 5]
    assert sorted(chosen) == [0, 1, 2, 3, 5]


def test_pm2_gives_the_second_need_its_seat() -> None:
    assert 5 in pm2(WHOLE, ASPECTS, lam=0.6, temperature=1.0, mix=0.6, depth=2)


WRITE = "write the notes to a markdown file"
SEARCH = "search the web for hotels"


def _unit(*values: float) -> np.ndarray:
    vector = np.asarray(values, dtype=np.float32)
    return vector / np.linalg.norm(vector)


def _no_model(texts: Sequence[str]) -> np.ndarray:
    raise AssertionError(f"the small space holds every vector; asked to embed {list(texts)}")


def small_space() -> Space:
    """Four tools of two servers (files: write, read; web: search, fetch), each with its own axis."""
    texts = ["write text to a markdown file", "read a file", "search the web for pages", "fetch a web page"]
    search = SearchSpace(
        ids=["files/write_file", "files/read_file", "web/search", "web/fetch"],
        tool_vectors=np.stack([_unit(1, 0, 0, 0), _unit(0, 1, 0, 0), _unit(0, 0, 1, 0), _unit(0, 0, 0, 1)]),
        tool_servers=np.asarray([0, 0, 1, 1], dtype=np.int32),
        server_names=["files", "web"],
        server_vectors=np.stack([_unit(1, 1, 0, 0), _unit(0, 0, 1, 1)]),
        lexical=LexicalIndex([tokenize(text) for text in texts]),
    )
    space = Space(Encoder("hand-made", _no_model, _no_model), "v3", search, ["write_file", "read_file", "search", "fetch"], search.lexical)
    space.query_vectors.update({WRITE: _unit(0.9, 0.3, 0.1, 0.1), SEARCH: _unit(0.1, 0.1, 0.9, 0.3)})
    return space


def test_a_query_of_one_aspect_keeps_the_shipped_ranking() -> None:
    space, q = small_space(), parts(WRITE)
    shipped = top_indices(fused(HYBRID)(space, q), DEPTH)
    assert shipped[:2] == [0, 1]  # the files server's tools first
    # One aspect (even a need the whole query's head misses) is no second need to cover.
    for found in ([], [WRITE], [SEARCH]):
        for relevance in ("lexical", "embedded"):
            scored = score_query(space, q, found, relevance)
            assert scored.per_aspect is None
            assert rerank_xquad(scored, {"lam": 0.9, "T": 0.25}) == shipped
    # Two aspects are covered: the web search is lifted to second place.
    covered = score_query(space, q, [WRITE, SEARCH], "embedded")
    assert covered.per_aspect is not None and covered.per_aspect.shape == (2, 4)
    assert rerank_xquad(covered, {"lam": 0.9, "T": 0.25})[:2] == [0, 2]


# -- cross-validation --------------------------------------------------------------------------------


def test_cross_validation_chooses_on_training_tasks_and_scores_held_out_ones() -> None:
    names = [f"tool{i}" for i in range(WHOLE.size)]
    # Ten tasks whose question needs tool 5 (coverage finds it) and ten step queries it cannot change.
    questions = [Query(f"q{i}", frozenset({"tool5"}), f"task{i}", "Office", "question") for i in range(10)]
    steps = [Query(f"s{i}", frozenset({"tool0"}), f"task{i}", "Office", "plain") for i in range(10)]
    sets = {"agent-steps": steps, "questions": questions}
    scored = {"agent-steps": [Scored(WHOLE) for _ in steps], "questions": [Scored(WHOLE, ASPECTS) for _ in questions]}
    grid = [{"lam": 0.0, "T": 1.0}, {"lam": 0.5, "T": 1.0}]
    result = cross_validate(scored, sets, names, rerank_xquad, grid)
    assert result.chosen == [{"lam": 0.5, "T": 1.0}] * 5
    assert [row["hit@3"] for row in result.rows["questions"]] == [1.0] * 10  # held out: tool 5 ranked 2nd
    assert [row["hit@1"] for row in result.rows["agent-steps"]] == [1.0] * 10
    assert all(fold["questions"]["MRR"] == 0.5 for fold in result.held_out)
