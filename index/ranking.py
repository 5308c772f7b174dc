"""Scoring tools for a query: BM25, dense, the paper's two-level score, and the hybrid.

The hybrid adds three signals after putting each on the same footing (a z-score over the
candidate tools, so no signal dominates by its units):

* dense  -- cosine similarity of the query's tool part and the tool's text (name, description,
  parameter names);
* BM25   -- lexical match of the query against tool name, description, parameters and the
  server's name/description/category (CJK segmented with jieba);
* server -- cosine similarity of the query's server part (the whole query when plain text) and
  the server's description, shared by all tools of a server: the first level of LiveMCPBench's
  two-level score (server similarity x tool similarity).

Equal weights on purpose: nothing here is fitted to the benchmark.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass
from typing import Literal

import numpy as np

from index.lexical import LexicalIndex

Method = Literal["hybrid", "dense", "bm25", "two-level"]
METHODS: tuple[Method, ...] = ("bm25", "dense", "two-level", "hybrid")


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


def _standardize(values: np.ndarray, mask: np.ndarray | None) -> np.ndarray:
    candidates = values if mask is None else values[mask]
    if candidates.size == 0:
        return values
    spread = float(candidates.std())
    if spread < 1e-9:
        return np.zeros_like(values)
    return (values - float(candidates.mean())) / spread


def score_tools(
    space: SearchSpace,
    *,
    tool_vector: np.ndarray,
    server_vector: np.ndarray,
    lexical_text: str,
    method: Method = "hybrid",
    mask: np.ndarray | None = None,
) -> np.ndarray:
    """One score per tool (higher is better; comparable only within one query)."""
    if method == "bm25":
        return space.lexical.scores(lexical_text)
    dense = similarities(space.tool_vectors, tool_vector)
    if method == "dense":
        return dense
    server = similarities(space.server_vectors, server_vector)[space.tool_servers] if len(space.server_names) else np.zeros_like(dense)
    if method == "two-level":
        return np.clip(dense, 0.0, None) * np.clip(server, 0.0, None)
    lexical = space.lexical.scores(lexical_text)
    return _standardize(dense, mask) + _standardize(lexical, mask) + _standardize(server, mask)


def top_indices(scores: np.ndarray, k: int, mask: np.ndarray | None = None) -> list[int]:
    """Indices of the ``k`` best scores (ties broken by position, i.e. catalog order)."""
    if mask is not None:
        scores = np.where(mask, scores, -np.inf)
        k = min(k, int(mask.sum()))
    k = min(k, scores.size)
    if k <= 0:
        return []
    if k < scores.size:
        candidates = np.argpartition(-scores, k - 1)[:k]
    else:
        candidates = np.arange(scores.size)
    order = np.lexsort((candidates, -scores[candidates]))
    return [int(i) for i in candidates[order]]
