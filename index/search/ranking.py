"""Scoring tools for a query: BM25, dense, the paper's two-level score, and the hybrid.

The hybrid fuses up to four signals, each first put on the same footing (a z-score over the
candidate tools, bounded at :data:`SIGNAL_CEILING`, or a reciprocal rank for RRF):

* dense     -- cosine similarity of the query's ``tool:`` part (the whole query when plain) and
  the tool's text (name in words, description, parameter names, English gloss of Chinese);
* lexical   -- BM25 of the query's ``tool:`` part over the tool's name, description, parameters,
  server name and English gloss (CJK segmented with jieba);
* server    -- cosine similarity of the query's ``server:`` part (the whole query when plain) and
  each server's description + tool names: the first level of LiveMCPBench's two-level score,
  shared by all tools of a server;
* bottom_up -- each server scored by its best tool's dense score, shared by its tools.

A query that lists several operations is scored as a whole and once per operation with that
operation's BM25 (:func:`operation_signals`), and each tool keeps its best score (:func:`best_of`).

:data:`HYBRID` holds the shipped weights. ``python -m bench retrieval`` cross-validates the
weights across tasks (agent-query dev set + task questions): weights fitted per fold do no
better on held-out tasks than these fixed ones, so the simpler ranker ships (the bench prints
the folds). :data:`HYBRID_V1` is the earlier equal-weight sum.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Literal

import numpy as np

from index.search.lexical import LexicalIndex

Method = Literal["hybrid", "dense", "bm25", "two-level"]
METHODS: tuple[Method, ...] = ("bm25", "dense", "two-level", "hybrid")
Fusion = Literal["zsum", "rrf"]
SIGNALS = ("dense", "lexical", "server", "bottom_up")


#: The bound on one signal's z-score (see :func:`standardize`), every fusion's unless it says otherwise:
#: the tightest that leaves the rankings of LiveMCPBench's 527 tools as they were (2 of 929 agent-step
#: first places move, nothing else); with unrelated tools added to the catalog it keeps part of what
#: the unbounded sum loses (``python -m bench.retrieval.studies.scale``).
SIGNAL_CEILING = 10.0


@dataclass(frozen=True)
class Weights:
    """How the hybrid fuses its signals (a weight of 0 skips the signal)."""

    dense: float = 1.0
    lexical: float = 0.5
    server: float = 0.3
    bottom_up: float = 0.0
    fusion: Fusion = "zsum"
    #: RRF's rank offset (the usual 60): larger flattens the head of each ranking.
    rrf_k: int = 60
    #: z-sum: the most standard deviations one signal may put a tool above the signal's mean
    #: (:func:`standardize`); None: no bound, as the first hybrid had.
    ceiling: float | None = SIGNAL_CEILING

    def of(self, signal: str) -> float:
        return float(getattr(self, signal))


#: The shipped ranker (see the module docstring for how it was chosen).
HYBRID = Weights()
#: The first hybrid: dense + BM25 + server description, equal weights, unbounded z-scores.
HYBRID_V1 = Weights(dense=1.0, lexical=1.0, server=1.0, bottom_up=0.0, ceiling=None)


@dataclass(frozen=True)
class SearchSpace:
    """Everything a query is scored against, held in memory (Chroma stays the store of record)."""

    ids: list[str]
    tool_vectors: np.ndarray  # (tools, dim), normalized
    tool_servers: np.ndarray  # (tools,) index into server_names
    server_names: list[str]
    server_vectors: np.ndarray  # (servers, dim), normalized
    lexical: LexicalIndex

    @property
    def size(self) -> int:
        return len(self.ids)


@dataclass(frozen=True)
class Signals:
    """The raw per-tool signals of one query (``None``: not computed)."""

    dense: np.ndarray | None = None
    lexical: np.ndarray | None = None
    server: np.ndarray | None = None
    bottom_up: np.ndarray | None = None


def similarities(matrix: np.ndarray, vector: np.ndarray) -> np.ndarray:
    """``matrix @ vector``, in torch's thread pool when torch is loaded (it is, once a query was embedded).

    numpy's BLAS threads keep spinning after a large product and then steal the CPU from the
    next query's embedding in torch: at 100,000 tools that made embedding ~5x slower here.
    """
    torch = sys.modules.get("torch")
    if torch is None or matrix.size == 0:
        return matrix @ vector
    with torch.inference_mode():
        return torch.mv(torch.from_numpy(matrix), torch.tensor(vector, dtype=torch.float32)).numpy()


def standardize(values: np.ndarray, mask: np.ndarray | None = None, ceiling: float | None = None) -> np.ndarray:
    """z-scores over the candidates (``mask``); a constant signal contributes nothing.

    With ``ceiling`` the spread is at least (best - mean) / ceiling, so the best candidate scores at
    most ``ceiling`` and the others keep their order and proportions. Why: a signal only a few tools
    score on has a tiny standard deviation. BM25 for a word exactly one of n tools has puts that tool
    at sqrt(n - 1) standard deviations, whatever the word: 23 at 527 tools, 316 at 100,000. One
    incidental word ("book" in a finance tool's ``priceToBook``) then outweighs every other signal,
    and more so the larger the catalog, so weights chosen on one catalog would not hold on a larger one.
    """
    candidates = values if mask is None else values[mask]
    if candidates.size == 0:
        return values
    mean = float(candidates.mean())
    spread = float(candidates.std())
    if ceiling is not None:
        spread = max(spread, (float(candidates.max()) - mean) / ceiling)
    if spread < 1e-9:
        return np.zeros_like(values, dtype=np.float32)
    return ((values - mean) / spread).astype(np.float32)


def reciprocal_ranks(values: np.ndarray, k: int, mask: np.ndarray | None = None) -> np.ndarray:
    """``1 / (k + rank)`` among the candidates (rank 1 = best; ties broken by position)."""
    scores = values if mask is None else np.where(mask, values, -np.inf)
    order = np.lexsort((np.arange(scores.size), -scores))
    ranks = np.empty(scores.size, dtype=np.float32)
    ranks[order] = np.arange(1, scores.size + 1, dtype=np.float32)
    return (1.0 / (k + ranks)).astype(np.float32)


def server_best(values: np.ndarray, tool_servers: np.ndarray, server_count: int) -> np.ndarray:
    """Each tool gets its server's best value among its tools (the bottom-up server signal)."""
    best = np.full(server_count, -np.inf, dtype=np.float32)
    np.maximum.at(best, tool_servers, values.astype(np.float32))
    return best[tool_servers]


def fuse(signals: Signals, weights: Weights, mask: np.ndarray | None = None) -> np.ndarray:
    """The weighted fusion of the computed signals (higher is better; comparable within one query)."""
    total: np.ndarray | None = None
    for name in SIGNALS:
        weight = weights.of(name)
        values = getattr(signals, name)
        if weight == 0 or values is None:
            continue
        if weights.fusion == "zsum":
            part = standardize(values, mask, weights.ceiling)
        else:
            part = reciprocal_ranks(values, weights.rrf_k, mask)
        total = weight * part if total is None else total + weight * part
    if total is None:
        raise ValueError("no signal to fuse: every weight is 0 or every signal is missing")
    return total


def best_of(scores: list[np.ndarray]) -> np.ndarray:
    """Each tool's best score over the whole query and each operation it lists (CombMAX).

    A query listing several operations ("add slides + save presentation") is served by a tool
    that fits any one of them; scored only as a whole, each operation's tool competes with
    the blend of all of them and the head of the ranking goes to tools that fit none well.
    The scores come from the same fusion and weights, so they are on one scale.
    """
    return scores[0] if len(scores) == 1 else np.maximum.reduce(scores)


def keyword_scores(lexical: LexicalIndex, tool_text: str, operations: Sequence[str]) -> np.ndarray:
    """A keyword-only ranking (``route`` while the model loads): each tool's best BM25 over the
    query's ``tool:`` text and each operation it lists."""
    return best_of([lexical.scores(text) for text in [tool_text, *operations]])


def operation_signals(whole: Signals, lexical: LexicalIndex, operations: Sequence[str], weights: Weights) -> list[Signals]:
    """Each listed operation's signals: its own BM25, the whole query's dense and server signals.

    Embedding every operation as well ranked no better on any query set (``bench retrieval``)
    and cost ~4 ms per operation on the route path; BM25 per operation costs ~0.1 ms.
    """
    if not weights.lexical:
        return []
    return [replace(whole, lexical=lexical.scores(text)) for text in operations]


def compute_signals(
    space: SearchSpace,
    *,
    tool_vector: np.ndarray | None,
    server_vector: np.ndarray | None,
    lexical_text: str,
    weights: Weights,
) -> Signals:
    """The signals ``weights`` uses; dense ones only when query vectors are given (lexical-only start-up)."""
    dense = similarities(space.tool_vectors, tool_vector) if tool_vector is not None else None
    lexical = space.lexical.scores(lexical_text) if weights.lexical else None
    server = None
    if weights.server and server_vector is not None and len(space.server_names):
        server = similarities(space.server_vectors, server_vector)[space.tool_servers]
    bottom_up = None
    if weights.bottom_up and dense is not None:
        bottom_up = server_best(dense, space.tool_servers, len(space.server_names))
    return Signals(dense=dense, lexical=lexical, server=server, bottom_up=bottom_up)


def score_tools(
    space: SearchSpace,
    *,
    tool_vector: np.ndarray | None,
    server_vector: np.ndarray | None,
    lexical_text: str,
    method: Method = "hybrid",
    mask: np.ndarray | None = None,
    weights: Weights = HYBRID,
) -> np.ndarray:
    """One score per tool (higher is better; comparable only within one query)."""
    if method == "bm25" or tool_vector is None:
        return space.lexical.scores(lexical_text)
    if method in ("dense", "two-level"):
        dense = similarities(space.tool_vectors, tool_vector)
        if method == "dense":
            return dense
        vector = server_vector if server_vector is not None else tool_vector
        server = similarities(space.server_vectors, vector)[space.tool_servers] if len(space.server_names) else np.zeros_like(dense)
        return np.clip(dense, 0.0, None) * np.clip(server, 0.0, None)
    signals = compute_signals(
        space, tool_vector=tool_vector, server_vector=server_vector, lexical_text=lexical_text, weights=weights
    )
    return fuse(signals, weights, mask)


#: How many of the best-ranked tools have their input providers lifted (chosen by cross-validation).
PROVIDER_DEPTH = 10
#: How far below the tool that needs it a provider is placed, in fused-score units (about a tenth
#: of a signal's standard deviation): just below it, above the tools that were already below it.
PROVIDER_GAP = 0.1
#: How far apart several providers of one tool are placed, in their own order (shown scores have 3 decimals).
PROVIDER_STEP = 0.001
#: The most providers one tool may have lifted (its best-scoring ones): 3 ranks as all of them on
#: the LiveMCPBench catalog, where a tool has up to 5; the bundled catalog has a tool with 11.
PROVIDER_CAP = 3


def with_providers(
    scores: np.ndarray,
    providers: Sequence[Sequence[int]],
    mask: np.ndarray | None = None,
    *,
    depth: int = PROVIDER_DEPTH,
    gap: float = PROVIDER_GAP,
    cap: int = PROVIDER_CAP,
) -> np.ndarray:
    """``scores`` with the providers of the ``depth`` best tools (within ``mask``) lifted to ``gap``
    below the tool that needs them, when they scored lower (at most ``cap`` per tool, its best
    scoring ones); nothing else moves."""
    lifted = scores
    for consumer in top_indices(scores, depth, mask):
        floor = scores[consumer] - gap
        # The best-scoring few only (a tool whose rule finds many providers would push everything
        # else out of the answer), in their own order, a step apart, instead of tying.
        best = sorted(providers[consumer], key=lambda p: (-float(scores[p]), p))[:cap]
        for place, provider in enumerate(p for p in best if lifted[p] < floor):
            value = floor - PROVIDER_STEP * place
            if lifted[provider] < value:
                if lifted is scores:
                    lifted = scores.copy()
                lifted[provider] = value
    return lifted


def top_indices(scores: np.ndarray, k: int, mask: np.ndarray | None = None) -> list[int]:
    """Indices of the ``k`` best scores (ties broken by position, i.e. catalog order)."""
    if mask is not None:
        scores = np.where(mask, scores, -np.inf)
        k = min(k, int(mask.sum()))
    k = min(k, scores.size)
    if k <= 0:
        return []
    if k < scores.size:
        # Every tool tying with the k-th best is a candidate: argpartition alone picks among ties
        # arbitrarily, and the ranking would then depend on more than scores and positions.
        kth = np.partition(scores, scores.size - k)[scores.size - k]
        candidates = np.flatnonzero(scores >= kth)
    else:
        candidates = np.arange(scores.size)
    order = np.lexsort((candidates, -scores[candidates]))[:k]
    return [int(i) for i in candidates[order]]
