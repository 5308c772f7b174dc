"""Fusion of the ranking signals and the weak-match / trimming verdicts (index.search.ranking, index.search.confidence)."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest

from index.search.confidence import WEAK_KEYWORD_SHARE, judge, weak_keywords
from index.search.lexical import LexicalIndex
from index.search.ranking import (
    HYBRID,
    HYBRID_V1,
    SIGNAL_CEILING,
    Signals,
    Weights,
    best_of,
    operation_signals,
    fuse,
    reciprocal_ranks,
    server_best,
    standardize,
    top_indices,
)


def test_standardize_over_the_candidates_only() -> None:
    values = np.array([1.0, 2.0, 3.0, 100.0], dtype=np.float32)
    z = standardize(values)
    assert abs(float(z.mean())) < 1e-6 and abs(float(z.std()) - 1) < 1e-5
    masked = standardize(values, np.array([True, True, True, False]))
    assert masked[:3].tolist() == pytest.approx([-1.2247, 0.0, 1.2247], abs=1e-3)
    assert standardize(np.ones(4, dtype=np.float32)).tolist() == [0, 0, 0, 0]  # a flat signal adds nothing


def test_a_bounded_signal_puts_its_best_at_the_ceiling_and_keeps_the_rest_in_proportion() -> None:
    sparse = np.zeros(10_000, dtype=np.float32)
    sparse[7], sparse[8] = 1.2, 0.6  # BM25 of a word two tools of 10,000 have
    assert standardize(sparse)[7] > 60  # unbounded: about sqrt(n / 2) standard deviations
    bounded = standardize(sparse, ceiling=10.0)
    assert bounded[7] == pytest.approx(10.0)
    assert (bounded[8] - bounded[0]) / (bounded[7] - bounded[0]) == pytest.approx(0.5)  # proportions kept
    assert np.argsort(-bounded, kind="stable").tolist() == np.argsort(-sparse, kind="stable").tolist()
    # within the ceiling nothing changes: a dense-like signal's best is a few deviations out
    spread_out = np.random.default_rng(0).normal(0.3, 0.05, 1000).astype(np.float32)
    assert standardize(spread_out, ceiling=10.0) == pytest.approx(standardize(spread_out))
    # the bound is over the candidates only: a masked-out tool's value does not set it
    mask = np.ones(10_000, dtype=bool)
    mask[7] = False
    assert standardize(sparse, mask, ceiling=10.0)[8] == pytest.approx(10.0)


@pytest.mark.parametrize("tools", [527, 10_000, 100_000])
def test_one_incidental_word_does_not_outweigh_a_clear_dense_leader_at_any_catalog_size(tools: int) -> None:
    assert HYBRID.ceiling == SIGNAL_CEILING and HYBRID_V1.ceiling is None
    rng = np.random.default_rng(tools)
    dense = rng.normal(0.2, 0.05, tools).astype(np.float32)
    dense[0] = float(dense.mean() + 6 * dense.std())  # the tool the request means, 6 deviations ahead
    lexical = np.zeros(tools, dtype=np.float32)
    lexical[1] = 1.2  # one word of the request ("book") only tool 1 has ("priceToBook")
    signals = Signals(dense=dense, lexical=lexical)
    assert int(np.argmax(fuse(signals, HYBRID))) == 0
    # unbounded, the single match is sqrt(n - 1) deviations: 23 at 527 tools, 316 at 100,000
    assert int(np.argmax(fuse(signals, replace(HYBRID, ceiling=None)))) == 1


def test_reciprocal_ranks_break_ties_by_position_and_respect_the_mask() -> None:
    ranks = reciprocal_ranks(np.array([0.2, 0.9, 0.9, 0.1]), k=60)
    assert ranks.tolist() == pytest.approx([1 / 63, 1 / 61, 1 / 62, 1 / 64])
    masked = reciprocal_ranks(np.array([0.2, 0.9, 0.5]), k=0, mask=np.array([True, False, True]))
    assert masked[2] == 1.0 and masked[0] == 0.5


def test_zsum_fusion_weights_each_signal() -> None:
    dense = np.array([0.9, 0.1, 0.5], dtype=np.float32)
    lexical = np.array([0.0, 9.0, 1.0], dtype=np.float32)
    signals = Signals(dense=dense, lexical=lexical)
    dense_led = fuse(signals, Weights(dense=1.0, lexical=0.1, server=0.0))
    lexical_led = fuse(signals, Weights(dense=0.1, lexical=1.0, server=0.0))
    assert int(np.argmax(dense_led)) == 0 and int(np.argmax(lexical_led)) == 1
    expected = standardize(dense) + 0.5 * standardize(lexical)
    assert fuse(signals, Weights(dense=1, lexical=0.5, server=0.3)) == pytest.approx(expected)  # no server signal: skipped


def test_rrf_fusion_uses_ranks_not_magnitudes() -> None:
    signals = Signals(dense=np.array([0.9, 0.89, 0.1]), lexical=np.array([0.0, 50.0, 49.0]))
    scores = fuse(signals, Weights(dense=1, lexical=1, server=0, fusion="rrf", rrf_k=60))
    assert int(np.argmax(scores)) == 1  # second in dense, first in BM25


def test_fusion_needs_a_signal() -> None:
    with pytest.raises(ValueError, match="no signal"):
        fuse(Signals(lexical=np.zeros(3)), Weights(dense=1, lexical=0, server=0))


def test_bottom_up_server_signal_is_the_best_tool_of_each_server() -> None:
    values = np.array([0.1, 0.7, 0.3, 0.2], dtype=np.float32)
    servers = np.array([0, 0, 1, 1])
    assert server_best(values, servers, 2).tolist() == pytest.approx([0.7, 0.7, 0.3, 0.3])


def test_shipped_weights_differ_from_the_first_hybrid() -> None:
    assert HYBRID.dense == 1.0 and HYBRID.fusion == "zsum"
    assert (HYBRID.lexical, HYBRID.server) != (HYBRID_V1.lexical, HYBRID_V1.server)


def test_top_indices_order_ties_and_mask() -> None:
    scores = np.array([0.5, 0.9, 0.9, 0.1])
    assert top_indices(scores, 3) == [1, 2, 0]
    assert top_indices(scores, 5, mask=np.array([True, False, False, True])) == [0, 3]
    # a tie across the cut goes to the first positions, however many tie
    tied = np.array([0.2] * 40 + [0.9], dtype=np.float32)
    assert top_indices(tied, 3) == [40, 0, 1]
    assert top_indices(tied[::-1].copy(), 2) == [0, 1]


def test_judge_trims_only_clearly_worse_hits_and_flags_weak_matches() -> None:
    scores = np.array([9.0, 8.0, 2.0, 1.0, 0.5], dtype=np.float32)
    positions = [0, 1, 2, 3, 4]
    strong = np.array([0.8, 0.6, 0.1, 0.1, 0.1], dtype=np.float32)
    verdict = judge(scores, strong, np.zeros(5, dtype=np.float32), positions, trim_floor=5.0, trim_margin=4.0)
    assert verdict.keep == 2 and not verdict.weak
    # Close scores are all kept, however low.
    flat = np.array([3.0, 2.9, 2.8, 2.7, 2.6], dtype=np.float32)
    assert judge(flat, strong, None, positions, trim_floor=5.0, trim_margin=4.0).keep == 5
    # Best dense similarity low and no strong keyword match: weak; a strong keyword match rescues it.
    weak_dense = np.full(5, 0.2, dtype=np.float32)
    assert judge(scores, weak_dense, np.zeros(5, dtype=np.float32), positions, weak_dense=0.3, weak_lexical=8).weak
    assert not judge(scores, weak_dense, np.array([12.0, 0, 0, 0, 0], dtype=np.float32), positions, weak_dense=0.3, weak_lexical=8).weak
    assert judge(scores, None, None, []).keep == 0


@pytest.mark.parametrize("documents", [3, 25, 527, 5000])
def test_one_rare_word_score_is_what_a_word_found_once_in_one_document_scores(documents: int) -> None:
    corpus = [[f"word{number}", "common"] for number in range(documents)]  # every document of the same length
    lexical = LexicalIndex(corpus)
    assert lexical.one_rare_word_score == pytest.approx(float(lexical.scores("word0").max()), rel=1e-5)
    assert lexical.scores("common").max() < 0.2 * lexical.one_rare_word_score  # a word every document has
    assert LexicalIndex([]).one_rare_word_score == 0.0


def test_a_keyword_answer_is_weak_when_only_common_words_matched() -> None:
    lexical = LexicalIndex([["weather", "forecast", "city", "get"], ["air", "quality", "city", "get"], ["read", "file", "get"]])
    rare = lexical.one_rare_word_score
    assert not weak_keywords(float(lexical.scores("weather forecast for a city").max()), rare)  # two rare words
    assert weak_keywords(float(lexical.scores("get a city").max()), rare)  # words most tools have
    # the share is the boundary, and a larger corpus scales it with a rare word's idf
    assert weak_keywords(WEAK_KEYWORD_SHARE * rare - 0.01, rare) and not weak_keywords(WEAK_KEYWORD_SHARE * rare, rare)
    assert LexicalIndex([["x"]] * 527).one_rare_word_score > 2 * rare


def test_best_of_keeps_each_tools_best_score_over_the_operations() -> None:
    whole = np.array([3.0, 1.0, 0.5], dtype=np.float32)
    first = np.array([1.0, 2.5, 0.0], dtype=np.float32)
    second = np.array([0.0, 0.0, 4.0], dtype=np.float32)
    assert best_of([whole]) is whole
    assert best_of([whole, first, second]).tolist() == [3.0, 2.5, 4.0]


def test_each_operation_gets_its_own_bm25_and_the_whole_querys_other_signals() -> None:
    from index.search.lexical import LexicalIndex
    from index.search.text import tokenize

    lexical = LexicalIndex([tokenize("read a spreadsheet"), tokenize("send an email")])
    whole = Signals(dense=np.array([0.4, 0.3], dtype=np.float32), lexical=lexical.scores("read a spreadsheet + send an email"),
                    server=np.array([0.1, 0.2], dtype=np.float32))
    first, second = operation_signals(whole, lexical, ["read a spreadsheet", "send an email"], HYBRID)
    assert first.dense is whole.dense and first.server is whole.server
    assert first.lexical[0] > 0 == first.lexical[1] and second.lexical[1] > 0 == second.lexical[0]
    assert operation_signals(whole, lexical, ["send an email"], Weights(lexical=0.0)) == []
