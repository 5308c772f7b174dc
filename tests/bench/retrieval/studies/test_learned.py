"""The learned re-ranker study (``python -m bench.retrieval.studies.learned``): its folds and its re-ranking,
on small hand-made features (the study itself needs LiveMCPBench and the model)."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
from sklearn.linear_model import LogisticRegression

from bench.retrieval.studies.learned import FOLDS, Entry, Lab, _ranks
from bench.retrieval.sets import Query

NAMES = ["a", "b", "c", "d"]


def _entry(task: str, relevant: str, form: str = "plain") -> Entry:
    """Four candidates; one feature, high for the relevant one, but the shipped order puts it last."""
    candidates = np.asarray([0, 1, 2, 3])
    matrix = np.asarray([[1.0 if NAMES[i] == relevant else 0.0] for i in candidates])
    labels = np.asarray([int(NAMES[i] == relevant) for i in candidates])
    return Entry(Query(f"find {relevant}", frozenset({relevant}), task, "Office", form), candidates, matrix, labels)


def _lab(entries: list[Entry], fold_of: dict[str, int]) -> Lab:
    return Lab({"agent-steps": entries, "questions": [], "real-agent": []}, NAMES, fold_of)


def test_ranks_put_the_best_first_and_break_ties_by_position() -> None:
    assert _ranks(np.asarray([0.2, 0.9, 0.2, 0.5])).tolist() == [2.0, 0.0, 3.0, 1.0]


def test_each_query_is_ranked_by_a_model_that_never_saw_its_task() -> None:
    tasks = [f"t{i}" for i in range(2 * FOLDS)]
    fold_of = {task: i % FOLDS for i, task in enumerate(tasks)}
    entries = [_entry(task, NAMES[-1 - i % 2]) for i, task in enumerate(tasks)]
    lab = _lab(entries, fold_of)
    fitted = lab.fit(LogisticRegression(), [0])
    assert len(fitted) == FOLDS
    rows = lab.rows(fitted, [0])["agent-steps"]
    assert [row["hit@1"] for row in rows] == [1.0] * len(tasks)  # learned: the shipped order had them last

    # A fold whose training data says the opposite: its own (held-out) task is scored by the others' model.
    flipped = [replace(e, labels=1 - e.labels) if fold_of[e.query.task_id] != 0 else e for e in entries]
    rows = _lab(flipped, fold_of).rows(_lab(flipped, fold_of).fit(LogisticRegression(), [0]), [0])["agent-steps"]
    held_out = [row["hit@1"] for row, e in zip(rows, flipped, strict=True) if fold_of[e.query.task_id] == 0]
    assert held_out == [0.0, 0.0]


def test_a_training_filter_leaves_a_form_out() -> None:
    tasks = [f"t{i}" for i in range(2 * FOLDS)]
    fold_of = {task: i % FOLDS for i, task in enumerate(tasks)}
    # The "terse" queries are labelled the opposite way: left out of training, they cannot teach it.
    entries = [_entry(task, "d") for task in tasks]
    entries += [replace(e, query=replace(e.query, form="terse"), labels=1 - e.labels) for e in entries]
    lab = _lab(entries, fold_of)
    kept = lab.fit(LogisticRegression(), [0], lambda set_name, q: q.form != "terse")
    rows = lab.rows(kept, [0])["agent-steps"]
    assert all(row["hit@1"] == 1.0 for row in rows)
