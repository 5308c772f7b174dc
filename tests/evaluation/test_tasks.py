"""The task list, human labels and category names (``evaluation/tasks.py``)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from evaluation.tasks import TaskError, canonical_category, load_human_labels, load_tasks, split_numbered
from tests.evaluation.judge_helpers import ALL_ANNOTATIONS

pytestmark = pytest.mark.timeout(30)


@pytest.mark.skipif(not ALL_ANNOTATIONS.is_file(), reason=f"LiveMCPBench task list not present at {ALL_ANNOTATIONS}")
def test_real_task_list_has_95_tasks_in_six_categories() -> None:
    tasks = load_tasks(ALL_ANNOTATIONS)
    assert len(tasks) == 95
    assert {task.category for task in tasks.values()} == {
        "Office",
        "Lifestyle",
        "Leisure",
        "Finance",
        "Travel",
        "Shopping",
    }
    assert all(task.steps for task in tasks.values())


def test_categories_and_numbered_lists() -> None:
    assert [
        canonical_category(n) for n in ("work", "Daily", "entertainment", "financing", "travel", "SHOPPING", "", "Misc")
    ] == [
        "Office",
        "Lifestyle",
        "Leisure",
        "Finance",
        "Travel",
        "Shopping",
        "Other",
        "Misc",
    ]
    assert split_numbered("1. a\n2) b\n   continued\n\n3. c ") == ["a", "b continued", "c"]


def test_task_and_label_files_fail_clearly(tmp_path: Path) -> None:
    bad = tmp_path / "bad.json"
    bad.write_text("[\n{,\n]")
    with pytest.raises(TaskError, match=r"bad.json:2: task list is not valid JSON"):
        load_tasks(bad)
    with pytest.raises(TaskError, match="not found"):
        load_tasks(tmp_path / "missing.json")
    labels = tmp_path / "labels.json"
    labels.write_text(
        json.dumps([{"task_id": "a", "task_success": "Success"}, {"task_id": "b", "task_success": "failure"}])
    )
    assert load_human_labels(labels) == {"a": True, "b": False}
    labels.write_text(json.dumps([{"task_id": "a", "task_success": "maybe"}]))
    with pytest.raises(TaskError, match='expected "success" or "failure"'):
        load_human_labels(labels)
