"""Is a route answer any good? Weak matches and clearly irrelevant tail hits.

Decisions on the scores of one query:

* **weak** -- the best tool's dense similarity is below :data:`WEAK_DENSE` and no query word
  matched it lexically with any strength (BM25 below :data:`WEAK_LEXICAL`): the pool most likely
  has no tool for this, and ``route`` says so and suggests related servers/categories rather than
  presenting five unrelated tools as answers.
* **weak keywords** -- while ``route`` answers by keywords alone (the model still loading, or
  failed to load), the best tool's BM25 score is below :data:`WEAK_KEYWORD_SHARE` times what one
  rare query word scores in this corpus (see
  :attr:`~index.search.lexical.LexicalIndex.one_rare_word_score`): only common words matched,
  and such a best hit is rarely the tool asked for (on the dev set, 11% of the flagged answers
  had a relevant first hit, against 57% of the rest; 13 of the 23 off-catalog requests answered
  are flagged).
* **trim** -- a hit whose fused score is both low in absolute terms (below :data:`TRIM_FLOOR`,
  i.e. not far above an average tool) and more than :data:`TRIM_MARGIN` below the best hit's is
  clearly irrelevant and is left out (``route`` then returns fewer than ``top_k``).

The thresholds were picked from the score distributions of the agent-query dev set and a
hand-written set of requests the pool cannot serve (``bench/data/off_catalog.jsonl``);
``python -m bench retrieval`` reports their effect on every set (trimming: hit@5 kept within
2 of 929 dev queries) and cross-validates the weak threshold across tasks (0.30-0.34 by fold).
The keyword share is fitted the same way: on each fold's training tasks, the largest share that
flags at most 5% of the keyword answers whose first hit is relevant (1.42-1.44 by fold).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

#: Best dense cosine below this (all-MiniLM-L6-v2, tool text) reads as "no such tool".
WEAK_DENSE = 0.30
#: ... unless a query word matched that strongly (BM25 score of the best lexical match).
WEAK_LEXICAL = 8.0
#: A keyword-only answer is weak below this many rare words' worth of BM25 (3.3 at 527 tools).
WEAK_KEYWORD_SHARE = 1.4
#: Hits below this fused score (z-score units of the shipped weights) ...
TRIM_FLOOR = 5.0
#: ... and this far below the best hit are dropped.
TRIM_MARGIN = 4.0


@dataclass(frozen=True)
class Verdict:
    keep: int  # how many of the ranked hits to keep (>= 1)
    weak: bool


def judge(
    scores: np.ndarray,
    dense: np.ndarray | None,
    lexical: np.ndarray | None,
    positions: Sequence[int],
    mask: np.ndarray | None = None,
    *,
    weak_dense: float = WEAK_DENSE,
    weak_lexical: float = WEAK_LEXICAL,
    trim_floor: float = TRIM_FLOOR,
    trim_margin: float = TRIM_MARGIN,
) -> Verdict:
    """The verdict on ranked ``positions`` (best first) of one query's fused ``scores``."""
    if not positions:
        return Verdict(keep=0, weak=False)
    best = float(scores[positions[0]])
    keep = 1
    for position in positions[1:]:
        score = float(scores[position])
        if score < trim_floor and best - score > trim_margin:
            break  # scores are sorted: every later hit is as bad
        keep += 1
    weak = False
    if dense is not None:
        candidates = dense if mask is None else np.where(mask, dense, -np.inf)
        top_dense = float(candidates.max())
        top_lexical = 0.0
        if lexical is not None and lexical.size:
            top_lexical = float((lexical if mask is None else np.where(mask, lexical, 0.0)).max())
        weak = top_dense < weak_dense and top_lexical < weak_lexical
    return Verdict(keep=keep, weak=weak)


def weak_keywords(best: float, one_rare_word: float, *, share: float = WEAK_KEYWORD_SHARE) -> bool:
    """Whether a keyword-only answer whose best BM25 score is ``best`` is weak, on a corpus where
    one rare query word scores ``one_rare_word``: only words that many tools contain matched."""
    return best < share * one_rare_word
