"""A linear query adapter trained on the catalog alone: a lab study.

``python -m bench.retrieval.studies.adapter [--home DIR]`` (LiveMCPBench data as for ``bench retrieval``).

No cross-encoder ships its weights on PyPI, and fine-tuning the model would mean shipping (or
building) new weights. The cheapest learned step is a matrix ``W`` applied to the query's
embedding before the dense cosine (``q' = q W``, normalized; the tools' vectors stay as built), a
384 x 384 product per query. ``W`` is trained here on *synthetic* queries made from each tool's
own definition by rules -- its name in words, the first sentences of its description (14 words
each), its English gloss, ``"<name> by <parameters>"`` -- with the tool as the positive and every
other tool as a negative (softmax cross-entropy over all 527 tools, temperature 0.05), starting
from the identity with a penalty ``reg · ||W - I||²`` that keeps it near the model's own space.
Nothing of the query sets is seen in training, so nothing needs cross-validation; three penalties
are reported, each scored with the shipped fusion (only the dense signal changes) and compared
with the shipped ranker per query with task-clustered intervals.
"""

from __future__ import annotations

import re
import sys
import time
from collections.abc import Callable, Sequence
import numpy as np

from bench.retrieval.lab import QueryParts, Space, with_dense
from bench.retrieval.studies.harness import open_study, print_comparison, shipped_rows, study_rows
from index.catalog.records import ToolRecord
from index.search.gloss import english_gloss
from index.search.ranking import similarities
from index.search.text import _parameter_words, humanize

REGULARIZATION = (0.1, 0.01, 0.001)
TEMPERATURE = 0.05
STEPS = 300
LEARNING_RATE = 2e-3
_SENTENCE = re.compile(r"(?<=[.!?。])\s+|\n+")


def synthetic_queries(record: ToolRecord) -> list[str]:
    """What an agent might ask for ``record``, made from its own definition by rules."""
    name = humanize(record.name)
    out = [name]
    sentences = [s.strip() for s in _SENTENCE.split((record.description or "").strip()) if len(s.split()) >= 3]
    out += [" ".join(sentence.split()[:14]) for sentence in sentences[:3]]
    gloss = english_gloss(record.description or "")
    if gloss:
        out.append(" ".join(gloss.split()[:12]))
    parameters = _parameter_words(record.input_schema)
    if parameters:
        out.append(f"{name} by {parameters}")
    return [text for text in dict.fromkeys(out) if text]


def train_adapter(queries: np.ndarray, targets: np.ndarray, tools: np.ndarray, reg: float) -> np.ndarray:
    """``W`` minimizing softmax cross-entropy of ``normalize(q W) · tools / T`` plus ``reg·||W - I||²``."""
    import torch

    torch.manual_seed(0)
    q, y, t = torch.from_numpy(queries), torch.from_numpy(targets), torch.from_numpy(tools)
    identity = torch.eye(q.shape[1])
    w = identity.clone().requires_grad_(True)
    optimizer = torch.optim.Adam([w], lr=LEARNING_RATE)
    for _ in range(STEPS):
        adapted = torch.nn.functional.normalize(q @ w, dim=1)
        loss = torch.nn.functional.cross_entropy(adapted @ t.T / TEMPERATURE, y) + reg * ((w - identity) ** 2).sum()
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
    return w.detach().numpy()


def adapted_score(w: np.ndarray) -> Callable[[Space, QueryParts], np.ndarray]:
    """The shipped fusion with the dense signal on the adapted query vector (the ``tool:`` part)."""

    def score(space: Space, q: QueryParts) -> np.ndarray:
        vector = space.query_vectors[q.tool] @ w
        dense = similarities(space.space.tool_vectors, (vector / np.linalg.norm(vector)).astype(np.float32))
        return with_dense(space, q, dense)

    return score


def main(argv: Sequence[str] | None = None) -> int:
    study = open_study(argv, "python -m bench.retrieval.studies.adapter", __doc__.split("\n\n")[0])
    if isinstance(study, int):
        return study
    records = sorted(study.catalog.tools, key=lambda r: r.id)  # the space's order
    pairs = [(text, i) for i, record in enumerate(records) for text in synthetic_queries(record)]
    texts = sorted({text for text, _ in pairs})
    vectors = dict(zip(texts, study.cache.get(study.encoder, texts, queries=True), strict=True))
    queries = np.stack([vectors[text] for text, _ in pairs]).astype(np.float32)
    targets = np.asarray([i for _, i in pairs], dtype=np.int64)
    print(f"{len(pairs)} synthetic queries for {len(records)} tools", file=sys.stderr)
    shipped = shipped_rows(study)
    print_comparison("== shipped ranker (per set: mean of each metric)", shipped, shipped, study.sets)
    for reg in REGULARIZATION:
        started = time.perf_counter()
        w = train_adapter(queries, targets, study.space.space.tool_vectors.astype(np.float32), reg)
        moved = float(np.linalg.norm(w - np.eye(w.shape[0])))
        rows = study_rows(study, adapted_score(w))
        print_comparison(
            f"== adapter, reg {reg:g} (trained in {time.perf_counter() - started:.0f} s; ||W - I|| = {moved:.2f})",
            rows, shipped, study.sets,
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
