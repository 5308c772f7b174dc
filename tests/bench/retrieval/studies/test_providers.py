"""The input-provider study (``python -m bench.retrieval.studies.providers``): depth and gap are chosen on the
training folds alone, and each link is told apart by its rule (the study itself needs LiveMCPBench and
the model)."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

from bench.retrieval.lab import folds_by_task
from bench.retrieval.studies.providers import cross_validated, rule_of
from bench.retrieval.sets import Query
from index.search.providers import Provision

TASKS = [f"t{n}" for n in range(10)]


def _query(task: str) -> Query:
    return Query(text="q", relevant=frozenset({"x"}), task_id=task, category="Travel", form="assistant")


def test_each_fold_is_scored_with_the_choice_of_the_other_folds_only() -> None:
    study: Any = SimpleNamespace(sets={"agent-steps": [_query(t) for t in TASKS], "questions": [_query(t) for t in TASKS]})
    held_out = folds_by_task(TASKS, 5, 0)
    special = held_out[0]  # its tasks score best on point 1, every other task on point 0

    def rows(point: int) -> dict[str, list[dict[str, float]]]:
        good = [(t in special) == (point == 1) for t in TASKS]
        return {
            "agent-steps": [{"hit@3": float(g)} for g in good],
            "questions": [{"nDCG@10": float(g)} for g in good],
        }

    grid = [(10, 0.1), (5, 0.5)]
    chosen, picks, per_fold = cross_validated(study, [rows(0), rows(1)], grid, seed=0)
    # Every fold's training tasks prefer point 0, so every fold picks it: the special fold, scored
    # with the others' choice, gets 0 -- it never chose for itself.
    assert picks == [grid[0]] * 5
    assert [row["hit@3"] for row, t in zip(chosen["agent-steps"], TASKS) if t in special] == [0.0] * len(special)
    assert per_fold["questions"] == [0.0, 1.0, 1.0, 1.0, 1.0]


def test_links_are_told_apart_by_rule() -> None:
    assert rule_of(Provision("a/x", "a/y")) == "named"
    assert rule_of(Provision("a/x", "a/y", "from_latitude")) == "coordinate"
    assert rule_of(Provision("a/x", "a/y", "storyId")) == "handle"
