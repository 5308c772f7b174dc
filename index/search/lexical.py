"""BM25 over tool text (bm25s: sparse matrices, scores for the whole corpus in one call)."""

from __future__ import annotations

import logging
from collections.abc import Sequence

import numpy as np

from index.search.gloss import has_chinese
from index.search.text import tokenize

logger = logging.getLogger(__name__)


class LexicalIndex:
    """BM25 (Lucene variant, k1=1.5, b=0.75: the textbook defaults, not tuned)."""

    def __init__(self, corpus: Sequence[list[str]]) -> None:
        """``corpus``: one token list per document, from :func:`index.search.text.tokenize`."""
        import bm25s

        logging.getLogger("bm25s").setLevel(logging.WARNING)
        self.size = len(corpus)
        self._bm25 = bm25s.BM25(k1=1.5, b=0.75)
        if self.size:
            # An empty token list would make bm25s drop the document from its vocabulary rows.
            self._bm25.index([tokens or [""] for tokens in corpus], show_progress=False)
        self._vocabulary: dict[str, int] = dict(self._bm25.vocab_dict) if self.size else {}
        #: Whether any document has Chinese words. Without, a query's Chinese can match nothing, so
        #: it is not segmented: jieba's dictionary (~1.5 s of CPU to load) is loaded only for corpora
        #: that need it.
        self.has_chinese = any(has_chinese(token) for token in self._vocabulary)

    def scores(self, text: str) -> np.ndarray:
        """One BM25 score per document (zeros when no query word occurs in the corpus)."""
        ids = [self._vocabulary[token] for token in tokenize(text, cjk=self.has_chinese) if token in self._vocabulary]
        if not ids:
            return np.zeros(self.size, dtype=np.float32)
        return np.asarray(self._bm25.get_scores_from_ids(ids), dtype=np.float32)
