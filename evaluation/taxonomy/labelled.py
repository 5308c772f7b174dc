"""Reading a hand-labelled taxonomy set: a directory with ``labels.json`` (label, reason and
source per task, plus tool descriptions) and the real runs it labels (``taxonomy/`` with their
``tasks.json``), optionally joined by LiveMCPBench's published sample trajectories read in place.

The project's own set is ``tests/fixtures/trajectories``; the test of the classifier and
``python -m bench taxonomy`` both measure against it through :func:`load_labelled_set`.
"""

from __future__ import annotations

import json
from pathlib import Path

from evaluation.judge.tool_descriptions import load_tool_descriptions
from evaluation.tasks import load_tasks
from evaluation.taxonomy.measure import LabelledCase
from evaluation.trajectories import load_trajectories
from index.settings import livemcpbench_dir

LABELS_FILE = "labels.json"
RUNS_DIR = "taxonomy"


def sample_file() -> Path:
    """LiveMCPBench's published sample trajectories (may be absent)."""
    return livemcpbench_dir() / "sample_trajectories.json"


def _sample_tools() -> Path:
    return livemcpbench_dir() / "tools" / "LiveMCPTool" / "tools.json"


def load_labelled_set(
    directory: Path, with_samples: bool = True
) -> tuple[list[LabelledCase], dict[tuple[str, str], str]]:
    """The labelled cases under ``directory`` (and the samples' when present and wanted), and the
    tool descriptions the capability check may use for them."""
    labels = json.loads((directory / LABELS_FILE).read_text(encoding="utf-8-sig"))
    descriptions = {("", name): text for name, text in labels["descriptions"].items()}
    runs = load_trajectories([directory / RUNS_DIR]).trajectories
    tasks = load_tasks(directory / RUNS_DIR / "tasks.json")
    samples = {}
    if with_samples and sample_file().is_file():
        samples = load_trajectories([sample_file()]).trajectories
        if _sample_tools().is_file():
            descriptions.update(load_tool_descriptions(_sample_tools()))
    cases = []
    for entry in labels["labels"]:
        if entry["source"] == "runs":
            trajectory, gold = runs[entry["task_id"]], tasks[entry["task_id"]].gold_tools
        elif entry["task_id"] in samples:
            trajectory = samples[entry["task_id"]]
            gold = trajectory.gold_tools
        else:
            continue  # a sample label while the samples are absent
        cases.append(LabelledCase(trajectory=trajectory, gold_tools=gold, label=entry["label"], why=entry["why"]))
    return cases, descriptions
