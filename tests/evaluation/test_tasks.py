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
    labels.write_text(json.dumps([{"task_id": "a", "task_success": "success"}, {"task_id": "a", "task_success": "failure"}]))
    with pytest.raises(TaskError, match=r"labels.json: entry 2: duplicate task_id 'a' \(also entry 1\)"):
        load_human_labels(labels)


@pytest.mark.parametrize(
    ("entries", "message"),
    [
        ([{"task_id": "a", "Question": "q"}, {"task_id": 7, "Question": "q"}], "entry 2: task_id: Input should be a valid string (got 7)."),
        ([{"task_id": "a", "Question": "q", "Annotator Metadata": "x"}], "entry 1 (task_id 'a'): Annotator Metadata: expected an object (got 'x')."),
        (["a"], "entry 1: expected an object with task_id and Question (got str 'a')."),
        ([{"Question": "q"}], "entry 1: task_id: Field required."),
        # Both entries are named: in a 95-entry list the first one is otherwise hard to find.
        (
            [{"task_id": "a", "Question": "q"}, {"task_id": "b", "Question": "q"}, {"task_id": "a", "Question": "r"}],
            "entry 3: duplicate task_id 'a' (also entry 1).",
        ),
        # The runner names files after task ids: one that leaves --out is refused, not written (or deleted) there.
        (
            [{"task_id": "../../victim", "Question": "q"}],
            "entry 1: task_id: must be usable as a file name (no '/', '\\', NUL, surrounding spaces, '.' or '..') "
            "(got '../../victim').",
        ),
        (
            [{"task_id": "..", "Question": "q"}],
            "entry 1: task_id: must be usable as a file name (no '/', '\\', NUL, surrounding spaces, '.' or '..') "
            "(got '..').",
        ),
        # A file name stops at 255 bytes: such an id used to fail its task at run time (resumes skipped it).
        (
            [{"task_id": "t" * 201, "Question": "q"}],
            "entry 1: task_id: must be at most 200 bytes long (it names the task's files) (got '" + "t" * 59 + ").",
        ),
    ],
    ids=["wrong-type", "metadata-not-object", "entry-not-object", "no-task-id", "duplicate", "path-traversal", "dot-dot", "too-long"],
)
def test_judge_and_runner_refuse_the_same_entries_with_the_same_line(tmp_path: Path, entries, message) -> None:
    from evaluation.run.tasks import load_tasks as load_run_tasks  # noqa: PLC0415
    from index.errors import ConfigError  # noqa: PLC0415

    path = tmp_path / "tasks.json"
    path.write_text(json.dumps(entries))
    with pytest.raises(TaskError) as judged:
        load_tasks(path)
    with pytest.raises(ConfigError) as run:
        load_run_tasks(path)
    assert str(judged.value) == str(run.value) == f"{path}: {message}"


def test_a_task_list_the_runner_writes_reads_back_in_the_judge(tmp_path: Path) -> None:
    from evaluation.run.cli import write_run_tasks  # noqa: PLC0415
    from evaluation.run.tasks import load_tasks as load_run_tasks  # noqa: PLC0415

    path = tmp_path / "all.json"
    entry = {"task_id": "t1", "Question": "q", "category": "work", "answers": "42",
             "Annotator Metadata": {"Steps": "1. a\n2. b", "Tools": "1. echo", "Number of steps": "2"}}
    path.write_text(json.dumps([entry]))
    written = write_run_tasks(load_run_tasks(path), tmp_path)
    [task] = load_tasks(written).values()
    assert (task.task_id, task.question, task.category, task.answers) == ("t1", "q", "Office", "42")
    assert (task.steps, task.gold_tools) == (["a", "b"], ["echo"])


def test_an_empty_task_list_is_refused_by_judge_and_runner(tmp_path: Path) -> None:
    from evaluation.run.tasks import load_tasks as load_run_tasks  # noqa: PLC0415
    from index.errors import ConfigError  # noqa: PLC0415

    path = tmp_path / "tasks.json"
    path.write_text("[]")
    with pytest.raises(TaskError, match="the task list holds no task"):
        load_tasks(path)
    with pytest.raises(ConfigError, match="the task list holds no task"):
        load_run_tasks(path)


def test_a_task_list_saved_with_a_bom_loads_in_judge_and_runner(tmp_path: Path) -> None:
    from evaluation.run.tasks import load_tasks as load_run_tasks  # noqa: PLC0415

    path = tmp_path / "tasks.json"
    path.write_bytes(b"\xef\xbb\xbf" + json.dumps([{"task_id": "a", "Question": "q?"}]).encode())
    assert list(load_tasks(path)) == ["a"]
    assert [task.task_id for task in load_run_tasks(path)] == ["a"]


def test_null_optional_text_loads_as_empty_in_judge_and_runner(tmp_path: Path) -> None:
    # Before: a null category, file name, answer or annotator text (an empty cell in an exported
    # list) refused the whole list.
    from evaluation.run.tasks import load_tasks as load_run_tasks  # noqa: PLC0415

    path = tmp_path / "tasks.json"
    path.write_text(json.dumps([
        {"task_id": "a", "Question": "qa", "category": None, "file_name": None, "answers": None,
         "Annotator Metadata": {"Steps": None, "Tools": None, "Number of steps": None}},
        {"task_id": "b", "Question": "qb", "category": "work", "Annotator Metadata": None},
    ]))
    judged = load_tasks(path)
    assert (judged["a"].category, judged["a"].answers, judged["a"].steps, judged["a"].gold_tools) == ("Other", "", [], [])
    assert (judged["b"].category, judged["b"].steps) == ("Office", [])
    run = {task.task_id: task for task in load_run_tasks(path)}
    assert (run["a"].category, run["a"].file_name, run["a"].metadata.tools) == ("Other", "", "")


@pytest.mark.parametrize(
    ("entry", "message"),
    [
        ({"task_id": "b", "Question": None}, "entry 2 (task_id 'b'): Question: must be a non-empty string, not null (got None)."),
        ({"task_id": None, "Question": "q"}, "entry 2: task_id: must be a non-empty string, not null (got None)."),
    ],
    ids=["null-question", "null-task-id"],
)
def test_a_null_required_field_names_the_file_and_entry(tmp_path: Path, entry: dict, message: str) -> None:
    from evaluation.run.tasks import load_tasks as load_run_tasks  # noqa: PLC0415
    from index.errors import ConfigError  # noqa: PLC0415

    path = tmp_path / "tasks.json"
    path.write_text(json.dumps([{"task_id": "a", "Question": "q"}, entry]))
    with pytest.raises(TaskError) as judged:
        load_tasks(path)
    with pytest.raises(ConfigError) as run:
        load_run_tasks(path)
    assert str(judged.value) == str(run.value) == f"{path}: {message}"
