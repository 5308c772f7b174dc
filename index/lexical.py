"""BM25 over tool text (bm25s: sparse matrices, scores for the whole corpus in one call)."""

from __future__ import annotations

import logging
from collections.abc import Sequence

import numpy as np

from index.text import tokenize

logger = logging.getLogger(__name__)


class LexicalIndex:
    """BM25 (Lucene variant, k1=1.5, b=0.75: the textbook defaults, not tuned)."""

    def __init__(self, documents: Sequence[str]) -> None:
        import bm25s

        self.size = len(documents)
        corpus = [tokenize(document) for document in documents]
        self._bm25 = bm25s.BM25(k1=1.5, b=0.75)
        if self.size:
            self._bm25.index(corpus, show_progress=False)
        self._vocabulary: dict[str, int] = dict(self._bm25.vocab_dict) if self.size else {}

    def scores(self, text: str) -> np.ndarray:
        """One BM25 score per document (zeros when no query word occurs in the corpus)."""
        ids = [self._vocabulary[token] for token in tokenize(text) if token in self._vocabulary]
        if not ids:
            return np.zeros(self.size, dtype=np.float32)
        return np.asarray(self._bm25.get_scores_from_ids(ids), dtype=np.float32)
