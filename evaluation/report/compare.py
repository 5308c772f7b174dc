"""``python -m evaluation.report.compare DIR_A DIR_B``: two judged runs side by side.

Per task and per category, with an exact McNemar test on the paired outcomes (the tasks only
one run solved), so a difference within noise is called that. A task missing from one run
counts as a failure there, as in the reports.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from pathlib import Path

from pydantic import BaseModel, Field, ValidationError

from evaluation.report.files import load_report
from evaluation.report.models import Report
from evaluation.report.stats import McNemar, mcnemar_exact, wilson_interval
from evaluation.tasks import CATEGORIES
from index.errors import CopilotError

DEFAULT_ALPHA = 0.05


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


class Comparison(BaseModel):
    run_a: str
    run_b: str
    n_tasks: int
    success_a: int
    success_b: int
    rate_a: float
    rate_b: float
    ci95_a: tuple[float, float]
    ci95_b: tuple[float, float]
    mcnemar: McNemar
    alpha: float
    significant: bool
    conclusion: str
    by_category: list[CategoryComparison]
    only_a: list[str] = Field(default_factory=list)
    only_b: list[str] = Field(default_factory=list)
    missing_in_a: list[str] = Field(default_factory=list)
    missing_in_b: list[str] = Field(default_factory=list)
    warnings: list[str] = Field(default_factory=list)


def _load(directory: Path) -> Report:
    try:
        return load_report(directory)
    except FileNotFoundError:
        raise CompareError(
            f"{directory}: no report.json (looked in {directory} and {directory / 'judge'}); "
            "judge the run first with 'python -m evaluation.judge'."
        ) from None
    except (ValidationError, ValueError) as error:
        raise CompareError(f"{directory}: report.json is unreadable ({str(error).splitlines()[0]}).") from None


def compare_reports(a: Report, b: Report, name_a: str, name_b: str, alpha: float = DEFAULT_ALPHA) -> Comparison:
    rows_a = {row.task_id: row for row in a.tasks}
    rows_b = {row.task_id: row for row in b.tasks}
    task_ids = list(rows_a) + [task_id for task_id in rows_b if task_id not in rows_a]
    category = {task_id: (rows_a.get(task_id) or rows_b[task_id]).category for task_id in task_ids}
    won_a = [task_id in rows_a and rows_a[task_id].verdict == "success" for task_id in task_ids]
    won_b = [task_id in rows_b and rows_b[task_id].verdict == "success" for task_id in task_ids]
    test = mcnemar_exact(won_a, won_b)
    significant = test.p_value < alpha
    n = len(task_ids)
    success_a, success_b = sum(won_a), sum(won_b)
    if test.only_a + test.only_b == 0:
        conclusion = "The runs succeed on exactly the same tasks: no difference."
    elif significant:
        better = name_a if test.only_a > test.only_b else name_b
        conclusion = (
            f"{better} is better: {max(test.only_a, test.only_b)} vs {min(test.only_a, test.only_b)} tasks solved by only "
            f"one run; exact McNemar p = {test.p_value:.3g} < {alpha:g}."
        )
    else:
        conclusion = (
            f"The difference is within noise: {test.only_a} tasks solved only by {name_a}, {test.only_b} only by "
            f"{name_b}; exact McNemar p = {test.p_value:.3g} >= {alpha:g}."
        )
    categories = [c for c in CATEGORIES if c in category.values()]
    categories += sorted(set(category.values()) - set(categories))
    by_category = []
    for name in categories:
        index = [i for i, task_id in enumerate(task_ids) if category[task_id] == name]
        sub = mcnemar_exact([won_a[i] for i in index], [won_b[i] for i in index])
        count = len(index)
        by_category.append(
            CategoryComparison(
                category=name,
                n=count,
                success_a=sum(won_a[i] for i in index),
                success_b=sum(won_b[i] for i in index),
                rate_a=sum(won_a[i] for i in index) / count,
                rate_b=sum(won_b[i] for i in index) / count,
                only_a=sub.only_a,
                only_b=sub.only_b,
                p_value=sub.p_value,
            )
        )
    warnings = []
    if (a.judge.models, a.judge.prompt) != (b.judge.models, b.judge.prompt):
        warnings.append(
            f"the runs were judged differently ({', '.join(a.judge.models)}/{a.judge.prompt} vs "
            f"{', '.join(b.judge.models)}/{b.judge.prompt}): part of any difference may be the judge's."
        )
    missing_in_a = [task_id for task_id in task_ids if task_id not in rows_a]
    missing_in_b = [task_id for task_id in task_ids if task_id not in rows_b]
    if missing_in_a or missing_in_b:
        warnings.append(
            f"the task lists differ ({len(missing_in_a)} tasks only in {name_b}, {len(missing_in_b)} only in {name_a}); "
            "a missing task counts as a failure."
        )
    return Comparison(
        run_a=name_a,
        run_b=name_b,
        n_tasks=n,
        success_a=success_a,
        success_b=success_b,
        rate_a=success_a / n if n else 0.0,
        rate_b=success_b / n if n else 0.0,
        ci95_a=wilson_interval(success_a, n),
        ci95_b=wilson_interval(success_b, n),
        mcnemar=test,
        alpha=alpha,
        significant=significant,
        conclusion=conclusion,
        by_category=by_category,
        only_a=[task_id for task_id, x, y in zip(task_ids, won_a, won_b, strict=True) if x and not y],
        only_b=[task_id for task_id, x, y in zip(task_ids, won_a, won_b, strict=True) if y and not x],
        missing_in_a=missing_in_a,
        missing_in_b=missing_in_b,
        warnings=warnings,
    )


def render(comparison: Comparison, a: Report, b: Report) -> str:
    c = comparison
    out = [
        f"A = {c.run_a}: {c.success_a}/{c.n_tasks} = {c.rate_a:.1%} (95% CI {c.ci95_a[0]:.1%}-{c.ci95_a[1]:.1%})",
        f"B = {c.run_b}: {c.success_b}/{c.n_tasks} = {c.rate_b:.1%} (95% CI {c.ci95_b[0]:.1%}-{c.ci95_b[1]:.1%})",
        "",
        "| category | tasks | A | B | B - A | only A | only B | McNemar p |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for row in c.by_category:
        out.append(
            f"| {row.category} | {row.n} | {row.success_a} ({row.rate_a:.0%}) | {row.success_b} ({row.rate_b:.0%}) | "
            f"{(row.rate_b - row.rate_a) * 100:+.1f} pt | {row.only_a} | {row.only_b} | {row.p_value:.3g} |"
        )
    out.append(
        f"| **all** | {c.n_tasks} | {c.success_a} ({c.rate_a:.0%}) | {c.success_b} ({c.rate_b:.0%}) | "
        f"{(c.rate_b - c.rate_a) * 100:+.1f} pt | {c.mcnemar.only_a} | {c.mcnemar.only_b} | {c.mcnemar.p_value:.3g} |"
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
            row = rows_a.get(task_id) or rows_b[task_id]
            verdict_a = rows_a[task_id].verdict if task_id in rows_a else "missing"
            verdict_b = rows_b[task_id].verdict if task_id in rows_b else "missing"
            question = row.question[:70] + ("..." if len(row.question) > 70 else "")
            out.append(f"| {task_id} | {row.category} | {verdict_a} | {verdict_b} | {question} |")
    for warning in c.warnings:
        out.append(f"\nwarning: {warning}")
    return "\n".join(out) + "\n"


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m evaluation.report.compare",
        description="Compare two judged runs per task and category, with an exact McNemar test.",
    )
    parser.add_argument("run_a", type=Path, help="judge output directory of run A (or the run's log directory)")
    parser.add_argument("run_b", type=Path, help="judge output directory of run B")
    parser.add_argument(
        "--alpha", type=float, default=DEFAULT_ALPHA, help=f"significance level (default {DEFAULT_ALPHA})"
    )
    parser.add_argument("--json", type=Path, metavar="FILE", help="also write the comparison as JSON")
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        if not 0 < args.alpha < 1:
            raise CompareError(f"--alpha must be between 0 and 1 (got {args.alpha}).")
        a, b = _load(args.run_a), _load(args.run_b)
        comparison = compare_reports(a, b, str(args.run_a), str(args.run_b), args.alpha)
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


