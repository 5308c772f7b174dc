"""Late interaction on the shipped model's own token vectors (ColBERT-style MaxSim): a lab study.

``python -m bench.retrieval.studies.interaction [--home DIR]`` (LiveMCPBench data as for ``bench retrieval``).

The dense signal compares one pooled vector per text, so a long question's many needs blur into
one point and a step phrased in other words is matched only as a whole. Late interaction keeps the
model's contextual vector of every word piece: each query piece finds its closest piece in a tool's
text and the tool scores the (IDF-weighted) mean of those maxima -- a soft, per-word match that BM25
(exact words) and pooled cosine (whole text) both lack. No extra model: the pieces come out of the
same forward pass that pools the query's vector. Nothing is fitted: the signal is reported as the
dense signal's replacement and as a fourth signal at fixed weights, on all pieces or content pieces
only, each compared with the shipped ranker per query with task-clustered intervals.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from bench.retrieval.lab import QueryParts, Score, Space, dense_only, parts, with_dense, with_operations
from bench.retrieval.studies.harness import open_study, print_comparison, shipped_rows, study_rows
from index.search.ranking import HYBRID, best_of, fuse, standardize
from index.search.text import STOPWORDS, tool_document

WEIGHTS = (0.25, 0.5, 1.0)


@dataclass(frozen=True)
class Pieces:
    """One text's word pieces: ids and unit-length contextual vectors (special pieces included)."""

    ids: np.ndarray  # (n,) int
    vectors: np.ndarray  # (n, dim) float32, each row of length 1


def content_mask(tokens: Sequence[str]) -> np.ndarray:
    """Which word pieces carry meaning: not [CLS]/[SEP]/[PAD], punctuation or a stopword (a
    continuation piece ``##…`` counts with its word's start, so it is kept)."""
    keep = []
    for token in tokens:
        if token.startswith("[") and token.endswith("]"):
            keep.append(False)
        elif token.startswith("##"):
            keep.append(True)
        else:
            keep.append(any(ch.isalnum() for ch in token) and token not in STOPWORDS)
    return np.asarray(keep, dtype=bool)


class TokenSpace:
    """Every tool's word-piece vectors in one matrix, with the piece-to-tool map and piece IDF."""

    def __init__(self, tools: Sequence[Pieces], tokens: Sequence[Sequence[str]], *, content_only: bool) -> None:
        rows, kept_ids = [], []
        for pieces, names in zip(tools, tokens, strict=True):
            mask = content_mask(names) if content_only else np.ones(len(names), dtype=bool)
            if not mask.any():
                mask[:] = True
            rows.append(pieces.vectors[mask])
            kept_ids.append(pieces.ids[mask])
        self.matrix = np.vstack(rows).astype(np.float32)
        # each tool's pieces are contiguous, in tool order: one reduceat takes every tool's maximum
        self.starts = np.cumsum([0] + [len(r) for r in rows[:-1]])
        self.tools = len(tools)
        self.content_only = content_only
        document_frequency: dict[int, int] = {}
        for ids in kept_ids:
            for piece in set(int(i) for i in ids):
                document_frequency[piece] = document_frequency.get(piece, 0) + 1
        self._frequency = document_frequency

    def idf(self, piece: int) -> float:
        df = self._frequency.get(piece, 0)
        return float(np.log((self.tools - df + 0.5) / (df + 0.5) + 1.0))

    def scores(self, query: Pieces, query_tokens: Sequence[str], *, idf: bool) -> np.ndarray:
        """Per tool: the weighted mean over the query's pieces of its best cosine among the tool's pieces."""
        mask = content_mask(query_tokens) if self.content_only else np.ones(len(query_tokens), dtype=bool)
        if not mask.any():
            mask[:] = True
        vectors, ids = query.vectors[mask], query.ids[mask]
        similarity = vectors @ self.matrix.T  # (query pieces, all tool pieces)
        best = np.maximum.reduceat(similarity, self.starts, axis=1)  # (query pieces, tools)
        weights = np.asarray([self.idf(int(i)) for i in ids] if idf else np.ones(len(ids)), dtype=np.float32)
        return (weights @ best / max(float(weights.sum()), 1e-9)).astype(np.float32)


class PieceEncoder:
    """The shipped model's word-piece vectors, one text at a time (int8 activations are scaled per
    batch, so a text alone gets the vectors it gets on the route path)."""

    def __init__(self) -> None:
        from index.models.embedding import get_embedder

        self.model = get_embedder(precision="int8").model()  # the study's own (load_encoder), loaded once
        self._cache: dict[str, tuple[Pieces, list[str]]] = {}

    def __call__(self, text: str) -> tuple[Pieces, list[str]]:
        if text not in self._cache:
            import torch

            prepare = getattr(self.model, "preprocess", None) or self.model.tokenize  # renamed in sentence-transformers 5
            features = prepare([text])
            with torch.inference_mode():
                output = self.model(features)
            ids = features["input_ids"][0].numpy()
            vectors = output["token_embeddings"][0].numpy().astype(np.float32)
            vectors /= np.maximum(np.linalg.norm(vectors, axis=1, keepdims=True), 1e-9)
            tokens = self.model.tokenizer.convert_ids_to_tokens([int(i) for i in ids])
            self._cache[text] = (Pieces(ids, vectors), tokens)
        return self._cache[text]


def late_interaction(
    tokens: TokenSpace, encode: PieceEncoder, *, weight: float, replace_dense: bool, idf: bool
) -> Score:
    """A lab score: the shipped fusion (best over the operations) with MaxSim added at ``weight``,
    or standing in for the dense signal (``replace_dense``: same weight as dense has)."""

    def score(space: Space, q: QueryParts) -> np.ndarray:
        pieces, names = encode(q.tool)
        late = tokens.scores(pieces, names, idf=idf)
        if replace_dense:
            return with_dense(space, q, late)
        return best_of([fuse(each, HYBRID) for each in with_operations(space, q)]) + weight * standardize(late)

    return score


def maxsim_alone(tokens: TokenSpace, encode: PieceEncoder, *, idf: bool) -> Score:
    def score(space: Space, q: QueryParts) -> np.ndarray:
        pieces, names = encode(q.tool)
        return tokens.scores(pieces, names, idf=idf)

    return score


def main(argv: Sequence[str] | None = None) -> int:
    study = open_study(argv, "python -m bench.retrieval.studies.interaction", __doc__.split("\n\n")[0])
    if isinstance(study, int):
        return study
    encode = PieceEncoder()
    records = sorted(study.catalog.tools, key=lambda r: r.id)  # the space's order
    print(f"word-piece vectors of {len(records)} tool texts", file=sys.stderr)
    documents = [encode(tool_document(record)) for record in records]
    shipped = shipped_rows(study)
    print_comparison("== shipped ranker (per set: mean of each metric)", shipped, shipped, study.sets)
    plain_dense = study_rows(study, dense_only("tool"))
    print_comparison("== plain dense (the pooled vector alone)", plain_dense, shipped, study.sets)
    queries = {q.text for qs in study.sets.values() for q in qs}
    print(f"word-piece vectors of {len(queries)} queries", file=sys.stderr)
    for text in sorted(queries):
        encode(parts(text).tool)
    for content_only in (False, True):
        tokens = TokenSpace([d[0] for d in documents], [d[1] for d in documents], content_only=content_only)
        pieces = "content pieces" if content_only else "all pieces"
        for idf in (False, True) if content_only else (False,):
            label = f"{pieces}{', IDF-weighted' if idf else ''}"
            print_comparison(f"== MaxSim alone ({label})", study_rows(study, maxsim_alone(tokens, encode, idf=idf)), shipped, study.sets)
            print_comparison(
                f"== shipped with MaxSim instead of dense ({label})",
                study_rows(study, late_interaction(tokens, encode, weight=1.0, replace_dense=True, idf=idf)),
                shipped,
                study.sets,
            )
            for weight in WEIGHTS:
                print_comparison(
                    f"== shipped + {weight} x MaxSim ({label})",
                    study_rows(study, late_interaction(tokens, encode, weight=weight, replace_dense=False, idf=idf)),
                    shipped,
                    study.sets,
                )
    return 0


if __name__ == "__main__":
    sys.exit(main())
