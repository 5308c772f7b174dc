"""A usage prior learned from other tasks, cross-validated across tasks: a lab study.

``python -m bench.retrieval.studies.usage [--home DIR]`` (LiveMCPBench data as for ``bench retrieval``).

The copilot can add to each tool's score ``w * log(1 + n)``, n the number of earlier trajectories
that ran the tool without error (:mod:`index.usage`). Its value depends on the logs it learns
from, which this project does not have; two stand-ins for the logs of *other* tasks:

- *annotated*: each task ran exactly its annotated tools (a run that solved every task);
- *route's first answer*: each task ran, for each of its annotated steps, the tool the shipped
  ranker puts first for the step's ``<tool_assistant>`` query, right or wrong (an agent that trusts
  ``route``; no label is read).

For comparison, a prior from the catalog alone (no logs): a tool's closeness to the others (its
mean cosine to its :data:`HUB_NEIGHBOURS` nearest tools, z-scored), which a generic tool has.

Tasks are split into five folds; a held-out task's queries are ranked with the prior of the other
four folds' tasks, never its own. Printed per stand-in: fixed weights, then the weight chosen on the
training folds alone (each training fold scored with the prior of the other training folds; the
objective of the weight study: agent-steps hit@3 and questions nDCG@10), for three splits, each
against the shipped ranker per query with task-clustered intervals.
"""

from __future__ import annotations

import sys
from collections import Counter
from collections.abc import Callable, Mapping, Sequence

import numpy as np

from bench.retrieval.lab import CV_OBJECTIVE, fold_means, folds_by_task, fused, parts, rank_lifted, top_indices
from bench.retrieval.sets import Query
from bench.retrieval.studies.harness import Rows, Study, open_study, print_comparison
from index.search.ranking import HYBRID, standardize
from index.usage.prior import usage_boost

FOLDS = 5
SEEDS = (0, 1, 2)
FIXED = (0.25, 0.5, 1.0)
GRID = (0.0, 0.25, 0.5, 0.75, 1.0, 1.5, 2.0, 3.0)
#: Nearest tools a tool's closeness is measured over (526: all the others).
HUB_NEIGHBOURS = (10, 526)
#: The form of a step an agent sends in the "route's first answer" stand-in.
AGENT_FORM = "assistant"

Logs = Mapping[str, frozenset[str]]  # task -> the tools its trajectory ran without error


def annotated_logs(study: Study) -> Logs:
    return {q.task_id: q.relevant for q in study.sets["questions"]}


def first_answer_logs(study: Study, scores: Mapping[str, list[np.ndarray]]) -> Logs:
    logs: dict[str, set[str]] = {}
    for query, score in zip(study.sets["agent-steps"], scores["agent-steps"], strict=True):
        if query.form == AGENT_FORM:
            logs.setdefault(query.task_id, set()).add(study.space.names[top_indices(score, 1)[0]])
    return {task: frozenset(tools) for task, tools in logs.items()}


def counts_vector(logs: Logs, tasks: set[str], names: Sequence[str]) -> np.ndarray:
    """Per tool of the space: how many of ``tasks``' trajectories ran a tool of its name."""
    counts = Counter(tool for task, tools in logs.items() if task in tasks for tool in tools)
    return np.asarray([counts[name] for name in names], dtype=np.float64)


def boosted_rows(study: Study, scores: Mapping[str, list[np.ndarray]], boost: Callable[[Query], np.ndarray | float]) -> Rows:
    """Every query's metrics when its fused ``scores`` get ``boost(query)`` added and then, as ``route``
    does, the input providers of the best tools lifted (boost 0: the shipped ranking)."""
    return {name: rank_lifted(study.space, queries, scores[name], boost).rows for name, queries in study.sets.items()}


def prior_rows(
    study: Study, scores: Mapping[str, list[np.ndarray]], logs: Logs, folds: list[set[str]], weight_of: Sequence[float]
) -> Rows:
    """Every query ranked with its fold's weight and the prior of the other folds' tasks."""
    every = set().union(*folds)
    boosts = [
        usage_boost(counts_vector(logs, every - fold, study.space.names), weight)
        for fold, weight in zip(folds, weight_of, strict=True)
    ]
    fold_of = {task: number for number, fold in enumerate(folds) for task in fold}
    return boosted_rows(study, scores, lambda query: boosts[fold_of[query.task_id]])


def chosen_weights(study: Study, scores: Mapping[str, list[np.ndarray]], logs: Logs, folds: list[set[str]]) -> list[float]:
    """Per held-out fold, the grid weight best on the other folds, each of them scored with the prior
    of the remaining ones (the held-out fold's tasks are never read)."""
    chosen = []
    for held, held_out in enumerate(folds):
        training = [fold for number, fold in enumerate(folds) if number != held]

        def objective(weight: float, training: list[set[str]] = training) -> float:
            rows = _rows_on(study, scores, logs, training, weight)
            return float(np.mean([np.mean([r[metric] for r in rows[name]]) for name, metric in CV_OBJECTIVE.items()]))

        chosen.append(max(GRID, key=lambda w: (round(objective(w), 6), -w)))
    return chosen


def _rows_on(study: Study, scores: Mapping[str, list[np.ndarray]], logs: Logs, folds: list[set[str]], weight: float) -> Rows:
    """``prior_rows`` restricted to the tasks of ``folds`` (each fold's prior from the others)."""
    tasks = set().union(*folds)
    kept = {name: [q for q in queries if q.task_id in tasks] for name, queries in study.sets.items()}
    kept_scores = {
        name: [s for q, s in zip(queries, scores[name], strict=True) if q.task_id in tasks] for name, queries in study.sets.items()
    }
    view = Study(study.catalog, kept, study.cache, study.encoder, study.space)
    return prior_rows(view, kept_scores, logs, folds, [weight] * len(folds))


def closeness(tool_vectors: np.ndarray, neighbours: int) -> np.ndarray:
    """Each tool's mean cosine to its ``neighbours`` nearest other tools, z-scored over the tools."""
    similarity = tool_vectors @ tool_vectors.T
    np.fill_diagonal(similarity, -np.inf)
    nearest = np.sort(similarity, axis=1)[:, -neighbours:].mean(axis=1)
    return standardize(nearest.astype(np.float32))


def main(argv: Sequence[str] | None = None) -> int:
    study = open_study(argv, "python -m bench.retrieval.studies.usage", __doc__.split("\n\n")[0])
    if isinstance(study, int):
        return study
    # The fused scores before input providers: the prior is added to them, and providers lifted after.
    score = fused(HYBRID)
    scores = {name: [score(study.space, parts(q.text)) for q in queries] for name, queries in study.sets.items()}
    shipped = boosted_rows(study, scores, lambda query: 0.0)  # the shipped ranker, from the scores above
    print_comparison("== shipped ranker (per set: mean of each metric)", shipped, shipped, study.sets)
    tasks = sorted({q.task_id for queries in study.sets.values() for q in queries})
    stand_ins = {"annotated": annotated_logs(study), "route's first answer": first_answer_logs(study, scores)}
    for label, logs in stand_ins.items():
        used = Counter(tool for tools in logs.values() for tool in tools)
        print(f"\n## logs: {label} ({len(logs)} tasks, {len(used)} tools ran; most: "
              + ", ".join(f"{tool} {n}" for tool, n in used.most_common(5)) + ")")
        folds = folds_by_task(tasks, FOLDS, SEEDS[0])
        for weight in FIXED:
            rows = prior_rows(study, scores, logs, folds, [weight] * FOLDS)
            print_comparison(f"== {label}: weight {weight} (split {SEEDS[0]})", rows, shipped, study.sets)
        for seed in SEEDS:
            folds = folds_by_task(tasks, FOLDS, seed)
            weights = chosen_weights(study, scores, logs, folds)
            rows = prior_rows(study, scores, logs, folds, weights)
            print_comparison(f"== {label}: weight chosen on the training folds (split {seed}: {weights})", rows, shipped, study.sets)
            print("  fold-to-fold (held out): " + _fold_spread(rows, study.sets, folds))
    print("\n## no logs: a prior from the catalog alone (a tool's closeness to the others)")
    for neighbours in HUB_NEIGHBOURS:
        prior = closeness(study.space.space.tool_vectors, min(neighbours, len(study.space.names) - 1))
        for weight in (0.25, 0.5):
            rows = boosted_rows(study, scores, lambda query, boost=weight * prior: boost)
            print_comparison(f"== closeness to the {neighbours} nearest tools, weight {weight}", rows, shipped, study.sets)
    return 0


def _fold_spread(rows: Rows, sets: Mapping[str, Sequence[Query]], folds: list[set[str]]) -> str:
    return "; ".join(
        f"{name} {CV_OBJECTIVE[name]} sd {np.std(means, ddof=1):.3f} (range {min(means):.3f}-{max(means):.3f})"
        for name, means in fold_means(rows, sets, folds).items()
    )


if __name__ == "__main__":
    sys.exit(main())
