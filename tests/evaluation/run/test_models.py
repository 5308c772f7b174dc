"""Run records: the manifest's resume rules, price tables, task lists and selection."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from evaluation.run.models import ModelPrice, RunManifest, TaskRecord, load_price_table, price_for
from evaluation.run.tasks import load_tasks, select_tasks
from index.errors import ConfigError
from tests.evaluation.run.support import write_tasks


def test_manifest_survives_reopening_and_defines_finished(tmp_path: Path) -> None:
    manifest = RunManifest.open(tmp_path, agent="copilot", model="m")
    manifest.record(TaskRecord(task_id="a", status="completed"))
    manifest.record(TaskRecord(task_id="b", status="failed", error="boom", error_kind="agent_failed"))
    manifest.record(TaskRecord(task_id="c", status="timeout", error_kind="timeout"))
    reopened = RunManifest.open(tmp_path)
    assert reopened.summary.agent == "copilot" and set(reopened.summary.tasks) == {"a", "b", "c"}
    assert [reopened.finished(t) for t in "abcd"] == [True, True, True, False]
    assert [reopened.finished(t, retry_failed=True) for t in "abcd"] == [True, False, False, False]
    assert not list(tmp_path.glob("*.tmp"))  # written atomically


def test_corrupt_manifest_is_a_clear_error(tmp_path: Path) -> None:
    (tmp_path / "summary.json").write_text("{not json")
    with pytest.raises(ConfigError) as caught:
        RunManifest.open(tmp_path)
    assert str(caught.value) == (
        f"{tmp_path / 'summary.json'}: the run summary is unreadable (not valid JSON: Expecting property name "
        "enclosed in double quotes at line 1 column 2). Use another --out directory or remove the file to start over."
    )
    (tmp_path / "summary.json").write_text(json.dumps({"tasks": {"a": {"status": "done"}}}))
    with pytest.raises(ConfigError, match=r"unreadable \(field tasks\.a\.task_id is missing; and 1 more problem"):
        RunManifest.open(tmp_path)


def test_price_tables_accept_objects_and_pairs(tmp_path: Path) -> None:
    path = tmp_path / "prices.json"
    path.write_text(json.dumps({"gpt-4o": {"input": 2.5, "output": 10}, "qwen": [0.5, 1.5],
                                "other": {"input_per_million": 1, "output_per_million": 2}}))
    table = load_price_table(path)
    assert table["gpt-4o"].cost(1_000_000, 100_000) == pytest.approx(3.5)
    assert table["qwen"] == ModelPrice(input=0.5, output=1.5)
    assert table["other"] == ModelPrice(input=1, output=2)
    assert price_for(table, "openai/gpt-4o") == table["gpt-4o"]
    assert price_for(table, "unknown") is None and price_for(None, "gpt-4o") is None


@pytest.mark.parametrize(
    ("content", "message"),
    [
        ('{"m": {"input": -1, "output": 1}}', "model 'm': input: Input should be greater than or equal to 0"),
        ('{"m": {"output": 1}}', "model 'm': input: Field required"),
        ("[1, 2]", "expected"),
        ("{oops", "prices.json:1: price table is not valid JSON"),
    ],
)
def test_bad_price_tables_name_the_problem(tmp_path: Path, content: str, message: str) -> None:
    path = tmp_path / "prices.json"
    path.write_text(content)
    with pytest.raises(ConfigError, match=message):
        load_price_table(path)


def test_task_list_validation_and_selection(tmp_path: Path) -> None:
    path = write_tasks(tmp_path / "tasks.json", [
        {"task_id": "aaa-1", "question": "q1", "category": "work"},
        {"task_id": "aab-2", "question": "q2", "category": "daily"},
        {"task_id": "bbb-3", "question": "q3", "category": "Office"},
    ])
    tasks = load_tasks(path)
    assert [t.category for t in tasks] == ["Office", "Lifestyle", "Office"]
    assert tasks[0].metadata.steps == "1. do it"
    assert [t.task_id for t in select_tasks(tasks, only=["bbb", "aaa-1"])] == ["bbb-3", "aaa-1"]
    assert [t.task_id for t in select_tasks(tasks, category="office")] == ["aaa-1", "bbb-3"]
    assert [t.task_id for t in select_tasks(tasks, category="WORK", limit=1)] == ["aaa-1"]
    with pytest.raises(ConfigError, match="prefix matches 2 tasks"):
        select_tasks(tasks, only=["aa"])

    path.write_text(json.dumps([{"task_id": "x", "Question": "q"}, {"task_id": "x", "Question": "q"}]))
    with pytest.raises(ConfigError, match="tasks.json: entry 2: duplicate task_id 'x'"):
        load_tasks(path)
    path.write_text(json.dumps([{"task_id": "x"}]))
    with pytest.raises(ConfigError, match=r"tasks.json: entry 1 \(task_id 'x'\): Question: Field required"):
        load_tasks(path)
    path.write_text('{"a": 1}')
    with pytest.raises(ConfigError, match="expected a JSON list of tasks"):
        load_tasks(path)


def test_unreadable_price_table_is_a_config_error(tmp_path: Path) -> None:
    # A directory given as the price table: a clear error, not an IsADirectoryError traceback.
    with pytest.raises(ConfigError, match="cannot read price table"):
        load_price_table(tmp_path)


def test_a_blank_question_is_refused_like_an_empty_one(tmp_path: Path) -> None:
    path = tmp_path / "tasks.json"
    path.write_text(json.dumps([{"task_id": "ok", "Question": "q"}, {"task_id": "x", "Question": "  \n\t "}]))
    with pytest.raises(ConfigError) as caught:
        load_tasks(path)
    assert str(caught.value) == (
        f"{path}: entry 2 (task_id 'x'): Question: must not be blank (it holds only whitespace) (got '  \\n\\t ')."
    )
    path.write_text(json.dumps([{"task_id": "x", "Question": ""}]))
    with pytest.raises(ConfigError, match=r"entry 1 \(task_id 'x'\): Question: String should have at least 1 character"):
        load_tasks(path)


def test_a_summary_of_a_newer_runner_is_refused_not_rewritten(tmp_path: Path) -> None:
    # It was resumed and rewritten as version 1, dropping what the newer runner recorded.
    newer = {"version": 2, "runner_version": "9.0", "agent": "a", "future": {"important": 1}, "tasks": {}}
    (tmp_path / "summary.json").write_text(json.dumps(newer))
    with pytest.raises(ConfigError) as caught:
        RunManifest.open(tmp_path, agent="a")
    assert str(caught.value) == (
        f"{tmp_path / 'summary.json'}: the run summary was written by runner 9.0 in format version 2; this runner "
        "reads version 1 and would lose what it cannot read. Resume the run with the newer runner, or use another "
        "--out directory."
    )
    assert json.loads((tmp_path / "summary.json").read_text()) == newer


def test_fields_this_runner_does_not_know_survive_a_resume(tmp_path: Path) -> None:
    record = {"task_id": "a", "status": "completed", "judge_hint": "kept"}
    (tmp_path / "summary.json").write_text(json.dumps({"version": 1, "agent": "x", "future": [1], "tasks": {"a": record}}))
    manifest = RunManifest.open(tmp_path, agent="x")
    manifest.record(TaskRecord(task_id="b", status="completed"))
    saved = json.loads((tmp_path / "summary.json").read_text())
    assert saved["future"] == [1] and saved["tasks"]["a"]["judge_hint"] == "kept" and set(saved["tasks"]) == {"a", "b"}
