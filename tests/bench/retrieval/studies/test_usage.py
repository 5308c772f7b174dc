"""The usage-prior study (``python -m bench.retrieval.studies.usage``): a held-out task is ranked with the
prior of the other folds' tasks only, and what each stand-in for the logs holds (the study itself
needs LiveMCPBench and the model)."""

from __future__ import annotations

import math
from types import SimpleNamespace
from typing import Any

import numpy as np
import pytest

from bench.retrieval.sets import Query
from bench.retrieval.studies.usage import annotated_logs, counts_vector, first_answer_logs, prior_rows

NAMES = ["write_file", "read_file", "geocode"]


def _query(task: str, relevant: str, form: str = "assistant") -> Query:
    return Query(text=f"need {relevant}", relevant=frozenset({relevant}), task_id=task, category="Office", form=form)


def _study(**sets: list[Query]) -> Any:
    return SimpleNamespace(sets=sets, space=SimpleNamespace(names=NAMES))


def test_counts_are_tasks_that_ran_a_tool_of_that_name() -> None:
    logs = {"t1": frozenset({"write_file", "geocode"}), "t2": frozenset({"write_file"}), "t3": frozenset({"read_file"})}
    assert counts_vector(logs, {"t1", "t2"}, NAMES).tolist() == [2, 0, 1]


def test_a_held_out_task_is_ranked_with_the_other_folds_prior_never_its_own() -> None:
    # Equal scores: only the prior orders the tools. t1 ran geocode, t2 ran read_file.
    queries = [_query("t1", "geocode"), _query("t2", "read_file")]
    study = _study(**{"agent-steps": queries})
    flat = {"agent-steps": [np.zeros(3, np.float32), np.zeros(3, np.float32)]}
    logs = {"t1": frozenset({"geocode"}), "t2": frozenset({"read_file"})}
    rows = prior_rows(study, flat, logs, [{"t1"}, {"t2"}], [1.0, 1.0])["agent-steps"]
    # t1's ranking is lifted by t2's read_file, not by its own geocode (which would put it first),
    # and t2's by t1's geocode: each relevant tool falls to third
    assert [row["hit@1"] for row in rows] == [0.0, 0.0]
    assert [row["MRR"] for row in rows] == [pytest.approx(1 / 3), pytest.approx(1 / 3)]
    # a weight of 0 is the shipped ranking (ties to the lower index: write_file first)
    plain = prior_rows(study, flat, logs, [{"t1"}, {"t2"}], [0.0, 0.0])["agent-steps"]
    assert [row["MRR"] for row in plain] == [pytest.approx(1 / 3), pytest.approx(1 / 2)]


def test_the_stand_ins_for_logs() -> None:
    steps = [_query("t1", "geocode"), _query("t1", "geocode", form="synonym"), _query("t2", "read_file")]
    questions = [_query("t1", "geocode"), _query("t2", "write_file")]
    study = _study(**{"agent-steps": steps, "questions": questions})
    assert annotated_logs(study) == {"t1": frozenset({"geocode"}), "t2": frozenset({"write_file"})}
    # route's first answer to each step in the assistant form, right or wrong; other forms are not sent
    scores = {"agent-steps": [np.array([0.0, 0.0, 1.0]), np.array([1.0, 0.0, 0.0]), np.array([0.5, 0.2, 0.1])]}
    assert first_answer_logs(study, scores) == {"t1": frozenset({"geocode"}), "t2": frozenset({"write_file"})}
    assert math.isclose(counts_vector(first_answer_logs(study, scores), {"t1", "t2"}, NAMES).sum(), 2)
