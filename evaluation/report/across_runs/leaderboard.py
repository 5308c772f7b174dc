"""``python -m evaluation.leaderboard DIR...``: judged runs side by side, with the cost-success
frontier.

One row per run (a judged run directory, or a repeated run whose ``repeats.json`` gives pass@k):
success with its 95% interval, pass@k, mean tokens and cost per task, total cost, turns,
route/execute calls and tool errors. The paper's plot -- success against (log) cost per task --
marks the Pareto frontier: the runs no other run beats on both cost and success. Neighbours on
the frontier are compared on their common tasks -- single runs with the exact McNemar test, a
repeated run by each task's pass@1 (a paired permutation test) -- so a step up the frontier is
called noise when it is. Runs judged by different judges or prompts are flagged: their
numbers are not comparable.
"""

from __future__ import annotations

import argparse
import itertools
import json
import math
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import TypeVar

from pydantic import BaseModel, Field

from evaluation.json_files import JSONFileError, read_json_model, unreadable
from evaluation.report.files import report_file
from index.storage.atomic import write_atomic
from evaluation.report.models import Report
from evaluation.report.plots import figure_png, literal, pyplot
from evaluation.report.render import esc, html_page, html_table, markdown_table, markdown_text, png_img
from evaluation.report.across_runs.repeats import REPEATS_REPORT, RepeatsReport
from evaluation.report.across_runs.significance import DEFAULT_ALPHA, add_alpha_argument, checked_alpha
from evaluation.report.stats import holm, mcnemar_exact, paired_difference_interval, paired_rate_difference_interval, sign_flip_p_value
from evaluation.report.tables import Table, money, num, pct, rate_cells
from index.cli.console import HelpFormatter, prepare_text_io
from index.errors import CopilotError

KeyT = TypeVar("KeyT")
REJUDGE = "; fix it, or judge the run again to rewrite it."


class LeaderboardError(CopilotError):
    """A run directory cannot be read as a judged run."""


class Entry(BaseModel):
    name: str
    path: str
    agent: str | None = None
    model: str | None = None
    n_tasks: int
    repeats: int = 1
    #: ``None`` when the run has no verdict at all (left out of the ranking's frontier).
    success_rate: float | None
    #: ``None`` exactly when ``success_rate`` is.
    ci95: tuple[float, float] | None
    #: pass@n over the repeats (``None`` for a single run).
    pass_at_n: float | None = None
    pass_hat_n: float | None = None
    #: The tasks pass@n and pass^n rest on (those with n judged attempts; ``None``: not known).
    tasks_at_n: int | None = None
    tokens: float | None = None
    cost: float | None = None
    total_cost: float | None = None
    turns: float | None = None
    #: Wall-clock seconds per task (over the tasks whose logs have times).
    seconds: float | None = None
    route_calls: float | None = None
    execute_calls: float | None = None
    tool_errors: float | None = None
    judge: str
    prompt: str
    judge_key: str
    on_frontier: bool = False
    #: task id -> (successes, attempts with an outcome): (1, 1) or (0, 1) for a single run, k of n
    #: for a repeated one; (0, 0) for a task with no outcome, which the frontier's paired tests
    #: leave out instead of pairing it as a failure.
    attempts: dict[str, tuple[int, int]] = Field(default_factory=dict)
    #: Tasks the judge never decided (its requests failed), left out of the rate; for repeated runs,
    #: task attempts.
    not_judged: int = 0


class FrontierStep(BaseModel):
    cheaper: str
    dearer: str
    common_tasks: int
    #: Tasks the cheaper run did better on (single runs: solved, and the dearer did not).
    only_cheaper: int
    only_dearer: int
    #: B - A on the common tasks; ``None`` (and no interval) when there is none: not tested.
    difference: float | None
    difference_ci95: tuple[float, float] | None
    p_value: float
    #: Holm-adjusted for the number of steps tested (each step is one more test); what decides.
    p_holm: float | None = None
    #: ``p_holm`` below alpha (a step not tested is not significant).
    significant: bool
    #: ``McNemar`` (both single runs) or ``permutation`` (a repeated run: per-task pass@1).
    test: str = "McNemar"


class Leaderboard(BaseModel):
    entries: list[Entry]
    #: ``cost`` when every run logged cost ($0 is a logged cost), else ``tokens``.
    axis: str
    frontier: list[str]
    steps: list[FrontierStep]
    alpha: float
    warnings: list[str] = Field(default_factory=list)


def _judge_key(report: Report) -> str:
    judge = report.judge
    return judge.config_hash or f"{','.join(judge.models)}/{judge.prompt}/v{judge.prompt_version}/{judge.key_points}"


def _run_label(directory: Path) -> str:
    """The directory a run is known by: for ``RUN/judge`` (the judge's default output), ``RUN``."""
    if directory.name == "judge" and directory.parent.name:
        return directory.parent.name
    return directory.name or str(directory)


def _name(agent: str | None, model: str | None, directory: Path, taken: set[str]) -> str:
    """A name no other run has: the agent and model, then its directory, then its path, then a number.

    Runs of the same agent and model are the usual case (a rerun, another day); names are the
    keys of the table, the frontier and its steps, so two runs sharing one would be mixed up."""
    label = " ".join(part for part in (agent, model) if part)
    candidates = [label, f"{label} ({_run_label(directory)})", f"{label} ({directory})"] if label else [
        _run_label(directory),
        str(directory),
    ]
    numbered = (f"{candidates[-1]} #{number}" for number in itertools.count(2))  # the same directory twice
    name = next(candidate for candidate in itertools.chain(candidates, numbered) if candidate not in taken)
    taken.add(name)
    return name


def _repeats(directory: Path) -> RepeatsReport | None:
    for candidate in (directory / REPEATS_REPORT, directory / "judge" / REPEATS_REPORT):
        if candidate.is_file():
            try:
                return read_json_model(candidate, RepeatsReport)
            except (JSONFileError, OSError) as error:
                raise LeaderboardError(unreadable(candidate, REPEATS_REPORT, error) + REJUDGE) from None
    return None


def load_entry(directory: Path, taken: set[str]) -> Entry:
    repeats = _repeats(directory)
    if repeats is not None:
        n = repeats.n_repeats
        efficiency = repeats.efficiency
        first = repeats.repeats[0] if repeats.repeats else None
        return Entry(
            name=_name(repeats.agent, repeats.model, directory, taken),
            path=str(directory),
            agent=repeats.agent,
            model=repeats.model,
            n_tasks=repeats.n_tasks,
            repeats=n,
            success_rate=repeats.pass_at_1,
            ci95=repeats.pass_at_1_ci95,
            pass_at_n=repeats.pass_at_k.get(n),
            pass_hat_n=repeats.pass_hat_k.get(n),
            tasks_at_n=repeats.tasks_at_k.get(n) if repeats.tasks_at_k else None,
            tokens=efficiency.tokens,
            cost=efficiency.cost,
            total_cost=repeats.total_cost,
            turns=efficiency.turns,
            seconds=efficiency.seconds,
            route_calls=efficiency.route_calls,
            execute_calls=efficiency.execute_calls,
            tool_errors=efficiency.tool_errors,
            judge=first.judge if first else "",
            prompt=first.prompt if first else "",
            judge_key=(first.judge_config or f"{first.judge}/{first.prompt}") if first else "",
            attempts={t.task_id: (t.successes, t.n) for t in repeats.tasks},
            not_judged=sum(t.outcomes.count("not_judged") for t in repeats.tasks),
        )
    try:
        path = report_file(directory)
    except FileNotFoundError:
        raise LeaderboardError(
            f"{directory}: no report.json or repeats.json (looked in {directory} and {directory / 'judge'}); "
            "judge the run first with 'python -m evaluation.judge'."
        ) from None
    try:
        report = read_json_model(path, Report)
    except (JSONFileError, OSError) as error:
        raise LeaderboardError(unreadable(path, "report.json", error) + REJUDGE) from None
    efficiency = report.efficiency.get("all")
    return Entry(
        name=_name(report.agent, report.model, directory, taken),
        path=str(directory),
        agent=report.agent,
        model=report.model,
        n_tasks=report.n_tasks,
        success_rate=report.success_rate,
        ci95=report.ci95,
        tokens=efficiency.tokens if efficiency else None,
        cost=efficiency.cost if efficiency else None,
        total_cost=report.usage.cost,
        turns=efficiency.turns if efficiency else None,
        seconds=efficiency.seconds if efficiency else None,
        route_calls=efficiency.route_calls if efficiency else None,
        execute_calls=efficiency.execute_calls if efficiency else None,
        tool_errors=efficiency.tool_errors if efficiency else None,
        judge=", ".join(report.judge.models),
        prompt=report.judge.prompt,
        judge_key=_judge_key(report),
        attempts={row.task_id: (int(row.verdict == "success"), 1) if row.has_outcome else (0, 0) for row in report.tasks},
        not_judged=len(report.not_judged),
    )


def pareto_frontier(points: Sequence[tuple[KeyT, float, float]]) -> list[KeyT]:
    """Keys of the ``(key, cost, success)`` points no other point dominates (cost <= and
    success >=, one of them strictly), cheapest first (ties in the order given). A point is
    compared with every other point, not with every other key: equal keys stay two points. Values
    within rounding of each other are equal: a cost summed in another order ($0.012499999999999999
    vs $0.0125) must not make one of two identical runs dominate the other."""

    def below(x: float, y: float) -> bool:
        return x < y and not math.isclose(x, y, rel_tol=1e-9, abs_tol=1e-12)

    frontier = []
    for index, (key, cost, success) in enumerate(points):
        dominated = any(
            not below(cost, other_cost)
            and not below(other_success, success)
            and (below(other_cost, cost) or below(success, other_success))
            for other, (_, other_cost, other_success) in enumerate(points)
            if other != index
        )
        if not dominated:
            frontier.append((cost, -success, index, key))
    return [key for _, _, _, key in sorted(frontier, key=lambda point: point[:3])]


def _step(a: Entry, b: Entry) -> FrontierStep:
    """The paired comparison of two neighbours on the frontier (``significant`` is decided over all
    steps, by :func:`build_leaderboard`)."""
    # The pairs: tasks both runs hold with an outcome in both (an undecided task is no failure).
    pairs = [(x, y) for task, x in a.attempts.items() if x[1] and (y := b.attempts.get(task, (0, 0)))[1]]
    # Each task's pass@1, B's less A's: what a repeated run's success column shows. A task's majority
    # outcome (how repeated runs were compared before) made 1 of 3 a failure and could reverse the
    # sign of the difference the table showed. For two single runs each is -1, 0 or 1.
    differences = [y[0] / y[1] - x[0] / x[1] for x, y in pairs]
    if a.repeats == 1 and b.repeats == 1:
        won_a, won_b = [x[0] == 1 for x, _ in pairs], [y[0] == 1 for _, y in pairs]
        test, p_value = "McNemar", mcnemar_exact(won_a, won_b).p_value
        interval = paired_difference_interval(won_a, won_b)
    else:
        test, p_value = "permutation", sign_flip_p_value(differences)
        interval = paired_rate_difference_interval([x for x, _ in pairs], [y for _, y in pairs])
    return FrontierStep(
        cheaper=a.name,
        dearer=b.name,
        common_tasks=len(pairs),
        only_cheaper=sum(1 for d in differences if d < 0),
        only_dearer=sum(1 for d in differences if d > 0),
        difference=math.fsum(differences) / len(pairs) if pairs else None,
        difference_ci95=interval,
        p_value=p_value,
        significant=False,
        test=test,
    )


def build_leaderboard(entries: list[Entry], alpha: float = DEFAULT_ALPHA) -> Leaderboard:
    # $0 is a logged cost (a local model): it stays on the cost axis, with the warning below that
    # it is off the log-scale plot. It used to switch the whole board to tokens.
    axis = "cost" if entries and all(e.cost is not None for e in entries) else "tokens"
    # Keyed by the entry itself, not its name: the frontier is a set of runs.
    points = [
        (e, getattr(e, axis), e.success_rate)
        for e in entries
        if getattr(e, axis) is not None and e.success_rate is not None
    ]
    on_frontier = pareto_frontier(points)  # type: ignore[arg-type]
    for entry in on_frontier:
        entry.on_frontier = True
    frontier = [entry.name for entry in on_frontier]
    steps = [_step(a, b) for a, b in zip(on_frontier, on_frontier[1:], strict=False)]
    tested = [step for step in steps if step.difference is not None]
    for step, adjusted in zip(tested, holm([step.p_value for step in tested]), strict=True):
        step.p_holm = adjusted
        step.significant = adjusted < alpha
    warnings = []
    keys = {e.judge_key for e in entries}
    if len(keys) > 1:
        listed = "; ".join(f"{e.name}: {e.judge}/{e.prompt}" for e in entries)
        warnings.append(
            f"the runs were judged by different judges or prompts ({listed}): their success rates are not comparable; "
            "judge them again with the same --model and --prompt."
        )
    unjudged = [e for e in entries if e.not_judged]
    if unjudged:
        listed = ", ".join(f"{e.name}: {e.not_judged} of {e.n_tasks * e.repeats}" for e in unjudged)
        warnings.append(
            f"tasks never judged (the judge's requests failed) are left out of the success rates and of the frontier's "
            f"paired tests ({listed}): those rates rest on fewer tasks; rerun the judge on those runs (it retries "
            "only the unjudged tasks), then the leaderboard."
        )
    missing = [e.name for e in entries if getattr(e, axis) is None]
    if missing:
        warnings.append(f"no {axis} logged for {', '.join(missing)}: left out of the frontier.")
    unplotted = [e.name for e in entries if (value := getattr(e, axis)) is not None and value <= 0]
    if unplotted:
        warnings.append(
            f"0 {axis} per task logged for {', '.join(unplotted)}: in the tables and the frontier, but not on the plot "
            "(its axis is logarithmic, and has no 0)."
        )
    if axis == "tokens" and entries:
        warnings.append("not every run logged cost (pass --price-table to the runner): the frontier uses tokens per task.")
    task_sets = {frozenset(e.attempts) for e in entries if e.attempts}
    if len(task_sets) > 1:
        sizes = ", ".join(f"{e.name}: {len(e.attempts)}" for e in entries)
        shared = len(frozenset.intersection(*task_sets))
        warnings.append(
            f"the runs hold different task sets ({sizes}; {shared} in all): each success rate is over its own "
            "tasks, so the rates and the frontier do not compare like with like; judge every run with the same "
            "--tasks list (a missing task then counts as a failure)."
        )
    for step in steps:
        if step.common_tasks == 0:
            warnings.append(f"{step.cheaper} and {step.dearer} share no task: their step is not tested.")
    return Leaderboard(entries=entries, axis=axis, frontier=frontier, steps=steps, alpha=alpha, warnings=warnings)


# ---------------------------------------------------------------------------------- rendering


def _over(entry: Entry) -> str:
    """How many tasks pass@n rests on, when fewer than the run's (a task short of n judged
    attempts is not in it): the figure would otherwise read as one over every task."""
    if entry.tasks_at_n is None or entry.tasks_at_n >= entry.n_tasks:
        return ""
    return f" (over {entry.tasks_at_n} task{'' if entry.tasks_at_n == 1 else 's'})"


def tables(board: Leaderboard) -> list[Table]:
    differs = len({e.judge_key for e in board.entries}) > 1
    # A run with no rate last: its old key, -1.0, tied with a 100% run and ranked it near the top.
    ranked = sorted(board.entries, key=lambda e: (e.success_rate is None, -(e.success_rate or 0.0)))
    runs = Table(
        "Runs",
        [
            "run", "tasks", "repeats", "success", "95% CI", "pass@n", "pass^n", "tokens/task", "cost/task ($)",
            "total cost ($)", "time/task (s)", "turns", "route", "execute", "tool errors", "judge", "frontier",
        ],
        [
            [
                e.name,
                str(e.n_tasks),
                str(e.repeats),
                *rate_cells(e.success_rate, e.ci95),
                pct(e.pass_at_n) + _over(e) if e.pass_at_n is not None else "",
                pct(e.pass_hat_n) + _over(e) if e.pass_hat_n is not None else "",
                num(e.tokens, 0),
                money(e.cost),
                money(e.total_cost),
                num(e.seconds, 1),
                num(e.turns, 1),
                num(e.route_calls, 1),
                num(e.execute_calls, 1),
                num(e.tool_errors, 1),
                f"{e.judge}/{e.prompt}" + (" (differs!)" if differs else ""),
                "yes" if e.on_frontier else "",
            ]
            for e in ranked
        ],
        "Success over each run's task list (a missing task is a failure; a task never judged is left out); for "
        "repeated runs, pass@1 "
        "with its interval over tasks, and pass@n / pass^n over all n repeats, on the tasks judged n times (how many "
        "is said when fewer than the run's). Means are per task.",
    )
    steps = Table(
        "Steps along the cost-success frontier",
        ["cheaper", "dearer", "common tasks", "better cheaper", "better dearer", "difference", "95% CI", "p", "Holm p", "test", "verdict"],
        [
            [
                s.cheaper,
                s.dearer,
                str(s.common_tasks),
                str(s.only_cheaper),
                str(s.only_dearer),
                *(
                    (
                        f"{s.difference * 100:+.1f} pt",
                        f"{s.difference_ci95[0] * 100:+.1f} to {s.difference_ci95[1] * 100:+.1f} pt",
                        f"{s.p_value:.3g}",
                        f"{s.p_holm:.3g}" if s.p_holm is not None else "",
                        s.test,
                        "significant" if s.significant else "within noise",
                    )
                    if s.difference is not None and s.difference_ci95 is not None
                    else ("", "", "", "", "", "not tested (no common task)")
                ),
            ]
            for s in board.steps
        ],
        f"On the tasks both runs hold (alpha {board.alpha:g}): two single runs by the exact McNemar test (better: solved "
        "by one run only); with a repeated run, by each task's pass@1, the difference with Newcombe's interval at each "
        "run's effective size and p from a paired permutation test (better: a higher pass@1). The verdict is "
        "the Holm-adjusted p's: each step is one more test.",
    )
    return [runs, steps] if board.steps else [runs]


def frontier_figure(board: Leaderboard) -> object:
    plt = pyplot()
    figure, axes = plt.subplots(figsize=(7, 4.2))
    axis = board.axis
    shown = [
        (e, getattr(e, axis), e.success_rate * 100)
        for e in board.entries
        if getattr(e, axis) is not None and getattr(e, axis) > 0 and e.success_rate is not None  # see the warnings
    ]
    for entry, x, y in shown:
        axes.scatter([x], [y], s=60, color="#F58518" if entry.on_frontier else "#4C78A8", zorder=3)
        if entry.ci95 is not None:
            low, high = entry.ci95
            axes.errorbar([x], [y], yerr=[[max(0.0, y - low * 100)], [max(0.0, high * 100 - y)]], color="#999", capsize=3, zorder=2)
        axes.annotate(literal(entry.name), (x, y), textcoords="offset points", xytext=(6, 4), fontsize=8)
    on = sorted((x, y) for e, x, y in shown if e.on_frontier)
    if on:
        axes.step([p[0] for p in on], [p[1] for p in on], where="post", color="#F58518", label="Pareto frontier")
        axes.legend(loc="lower right")
    axes.set_xscale("log")
    axes.set_ylim(0, 100)
    axes.set_xlabel("cost per task, $ (log)" if axis == "cost" else "tokens per task (log)")
    axes.set_ylabel("success rate, % (95% CI)")
    axes.set_title("Cost vs success")
    return figure


def render_markdown(board: Leaderboard, plot_file: str | None) -> str:
    out = ["# Leaderboard", ""]
    out += [f"- warning: {markdown_text(warning)}" for warning in board.warnings]
    frontier = " -> ".join(markdown_text(name) for name in board.frontier) or "none"
    out += [f"- Pareto frontier ({board.axis} vs success): {frontier}", ""]
    if plot_file:
        out += [f"![cost vs success]({plot_file})", ""]
    for table in tables(board):
        out += markdown_table(table)
    return "\n".join(out)


def render_html(board: Leaderboard, plot: bytes | None) -> str:
    body = ["<h1>Leaderboard</h1>"]
    body += [f"<p class='failure'>warning: {esc(warning)}</p>" for warning in board.warnings]
    body.append(f"<p class='note'>Pareto frontier ({esc(board.axis)} vs success): {esc(' -> '.join(board.frontier) or 'none')}</p>")
    if plot:
        body.append("<div class='plots'>" + png_img("cost vs success", plot) + "</div>")
    body += [html_table(table) for table in tables(board)]
    return html_page("Leaderboard", body)


def write_leaderboard(board: Leaderboard, out: Path) -> list[Path]:
    try:
        out.mkdir(parents=True, exist_ok=True)
        plot = figure_png(frontier_figure(board)) if any(getattr(e, board.axis) for e in board.entries) else None
        files = [out / "leaderboard.json", out / "leaderboard.md", out / "leaderboard.html"]
        write_atomic(files[0], json.dumps(board.model_dump(mode="json", exclude={"entries": {"__all__": {"attempts"}}}), indent=1) + "\n")
        plot_file = None
        if plot:
            write_atomic(out / "leaderboard.png", plot)
            plot_file = "leaderboard.png"
        write_atomic(files[1], render_markdown(board, plot_file))
        write_atomic(files[2], render_html(board, plot))
    except OSError as error:
        raise LeaderboardError(f"cannot write the leaderboard to {out} ({error.strerror or error}); pass --out DIR.") from None
    return files


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m evaluation.leaderboard",
        description="Judged runs side by side: success, pass@k, tokens, cost, calls, and the cost-success frontier.",
        formatter_class=HelpFormatter,
    )
    parser.add_argument("runs", nargs="+", type=Path, help="judged run directories (or their judge/ directories)")
    parser.add_argument("--out", type=Path, default=Path("leaderboard"), help="where leaderboard.md/.html/.json go (default ./leaderboard)")
    add_alpha_argument(parser)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    prepare_text_io()
    args = build_parser().parse_args(argv)
    try:
        alpha = checked_alpha(args.alpha)
        taken: set[str] = set()
        board = build_leaderboard([load_entry(path, taken) for path in args.runs], alpha)
        files = write_leaderboard(board, args.out)
    except CopilotError as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    sys.stdout.write(render_markdown(board, None) + "\n")
    for path in files:
        print(f"wrote {path}", file=sys.stderr)
    return 0

