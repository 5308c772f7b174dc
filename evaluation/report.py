"""The judged run as numbers (``report.json``), prose tables (``report.md``) and a self-contained
page (``report.html``, inline CSS, plots embedded as PNG).

The success rate is over the *full* task universe (the ``--tasks`` list, else every task seen in
the logs): a task without a trajectory, or one that could not be judged, counts as a failure
and is listed, never dropped.
"""

from __future__ import annotations

import base64
import html
import io
import json
import statistics
from collections import Counter
from collections.abc import Sequence
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, Field

from evaluation.stats import Confusion, cohen_kappa, confusion, wilson_interval
from evaluation.tasks import CATEGORIES
from evaluation.trajectories import UNAVAILABLE_KINDS, Trajectory
from evaluation.verdict_log import VerdictRecord
from server.trajectory import utc_now

Outcome = Literal["success", "failure", "abstain", "not_judged", "no_trajectory"]
FORMATS = ("json", "md", "html")


class TaskInfo(BaseModel):
    task_id: str
    question: str
    category: str
    gold_tools: list[str] = Field(default_factory=list)


class JudgeInfo(BaseModel):
    models: list[str]
    prompt: str
    key_points: str
    base_url: str | None = None


class InputInfo(BaseModel):
    paths: list[str] = Field(default_factory=list)
    tasks_file: str | None = None
    human_labels: str | None = None
    files_read: int = 0
    malformed_lines: int = 0
    problems: list[str] = Field(default_factory=list)
    unknown_task_ids: list[str] = Field(default_factory=list)
    #: task id -> why it could not be judged in the last run.
    errors: dict[str, str] = Field(default_factory=dict)


class Rate(BaseModel):
    n: int
    success: int
    rate: float
    ci95: tuple[float, float]

    @classmethod
    def of(cls, success: int, n: int) -> Rate:
        return cls(n=n, success=success, rate=success / n if n else 0.0, ci95=wilson_interval(success, n))


class TaskRow(BaseModel):
    task_id: str
    category: str
    question: str
    verdict: Outcome
    judges: dict[str, str] = Field(default_factory=dict)
    human: bool | None = None
    has_trajectory: bool = False
    complete: bool | None = None
    turns: int | None = None
    turns_estimated: bool = False
    route_calls: int = 0
    execute_calls: int = 0
    distinct_tools: int = 0
    tool_errors: int = 0
    input_tokens: int | None = None
    output_tokens: int | None = None
    cost: float | None = None
    gold_tools: list[str] = Field(default_factory=list)
    gold_retrieved: bool | None = None
    gold_rank: int | None = None
    gold_executed: bool | None = None
    unavailable_servers: list[str] = Field(default_factory=list)
    thoughts: str = ""


class HumanAgreement(BaseModel):
    n_labelled: int
    human_success_rate: float
    judge_success_rate: float
    agreement: float | None
    cohen_kappa: float | None
    confusion: Confusion
    judge_abstains: int
    false_successes: list[str]
    false_failures: list[str]
    labels_outside_tasks: int = 0


class JudgeStats(BaseModel):
    model: str
    success: int
    failure: int
    abstain: int
    success_rate: float
    human_agreement: float | None = None
    cohen_kappa: float | None = None


class EfficiencyGroup(BaseModel):
    n: int
    turns: float | None
    route_calls: float | None
    execute_calls: float | None
    distinct_tools: float | None
    tool_errors: float | None
    tokens: float | None = None
    cost: float | None = None


class Retrieval(BaseModel):
    tasks_with_gold: int
    tasks_routed: int
    gold_retrieved: int
    gold_retrieved_rate: float | None
    recall_at_1: float | None
    recall_at_5: float | None
    mean_best_rank: float | None
    median_best_rank: float | None
    gold_executed: int
    note: str = (
        "gold = tool names in the task's Annotator Metadata.Tools; rank = best 1-based position in any route result"
    )


class ServerHealth(BaseModel):
    server: str
    calls: int
    errors: int
    timeouts: int
    error_rate: float
    error_kinds: dict[str, int] = Field(default_factory=dict)
    tasks: int = 0


class Health(BaseModel):
    servers: list[ServerHealth] = Field(default_factory=list)
    failures_from_unavailable_servers: list[dict[str, object]] = Field(default_factory=list)


class Usage(BaseModel):
    tasks_with_usage: int
    input_tokens: int
    output_tokens: int
    cost: float | None
    judge_input_tokens: int
    judge_output_tokens: int


class Report(BaseModel):
    generated: str = Field(default_factory=utc_now)
    judge: JudgeInfo
    inputs: InputInfo
    n_tasks: int
    n_with_trajectory: int
    n_judged: int
    success: int
    failure: int
    success_rate: float
    ci95: tuple[float, float]
    by_category: dict[str, Rate]
    abstains: list[str]
    not_judged: list[str]
    missing_trajectories: list[str]
    judges: list[JudgeStats]
    human_agreement: float | None = None
    cohen_kappa: float | None = None
    confusion: Confusion | None = None
    human: HumanAgreement | None = None
    efficiency: dict[str, EfficiencyGroup]
    usage: Usage
    retrieval: Retrieval
    health: Health
    tasks: list[TaskRow]


# ---------------------------------------------------------------------------------------------
# building


def _normalise(name: str) -> str:
    return name.strip().lower().replace("-", "_")


def _gold_diagnostics(row: TaskRow, trajectory: Trajectory) -> None:
    gold = {_normalise(name) for name in row.gold_tools if name.strip()}
    if not gold:
        return
    ranks = [
        rank
        for call in trajectory.route_calls
        for rank, (_server, tool) in enumerate(call.hits, 1)
        if _normalise(tool) in gold
    ]
    row.gold_retrieved = bool(ranks) if trajectory.route_calls else None
    row.gold_rank = min(ranks) if ranks else None
    row.gold_executed = any(_normalise(call.tool or "") in gold for call in trajectory.execute_calls)


def _unavailable_servers(trajectory: Trajectory) -> list[str]:
    """Servers that failed as unavailable and never answered successfully afterwards."""
    state: dict[str, bool] = {}
    for call in trajectory.execute_calls:
        if not call.server:
            continue
        if call.is_error and call.error_kind in UNAVAILABLE_KINDS:
            state[call.server] = True
        elif not call.is_error:
            state[call.server] = False
    return sorted(server for server, down in state.items() if down)


def _row(info: TaskInfo, trajectory: Trajectory | None, record: VerdictRecord | None, human: bool | None) -> TaskRow:
    if trajectory is None:
        verdict: Outcome = "no_trajectory"
    elif record is None:
        verdict = "not_judged"
    else:
        verdict = record.verdict
    row = TaskRow(
        task_id=info.task_id,
        category=info.category,
        question=info.question,
        verdict=verdict,
        human=human,
        gold_tools=info.gold_tools or (trajectory.gold_tools if trajectory else []),
    )
    if record is not None:
        row.judges = {vote.model: vote.verdict for vote in record.judges}
        row.thoughts = record.thoughts
    if trajectory is not None:
        row.has_trajectory = True
        row.complete = trajectory.complete
        row.turns = trajectory.estimated_turns
        row.turns_estimated = trajectory.turns is None
        row.route_calls = len(trajectory.route_calls)
        row.execute_calls = len(trajectory.execute_calls)
        row.distinct_tools = trajectory.distinct_tools
        row.tool_errors = trajectory.tool_errors
        if trajectory.usage is not None:
            row.input_tokens = trajectory.usage.input_tokens
            row.output_tokens = trajectory.usage.output_tokens
            row.cost = trajectory.usage.cost
        _gold_diagnostics(row, trajectory)
        row.unavailable_servers = _unavailable_servers(trajectory)
    return row


def _mean(values: Sequence[float | int | None]) -> float | None:
    present = [value for value in values if value is not None]
    return round(statistics.fmean(present), 3) if present else None


def _efficiency(rows: Sequence[TaskRow]) -> EfficiencyGroup:
    return EfficiencyGroup(
        n=len(rows),
        turns=_mean([row.turns for row in rows]),
        route_calls=_mean([row.route_calls for row in rows]),
        execute_calls=_mean([row.execute_calls for row in rows]),
        distinct_tools=_mean([row.distinct_tools for row in rows]),
        tool_errors=_mean([row.tool_errors for row in rows]),
        tokens=_mean(
            [
                (row.input_tokens or 0) + (row.output_tokens or 0) if row.input_tokens is not None else None
                for row in rows
            ]
        ),
        cost=_mean([row.cost for row in rows]),
    )


def _retrieval(rows: Sequence[TaskRow]) -> Retrieval:
    with_gold = [row for row in rows if row.gold_tools and row.has_trajectory]
    routed = [row for row in with_gold if row.gold_retrieved is not None]
    ranks = [row.gold_rank for row in routed if row.gold_rank is not None]
    n = len(routed)
    return Retrieval(
        tasks_with_gold=len(with_gold),
        tasks_routed=n,
        gold_retrieved=len(ranks),
        gold_retrieved_rate=len(ranks) / n if n else None,
        recall_at_1=sum(1 for rank in ranks if rank <= 1) / n if n else None,
        recall_at_5=sum(1 for rank in ranks if rank <= 5) / n if n else None,
        mean_best_rank=_mean(ranks),
        median_best_rank=float(statistics.median(ranks)) if ranks else None,
        gold_executed=sum(1 for row in with_gold if row.gold_executed),
    )


def _health(rows: Sequence[TaskRow], trajectories: dict[str, Trajectory]) -> Health:
    calls: Counter[str] = Counter()
    errors: Counter[str] = Counter()
    timeouts: Counter[str] = Counter()
    kinds: dict[str, Counter[str]] = {}
    tasks: dict[str, set[str]] = {}
    for trajectory in trajectories.values():
        for call in trajectory.execute_calls:
            server = call.server or "(none)"
            calls[server] += 1
            tasks.setdefault(server, set()).add(trajectory.task_id)
            if call.is_error:
                errors[server] += 1
                kinds.setdefault(server, Counter())[call.error_kind or "tool_error"] += 1
                if call.error_kind == "timeout":
                    timeouts[server] += 1
    servers = [
        ServerHealth(
            server=server,
            calls=count,
            errors=errors[server],
            timeouts=timeouts[server],
            error_rate=errors[server] / count,
            error_kinds=dict(kinds.get(server, {})),
            tasks=len(tasks[server]),
        )
        for server, count in calls.items()
    ]
    servers.sort(key=lambda health: (-health.errors, -health.calls, health.server))
    traced = [
        {"task_id": row.task_id, "category": row.category, "servers": row.unavailable_servers}
        for row in rows
        if row.verdict != "success" and row.unavailable_servers
    ]
    return Health(servers=servers, failures_from_unavailable_servers=traced)


def _human(rows: Sequence[TaskRow], human: dict[str, bool]) -> HumanAgreement | None:
    labelled = [row for row in rows if row.human is not None]
    if not labelled:
        return None
    said = [row.verdict == "success" for row in labelled]
    truth = [bool(row.human) for row in labelled]
    table = confusion(said, truth)
    universe = {row.task_id for row in rows}
    return HumanAgreement(
        n_labelled=len(labelled),
        human_success_rate=sum(truth) / len(truth),
        judge_success_rate=sum(said) / len(said),
        agreement=table.agreement,
        cohen_kappa=cohen_kappa(table),
        confusion=table,
        judge_abstains=sum(1 for row in labelled if row.verdict == "abstain"),
        false_successes=[row.task_id for row in labelled if row.verdict == "success" and not row.human],
        false_failures=[row.task_id for row in labelled if row.verdict != "success" and row.human],
        labels_outside_tasks=sum(1 for task_id in human if task_id not in universe),
    )


def _judge_stats(models: Sequence[str], rows: Sequence[TaskRow]) -> list[JudgeStats]:
    stats = []
    n = len(rows)
    for model in models:
        votes = [row.judges.get(model) for row in rows]
        success = votes.count("success")
        entry = JudgeStats(
            model=model,
            success=success,
            failure=votes.count("failure"),
            abstain=votes.count("abstain"),
            success_rate=success / n if n else 0.0,
        )
        labelled = [(row.judges.get(model) == "success", bool(row.human)) for row in rows if row.human is not None]
        if labelled:
            table = confusion([a for a, _ in labelled], [b for _, b in labelled])
            entry.human_agreement = table.agreement
            entry.cohen_kappa = cohen_kappa(table)
        stats.append(entry)
    return stats


def build_report(
    *,
    universe: Sequence[TaskInfo],
    trajectories: dict[str, Trajectory],
    verdicts: dict[str, VerdictRecord],
    human: dict[str, bool] | None,
    judge: JudgeInfo,
    inputs: InputInfo,
) -> Report:
    human = human or {}
    rows = [
        _row(info, trajectories.get(info.task_id), verdicts.get(info.task_id), human.get(info.task_id))
        for info in universe
    ]
    n = len(rows)
    success = sum(1 for row in rows if row.verdict == "success")
    categories = [c for c in CATEGORIES if any(row.category == c for row in rows)]
    categories += sorted({row.category for row in rows} - set(categories))
    by_category = {
        category: Rate.of(
            sum(1 for row in rows if row.category == category and row.verdict == "success"),
            sum(1 for row in rows if row.category == category),
        )
        for category in categories
    }
    agreement = _human(rows, human)
    judged = [row for row in rows if row.verdict in ("success", "failure", "abstain")]
    usage_rows = [row for row in rows if row.input_tokens is not None]
    costs = [row.cost for row in usage_rows if row.cost is not None]
    return Report(
        judge=judge,
        inputs=inputs,
        n_tasks=n,
        n_with_trajectory=sum(1 for row in rows if row.has_trajectory),
        n_judged=len(judged),
        success=success,
        failure=n - success,
        success_rate=success / n if n else 0.0,
        ci95=wilson_interval(success, n),
        by_category=by_category,
        abstains=[row.task_id for row in rows if row.verdict == "abstain"],
        not_judged=[row.task_id for row in rows if row.verdict == "not_judged"],
        missing_trajectories=[row.task_id for row in rows if row.verdict == "no_trajectory"],
        judges=_judge_stats(judge.models, rows),
        human_agreement=agreement.agreement if agreement else None,
        cohen_kappa=agreement.cohen_kappa if agreement else None,
        confusion=agreement.confusion if agreement else None,
        human=agreement,
        efficiency={
            "all": _efficiency([row for row in rows if row.has_trajectory]),
            "success": _efficiency([row for row in rows if row.verdict == "success"]),
            "failure": _efficiency([row for row in rows if row.has_trajectory and row.verdict != "success"]),
        },
        usage=Usage(
            tasks_with_usage=len(usage_rows),
            input_tokens=sum(row.input_tokens or 0 for row in usage_rows),
            output_tokens=sum(row.output_tokens or 0 for row in usage_rows),
            cost=sum(costs) if costs else None,
            judge_input_tokens=sum(record.input_tokens for record in verdicts.values()),
            judge_output_tokens=sum(record.output_tokens for record in verdicts.values()),
        ),
        retrieval=_retrieval(rows),
        health=_health(rows, trajectories),
        tasks=rows,
    )


# ---------------------------------------------------------------------------------------------
# plots (matplotlib, Agg backend; imported only when a report is rendered)


def _figure_png(figure) -> bytes:  # type: ignore[no-untyped-def]
    buffer = io.BytesIO()
    figure.savefig(buffer, format="png", dpi=110, bbox_inches="tight")
    import matplotlib.pyplot as plt

    plt.close(figure)
    return buffer.getvalue()


def render_plots(report: Report) -> dict[str, bytes]:
    """``name -> PNG``: success by category, agreement/confusion, tokens-or-cost vs success."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    plots: dict[str, bytes] = {}
    if report.by_category:
        names = [*report.by_category, "All"]
        rates = [*report.by_category.values(), Rate.of(report.success, report.n_tasks)]
        figure, axes = plt.subplots(figsize=(7, 0.45 * len(names) + 1.2))
        values = [rate.rate * 100 for rate in rates]
        low = [max(0.0, (rate.rate - rate.ci95[0]) * 100) for rate in rates]
        high = [max(0.0, (rate.ci95[1] - rate.rate) * 100) for rate in rates]
        colors = ["#4C78A8"] * (len(names) - 1) + ["#F58518"]
        axes.barh(names, values, xerr=[low, high], color=colors, capsize=3)
        for y, rate in enumerate(rates):
            # Right of the interval, so the label never sits on the error bar.
            axes.text(min(rate.ci95[1] * 100 + 1.5, 90), y, f"{rate.success}/{rate.n}", va="center", fontsize=8)
        axes.invert_yaxis()
        axes.set_xlim(0, 100)
        axes.set_xlabel("success rate, % (95% Wilson CI)")
        axes.set_title("Success by category")
        plots["by_category"] = _figure_png(figure)
    if report.confusion is not None:
        table = report.confusion
        figure, axes = plt.subplots(figsize=(4.2, 3.6))
        grid = [[table.true_success, table.false_success], [table.false_failure, table.true_failure]]
        axes.imshow(grid, cmap="Blues", vmin=0)
        darkest = max(max(row) for row in grid) or 1
        for i in range(2):
            for j in range(2):
                color = "white" if grid[i][j] > darkest / 2 else "black"
                axes.text(j, i, str(grid[i][j]), ha="center", va="center", fontsize=14, color=color)
        axes.set_xticks([0, 1], ["human: success", "human: failure"])
        axes.set_yticks([0, 1], ["judge: success", "judge: failure"])
        kappa = "n/a" if report.cohen_kappa is None else f"{report.cohen_kappa:.2f}"
        axes.set_title(f"Judge vs people: agreement {report.human_agreement:.0%}, kappa {kappa}", fontsize=9)
        plots["agreement"] = _figure_png(figure)
    elif len(report.judges) > 1:
        figure, axes = plt.subplots(figsize=(6, 0.45 * len(report.judges) + 1.2))
        axes.barh([judge.model for judge in report.judges], [judge.success_rate * 100 for judge in report.judges])
        axes.axvline(report.success_rate * 100, color="#F58518", label="jury")
        axes.set_xlim(0, 100)
        axes.set_xlabel("success rate, %")
        axes.legend()
        axes.set_title("Each judge vs the jury")
        plots["agreement"] = _figure_png(figure)
    usage_rows = [row for row in report.tasks if row.input_tokens is not None]
    if usage_rows:
        use_cost = any(row.cost is not None for row in usage_rows)
        figure, axes = plt.subplots(figsize=(6, 3.4))
        for offset, (label, wanted) in enumerate((("success", True), ("not success", False))):
            values = [
                (row.cost if use_cost else (row.input_tokens or 0) + (row.output_tokens or 0))
                for row in usage_rows
                if (row.verdict == "success") == wanted and (row.cost is not None or not use_cost)
            ]
            xs = [offset + (i % 7 - 3) * 0.04 for i in range(len(values))]
            axes.scatter(xs, values, alpha=0.7, label=f"{label} (n={len(values)})")
        axes.set_xticks([0, 1], ["success", "not success"])
        axes.set_ylabel("agent cost" if use_cost else "agent tokens (in+out)")
        axes.set_title(("Cost" if use_cost else "Tokens") + " per task vs outcome")
        plots["usage"] = _figure_png(figure)
    return plots


# ---------------------------------------------------------------------------------------------
# writing


def _pct(value: float | None) -> str:
    return "n/a" if value is None else f"{value:.1%}"


def _num(value: float | None, digits: int = 2) -> str:
    return "n/a" if value is None else f"{value:.{digits}f}"


def _tables(report: Report) -> list[tuple[str, list[str], list[list[str]], str]]:
    """``(title, header, rows, note)`` shared by the Markdown and HTML renderings."""
    tables: list[tuple[str, list[str], list[list[str]], str]] = []
    tables.append(
        (
            "Success by category",
            ["category", "tasks", "success", "rate", "95% CI"],
            [
                [name, str(rate.n), str(rate.success), _pct(rate.rate), f"{_pct(rate.ci95[0])}-{_pct(rate.ci95[1])}"]
                for name, rate in report.by_category.items()
            ]
            + [
                [
                    "**all**",
                    str(report.n_tasks),
                    str(report.success),
                    _pct(report.success_rate),
                    f"{_pct(report.ci95[0])}-{_pct(report.ci95[1])}",
                ]
            ],
            "Tasks without a trajectory or verdict count as failures.",
        )
    )
    if len(report.judges) > 1 or report.human is not None:
        tables.append(
            (
                "Judges",
                ["judge", "success", "failure", "abstain", "success rate", "human agreement", "kappa"],
                [
                    [
                        j.model,
                        str(j.success),
                        str(j.failure),
                        str(j.abstain),
                        _pct(j.success_rate),
                        _pct(j.human_agreement),
                        _num(j.cohen_kappa),
                    ]
                    for j in report.judges
                ],
                "A jury takes the majority of success/failure votes; a tie is a failure.",
            )
        )
    if report.human is not None:
        h = report.human
        c = h.confusion
        tables.append(
            (
                "Agreement with people",
                ["", "human: success", "human: failure"],
                [
                    ["judge: success", str(c.true_success), f"{c.false_success} (false successes)"],
                    ["judge: failure", f"{c.false_failure} (false failures)", str(c.true_failure)],
                ],
                (
                    f"{h.n_labelled} labelled tasks: agreement {_pct(h.agreement)}, Cohen's kappa {_num(h.cohen_kappa)}, "
                    f"people {_pct(h.human_success_rate)} vs judge {_pct(h.judge_success_rate)} success; "
                    f"judge abstains (counted as failure): {h.judge_abstains}."
                ),
            )
        )
    tables.append(
        (
            "Efficiency (mean per task)",
            [
                "tasks",
                "n",
                "turns",
                "route calls",
                "execute calls",
                "distinct tools",
                "tool errors",
                "agent tokens",
                "cost",
            ],
            [
                [
                    name,
                    str(g.n),
                    _num(g.turns, 1),
                    _num(g.route_calls, 1),
                    _num(g.execute_calls, 1),
                    _num(g.distinct_tools, 1),
                    _num(g.tool_errors, 1),
                    _num(g.tokens, 0),
                    _num(g.cost, 4),
                ]
                for name, g in report.efficiency.items()
            ],
            "Turns are logged LLM turns when the agent reports them, else estimated as calls + 1.",
        )
    )
    r = report.retrieval
    tables.append(
        (
            "Retrieval of annotated tools",
            [
                "tasks with gold tools",
                "tasks that routed",
                "gold retrieved",
                "recall@1",
                "recall@5",
                "mean best rank",
                "median best rank",
                "gold tool executed",
            ],
            [
                [
                    str(r.tasks_with_gold),
                    str(r.tasks_routed),
                    f"{r.gold_retrieved} ({_pct(r.gold_retrieved_rate)})",
                    _pct(r.recall_at_1),
                    _pct(r.recall_at_5),
                    _num(r.mean_best_rank, 1),
                    _num(r.median_best_rank, 1),
                    str(r.gold_executed),
                ]
            ],
            r.note,
        )
    )
    tables.append(
        (
            "Tool/server health",
            ["server", "calls", "errors", "timeouts", "error rate", "tasks", "error kinds"],
            [
                [
                    s.server,
                    str(s.calls),
                    str(s.errors),
                    str(s.timeouts),
                    _pct(s.error_rate),
                    str(s.tasks),
                    ", ".join(f"{k} {v}" for k, v in s.error_kinds.items()),
                ]
                for s in report.health.servers[:30]
            ],
            (
                f"{len(report.health.failures_from_unavailable_servers)} unsuccessful task(s) trace back to a server that "
                "was unavailable (crashed, unreachable or timing out, and never answered afterwards)."
            ),
        )
    )
    if report.health.failures_from_unavailable_servers:
        tables.append(
            (
                "Unsuccessful tasks with an unavailable server",
                ["task", "category", "servers"],
                [
                    [str(t["task_id"]), str(t["category"]), ", ".join(t["servers"])]
                    for t in report.health.failures_from_unavailable_servers
                ],  # type: ignore[arg-type]
                "",
            )
        )
    tables.append(
        (
            "Tasks",
            ["task", "category", "verdict", "human", "turns", "route", "execute", "errors", "gold rank", "question"],
            [
                [
                    row.task_id,
                    row.category,
                    row.verdict,
                    "" if row.human is None else ("success" if row.human else "failure"),
                    "" if row.turns is None else str(row.turns),
                    str(row.route_calls),
                    str(row.execute_calls),
                    str(row.tool_errors),
                    "" if row.gold_rank is None else str(row.gold_rank),
                    row.question[:90] + ("..." if len(row.question) > 90 else ""),
                ]
                for row in report.tasks
            ],
            "",
        )
    )
    return tables


def _headline(report: Report) -> list[str]:
    lines = [
        f"{report.success}/{report.n_tasks} tasks succeeded: {_pct(report.success_rate)} (95% CI {_pct(report.ci95[0])}-{_pct(report.ci95[1])}).",
        (
            f"Judge: {', '.join(report.judge.models)} ({'jury, majority vote' if len(report.judge.models) > 1 else 'single judge'}), "
            f"prompt {report.judge.prompt}, key points {report.judge.key_points}."
        ),
        (
            f"{report.n_with_trajectory} tasks have a trajectory, {report.n_judged} were judged; "
            f"{len(report.missing_trajectories)} without trajectory, {len(report.not_judged)} not judged, "
            f"{len(report.abstains)} abstain (all counted as failures)."
        ),
    ]
    if report.human is not None:
        lines.append(
            f"Agreement with people: {_pct(report.human_agreement)}, Cohen's kappa {_num(report.cohen_kappa)}."
        )
    if report.inputs.malformed_lines or report.inputs.problems:
        lines.append(
            f"Input problems: {len(report.inputs.problems)} (malformed lines skipped: {report.inputs.malformed_lines})."
        )
    return lines


def _lists(report: Report) -> list[tuple[str, list[str]]]:
    lists = [
        ("Tasks without a trajectory (counted as failures)", report.missing_trajectories),
        (
            "Tasks not judged (LLM errors; rerun to retry)",
            [f"{t}: {report.inputs.errors.get(t, '')}" for t in report.not_judged],
        ),
        ("Abstains (no parseable verdict)", report.abstains),
        ("Task ids not in the task list", report.inputs.unknown_task_ids),
        ("Input problems (skipped)", report.inputs.problems),
    ]
    return [(title, items) for title, items in lists if items]


def _markdown(report: Report, plot_files: dict[str, str]) -> str:
    out = ["# LiveMCPEval report", ""]
    out += [f"- {line}" for line in _headline(report)]
    out.append("")
    for name, file in plot_files.items():
        out.append(f"![{name}]({file})")
    if plot_files:
        out.append("")
    for title, header, rows, note in _tables(report):
        out += [f"## {title}", ""]
        if note:
            out += [note, ""]
        if rows:
            out.append("| " + " | ".join(header) + " |")
            out.append("|" + "---|" * len(header))
            for row in rows:
                out.append("| " + " | ".join(cell.replace("|", "\\|").replace("\n", " ") for cell in row) + " |")
            out.append("")
    for title, items in _lists(report):
        out += [f"## {title}", ""] + [f"- {item}" for item in items[:200]] + [""]
    return "\n".join(out)


_CSS = """
body{font-family:system-ui,-apple-system,Segoe UI,Roboto,sans-serif;margin:2rem auto;max-width:1100px;color:#222;padding:0 1rem}
h1{margin-bottom:.2rem}h2{margin-top:2rem;border-bottom:1px solid #ddd;padding-bottom:.2rem}
.cards{display:flex;gap:1rem;flex-wrap:wrap;margin:1rem 0}.card{background:#f5f7fa;border-radius:8px;padding:.8rem 1.1rem;min-width:150px}
.card .v{font-size:1.6rem;font-weight:600}.card .k{color:#555;font-size:.85rem}
table{border-collapse:collapse;width:100%;font-size:.85rem;margin:.5rem 0}th,td{border:1px solid #ddd;padding:.3rem .5rem;text-align:left;vertical-align:top;overflow-wrap:break-word}
.scroll{overflow-x:auto}td.text{overflow-wrap:anywhere;min-width:6rem}
th{background:#f0f2f5}tr:nth-child(even) td{background:#fafbfc}.note{color:#555;font-size:.85rem}
.success{color:#1a7f37;font-weight:600}.failure{color:#b42318}.abstain{color:#9a6700}.not_judged,.no_trajectory{color:#777}
.plots{display:flex;flex-wrap:wrap;gap:1rem}.plots img{max-width:100%;border:1px solid #eee;border-radius:6px}
ul{font-size:.85rem}
"""


def _html(report: Report, plots: dict[str, bytes]) -> str:
    esc = html.escape
    parts = [
        "<!doctype html><html lang='en'><head><meta charset='utf-8'>",
        "<meta name='viewport' content='width=device-width,initial-scale=1'>",
        f"<title>LiveMCPEval report</title><style>{_CSS}</style></head><body>",
        "<h1>LiveMCPEval report</h1>",
        f"<p class='note'>generated {esc(report.generated)} &middot; judge {esc(', '.join(report.judge.models))} &middot; prompt {esc(report.judge.prompt)}</p>",
        "<div class='cards'>",
    ]
    cards = [
        ("success rate", _pct(report.success_rate)),
        ("95% CI", f"{_pct(report.ci95[0])}-{_pct(report.ci95[1])}"),
        ("succeeded", f"{report.success}/{report.n_tasks}"),
        ("abstain", str(len(report.abstains))),
        ("no trajectory", str(len(report.missing_trajectories))),
    ]
    if report.human is not None:
        cards += [("human agreement", _pct(report.human_agreement)), ("Cohen's kappa", _num(report.cohen_kappa))]
    parts += [f"<div class='card'><div class='v'>{esc(v)}</div><div class='k'>{esc(k)}</div></div>" for k, v in cards]
    parts.append("</div><ul>" + "".join(f"<li>{esc(line)}</li>" for line in _headline(report)) + "</ul>")
    if plots:
        parts.append("<div class='plots'>")
        for name, png in plots.items():
            data = base64.b64encode(png).decode()
            parts.append(f"<img alt='{esc(name)}' src='data:image/png;base64,{data}'>")
        parts.append("</div>")
    for title, header, rows, note in _tables(report):
        parts.append(f"<h2>{esc(title)}</h2>")
        if note:
            parts.append(f"<p class='note'>{esc(note)}</p>")
        if not rows:
            continue
        parts.append("<div class='scroll'><table><tr>" + "".join(f"<th>{esc(h)}</th>" for h in header) + "</tr>")
        verdict_column = header.index("verdict") if "verdict" in header else -1
        # Free text may break anywhere (long paths); numbers and labels keep their words whole.
        text_columns = {index for index, name in enumerate(header) if name in ("question", "task", "servers")}
        for row in rows:
            cells = []
            for index, cell in enumerate(row):
                text = esc(cell.replace("**", ""))
                css = (
                    f" class='{esc(cell)}'"
                    if index == verdict_column
                    else " class='text'"
                    if index in text_columns
                    else ""
                )
                cells.append(f"<td{css}>{text}</td>")
            parts.append("<tr>" + "".join(cells) + "</tr>")
        parts.append("</table></div>")
    for title, items in _lists(report):
        parts.append(f"<h2>{esc(title)}</h2><ul>" + "".join(f"<li>{esc(item)}</li>" for item in items[:200]) + "</ul>")
    parts.append("</body></html>")
    return "\n".join(parts)


def _atomic_write(path: Path, data: str | bytes) -> None:
    tmp = path.with_name(path.name + ".tmp")
    if isinstance(data, bytes):
        tmp.write_bytes(data)
    else:
        tmp.write_text(data, encoding="utf-8")
    tmp.replace(path)


def write_reports(report: Report, out_dir: str | Path, formats: Sequence[str] = FORMATS) -> list[Path]:
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    written: list[Path] = []
    if "json" in formats:
        path = out_dir / "report.json"
        _atomic_write(path, json.dumps(report.model_dump(mode="json"), indent=1, ensure_ascii=False) + "\n")
        written.append(path)
    if "md" in formats or "html" in formats:
        plots = render_plots(report)
        plot_files: dict[str, str] = {}
        if plots and "md" in formats:
            (out_dir / "plots").mkdir(exist_ok=True)
            for name, png in plots.items():
                _atomic_write(out_dir / "plots" / f"{name}.png", png)
                plot_files[name] = f"plots/{name}.png"
        if "md" in formats:
            path = out_dir / "report.md"
            _atomic_write(path, _markdown(report, plot_files))
            written.append(path)
        if "html" in formats:
            path = out_dir / "report.html"
            _atomic_write(path, _html(report, plots))
            written.append(path)
    return written


def load_report(directory: str | Path) -> Report:
    """``report.json`` of a judged run (``DIR/report.json`` or ``DIR/judge/report.json``)."""
    directory = Path(directory)
    for candidate in (directory / "report.json", directory / "judge" / "report.json", directory):
        if candidate.is_file():
            return Report.model_validate_json(candidate.read_bytes())
    raise FileNotFoundError(directory)
