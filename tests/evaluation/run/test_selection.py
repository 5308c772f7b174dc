"""``--only`` / ``--category`` mistakes: the error offers the name that was probably meant, and
never a list of unrelated ids presented as suggestions."""

from __future__ import annotations

from pathlib import Path

import pytest

from evaluation.run.tasks import BenchmarkTask, load_tasks, select_tasks
from index.errors import ConfigError
from tests.evaluation.run.support import write_tasks

UUIDS = ["0e3287cb-c0ff-4d2a-8c3d-d8833014a7b0", "99d7541a-73c0-4ea1-8002-a70a041f3ffc", "dda8ea55-629c-4ae8-ab87-0c81477ae615"]


@pytest.fixture()
def tasks(tmp_path: Path) -> list[BenchmarkTask]:
    path = write_tasks(tmp_path / "tasks.json", [
        {"task_id": UUIDS[0], "question": "q1", "category": "Office"},
        {"task_id": UUIDS[1], "question": "q2", "category": "Travel"},
        {"task_id": UUIDS[2], "question": "q3", "category": "Lifestyle"},
    ])
    return load_tasks(path)


def _error(tasks: list[BenchmarkTask], **selection: object) -> str:
    with pytest.raises(ConfigError) as caught:
        select_tasks(tasks, **selection)  # type: ignore[arg-type]
    return str(caught.value)


def test_a_mistyped_task_id_suggests_the_id_it_resembles(tasks) -> None:
    typo = UUIDS[1][:-1] + "d"
    assert _error(tasks, only=[typo]) == f"--only {typo}: no such task id. Did you mean: {UUIDS[1]}?"


def test_an_id_like_no_task_gets_no_arbitrary_suggestions(tasks) -> None:
    # A row number instead of an id: the error shows what ids look like, not three "did you mean"s.
    message = _error(tasks, only=["17"])
    assert message == f"--only 17: no such task id (the task list holds 3 tasks; their ids look like {UUIDS[0]})."


def test_a_mistyped_category_suggests_the_nearest(tasks) -> None:
    assert _error(tasks, category="Travle") == (
        "--category Travle: unknown category. Did you mean Travel? "
        "Categories in the task list: Lifestyle, Office, Travel."
    )
    # An alias of the paper's (daily = Lifestyle), mistyped.
    assert "Did you mean Lifestyle?" in _error(tasks, category="dialy")
    assert _error(tasks, category="Gardening") == (
        "--category Gardening: unknown category. Categories in the task list: Lifestyle, Office, Travel."
    )


def test_a_paper_category_absent_from_the_list_is_not_called_unknown(tasks) -> None:
    assert _error(tasks, category="financing") == (
        "--category financing: no task in the task list is in category Finance. "
        "Categories in the task list: Lifestyle, Office, Travel."
    )


def test_an_ambiguous_prefix_lists_its_matches_without_a_false_ellipsis(tasks) -> None:
    tasks = [t.model_copy(update={"task_id": f"a-{n}"}) for n, t in enumerate(tasks)]
    assert _error(tasks, only=["a-"]) == "--only a-: prefix matches 3 tasks (a-0, a-1, a-2); give more characters."
