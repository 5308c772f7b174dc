"""``python -m evaluation.compare DIR_A DIR_B``: two judged runs side by side.

Per task and per category, with an exact McNemar test on the paired outcomes (the tasks only
one run solved), so a difference within noise is called that. The pairs are the tasks both runs
hold with a verdict in both: a task one run's judge never decided (``not_judged``) has no outcome
to pair, so it is left out and named, never counted as a failure.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from pathlib import Path

from pydantic import BaseModel, Field

from evaluation.json_files import JSONFileError, read_json_model, unreadable
from evaluation.report.files import report_file
from evaluation.report.models import Report
from evaluation.report.render import markdown_row
from evaluation.report.across_runs.repeats import REPEATS_REPORT
from evaluation.report.across_runs.significance import DEFAULT_ALPHA, add_alpha_argument, checked_alpha
from evaluation.report.stats import McNemar, defined, holm, mcnemar_exact, paired_difference_interval, wilson_interval
from evaluation.report.tables import interval, listed_ids, pct, rate_cells
from evaluation.tasks import CATEGORIES
from index.cli.console import HelpFormatter, prepare_text_io
from index.errors import CopilotError

#: Below this share of common tasks the comparison is flagged loudly.
LOW_OVERLAP = 0.5


class CompareError(CopilotError):
    """A judged run cannot be read."""


class CategoryComparison(BaseModel):
    category: str
    n: int
    success_a: int
    success_b: int
    rate_a: float
    rate_b: float
    only_a: int
    only_b: int
    p_value: float
    #: Holm-adjusted for the number of categories compared (per-category tests are many tests).
    p_holm: float


class Comparison(BaseModel):
    run_a: str
    run_b: str
    #: Tasks both runs hold: the paired test and the difference are computed on these only.
    n_tasks: int
    success_a: int
    success_b: int
    rate_a: float
    rate_b: float
    ci95_a: tuple[float, float]
    ci95_b: tuple[float, float]
    #: B - A on the common tasks, with a 95% interval for paired proportions.
    difference: float
    difference_ci95: tuple[float, float]
    mcnemar: McNemar
    alpha: float
    significant: bool
    conclusion: str
    by_category: list[CategoryComparison]
    only_a: list[str] = Field(default_factory=list)
    only_b: list[str] = Field(default_factory=list)
    #: Tasks only one run holds (left out of the paired comparison).
    missing_in_a: list[str] = Field(default_factory=list)
    missing_in_b: list[str] = Field(default_factory=list)
    #: Tasks both runs hold that one run's judge never decided: left out of the pairs.
    unjudged_in_a: list[str] = Field(default_factory=list)
    unjudged_in_b: list[str] = Field(default_factory=list)
    #: Common tasks over all tasks of either run.
    overlap: float = 1.0
    #: Each run over its own full task list, for reference.
    full_a: str = ""
    full_b: str = ""
    warnings: list[str] = Field(default_factory=list)


def _load(directory: Path) -> tuple[Path, Report]:
    """The run's ``report.json`` and what it holds."""
    try:
        path = report_file(directory)
    except FileNotFoundError:
        if any((place / REPEATS_REPORT).is_file() for place in (directory, directory / "judge")):
            # A repeated run, judged or not: "judge the run first" was wrong advice for a judged one.
            raise CompareError(
                f"{directory}: a repeated run (repeats.json), and compare pairs two single runs' verdicts. Compare "
                "repeated runs by each task's pass@1 with 'python -m evaluation.leaderboard RUN_A RUN_B' (a paired "
                "permutation test on every step of its frontier), or compare one repeat of each (RUN/repeat-1)."
            ) from None
        raise CompareError(
            f"{directory}: no report.json (looked in {directory} and {directory / 'judge'}); "
            "judge the run first with 'python -m evaluation.judge'."
        ) from None
    try:
        return path, read_json_model(path, Report)
    except (JSONFileError, OSError) as error:
        raise CompareError(
            unreadable(path, "report.json", error) + "; fix it, or judge the run again to rewrite it."
        ) from None


def _conclusion(test: McNemar, name_a: str, name_b: str, alpha: float) -> str:
    if test.only_a + test.only_b == 0:
        return "The runs succeed on exactly the same tasks: no difference."
    if test.p_value < alpha:
        better = name_a if test.only_a > test.only_b else name_b
        return (
            f"{better} is better: {max(test.only_a, test.only_b)} vs {min(test.only_a, test.only_b)} tasks solved by "
            f"only one run; exact McNemar p = {test.p_value:.3g} < {alpha:g}."
        )
    return (
        f"The difference is within noise: {test.only_a} tasks solved only by {name_a}, {test.only_b} only by "
        f"{name_b}; exact McNemar p = {test.p_value:.3g} >= {alpha:g}."
    )


def _by_category(task_ids: list[str], category: dict[str, str], won_a: list[bool], won_b: list[bool]) -> list[CategoryComparison]:
    categories = [c for c in CATEGORIES if c in category.values()]
    categories += sorted(set(category.values()) - set(categories))
    tests = []
    for name in categories:
        index = [i for i, task_id in enumerate(task_ids) if category[task_id] == name]
        tests.append((name, index, mcnemar_exact([won_a[i] for i in index], [won_b[i] for i in index])))
    adjusted = holm([test.p_value for _, _, test in tests])
    return [
        CategoryComparison(
            category=name,
            n=len(index),
            success_a=sum(won_a[i] for i in index),
            success_b=sum(won_b[i] for i in index),
            rate_a=sum(won_a[i] for i in index) / len(index),
            rate_b=sum(won_b[i] for i in index) / len(index),
            only_a=test.only_a,
            only_b=test.only_b,
            p_value=test.p_value,
            p_holm=p_holm,
        )
        for (name, index, test), p_holm in zip(tests, adjusted, strict=True)
    ]


def _unjudged_warnings(runs: Sequence[tuple[str, list[str]]]) -> list[str]:
    """Tasks one run's judge never decided (its requests failed, or it was not run on them) have
    no outcome: they are left out of the pairs, and said first, before the figures they affect."""
    warnings = []
    for name, unjudged in runs:
        if unjudged:
            warnings.append(
                f"UNJUDGED: {len(unjudged)} tasks both runs hold were never judged in {name} ({listed_ids(unjudged)}) and are "
                "left out of the paired comparison; rerun the judge on that run (it retries only those tasks), "
                "then compare again."
            )
    return warnings


def _rate_text(report: Report) -> str:
    rate, _ = rate_cells(report.success_rate, report.ci95)
    return f"{report.success}/{report.n_with_outcome} = {rate}"


def _left_out(unjudged_a: Sequence[str], unjudged_b: Sequence[str]) -> dict[str, None]:
    """The common tasks either run's judge never decided, A's first, each once (an ordered set)."""
    return dict.fromkeys([*unjudged_a, *unjudged_b])


def compare_reports(a: Report, b: Report, name_a: str, name_b: str, alpha: float = DEFAULT_ALPHA) -> Comparison:
    """Paired comparison on the tasks both runs hold; raises :class:`CompareError` when there are none."""
    rows_a = {row.task_id: row for row in a.tasks}
    rows_b = {row.task_id: row for row in b.tasks}
    common = [task_id for task_id in rows_a if task_id in rows_b]
    missing_in_a = [task_id for task_id in rows_b if task_id not in rows_a]
    missing_in_b = [task_id for task_id in rows_a if task_id not in rows_b]
    union = len(common) + len(missing_in_a) + len(missing_in_b)
    if not common:
        raise CompareError(
            f"{name_a} and {name_b} have no task in common ({len(rows_a)} and {len(rows_b)} tasks): "
            "a paired comparison needs the same tasks; judge both runs against the same --tasks list."
        )
    # An undecided task is not a failure: pairing it as one would credit the other run with a "win"
    # that is the judge endpoint's, not the agent's.
    unjudged_in_a = [task_id for task_id in common if not rows_a[task_id].has_outcome]
    unjudged_in_b = [task_id for task_id in common if not rows_b[task_id].has_outcome]
    left_out = _left_out(unjudged_in_a, unjudged_in_b)
    task_ids = [task_id for task_id in common if task_id not in left_out]
    if not task_ids:
        raise CompareError(
            f"none of the {len(common)} tasks {name_a} and {name_b} share was judged in both runs "
            f"({len(unjudged_in_a)} never judged in {name_a}, {len(unjudged_in_b)} in {name_b}): nothing to pair; "
            "run the judge on both runs (it retries only the unjudged tasks), then compare again."
        )
    category = {task_id: rows_a[task_id].category for task_id in task_ids}
    won_a = [rows_a[task_id].verdict == "success" for task_id in task_ids]
    won_b = [rows_b[task_id].verdict == "success" for task_id in task_ids]
    test = mcnemar_exact(won_a, won_b)
    n = len(task_ids)
    success_a, success_b = sum(won_a), sum(won_b)
    warnings = []
    disagree = [t for t in task_ids if rows_a[t].category != rows_b[t].category]
    if disagree:
        listed = "; ".join(f"{t}: {rows_a[t].category} in {name_a}, {rows_b[t].category} in {name_b}" for t in disagree[:5])
        more = f"; and {len(disagree) - 5} more" if len(disagree) > 5 else ""
        warnings.append(
            f"{len(disagree)} task(s) are in different categories in the two runs ({listed}{more}): the per-category "
            f"table uses {name_a}'s; judge both runs against the same --tasks list."
        )
    overlap = len(common) / union
    if missing_in_a or missing_in_b:
        warnings.append(
            f"{'ONLY ' if overlap < LOW_OVERLAP else ''}{len(common)} of {union} tasks ({overlap:.0%}) are in both runs; the "
            f"comparison uses those only ({len(missing_in_b)} only in {name_a}, {len(missing_in_a)} only in {name_b})."
            + (" With so little overlap the comparison says little about the runs as a whole." if overlap < LOW_OVERLAP else "")
        )
    warnings += _unjudged_warnings([(name_a, unjudged_in_a), (name_b, unjudged_in_b)])
    if (a.judge.models, a.judge.prompt, a.judge.prompt_version) != (b.judge.models, b.judge.prompt, b.judge.prompt_version):
        warnings.append(
            f"the runs were judged differently ({', '.join(a.judge.models)}/{a.judge.prompt} vs "
            f"{', '.join(b.judge.models)}/{b.judge.prompt}): part of any difference may be the judge's."
        )
    by_category = _by_category(task_ids, category, won_a, won_b)
    if len(by_category) > 1:
        warnings.append(
            f"per-category p-values are {len(by_category)} tests: read the Holm-adjusted column, or expect about "
            f"{alpha:g} x {len(by_category)} false alarms among the raw ones."
        )
    return Comparison(
        run_a=name_a,
        run_b=name_b,
        n_tasks=n,
        success_a=success_a,
        success_b=success_b,
        rate_a=success_a / n,
        rate_b=success_b / n,
        # n > 0 (refused above): every interval is defined.
        ci95_a=defined(wilson_interval(success_a, n)),
        ci95_b=defined(wilson_interval(success_b, n)),
        difference=(success_b - success_a) / n,
        difference_ci95=defined(paired_difference_interval(won_a, won_b)),
        mcnemar=test,
        alpha=alpha,
        significant=test.p_value < alpha,
        conclusion=_conclusion(test, name_a, name_b, alpha),
        by_category=by_category,
        only_a=[task_id for task_id, x, y in zip(task_ids, won_a, won_b, strict=True) if x and not y],
        only_b=[task_id for task_id, x, y in zip(task_ids, won_a, won_b, strict=True) if y and not x],
        missing_in_a=missing_in_a,
        missing_in_b=missing_in_b,
        unjudged_in_a=unjudged_in_a,
        unjudged_in_b=unjudged_in_b,
        overlap=overlap,
        full_a=_rate_text(a),
        full_b=_rate_text(b),
        warnings=warnings,
    )


def render(comparison: Comparison, a: Report, b: Report) -> str:
    c = comparison
    out = [f"WARNING: {warning}" for warning in c.warnings if warning.startswith(("SAME", "ONLY", "UNJUDGED"))]
    out += [
        f"A = {c.run_a}: {c.success_a}/{c.n_tasks} = {pct(c.rate_a)} (95% CI {interval(c.ci95_a)})",
        f"B = {c.run_b}: {c.success_b}/{c.n_tasks} = {pct(c.rate_b)} (95% CI {interval(c.ci95_b)})",
        f"B - A = {c.difference * 100:+.1f} pt (95% CI {c.difference_ci95[0] * 100:+.1f} to {c.difference_ci95[1] * 100:+.1f} pt, "
        f"paired, on the {c.n_tasks} common tasks{' judged in both runs' if c.unjudged_in_a or c.unjudged_in_b else ''})",
    ]
    left_out = _left_out(c.unjudged_in_a, c.unjudged_in_b)
    if left_out:
        out.append(
            f"(left out of the pairs, never judged: {len(left_out)} tasks -- "
            f"in A: {', '.join(c.unjudged_in_a) or 'none'}; in B: {', '.join(c.unjudged_in_b) or 'none'})"
        )
    if c.missing_in_a or c.missing_in_b or left_out:
        out.append(f"(over each run's own task list: A {c.full_a}, B {c.full_b})")
    out += [
        "",
        "| category | tasks | A | B | B - A | only A | only B | McNemar p | Holm p |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for row in c.by_category:
        out.append(
            markdown_row(
                [
                    # 0.1%, as the lines above: a whole percent showed 58.3% there as 58% here.
                    row.category, str(row.n), f"{row.success_a} ({pct(row.rate_a)})", f"{row.success_b} ({pct(row.rate_b)})",
                    f"{(row.rate_b - row.rate_a) * 100:+.1f} pt", str(row.only_a), str(row.only_b), f"{row.p_value:.3g}",
                    f"{row.p_holm:.3g}",
                ]
            )
        )
    out.append(
        f"| **all** | {c.n_tasks} | {c.success_a} ({pct(c.rate_a)}) | {c.success_b} ({pct(c.rate_b)}) | "
        f"{(c.rate_b - c.rate_a) * 100:+.1f} pt | {c.mcnemar.only_a} | {c.mcnemar.only_b} | {c.mcnemar.p_value:.3g} | |"
    )
    out += ["", c.conclusion]
    rows_a = {row.task_id: row for row in a.tasks}
    rows_b = {row.task_id: row for row in b.tasks}
    if c.only_a or c.only_b:
        out += [
            "",
            "Tasks with different outcomes:",
            "",
            "| task | category | A | B | question |",
            "|---|---|---|---|---|",
        ]
        for task_id in [*c.only_a, *c.only_b]:
            row = rows_a[task_id]
            question = row.question[:70] + ("..." if len(row.question) > 70 else "")
            out.append(markdown_row([task_id, row.category, row.verdict, rows_b[task_id].verdict, question]))
    for warning in c.warnings:
        out.append(f"\nwarning: {warning}")
    return "\n".join(out) + "\n"


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m evaluation.compare",
        description="Compare two judged runs per task and category, with an exact McNemar test.",
        formatter_class=HelpFormatter,
    )
    parser.add_argument("run_a", type=Path, help="judge output directory of run A (or the run's log directory)")
    parser.add_argument("run_b", type=Path, help="judge output directory of run B")
    add_alpha_argument(parser)
    parser.add_argument("--json", type=Path, metavar="FILE", help="also write the comparison as JSON")
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    prepare_text_io()
    args = build_parser().parse_args(argv)
    try:
        alpha = checked_alpha(args.alpha)
        (path_a, a), (path_b, b) = _load(args.run_a), _load(args.run_b)
        comparison = compare_reports(a, b, str(args.run_a), str(args.run_b), alpha)
        if path_a.resolve() == path_b.resolve():
            comparison.warnings.insert(0, f"SAME REPORT: both runs are {path_a}; nothing is compared.")
        if args.json:
            try:
                args.json.write_text(json.dumps(comparison.model_dump(mode="json"), indent=1) + "\n", encoding="utf-8")
            except OSError as error:
                raise CompareError(f"cannot write {args.json} ({error.strerror}).") from None
    except CopilotError as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    sys.stdout.write(render(comparison, a, b))
    return 0


