"""Reading a hand-labelled taxonomy set: a directory with ``labels.json`` (label, reason and
source per task, plus tool descriptions) and the real runs it labels (``taxonomy/`` with their
``tasks.json``), optionally joined by LiveMCPBench's published sample trajectories read in place.

The project's own set is ``tests/fixtures/trajectories``; the test of the classifier and
``python -m bench taxonomy`` both measure against it through :func:`load_labelled_set`.
"""

from __future__ import annotations

from pathlib import Path
from typing import Literal

from pydantic import BaseModel, Field

from evaluation.judge.tool_descriptions import load_tool_descriptions
from evaluation.tasks import load_tasks
from evaluation.taxonomy.measure import LabelledCase
from evaluation.taxonomy.model import ErrorClass
from evaluation.trajectories import load_trajectories
from index.errors import ConfigError
from index.json_text import JSONFileError, read_json_model
from index.settings import livemcpbench_dir

LABELS_FILE = "labels.json"
RUNS_DIR = "taxonomy"


class LabelEntry(BaseModel):
    """One task labelled by hand: its id in ``source`` (``taxonomy/`` or the published samples)."""

    task_id: str = Field(min_length=1)
    source: Literal["runs", "sample"]
    label: ErrorClass
    why: str = ""


class LabelsFile(BaseModel):
    about: str = ""
    #: Descriptions of the tools the runs in ``taxonomy/`` used, by tool name.
    descriptions: dict[str, str] = Field(default_factory=dict)
    labels: list[LabelEntry]


def sample_file() -> Path:
    """LiveMCPBench's published sample trajectories (may be absent)."""
    return livemcpbench_dir() / "sample_trajectories.json"


def _sample_tools() -> Path:
    return livemcpbench_dir() / "tools" / "LiveMCPTool" / "tools.json"


def _read_labels(path: Path) -> LabelsFile:
    try:
        labels = read_json_model(path, LabelsFile)
    except (JSONFileError, OSError) as error:
        raise ConfigError(f"{path}: {error}") from None
    seen: set[str] = set()
    for number, entry in enumerate(labels.labels, 1):
        if entry.task_id in seen:
            raise ConfigError(f"{path}: labels entry {number}: task {entry.task_id!r} is labelled twice.")
        seen.add(entry.task_id)
    return labels


def load_labelled_set(
    directory: Path, with_samples: bool = True
) -> tuple[list[LabelledCase], dict[tuple[str, str], str]]:
    """The labelled cases under ``directory`` (and the samples' when present and wanted), and the
    tool descriptions the capability check may use for them.

    Raises :class:`ConfigError` naming the file and entry for a label that cannot be used: a
    measurement over silently fewer cases would read as a better classifier."""
    path = directory / LABELS_FILE
    labels = _read_labels(path)
    descriptions = {("", name): text for name, text in labels.descriptions.items()}
    runs = load_trajectories([directory / RUNS_DIR]).trajectories
    tasks = load_tasks(directory / RUNS_DIR / "tasks.json")
    samples = {}
    present = with_samples and sample_file().is_file()
    if present:
        samples = load_trajectories([sample_file()]).trajectories
        if _sample_tools().is_file():
            descriptions.update(load_tool_descriptions(_sample_tools()))
    cases = []
    for number, entry in enumerate(labels.labels, 1):
        if entry.source == "runs":
            if entry.task_id not in runs or entry.task_id not in tasks:
                missing = f"{RUNS_DIR}/" if entry.task_id not in runs else f"{RUNS_DIR}/tasks.json"
                raise ConfigError(f"{path}: labels entry {number}: task {entry.task_id!r} is not in {missing}.")
            trajectory, gold = runs[entry.task_id], tasks[entry.task_id].gold_tools
        elif not present:
            continue  # a sample label while the samples are absent (or not wanted)
        elif entry.task_id in samples:
            trajectory = samples[entry.task_id]
            gold = trajectory.gold_tools
        else:
            raise ConfigError(f"{path}: labels entry {number}: task {entry.task_id!r} is not in {sample_file()}.")
        cases.append(LabelledCase(trajectory=trajectory, gold_tools=gold, label=entry.label, why=entry.why))
    return cases, descriptions
