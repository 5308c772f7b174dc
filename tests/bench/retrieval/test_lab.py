"""The lab's embedding cache (bench.retrieval.lab.EmbeddingCache): vectors kept on disk by model and
text, and progress when many texts are embedded. The encoder here is a counting function of the
text, so what is cached and re-embedded can be told apart (the model itself is the index tests')."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import numpy as np
import pytest

from bench.retrieval.lab import EmbeddingCache, Encoder


def _encoder(calls: list[int]) -> Encoder:
    def embed(texts: Sequence[str]) -> np.ndarray:
        calls.append(len(texts))
        return np.array([[len(t), 1.0 + i % 3] for i, t in enumerate(texts)], dtype=np.float32)

    return Encoder("counting", embed, embed, identity="counting v1")


def test_vectors_are_embedded_once_and_read_back_normalized(tmp_path: Path) -> None:
    calls: list[int] = []
    cache = EmbeddingCache(tmp_path)
    first = cache.get(_encoder(calls), ["a", "bbb"])
    assert np.linalg.norm(first, axis=1) == pytest.approx([1.0, 1.0])
    again = cache.get(_encoder(calls), ["a", "bbb"])
    assert calls == [2] and np.array_equal(first, again)  # the second read embeds nothing
    cache.get(_encoder(calls), ["a", "bbb"], queries=True)  # queries are kept apart from documents
    assert calls == [2, 2]


def test_embedding_many_texts_says_how_far_it_has_got(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    calls: list[int] = []
    EmbeddingCache(tmp_path).get(_encoder(calls), [f"text {n}" for n in range(2100)])
    lines = capsys.readouterr().err.splitlines()
    assert lines == [
        "  embedded 1024/2100 documents (counting)",
        "  embedded 2048/2100 documents (counting)",
        "  embedded 2100/2100 documents (counting)",
    ]
    assert sum(calls) == 2100 and max(calls) == 64
    EmbeddingCache(tmp_path).get(_encoder(calls), ["a few", "texts"])
    assert capsys.readouterr().err == ""  # a few texts are embedded without a word
