"""A learned re-ranker over richer features, cross-validated across tasks: a lab study.

``python -m bench.retrieval.studies.learned [--home DIR]`` (LiveMCPBench data as for ``bench retrieval``).

The shipped ranker adds three z-scored signals with fixed weights; a grid of weights fitted by
cross-validation bought nothing beyond noise. This asks whether *more* features, and a model that
can combine them non-linearly, do better. Each query's top :data:`POOL` tools by the shipped score
are re-ranked by a model of, per tool:

- the shipped fused score and its four signals, z-scored over the catalog (dense on the ``tool:``
  part, BM25 best over the whole query and its operations, server, bottom-up server);
- dense on the whole query; dense between the ``tool:`` part and the tool's *name* in words alone;
- BM25 over the tool's name alone; the share of the query's words found in the tool's own text;
- the ranks of the dense and BM25 signals (log scale), and the tool's rank in the shipped order.

Two models: a logistic regression (pointwise, classes balanced) and gradient-boosted trees
(scikit-learn's ``HistGradientBoostingClassifier``, depth 3). Both are fitted on five folds grouped
by task over the agent-steps and questions sets together (a task's steps and its question always
fall in the same fold) and score only held-out tasks; the real agent queries are scored by the
model of their task's fold. Every feature describes how a query and a tool match, never which tool
it is, so nothing about the benchmark's favourite tools can be learned. Each model is fitted on
all features and on the shipped signals and ranks alone (what the index computes already).
Printed: each set's means with the paired difference from the shipped ranker (task-clustered 95%
intervals), and the fold-to-fold spread of the objective of the weight study (agent-steps hit@3,
questions nDCG@10).

The agent-steps set is made by rules, in five forms of each step, and a model that sees every form
in training may learn the forms rather than the matching. So the boosted trees are also fitted with
each form left out of training in turn and scored on that form alone: a kind of query it never saw,
as the real agents' queries are.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from bench.retrieval.lab import QueryParts, Space, folds_by_task, parts, top_indices, with_operations
from bench.retrieval.metrics import paired_difference, query_metrics
from bench.retrieval.sets import Query
from bench.retrieval.studies.harness import Rows, open_study, print_comparison, shipped_rows
from index.search.lexical import LexicalIndex
from index.search.ranking import HYBRID, best_of, fuse, similarities, standardize
from index.search.text import humanize, tokenize, tool_lexical_text

#: Tools re-ranked per query (the rest keep the shipped order below them).
POOL = 50
FOLDS = 5
FEATURES = (
    "shipped",
    "dense",
    "bm25",
    "server",
    "bottom_up",
    "dense_whole",
    "dense_name",
    "bm25_name",
    "coverage",
    "log_rank_dense",
    "log_rank_bm25",
    "log_rank_shipped",
)


class Features:
    """Per query, the feature matrix of its :data:`POOL` candidates (and their indices)."""

    def __init__(self, space: Space, name_vectors: np.ndarray, names: LexicalIndex, tokens: list[set[str]]) -> None:
        self.space = space
        self.name_vectors = name_vectors
        self.names = names
        self.tokens = tokens

    def of(self, q: QueryParts) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """``(candidates, features, shipped scores)`` of one query."""
        space = self.space
        signals = with_operations(space, q)
        shipped = best_of([fuse(each, HYBRID) for each in signals])
        whole = signals[0]
        assert whole.dense is not None and whole.server is not None and whole.bottom_up is not None
        bm25 = best_of([each.lexical for each in signals if each.lexical is not None])
        dense_whole = similarities(space.space.tool_vectors, space.query_vectors[q.whole])
        dense_name = similarities(self.name_vectors, space.query_vectors[q.tool])
        bm25_name = self.names.scores(q.tool)
        words = set(tokenize(q.tool))
        coverage = np.asarray([len(words & own) / max(len(words), 1) for own in self.tokens], dtype=np.float32)
        candidates = np.asarray(top_indices(shipped, POOL))
        columns = [
            standardize(shipped),
            standardize(whole.dense),
            standardize(bm25),
            standardize(whole.server),
            standardize(whole.bottom_up),
            standardize(dense_whole),
            standardize(dense_name),
            standardize(bm25_name),
            coverage,
            -np.log1p(_ranks(whole.dense)),
            -np.log1p(_ranks(bm25)),
            -np.log1p(_ranks(shipped)),
        ]
        matrix = np.stack([column[candidates] for column in columns], axis=1).astype(np.float64)
        return candidates, matrix, shipped


def _ranks(values: np.ndarray) -> np.ndarray:
    order = np.lexsort((np.arange(values.size), -values))
    ranks = np.empty(values.size, dtype=np.float64)
    ranks[order] = np.arange(values.size)
    return ranks


def _models() -> dict[str, object]:
    from sklearn.ensemble import HistGradientBoostingClassifier
    from sklearn.linear_model import LogisticRegression
    from sklearn.pipeline import make_pipeline
    from sklearn.preprocessing import StandardScaler

    return {
        "logistic regression": make_pipeline(StandardScaler(), LogisticRegression(C=1.0, class_weight="balanced", max_iter=2000)),
        "boosted trees (depth 3)": HistGradientBoostingClassifier(
            max_depth=3, max_iter=150, learning_rate=0.05, class_weight="balanced", random_state=0
        ),
    }


@dataclass
class Entry:
    """One query's candidates, their features and which of them are relevant."""

    query: Query
    candidates: np.ndarray
    matrix: np.ndarray
    labels: np.ndarray


Entries = dict[str, list[Entry]]
Filter = Callable[[str, Query], bool]


def _everything(set_name: str, query: Query) -> bool:
    return True


class Lab:
    """The entries of every set, the folds by task, and a way to fit and score a re-ranker on them."""

    def __init__(self, entries: Entries, names: list[str], fold_of: dict[str, int]) -> None:
        self.entries = entries
        self.names = names
        self.fold_of = fold_of

    def fit(self, model: Any, columns: Sequence[int], train: Filter = _everything) -> list[Any]:
        """One model per fold, fitted on the other folds' tasks of the sets it trains on (``train``)."""
        from sklearn.base import clone

        fitted = []
        for number in range(FOLDS):
            chosen = [
                entry
                for set_name in TRAINED_ON
                for entry in self.entries[set_name]
                if self.fold_of[entry.query.task_id] != number and train(set_name, entry.query)
            ]
            each = clone(model)
            each.fit(np.vstack([e.matrix[:, columns] for e in chosen]), np.concatenate([e.labels for e in chosen]))
            fitted.append(each)
        return fitted

    def rows(self, fitted: list[Any], columns: Sequence[int]) -> Rows:
        """Every query ranked by the model of its task's fold (which never saw that task)."""
        rows: Rows = {}
        for set_name, entries in self.entries.items():
            rows[set_name] = []
            for entry in entries:
                model = fitted[self.fold_of.get(entry.query.task_id, 0)]
                learned = model.predict_proba(entry.matrix[:, columns])[:, 1]
                order = entry.candidates[np.lexsort((np.arange(len(entry.candidates)), -learned))]
                ranked = [self.names[i] for i in order[:10]]
                rows[set_name].append(query_metrics(ranked, entry.query.relevant) if entry.query.relevant else {})
        return rows


#: The sets the re-rankers learn from (the real agent queries are only scored).
TRAINED_ON = ("agent-steps", "questions")
#: The shipped ranker's own signals and ranks: no feature the index does not compute already.
SIGNALS_ONLY = ("shipped", "dense", "bm25", "server", "bottom_up", "log_rank_dense", "log_rank_bm25", "log_rank_shipped")


def main(argv: Sequence[str] | None = None) -> int:
    study = open_study(argv, "python -m bench.retrieval.studies.learned", __doc__.split("\n\n")[0])
    if isinstance(study, int):
        return study
    records = sorted(study.catalog.tools, key=lambda r: r.id)  # the space's order
    name_vectors = study.cache.get(study.encoder, [humanize(r.name) for r in records]).astype(np.float32)
    features = Features(
        study.space,
        name_vectors,
        LexicalIndex([tokenize(humanize(r.name)) for r in records]),
        [set(tokenize(tool_lexical_text(r))) for r in records],
    )
    names = study.space.names
    entries: Entries = {}
    for set_name, queries in study.sets.items():
        entries[set_name] = []
        for query in queries:
            candidates, matrix, _ = features.of(parts(query.text))
            labels = np.asarray([names[i] in query.relevant for i in candidates], dtype=np.int64)
            entries[set_name].append(Entry(query, candidates, matrix, labels))
        print(f"{set_name}: features of {len(queries)} queries", file=sys.stderr)
    tasks = {q.task_id for name in TRAINED_ON for q in study.sets[name]}
    fold_of = {task: number for number, fold in enumerate(folds_by_task(tasks, FOLDS)) for task in fold}
    lab = Lab(entries, names, fold_of)
    shipped = shipped_rows(study)
    print_comparison("== shipped ranker (per set: mean of each metric)", shipped, shipped, study.sets)
    every = list(range(len(FEATURES)))
    signals_only = [FEATURES.index(name) for name in SIGNALS_ONLY]
    models = _models()
    for label, model in models.items():
        for columns, which in ((every, "all features"), (signals_only, "the shipped signals and ranks only")):
            rows = lab.rows(lab.fit(model, columns), columns)
            spread = _fold_spread(rows, study.sets, fold_of)
            print_comparison(
                f"== re-ranked by {label}, {which} (held-out folds); objective per fold: {spread}", rows, shipped, study.sets
            )
    for columns, which in ((every, "all features"), (signals_only, "the shipped signals and ranks only")):
        _leave_one_form_out(lab, models["boosted trees (depth 3)"], columns, which, shipped, study.sets["agent-steps"])
    return 0


def _leave_one_form_out(
    lab: Lab, model: Any, columns: Sequence[int], which: str, shipped: Rows, steps: Sequence[Query]
) -> None:
    """Does the gain hold for a kind of query the model never saw? Each agent-steps form in turn is
    left out of training (with the held-out tasks, as always) and is all that is scored."""
    print(f"\n== boosted trees, {which}, each agent-steps form left out of training (scored on it alone)")
    gains: list[tuple[int, float]] = []
    for form in sorted({q.form for q in steps}):
        fitted = lab.fit(model, columns, lambda set_name, q, form=form: not (set_name == "agent-steps" and q.form == form))
        rows = lab.rows(fitted, columns)["agent-steps"]
        kept = [i for i, q in enumerate(steps) if q.form == form]
        clusters = [steps[i].task_id for i in kept]
        cells = []
        for key in ("hit@3", "prec@3", "nDCG@10"):
            diff = paired_difference([rows[i][key] for i in kept], [shipped["agent-steps"][i][key] for i in kept], clusters)
            mean = sum(rows[i][key] for i in kept) / len(kept)
            cells.append(f"{key} {mean:.3f} ({diff.mean:+.3f}, {diff.low:+.3f} to {diff.high:+.3f})")
            if key == "hit@3":
                gains.append((len(kept), diff.mean))
        print(f"  {form:<10} ({len(kept)} queries)  " + "  ".join(cells))
    total = sum(n for n, _ in gains)
    print(f"  hit@3 gain over the forms, weighted by their queries: {sum(n * g for n, g in gains) / total:+.3f}")


def _fold_spread(rows: Rows, sets: dict[str, Sequence[Query]], fold_of: dict[str, int]) -> str:
    """The weight study's objective (mean of agent-steps hit@3 and questions nDCG@10) on each held-out fold."""
    values = []
    for number in range(FOLDS):
        means = []
        for set_name, metric in (("agent-steps", "hit@3"), ("questions", "nDCG@10")):
            chosen = [row[metric] for row, q in zip(rows[set_name], sets[set_name], strict=True) if fold_of[q.task_id] == number]
            means.append(sum(chosen) / max(len(chosen), 1))
        values.append(sum(means) / 2)
    return f"{np.mean(values):.3f} (sd {np.std(values):.3f}, {min(values):.3f}-{max(values):.3f})"


if __name__ == "__main__":
    sys.exit(main())
