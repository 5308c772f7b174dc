"""Reports built straight from verdicts and trajectories made here: the report-building
functions are tested without a judge endpoint, on numbers one can check by hand."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence

from evaluation.judge.verdict_log import JudgeVote, VerdictRecord
from evaluation.report.build import build_report
from evaluation.report.models import InputInfo, JudgeInfo, Report, TaskInfo
from evaluation.trajectories import Trajectory
from evaluation.trajectories.model import ToolCall, UsageTotals


def record(task_id: str, verdict: str, votes: Mapping[str, str] | None = None, category: str = "Office") -> VerdictRecord:
    """A verdict on ``task_id``; ``votes`` (model -> vote) for a jury, else one judge ``judge-a``."""
    votes = votes or {"judge-a": verdict}
    return VerdictRecord(
        task_id=task_id, category=category, verdict=verdict, judge_model=",".join(votes), prompt="livemcpeval",  # type: ignore[arg-type]
        prompt_hash="p", config_hash="c", trajectory_hash="t",
        judges=[JudgeVote(model=model, verdict=vote) for model, vote in votes.items()],  # type: ignore[arg-type]
    )


def trajectory(
    task_id: str,
    executes: int = 0,
    routes: Sequence[Sequence[str]] = (),
    tokens: tuple[int, int] | None = None,
    cost: float | None = None,
    unavailable: str | None = None,
) -> Trajectory:
    """A copilot trajectory: a ``route`` call per entry of ``routes`` (the tools it returned), then
    ``executes`` calls of ``echo`` -- all failing as ``server_unavailable`` on server ``unavailable``
    when given; ``tokens`` (in, out) and ``cost`` as its usage."""
    calls = [ToolCall(index=i, kind="route", query="q", hits=[("s", tool) for tool in hits]) for i, hits in enumerate(routes, 1)]
    calls += [
        ToolCall(
            index=len(routes) + i, kind="execute", server=unavailable or "s", tool="echo", is_error=bool(unavailable),
            error_kind="server_unavailable" if unavailable else None,
        )
        for i in range(1, executes + 1)
    ]
    usage = None if tokens is None else UsageTotals(input_tokens=tokens[0], output_tokens=tokens[1], cost=cost)
    return Trajectory(task_id=task_id, format="copilot", question=f"question {task_id}", calls=calls, usage=usage, final_answer="done")


def built(
    universe: Mapping[str, str | tuple[str, Sequence[str]]],
    trajectories: Iterable[Trajectory],
    records: Iterable[VerdictRecord],
    human: dict[str, bool] | None = None,
    models: Sequence[str] = ("judge-a",),
) -> Report:
    """The report over ``universe`` (task id -> category, or (category, annotated tools))."""
    tasks = [
        TaskInfo(task_id=task_id, question=f"question {task_id}", category=spec, gold_tools=[])
        if isinstance(spec, str)
        else TaskInfo(task_id=task_id, question=f"question {task_id}", category=spec[0], gold_tools=list(spec[1]))
        for task_id, spec in universe.items()
    ]
    return build_report(
        universe=tasks,
        trajectories={t.task_id: t for t in trajectories},
        verdicts={r.task_id: r for r in records},
        human=human,
        judge=JudgeInfo(models=list(models), prompt="livemcpeval", key_points="annotated"),
        inputs=InputInfo(),
    )
