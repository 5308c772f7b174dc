"""The report's tables and lists, shared by the Markdown and HTML renderings.

Each table is built by its own small function from the :class:`Report`; :func:`tables` puts them
in reading order and leaves out the ones with nothing to say.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from evaluation.report.models import Report


@dataclass
class Table:
    title: str
    header: list[str]
    rows: list[list[str]] = field(default_factory=list)
    note: str = ""


def pct(value: float | None) -> str:
    return "n/a" if value is None else f"{value:.1%}"


def num(value: float | None, digits: int = 2) -> str:
    return "n/a" if value is None else f"{value:.{digits}f}"


def interval(low: float, high: float) -> str:
    return f"{pct(low)}-{pct(high)}"


def category_table(report: Report) -> Table:
    rows = [
        [name, str(rate.n), str(rate.success), pct(rate.rate), interval(*rate.ci95)]
        for name, rate in report.by_category.items()
    ]
    rows.append(["**all**", str(report.n_tasks), str(report.success), pct(report.success_rate), interval(*report.ci95)])
    return Table(
        "Success by category",
        ["category", "tasks", "success", "rate", "95% CI"],
        rows,
        "Tasks without a trajectory or verdict count as failures.",
    )


def judges_table(report: Report) -> Table | None:
    if len(report.judges) <= 1 and report.human is None:
        return None
    return Table(
        "Judges",
        ["judge", "success", "failure", "abstain", "success rate", "human agreement", "kappa"],
        [
            [j.model, str(j.success), str(j.failure), str(j.abstain), pct(j.success_rate), pct(j.human_agreement), num(j.cohen_kappa)]
            for j in report.judges
        ],
        "A jury takes the majority of success/failure votes; a tie is a failure.",
    )


def agreement_table(report: Report) -> Table | None:
    h = report.human
    if h is None:
        return None
    c = h.confusion
    return Table(
        "Agreement with people",
        ["", "human: success", "human: failure"],
        [
            ["judge: success", str(c.true_success), f"{c.false_success} (false successes)"],
            ["judge: failure", f"{c.false_failure} (false failures)", str(c.true_failure)],
        ],
        (
            f"{h.n_labelled} labelled tasks: agreement {pct(h.agreement)}, Cohen's kappa {num(h.cohen_kappa)}, "
            f"people {pct(h.human_success_rate)} vs judge {pct(h.judge_success_rate)} success; "
            f"judge abstains (counted as failure): {h.judge_abstains}."
        ),
    )


def efficiency_table(report: Report) -> Table:
    header = ["tasks", "n", "turns", "route calls", "execute calls", "distinct tools", "tool errors", "agent tokens", "cost"]
    rows = [
        [
            name,
            str(g.n),
            num(g.turns, 1),
            num(g.route_calls, 1),
            num(g.execute_calls, 1),
            num(g.distinct_tools, 1),
            num(g.tool_errors, 1),
            num(g.tokens, 0),
            num(g.cost, 4),
        ]
        for name, g in report.efficiency.items()
    ]
    return Table(
        "Efficiency (mean per task)",
        header,
        rows,
        "Turns are logged LLM turns when the agent reports them, else estimated as calls + 1.",
    )


def retrieval_table(report: Report) -> Table:
    r = report.retrieval
    header = [
        "tasks with gold tools",
        "tasks that routed",
        "gold retrieved",
        "recall@1",
        "recall@5",
        "mean best rank",
        "median best rank",
        "gold tool executed",
    ]
    row = [
        str(r.tasks_with_gold),
        str(r.tasks_routed),
        f"{r.gold_retrieved} ({pct(r.gold_retrieved_rate)})",
        pct(r.recall_at_1),
        pct(r.recall_at_5),
        num(r.mean_best_rank, 1),
        num(r.median_best_rank, 1),
        str(r.gold_executed),
    ]
    return Table("Retrieval of annotated tools", header, [row], r.note)


def health_table(report: Report) -> Table:
    servers = report.health.servers
    rows = [
        [
            s.server,
            str(s.calls),
            str(s.errors),
            str(s.timeouts),
            pct(s.error_rate),
            str(s.tasks),
            ", ".join(f"{k} {v}" for k, v in s.error_kinds.items()),
        ]
        for s in servers[:30]
    ]
    note = (
        f"{len(report.health.failures_from_unavailable_servers)} unsuccessful task(s) trace back to a server that "
        "was unavailable (crashed, unreachable or timing out, and never answered afterwards)."
    )
    return Table("Tool/server health", ["server", "calls", "errors", "timeouts", "error rate", "tasks", "error kinds"], rows, note)


def unavailable_table(report: Report) -> Table | None:
    traced = report.health.failures_from_unavailable_servers
    if not traced:
        return None
    return Table(
        "Unsuccessful tasks with an unavailable server",
        ["task", "category", "servers"],
        [[str(t["task_id"]), str(t["category"]), ", ".join(t["servers"])] for t in traced],  # type: ignore[arg-type]
    )


def tasks_table(report: Report) -> Table:
    header = ["task", "category", "verdict", "human", "turns", "route", "execute", "errors", "gold rank", "question"]
    rows = [
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
    ]
    return Table("Tasks", header, rows)


TABLES: tuple[Callable[[Report], Table | None], ...] = (
    category_table,
    judges_table,
    agreement_table,
    efficiency_table,
    retrieval_table,
    health_table,
    unavailable_table,
    tasks_table,
)


def tables(report: Report) -> list[Table]:
    """Every table that has something to say, in reading order."""
    return [table for build in TABLES if (table := build(report)) is not None]


def headline(report: Report) -> list[str]:
    lines = [
        f"{report.success}/{report.n_tasks} tasks succeeded: {pct(report.success_rate)} (95% CI {interval(*report.ci95)}).",
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
        lines.append(f"Agreement with people: {pct(report.human_agreement)}, Cohen's kappa {num(report.cohen_kappa)}.")
    if report.inputs.malformed_lines or report.inputs.problems:
        lines.append(
            f"Input problems: {len(report.inputs.problems)} (malformed lines skipped: {report.inputs.malformed_lines})."
        )
    return lines


def lists(report: Report) -> list[tuple[str, list[str]]]:
    found = [
        ("Tasks without a trajectory (counted as failures)", report.missing_trajectories),
        (
            "Tasks not judged (LLM errors; rerun to retry)",
            [f"{t}: {report.inputs.errors.get(t, '')}" for t in report.not_judged],
        ),
        ("Abstains (no parseable verdict)", report.abstains),
        ("Task ids not in the task list", report.inputs.unknown_task_ids),
        ("Input problems (skipped)", report.inputs.problems),
    ]
    return [(title, items) for title, items in found if items]
