"""The report's tables and lists, shared by the Markdown and HTML renderings.

Each table is built by its own small function from the :class:`Report`; :func:`tables` puts them
in reading order and leaves out the ones with nothing to say.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from evaluation.report.models import Rate, Report, TaskRow
from evaluation.taxonomy.model import CLASS_NAMES, CLASSES


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


def money(value: float | None) -> str:
    """A cost in dollars with three significant digits however small (a fixed 2 or 4 decimals
    showed $0.0016 as 0.00), and cents from a dollar up."""
    if value is None:
        return "n/a"
    if value <= 0:
        return "0"
    return f"{value:,.{max(2, 2 - math.floor(math.log10(value)))}f}"


def interval(ci95: tuple[float, float] | None) -> str:
    """A 95% interval as text, ``n/a`` when undefined (no unit to rest on), never 0.0%-0.0%."""
    return "n/a" if ci95 is None else f"{pct(ci95[0])}-{pct(ci95[1])}"


def with_interval(value: float | None, ci95: tuple[float, float] | None) -> str:
    """``50.0% (95% CI 30.0%-70.0%)``; a value that is undefined is ``n/a``, without an interval."""
    if value is None:
        return "n/a"
    return f"{pct(value)} (95% CI {interval(ci95)})"


def rate_cells(rate: float | None, ci95: tuple[float, float] | None) -> tuple[str, str]:
    """A success rate and its 95% interval as text; no rate (no task with an outcome) says so
    instead of reading as 0%, and has no interval."""
    if rate is None:
        return "n/a (not judged)", ""
    return pct(rate), interval(ci95)


def listed_ids(ids: Sequence[str], most: int = 5) -> str:
    """The first ``most`` task ids, then ``...`` when there are more: a warning names some, not all."""
    return ", ".join(ids[:most]) + (", ..." if len(ids) > most else "")


def category_table(report: Report) -> Table:
    rows = [
        [name, str(rate.n), str(rate.success), *rate_cells(rate.rate, rate.ci95)]
        for name, rate in report.by_category.items()
    ]
    rows.append(
        ["**all**", str(report.n_with_outcome), str(report.success), *rate_cells(report.success_rate, report.ci95)]
    )
    return Table(
        "Success by category",
        ["category", "tasks", "success", "rate", "95% CI"],
        rows,
        "Tasks without a trajectory count as failures; tasks the judge never decided are left out (not failures), "
        "so a row's tasks are those with an outcome.",
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
        "A jury takes the majority of success/failure votes; a tie is a failure. Over the tasks with an outcome, as the "
        "headline: a task without a trajectory is a failure of every judge, a task never decided is left out.",
    )


def jury_table(report: Report) -> Table | None:
    jury = report.jury
    if jury is None:
        return None
    return Table(
        "Agreement between judges",
        ["judge A", "judge B", "tasks", "agreement", "Cohen's kappa"],
        [[p.judge_a, p.judge_b, str(p.n), pct(p.agreement), num(p.cohen_kappa)] for p in jury.pairs],
        f"On the {jury.n} tasks every judge voted on (success vs not); no human labels needed. Fleiss' kappa over all "
        f"judges: {num(jury.fleiss_kappa)} (n/a when every vote is the same). The judges split on {len(jury.split_tasks)} "
        f"task(s){': ' + listed_ids(jury.split_tasks) if jury.split_tasks else ''}.",
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
    header = [
        "tasks", "n", "turns", "route calls", "execute calls", "distinct tools", "tool errors", "agent tokens (in+out)",
        "cost ($)", "time (s)", "tool time (s)",
    ]
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
            money(g.cost),
            num(g.seconds, 1),
            num(g.tool_seconds, 1),
        ]
        for name, g in report.efficiency.items()
    ]
    return Table(
        "Efficiency (mean per task)",
        header,
        rows,
        "Turns are logged LLM turns when the agent reports them, else estimated as calls + 1. Time: wall clock from "
        "the task's first logged event to its last (summed over its sessions); tool time: its execute calls' "
        "latencies. Tokens, cost and times are over the tasks that logged them. A task the judge never decided is in "
        "all, not in failure.",
    )


def retrieval_table(report: Report) -> Table:
    r = report.retrieval
    header = [
        "tasks with gold tools",
        "tasks that routed",
        "gold retrieved",
        "hit@1",
        "hit@5",
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


def retrieval_split_table(report: Report) -> Table | None:
    split = report.retrieval_split
    if split is None:
        return None

    def row(name: str, rate: Rate) -> list[str]:
        return [name, str(rate.n), str(rate.success), pct(rate.rate), interval(rate.ci95) if rate.n else ""]

    return Table(
        "Success by whether route returned an annotated tool",
        ["route results", "tasks", "success", "rate", "95% CI"],
        [
            row("an annotated tool was returned", split.returned),
            row("no annotated tool was returned", split.not_returned),
            row("route was never called", split.no_route),
        ],
        "Tasks with annotated tools, a trajectory and an outcome (a task the judge never decided is left out). The paper's main diagnosis: agents shown the right tool "
        "succeed far more often; the gap is what better retrieval could win.",
    )


def health_table(report: Report) -> Table:
    servers = report.health.servers
    rows = [
        [
            s.server + (f" (also: {', '.join(s.aliases)})" if s.aliases else ""),
            str(s.calls),
            str(s.errors),
            str(s.timeouts),
            pct(s.error_rate),
            str(s.tasks),
            ", ".join(f"{k} {v}" for k, v in s.error_kinds.items()),
        ]
        for s in servers
    ]
    note = (
        f"All {len(servers)} server(s) called, most errors first; spellings that differ only in case, spaces, "
        f"'_' or '-' are one server. {len(report.health.failures_from_unavailable_servers)} unsuccessful task(s) "
        "trace back to a server that was unavailable (crashed, unreachable or timing out, and never answered afterwards)."
    )
    return Table("Tool/server health", ["server", "calls", "errors", "timeouts", "error rate", "tasks", "error kinds"], rows, note)


#: Tools in the table (report.json lists them all).
TOOLS_SHOWN = 30


def tools_table(report: Report) -> Table | None:
    if not report.tools:
        return None
    shown = report.tools[:TOOLS_SHOWN]
    return Table(
        "Tools routed and executed",
        ["server", "tool", "routed", "routed in tasks", "executed", "errors", "executed in tasks", "of them successful", "gold in tasks"],
        [
            [
                t.server, t.tool, str(t.routed), str(t.routed_tasks), str(t.executed), str(t.errors), str(t.executed_tasks),
                str(t.successful_tasks), str(t.gold_tasks) if t.gold_tasks else "",
            ]
            for t in shown
        ],
        f"Most executed first{f'; the first {len(shown)} of {len(report.tools)} (all in report.json, tools)' if len(shown) < len(report.tools) else ''}. "
        "routed: route answers that listed the tool; executed: its execute calls; gold: tasks whose annotated tools "
        "name it.",
    )


def unavailable_table(report: Report) -> Table | None:
    traced = report.health.failures_from_unavailable_servers
    if not traced:
        return None
    return Table(
        "Unsuccessful tasks with an unavailable server",
        ["task", "category", "servers"],
        [[str(t["task_id"]), str(t["category"]), ", ".join(t["servers"])] for t in traced],  # type: ignore[arg-type]
    )


def taxonomy_table(report: Report) -> Table | None:
    taxonomy = report.taxonomy
    if not taxonomy.unsuccessful:
        return None
    present = [label for label in (*CLASSES, "undecided") if taxonomy.counts.get(label)]  # type: ignore[call-overload]
    header = ["category", "unsuccessful", *[CLASS_NAMES[label] for label in present]]
    rows = []
    for category, counts in taxonomy.by_category.items():
        rows.append([category, str(sum(counts.values())), *[str(counts.get(label, 0)) for label in present]])
    rows.append(["**all**", str(taxonomy.unsuccessful), *[str(taxonomy.counts.get(label, 0)) for label in present]])
    note = (
        "Unsuccessful tasks with a trajectory, classified from the log: Query (no route query asked for an annotated "
        "tool's capability), Retrieve (a query asked for it but no annotated tool came back), Tool (an annotated tool "
        "was returned but not called, or called with wrong parameters or names), Other (server unavailable, timeouts, "
        "model or endpoint errors, max turns, or the tools worked and the answer still fell short)."
    )
    if taxonomy.llm_second_opinions:
        note += f" {taxonomy.llm_second_opinions} label(s) are an LLM's second opinion on cases the log could not decide."
    return Table("Why tasks failed", header, rows, note)


def diagnosis_table(report: Report) -> Table | None:
    rows = [
        [
            row.task_id,
            row.category,
            CLASS_NAMES[row.diagnosis.label] + (" (LLM)" if row.diagnosis.source == "llm" else ""),
            row.diagnosis.cause or "",
            row.diagnosis.reason,
            "; ".join(f"{e.call}: {e.note}" if e.call else e.note for e in row.diagnosis.evidence[:4]),
        ]
        for row in report.tasks
        if row.diagnosis is not None
    ]
    if not rows:
        return None
    return Table("Unsuccessful tasks and their error class", ["task", "category", "class", "cause", "reason", "evidence"], rows)


def confirmations_table(report: Report) -> Table | None:
    c = report.confirmations
    if not c.requested and not c.policy:
        return None
    answers = ", ".join(f"{name} {count}" for name, count in sorted(c.by_answer.items())) or "none"
    return Table(
        "Confirmations",
        ["policy", "requested", "tasks with confirmations", "answers"],
        [[", ".join(c.policy) or "unknown", str(c.requested), str(c.tasks_with_confirmations), answers]],
        "Calls the copilot gated behind the user's OK (destructive or untrusted tools). approve/deny: answered by "
        "the runner's MCP client through elicitation; ask: no elicitation, the agent got a confirm token (answer "
        "'token'); host: an external agent's host answered.",
    )


def run_end(row: TaskRow) -> str:
    """How the runner ended the task, when not with an answer: ``timeout``, ``failed: llm_error``."""
    if row.run_status in (None, "completed"):
        return ""
    if row.run_error_kind and row.run_error_kind != row.run_status:
        return f"{row.run_status}: {row.run_error_kind}"
    return row.run_status


def run_broke_line(run_broke: dict[str, str]) -> str:
    """One sentence on the unsuccessful tasks the run itself ended (empty when there are none)."""
    if not run_broke:
        return ""
    kinds = Counter(run_broke.values())
    counts = ", ".join(f"{kind} {count}" for kind, count in sorted(kinds.items(), key=lambda item: (-item[1], item[0])))
    return (
        f"{len(run_broke)} unsuccessful task(s) were ended by the run itself, not the agent ({counts}) and count as "
        "failures: fix the cause, rerun them with the runner's --retry-failed, then judge again."
    )


def tasks_table(report: Report) -> Table:
    header = [
        "task", "category", "verdict", "run", "human", "turns", "route", "execute", "errors", "confirmations", "gold rank",
        "error class", "question",
    ]
    rows = [
        [
            row.task_id,
            row.category,
            row.verdict,
            run_end(row),
            "" if row.human is None else ("success" if row.human else "failure"),
            "" if row.turns is None else str(row.turns),
            str(row.route_calls),
            str(row.execute_calls),
            str(row.tool_errors),
            str(row.confirmations_requested) if row.confirmations_requested else "",
            "" if row.gold_rank is None else str(row.gold_rank),
            CLASS_NAMES[row.diagnosis.label] if row.diagnosis else "",
            row.question[:90] + ("..." if len(row.question) > 90 else ""),
        ]
        for row in report.tasks
    ]
    return Table("Tasks", header, rows)


TABLES: tuple[Callable[[Report], Table | None], ...] = (
    category_table,
    judges_table,
    jury_table,
    agreement_table,
    efficiency_table,
    retrieval_table,
    retrieval_split_table,
    taxonomy_table,
    diagnosis_table,
    confirmations_table,
    health_table,
    tools_table,
    unavailable_table,
    tasks_table,
)


def tables(report: Report) -> list[Table]:
    """Every table that has something to say, in reading order."""
    return [table for build in TABLES if (table := build(report)) is not None]


def headline(report: Report) -> list[str]:
    lines = [
        f"{report.success}/{report.n_with_outcome} tasks succeeded: {with_interval(report.success_rate, report.ci95)}"
        + (f"; {len(report.not_judged)} not judged, left out." if report.not_judged else ".")
        if report.success_rate is not None
        else f"Success rate: n/a -- not judged (0 of {report.n_tasks} tasks judged); rerun the judge.",
        (
            f"Judge: {', '.join(report.judge.models)} ({'jury, majority vote' if len(report.judge.models) > 1 else 'single judge'}), "
            f"prompt {report.judge.prompt}, key points {report.judge.key_points}."
        ),
        (
            f"{report.n_with_trajectory} tasks have a trajectory, {report.n_judged} were judged; "
            f"{len(report.missing_trajectories)} without trajectory and {len(report.abstains)} abstain (counted as "
            f"failures), {len(report.not_judged)} not judged (left out of the rates)."
        ),
    ]
    if broke := run_broke_line(report.run_broke):
        lines.append(broke)
    if report.human is not None:
        lines.append(f"Agreement with people: {pct(report.human_agreement)}, Cohen's kappa {num(report.cohen_kappa)}.")
    split = report.retrieval_split
    if split is not None and (split.returned.n or split.not_returned.n):
        lines.append(
            f"When route returned an annotated tool: {split.returned.success}/{split.returned.n} succeeded; "
            f"when it did not: {split.not_returned.success}/{split.not_returned.n}."
        )
    if report.first_task:
        span = report.first_task[:10] + ("" if (report.last_task or "")[:10] == report.first_task[:10] else f" to {(report.last_task or '')[:10]}")
        lines.append(f"Tasks run on {span} (tasks are time-varying)." + (f" Agent {report.agent}" + (f", model {report.model}." if report.model else ".") if report.agent else ""))
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
        (
            "Tasks the run itself ended (counted as failures; rerun with --retry-failed)",
            [f"{task_id}: {kind}" for task_id, kind in report.run_broke.items()],
        ),
        ("Task ids not in the task list", report.inputs.unknown_task_ids),
        ("Input problems (skipped)", report.inputs.problems),
        (
            "Questions that differ from the task list (judged with the task list's)",
            [f"{m.task_id}: task list: {m.task_list!r}; trajectory: {m.trajectory!r}" for m in report.inputs.question_mismatches],
        ),
    ]
    return [(title, items) for title, items in found if items]
