"""BM25 over tool text (bm25s: sparse matrices, scores for the whole corpus in one call)."""

from __future__ import annotations

import logging
import math
from collections.abc import Sequence

import numpy as np

from index.search.gloss import has_chinese
from index.search.text import tokenize

logger = logging.getLogger(__name__)

#: BM25's term-frequency saturation (with b=0.75): the textbook defaults, not tuned.
K1 = 1.5
B = 0.75


class LexicalIndex:
    """BM25 (Lucene variant, :data:`K1` and :data:`B`)."""

    def __init__(self, corpus: Sequence[list[str]]) -> None:
        """``corpus``: one token list per document, from :func:`index.search.text.tokenize`."""
        import bm25s

        logging.getLogger("bm25s").setLevel(logging.WARNING)
        self.size = len(corpus)
        self._bm25 = bm25s.BM25(k1=K1, b=B)
        if self.size:
            # An empty token list would make bm25s drop the document from its vocabulary rows.
            self._bm25.index([tokens or [""] for tokens in corpus], show_progress=False)
        self._vocabulary: dict[str, int] = dict(self._bm25.vocab_dict) if self.size else {}
        #: Whether any document has Chinese words. Without, a query's Chinese can match nothing, so
        #: it is not segmented: jieba's dictionary (~1.5 s of CPU to load) is loaded only for corpora
        #: that need it.
        self.has_chinese = any(has_chinese(token) for token in self._vocabulary)

    @property
    def one_rare_word_score(self) -> float:
        """What a query word found once in a single document of average length scores: the scale
        of this corpus's scores (it grows with the corpus, as a rare word's idf does), on which a
        keyword-only answer is judged (:func:`index.search.confidence.weak_keywords`)."""
        if not self.size:
            return 0.0
        # Lucene idf of a word in one document; bm25s's Lucene term score is idf * tf / (tf + k1 * norm).
        return math.log1p((self.size - 0.5) / 1.5) / (1.0 + K1)

    def scores(self, text: str) -> np.ndarray:
        """One BM25 score per document (zeros when no query word occurs in the corpus)."""
        ids = [self._vocabulary[token] for token in tokenize(text, cjk=self.has_chinese) if token in self._vocabulary]
        if not ids:
            return np.zeros(self.size, dtype=np.float32)
        return np.asarray(self._bm25.get_scores_from_ids(ids), dtype=np.float32)
