"""The session-prior study (``python -m bench.retrieval.studies.session``): the weight a held-out
fold is ranked with is chosen on the other folds only (the study itself needs LiveMCPBench and the
model; the sessions are in ``tests/bench/retrieval/test_sessions.py``)."""

from __future__ import annotations

from types import SimpleNamespace

from bench.retrieval.sets import Query
from bench.retrieval.studies.session import GRID, chosen_rows


def _query(task: str) -> Query:
    return Query(f"{task} step", frozenset({"geocode"}), task, "Travel", "assistant", step=1)


def test_a_held_out_fold_is_ranked_with_the_weight_best_on_the_other_folds() -> None:
    study = SimpleNamespace(sets={"agent-steps": [_query("t1"), _query("t2")], "questions": []})
    # weight 1 is best on t1, weight 0 on t2: each fold gets the other's
    grid_rows = {
        weight: {"agent-steps": [{"hit@3": float(weight == 1.0), "tag": weight}, {"hit@3": float(weight == 0.0), "tag": weight}],
                 "questions": []}
        for weight in GRID
    }
    rows, chosen = chosen_rows(study, grid_rows, [{"t1"}, {"t2"}])
    assert chosen == [0.0, 1.0]
    assert [row["tag"] for row in rows["agent-steps"]] == [0.0, 1.0]
