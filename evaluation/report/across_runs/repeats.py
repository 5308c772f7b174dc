"""Repeated runs of one agent: per task and overall pass@1, pass@k and pass^k.

Each repeat is judged on its own (its ``report.json``); this module pairs their verdicts by task.
For a task run ``n`` times with ``c`` successes:

- pass@1 = c / n (the mean over repeats; overall, its mean over tasks with a 95% interval that
  treats tasks, not attempts, as the independent units);
- pass@k = 1 - C(n-c, k) / C(n, k): the chance that at least one of k attempts succeeds;
- pass^k = C(c, k) / C(n, k): the chance that all k attempts succeed (consistency);

both unbiased for every k <= n. An attempt the judge never decided (``not_judged``) is no attempt:
``n`` counts a task's judged attempts only, a task enters pass@k only for k <= its ``n``, and a task
with no judged attempt is left out (and named), never counted as failed. The spread between repeats is reported as the standard deviation
of the repeats' success rates and the mean within-task variance (unbiased, c(n-c)/(n(n-1)), over
tasks with two attempts or more). Tasks are time-varying
(news, prices, weather), so each repeat's dates are kept.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Sequence
from pathlib import Path

from pydantic import BaseModel, Field

from evaluation.report.build import efficiency_group
from evaluation.report.models import EfficiencyGroup, Outcome, Report
from evaluation.report.stats import pass_at_k, pass_hat_k, sample_sd, task_rate_interval
from evaluation.report.tables import listed_ids
from evaluation.tasks import CATEGORIES
from server.trajectory.records import utc_now

REPEATS_REPORT = "repeats.json"


class RepeatInfo(BaseModel):
    name: str
    path: str
    n_tasks: int
    success: int
    #: ``None`` when the repeat has no verdict at all.
    success_rate: float | None
    #: Dates of the repeat's first and last task (from the logs).
    first_task: str | None = None
    last_task: str | None = None
    judge: str
    prompt: str
    judge_config: str | None = None


class TaskRepeats(BaseModel):
    task_id: str
    category: str
    question: str
    #: The verdict of each repeat, in repeat order (``missing`` when the repeat lacks the task).
    outcomes: list[Outcome | str]
    #: Attempts with a verdict (a ``not_judged`` one is no attempt; a ``missing`` one is failed).
    n: int
    successes: int
    #: ``None`` (and empty dicts) when no attempt was judged; pass@k only for k <= n.
    pass_at_1: float | None
    pass_at_k: dict[int, float]
    pass_hat_k: dict[int, float]


class CategoryRepeats(BaseModel):
    tasks: int
    #: ``None`` when no task of the category has enough judged attempts.
    pass_at_1: float | None
    pass_at_n: float | None
    pass_hat_n: float | None
    #: The tasks pass@n and pass^n rest on: those with n judged attempts (``None`` in older files).
    tasks_at_n: int | None = None
    #: pass@1's 95% interval, tasks as units (``None`` without an attempt, and in older files).
    pass_at_1_ci95: tuple[float, float] | None = None


class RepeatsReport(BaseModel):
    generated: str = Field(default_factory=utc_now)
    agent: str | None = None
    model: str | None = None
    #: The repeats judged (a repeat not run yet is not one of them).
    n_repeats: int
    ks: list[int]
    repeats: list[RepeatInfo]
    #: Repeats of the run without any trajectory yet (an interrupted run): left out of every figure.
    not_run: list[str] = Field(default_factory=list)
    n_tasks: int
    #: Over the tasks with at least one judged attempt (``None``, and no interval, when there is none).
    pass_at_1: float | None
    pass_at_1_ci95: tuple[float, float] | None
    #: k -> mean over the tasks with at least k judged attempts (k absent when there is none).
    pass_at_k: dict[int, float]
    pass_hat_k: dict[int, float]
    #: k -> how many tasks pass@k and pass^k rest on (those with at least k judged attempts).
    tasks_at_k: dict[int, int] = Field(default_factory=dict)
    #: Tasks with no judged attempt in any repeat: left out of every figure above.
    unjudged_tasks: list[str] = Field(default_factory=list)
    #: Standard deviation of the repeats' success rates.
    between_repeats_sd: float | None
    #: Mean over tasks with at least two judged attempts of c(n-c)/(n(n-1)), the unbiased estimate
    #: of each task's p(1-p) (the plug-in p(1-p) with p = c/n is low by (n-1)/n: a third with 3
    #: repeats): 0 when every task always or never succeeds; ``None`` when no task has two attempts.
    within_task_variance: float | None
    #: Tasks whose outcome differed between repeats.
    flaky_tasks: int
    by_category: dict[str, CategoryRepeats]
    #: Mean per task over all repeats (tokens, cost, turns, calls, tool errors): every attempt with
    #: a trajectory is one task row (tokens and cost over the attempts that logged them).
    efficiency: EfficiencyGroup
    #: What the repeats' runs cost in all (the sum of their logged costs; ``None`` when none logged
    #: any): the mean above times tasks times repeats charged tasks a repeat never ran.
    total_cost: float | None = None
    tasks: list[TaskRepeats]
    warnings: list[str] = Field(default_factory=list)


def _task_rows(reports: Sequence[Report]) -> list[TaskRepeats]:
    order: list[str] = []
    info: dict[str, tuple[str, str]] = {}
    for report in reports:
        for row in report.tasks:
            if row.task_id not in info:
                order.append(row.task_id)
                info[row.task_id] = (row.category, row.question)
    rows = []
    n_repeats = len(reports)
    for task_id in order:
        outcomes: list[Outcome | str] = []
        for report in reports:
            row = next((r for r in report.tasks if r.task_id == task_id), None)
            outcomes.append(row.verdict if row is not None else "missing")
        # A repeat that lacks the task counts as a failed attempt, as a missing trajectory does; one
        # whose judge never decided it is no attempt (the judge endpoint's failure, not the agent's).
        n, c = n_repeats - outcomes.count("not_judged"), outcomes.count("success")
        rows.append(
            TaskRepeats(
                task_id=task_id,
                category=info[task_id][0],
                question=info[task_id][1],
                outcomes=outcomes,
                n=n,
                successes=c,
                pass_at_1=c / n if n else None,
                pass_at_k={k: pass_at_k(n, c, k) for k in range(1, n + 1)},
                pass_hat_k={k: pass_hat_k(n, c, k) for k in range(1, n + 1)},
            )
        )
    return rows


def _within_task_variance(rows: Sequence[TaskRepeats]) -> float | None:
    """The mean over tasks with two judged attempts or more of c(n-c)/(n(n-1)), unbiased for each
    task's p(1-p); one attempt says nothing of a task's spread."""
    spreads = [row.successes * (row.n - row.successes) / (row.n * (row.n - 1)) for row in rows if row.n >= 2]
    return statistics.fmean(spreads) if spreads else None


def _mean_of(values: Sequence[float | None], digits: int | None = None) -> float | None:
    """The mean of the values present (rounded to ``digits``); ``None`` when there is none."""
    present = [value for value in values if value is not None]
    if not present:
        return None
    mean = statistics.fmean(present)
    return mean if digits is None else round(mean, digits)


def _efficiency(reports: Sequence[Report]) -> EfficiencyGroup:
    # The task rows pooled, as in one report's "all": a mean of each repeat's means weighted a
    # repeat that ran 1 task like one that ran 95.
    return efficiency_group([row for report in reports for row in report.tasks if row.has_trajectory])


def _warnings(reports: Sequence[Report], names: Sequence[str]) -> list[str]:
    warnings = []
    judges = {(tuple(r.judge.models), r.judge.prompt, r.judge.prompt_version) for r in reports}
    if len(judges) > 1:
        listed = "; ".join(f"{name}: {', '.join(r.judge.models)}/{r.judge.prompt}" for name, r in zip(names, reports, strict=True))
        warnings.append(f"the repeats were judged by different judges or prompts ({listed}): differences may be the judge's.")
    universes = {frozenset(row.task_id for row in r.tasks) for r in reports}
    if len(universes) > 1:
        warnings.append("the repeats hold different task sets; a task missing from a repeat counts as a failed attempt.")
    unjudged = [f"{name}: {len(r.not_judged)}" for name, r in zip(names, reports, strict=True) if r.not_judged]
    if unjudged:
        # The judge's failed requests, not the agent's: said, since they shrink the attempts.
        warnings.append(
            f"tasks never judged (the judge's requests failed) are left out of their tasks' attempts "
            f"({', '.join(unjudged)}): those tasks enter pass@k only for k up to their judged attempts; "
            "rerun the judge (it retries only those tasks)."
        )
    agents = {(r.agent, r.model) for r in reports if r.agent}
    if len(agents) > 1:
        warnings.append(f"the repeats were run by different agents or models ({sorted(map(str, agents))}).")
    return warnings


def _over_tasks(rows: Sequence[TaskRepeats], ks: Sequence[int], field: str) -> dict[int, float]:
    """k -> the mean over the tasks with at least k judged attempts (k left out when none has)."""
    means = {k: _mean_of([getattr(row, field).get(k) for row in rows]) for k in ks}
    return {k: mean for k, mean in means.items() if mean is not None}


def build_repeats_report(
    reports: Sequence[Report], names: Sequence[str], paths: Sequence[Path], not_run: Sequence[str] = ()
) -> RepeatsReport:
    """pass@k over the judged ``reports``; ``not_run`` names the repeats with no trajectory yet."""
    if not reports:
        raise ValueError("no repeats")
    rows = _task_rows(reports)
    warnings = _warnings(reports, names)
    if not_run:
        warnings.insert(
            0,
            f"{len(not_run)} of {len(reports) + len(not_run)} repeats have not run yet ({', '.join(not_run)}): the "
            f"figures are over the {len(reports)} that ran; resume the run (the same python -m evaluation.run "
            "command), then judge again.",
        )
    unjudged = [row.task_id for row in rows if row.n == 0]
    if unjudged:
        warnings.append(
            f"{len(unjudged)} of {len(rows)} tasks were judged in no repeat ({listed_ids(unjudged)}): left out of "
            "pass@k and pass^k."
        )
    n = len(reports)
    ks = list(range(1, n + 1))
    rates = [row.pass_at_1 for row in rows if row.pass_at_1 is not None]
    categories = [c for c in CATEGORIES if any(row.category == c for row in rows)]
    categories += sorted({row.category for row in rows} - set(categories))
    by_category = {}
    for name in categories:
        members = [row for row in rows if row.category == name]
        by_category[name] = CategoryRepeats(
            tasks=len(members),
            pass_at_1=_mean_of([row.pass_at_1 for row in members]),
            pass_at_1_ci95=task_rate_interval([(row.successes, row.n) for row in members]),
            pass_at_n=_mean_of([row.pass_at_k.get(n) for row in members]),
            pass_hat_n=_mean_of([row.pass_hat_k.get(n) for row in members]),
            tasks_at_n=sum(1 for row in members if row.n >= n),
        )
    first = reports[0]
    return RepeatsReport(
        agent=first.agent,
        model=first.model,
        n_repeats=n,
        ks=ks,
        not_run=list(not_run),
        repeats=[
            RepeatInfo(
                name=name,
                path=str(path),
                n_tasks=report.n_tasks,
                success=report.success,
                success_rate=report.success_rate,
                first_task=report.first_task,
                last_task=report.last_task,
                judge=", ".join(report.judge.models),
                prompt=report.judge.prompt,
                judge_config=report.judge.config_hash,
            )
            for name, path, report in zip(names, paths, reports, strict=True)
        ],
        n_tasks=len(rows),
        pass_at_1=_mean_of(rates),
        pass_at_1_ci95=task_rate_interval([(row.successes, row.n) for row in rows]),
        pass_at_k=_over_tasks(rows, ks, "pass_at_k"),
        pass_hat_k=_over_tasks(rows, ks, "pass_hat_k"),
        tasks_at_k={k: count for k in ks if (count := sum(1 for row in rows if row.n >= k))},
        unjudged_tasks=unjudged,
        between_repeats_sd=sample_sd([r.success_rate for r in reports if r.success_rate is not None]),
        within_task_variance=_within_task_variance(rows),
        flaky_tasks=sum(1 for row in rows if 0 < row.successes < row.n),
        by_category=by_category,
        efficiency=_efficiency(reports),
        total_cost=math.fsum(costs) if (costs := [r.usage.cost for r in reports if r.usage.cost is not None]) else None,
        tasks=rows,
        warnings=warnings,
    )
