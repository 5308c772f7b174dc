"""The classifier measured against the hand-labelled set (``evaluation/taxonomy/labelled.py`` reads
it; real trajectories): every label right."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pytest

from evaluation.taxonomy.capability import IndexCapabilityCheck
from evaluation.taxonomy.labelled import load_labelled_set, sample_file
from evaluation.taxonomy.measure import measure
from index.errors import ConfigError

pytestmark = pytest.mark.timeout(120)

LABELLED = Path(__file__).resolve().parents[2] / "fixtures" / "trajectories"


@pytest.fixture(scope="module")
def embedder():
    from index.models.embedding import get_embedder  # noqa: PLC0415

    return get_embedder()


def test_our_runs_are_classified_as_labelled(embedder) -> None:
    cases, descriptions = load_labelled_set(LABELLED, with_samples=False)
    assert len(cases) == 6
    result = measure(cases, IndexCapabilityCheck(None, descriptions, embedder))
    assert result.mistakes == []
    retrieve = result.predictions["tx-retrieve"]
    assert retrieve.label == "retrieve" and retrieve.evidence[0].call.startswith("#1 (")


def test_the_published_samples_are_classified_as_labelled(embedder) -> None:
    if not sample_file().is_file():
        pytest.skip(f"LiveMCPBench sample not present at {sample_file()} (set COPILOT_LIVEMCPBENCH_DIR)")
    cases, descriptions = load_labelled_set(LABELLED)
    result = measure(cases, IndexCapabilityCheck(None, descriptions, embedder))
    assert result.n == 9 and result.mistakes == [], result.mistakes


def test_an_empty_set_has_no_accuracy_rather_than_none_right() -> None:
    assert measure([], None).accuracy is None


def _runs_entry(labels: dict[str, Any]) -> dict[str, Any]:
    return next(entry for entry in labels["labels"] if entry["source"] == "runs")


@pytest.mark.parametrize(
    ("change", "expected"),
    [
        (lambda labels: _runs_entry(labels).pop("source"), "field labels[{index}].source is missing"),
        (lambda labels: _runs_entry(labels).update(source="run"), "field labels[{index}].source: Input should be"),
        (lambda labels: _runs_entry(labels).update(label="Query"), "field labels[{index}].label: Input should be"),
        (lambda labels: _runs_entry(labels).update(task_id="tx-nope"), "labels entry {number}: task 'tx-nope' is not in taxonomy/."),
        (lambda labels: labels["labels"].append(dict(_runs_entry(labels))), "task '{task}' is labelled twice."),
        (lambda labels: labels.update(labels={"a": 1}), "field labels: Input should be a valid array"),
    ],
)
def test_a_label_that_cannot_be_used_names_its_file_and_entry(tmp_path: Path, change: Any, expected: str) -> None:
    # A label dropped in silence would measure the classifier on fewer cases than the set has.
    labelled = tmp_path / "set"
    shutil.copytree(LABELLED, labelled)
    labels = json.loads((labelled / "labels.json").read_text(encoding="utf-8"))
    entry = _runs_entry(labels)
    index, task = labels["labels"].index(entry), entry["task_id"]
    change(labels)
    (labelled / "labels.json").write_text(json.dumps(labels), encoding="utf-8")
    with pytest.raises(ConfigError) as raised:
        load_labelled_set(labelled, with_samples=False)
    assert str(raised.value).startswith(f"{labelled / 'labels.json'}: ")
    assert expected.format(index=index, number=index + 1, task=task) in str(raised.value)


def test_a_sample_label_naming_no_sample_is_an_error_when_the_samples_are_present(tmp_path: Path) -> None:
    if not sample_file().is_file():
        pytest.skip(f"LiveMCPBench sample not present at {sample_file()} (set COPILOT_LIVEMCPBENCH_DIR)")
    labelled = tmp_path / "set"
    shutil.copytree(LABELLED, labelled)
    labels = json.loads((labelled / "labels.json").read_text(encoding="utf-8"))
    number, entry = next((n, e) for n, e in enumerate(labels["labels"], 1) if e["source"] == "sample")
    entry["task_id"] += "-typo"
    (labelled / "labels.json").write_text(json.dumps(labels), encoding="utf-8")
    assert len(load_labelled_set(labelled, with_samples=False)[0]) == 6  # not wanted: not looked for
    with pytest.raises(ConfigError, match=f"labels entry {number}: task '{entry['task_id']}' is not in "):
        load_labelled_set(labelled)
