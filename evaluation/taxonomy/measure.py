"""Measuring the classifier against hand-labelled trajectories (accuracy and a confusion table)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from pydantic import BaseModel, Field

from evaluation.taxonomy.capability import CapabilityCheck
from evaluation.taxonomy.classify import classify
from evaluation.taxonomy.model import Diagnosis, ErrorClass
from evaluation.trajectories import Trajectory


class LabelledCase(BaseModel):
    trajectory: Trajectory
    gold_tools: list[str]
    label: ErrorClass
    why: str = ""


class Measurement(BaseModel):
    n: int
    correct: int
    #: ``None`` over no cases (undefined, not 0%).
    accuracy: float | None
    #: (expected, predicted) -> count
    confusion: dict[str, int] = Field(default_factory=dict)
    mistakes: list[str] = Field(default_factory=list)
    predictions: dict[str, Diagnosis] = Field(default_factory=dict)


def measure(cases: Sequence[LabelledCase], check: CapabilityCheck | None) -> Measurement:
    confusion: dict[str, int] = {}
    predictions: dict[str, Diagnosis] = {}
    mistakes = []
    for case in cases:
        found = classify(case.trajectory, case.gold_tools, check)
        predictions[case.trajectory.task_id] = found
        key = f"{case.label} -> {found.label}"
        confusion[key] = confusion.get(key, 0) + 1
        if found.label != case.label:
            mistakes.append(f"{case.trajectory.task_id}: labelled {case.label}, classified {found.label} ({found.reason})")
    correct = sum(1 for case in cases if predictions[case.trajectory.task_id].label == case.label)
    return Measurement(
        n=len(cases),
        correct=correct,
        accuracy=correct / len(cases) if cases else None,
        confusion=dict(sorted(confusion.items())),
        mistakes=mistakes,
        predictions=predictions,
    )


def merged_descriptions(*sources: Mapping[tuple[str, str], str]) -> dict[tuple[str, str], str]:
    merged: dict[tuple[str, str], str] = {}
    for source in sources:
        merged.update(source)
    return merged
