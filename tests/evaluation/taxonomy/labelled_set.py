"""The hand-labelled taxonomy set: LiveMCPBench's published sample trajectories (read in place,
when present) and real runs of the built-in agent (``tests/fixtures/trajectories/taxonomy``)."""

from __future__ import annotations

import json
from pathlib import Path

from evaluation.judge.tool_descriptions import load_tool_descriptions
from evaluation.tasks import load_tasks
from evaluation.taxonomy.measure import LabelledCase
from evaluation.trajectories import load_trajectories
from index.settings import livemcpbench_dir

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures" / "trajectories"


def sample_file() -> Path:
    return livemcpbench_dir() / "sample_trajectories.json"


def load_labelled_set(with_samples: bool = True) -> tuple[list[LabelledCase], dict[tuple[str, str], str]]:
    """The cases and the tool descriptions the capability check may use for them."""
    labels = json.loads((FIXTURES / "labels.json").read_text(encoding="utf-8"))
    descriptions = {("", name): text for name, text in labels["descriptions"].items()}
    runs = load_trajectories([FIXTURES / "taxonomy"]).trajectories
    tasks = load_tasks(FIXTURES / "taxonomy" / "tasks.json")
    samples = {}
    if with_samples and sample_file().is_file():
        samples = load_trajectories([sample_file()]).trajectories
        tools = livemcpbench_dir() / "tools" / "LiveMCPTool" / "tools.json"
        if tools.is_file():
            descriptions.update(load_tool_descriptions(tools))
    cases = []
    for entry in labels["labels"]:
        if entry["source"] == "runs":
            trajectory, gold = runs[entry["task_id"]], tasks[entry["task_id"]].gold_tools
        elif entry["task_id"] in samples:
            trajectory = samples[entry["task_id"]]
            gold = trajectory.gold_tools
        else:
            continue
        cases.append(LabelledCase(trajectory=trajectory, gold_tools=gold, label=entry["label"], why=entry["why"]))
    return cases, descriptions
