"""Labelling every unsuccessful task of a judged run (called by the judge before its report)."""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping, Sequence

import anyio
from pydantic import BaseModel, ConfigDict

from evaluation.judge.prompting.completions import CompletionService
from evaluation.taxonomy.capability import CapabilityCheck, CapabilityVerdict, open_capability_check
from evaluation.taxonomy.classify import classify
from evaluation.taxonomy.model import Diagnosis
from evaluation.taxonomy.second_opinion import second_opinion
from evaluation.trajectories import Trajectory

logger = logging.getLogger(__name__)


class Case(BaseModel):
    """One unsuccessful task to label."""

    model_config = ConfigDict(arbitrary_types_allowed=True)

    trajectory: Trajectory
    question: str
    gold_tools: list[str]


class LazyCheck:
    """Opens the capability check (index, embedding model: seconds) only when a rule needs it."""

    def __init__(self, factory: Callable[[], CapabilityCheck]) -> None:
        self._factory = factory
        self._check: CapabilityCheck | None = None

    def about(self, query: str, gold_tool: str) -> CapabilityVerdict | None:
        if self._check is None:
            self._check = self._factory()
        return self._check.about(query, gold_tool)


async def diagnose(
    cases: Sequence[Case],
    descriptions: Mapping[tuple[str, str], str],
    *,
    check: CapabilityCheck | None = None,
    service: CompletionService | None = None,
    model: str | None = None,
) -> dict[str, Diagnosis]:
    """``task_id -> Diagnosis``; with ``service`` and ``model``, undecided tasks get a second opinion."""
    lazy = check or LazyCheck(lambda: open_capability_check(descriptions))
    found: dict[str, Diagnosis] = {}

    def label_all() -> None:
        for case in cases:
            found[case.trajectory.task_id] = classify(case.trajectory, case.gold_tools, lazy)

    await anyio.to_thread.run_sync(label_all)
    if service is not None and model is not None:
        for case in cases:
            finding = found[case.trajectory.task_id]
            if finding.label == "undecided":
                found[finding.task_id] = await second_opinion(
                    service, model, case.trajectory, case.question, case.gold_tools, finding
                )
    return found
