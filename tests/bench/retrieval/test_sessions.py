"""Query sets replayed as sessions (bench.retrieval.sessions): what each step's session holds, and
ranking with it as ``route`` does."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import numpy as np
import pytest

from bench.retrieval.sessions import (
    annotated_ran,
    first_answer_ran,
    rank_in_sessions,
    sessions_of,
    shared_steps,
)
from bench.retrieval.sets import Query

NAMES = ["write_file", "read_file", "geocode", "write_file"]
SERVERS = ["files", "maps", "office"]
TOOL_SERVERS = np.array([0, 0, 1, 2], dtype=np.int32)  # write_file on files and on office


def _step(task: str, step: int, relevant: str, form: str = "assistant") -> Query:
    return Query(f"{task} step {step} {form}", frozenset({relevant}), task, "Office", form, step=step)


def _space() -> Any:
    return SimpleNamespace(names=NAMES, space=SimpleNamespace(server_names=SERVERS, tool_servers=TOOL_SERVERS), providers=())


def test_a_task_is_replayed_as_one_session_of_its_earlier_steps() -> None:
    steps = [_step("t1", 1, "geocode"), _step("t1", 2, "write_file"), _step("t1", 3, "read_file"),
             _step("t1", 3, "read_file", form="synonym"), _step("t2", 1, "read_file")]
    question = Query("the whole task", frozenset({"geocode"}), "t1", "Office", "question")
    real = Query("route", frozenset({"geocode"}), "t1", "Office", "real", session=("maps",))
    sets = {"agent-steps": steps, "questions": [question], "real-agent": [real]}
    ran = annotated_ran(steps, _space())
    # a name two servers hold: both ran (by name, as relevance is)
    assert ran == {"t1": {1: ["maps"], 2: ["files", "office"], 3: ["files"]}, "t2": {1: ["files"]}}
    sessions = sessions_of(sets, ran)
    assert [sessions[q] for q in steps] == [(), ("maps",), ("office", "files", "maps"), ("office", "files", "maps"), ()]
    assert sessions[question] == () and sessions[real] == ("maps",)  # a question starts its session; real ones carry theirs
    assert shared_steps(ran) == (1, 2)  # steps 2 and 3 of t1: step 3's files was also step 2's
    assert shared_steps({"t1": {1: ["maps"], 2: ["files"], 3: ["office"]}}) == (0, 2)


def test_route_s_first_answer_is_what_an_earlier_step_ran() -> None:
    steps = [_step("t1", 1, "geocode"), _step("t1", 1, "geocode", form="plain"), _step("t1", 2, "write_file")]
    scores = [np.array([0.0, 0.0, 0.0, 1.0]), np.array([0.0, 0.0, 1.0, 0.0]), np.array([1.0, 0.0, 0.0, 0.0])]
    assert first_answer_ran(steps, scores, _space()) == {"t1": {1: ["office"], 2: ["files"]}}  # wrong, as the agent took it


def test_an_agent_looping_on_route_s_first_answer_gets_each_answer_ranked_in_its_session() -> None:
    # Step 1's first answer is read_file (files); step 2 alone would answer geocode (maps), but
    # with files lifted its first answer is write_file (files). Step order, not list order, counts.
    steps = [_step("t1", 2, "write_file"), _step("t1", 1, "read_file")]
    scores = [np.array([0.5, 0.0, 1.0, 0.0]), np.array([0.0, 1.0, 0.0, 0.0])]
    assert first_answer_ran(steps, scores, _space()) == {"t1": {1: ["files"], 2: ["maps"]}}
    assert first_answer_ran(steps, scores, _space(), 2.0) == {"t1": {1: ["files"], 2: ["files"]}}
    assert first_answer_ran(steps, scores, _space(), 0.0) == first_answer_ran(steps, scores, _space())


def test_the_session_s_servers_are_lifted_by_the_weight() -> None:
    query = _step("t1", 2, "read_file")
    flat = [np.array([0.5, 0.0, 0.4, 0.0])]
    plain = rank_in_sessions(_space(), [query], {query: ()}, 2.0, flat).rows[0]
    lifted = rank_in_sessions(_space(), [query], {query: ("files",)}, 2.0, flat)
    assert plain["hit@1"] == 0.0 and plain["MRR"] == pytest.approx(1 / 3)
    assert lifted.names[0][:2] == ["write_file", "read_file"]  # read_file passes geocode, not write_file
    assert lifted.rows[0]["MRR"] == pytest.approx(1 / 2)
    assert rank_in_sessions(_space(), [query], {query: ("files",)}, 0.0, flat).rows == [plain]
