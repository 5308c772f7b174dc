"""``repeats.json``/``.md``/``.html``: the repeats report as numbers, tables and a plot."""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from index.storage.atomic import write_atomic
from evaluation.report.plots import figure_png, pyplot
from evaluation.report.render import esc, html_page, html_table, markdown_table, markdown_text, png_img
from evaluation.report.across_runs.repeats import REPEATS_REPORT, RepeatsReport
from evaluation.report.tables import Table, interval, num, pct, with_interval


def _ks(report: RepeatsReport) -> list[int]:
    """The k shown in tables: 1, 2, 3, 5, 10 … and n (all of them when n is small)."""
    n = report.n_repeats
    if n <= 5:
        return report.ks
    return sorted({k for k in (1, 2, 3, 5, 10, 20, n) if k <= n})


def tables(report: RepeatsReport) -> list[Table]:
    ks = _ks(report)
    overall = Table(
        f"Across {report.n_repeats} repeats",
        ["measure", *[f"k={k}" for k in ks]],
        [
            ["pass@k", *[pct(report.pass_at_k.get(k)) for k in ks]],
            ["pass^k", *[pct(report.pass_hat_k.get(k)) for k in ks]],
            ["tasks", *[str(report.tasks_at_k.get(k, 0)) for k in ks]],
        ],
        (
            f"pass@1 {with_interval(report.pass_at_1, report.pass_at_1_ci95)}"
            f"{', tasks as units' if report.pass_at_1 is not None else ''}; "
            f"sd between repeats {pct(report.between_repeats_sd)}; mean within-task variance "
            f"{num(report.within_task_variance, 3)}; {report.flaky_tasks} of {report.n_tasks} tasks changed outcome "
            "between repeats. pass@k: at least one of k attempts succeeds; pass^k: all k do (unbiased estimators); "
            "tasks: those with at least k judged attempts, which pass@k and pass^k are over."
        ),
    )
    repeats = Table(
        "Repeats",
        ["repeat", "tasks", "success", "rate", "first task", "last task", "judge", "prompt"],
        [
            [
                r.name,
                str(r.n_tasks),
                str(r.success),
                pct(r.success_rate),
                (r.first_task or "")[:19],
                (r.last_task or "")[:19],
                r.judge,
                r.prompt,
            ]
            for r in report.repeats
        ],
        "Tasks are time-varying: each repeat's dates are those of its first and last task.",
    )
    n = report.n_repeats
    categories = Table(
        "By category",
        ["category", "tasks", "pass@1", "95% CI", f"pass@{n}", f"pass^{n}", f"tasks with {n} attempts"],
        [
            [
                name, str(c.tasks), pct(c.pass_at_1), interval(c.pass_at_1_ci95) if c.pass_at_1_ci95 else "",
                pct(c.pass_at_n), pct(c.pass_hat_n), "" if c.tasks_at_n is None else str(c.tasks_at_n),
            ]
            for name, c in report.by_category.items()
        ],
        "pass@1's interval: tasks as units (Wilson at the Kish effective size).",
    )
    tasks = Table(
        "Tasks",
        ["task", "category", "successes", "pass@1", f"pass@{n}", f"pass^{n}", "outcomes", "question"],
        [
            [
                t.task_id,
                t.category,
                f"{t.successes}/{t.n}",
                pct(t.pass_at_1),
                pct(t.pass_at_k.get(n)),
                pct(t.pass_hat_k.get(n)),
                " ".join(str(o) for o in t.outcomes),
                t.question[:80] + ("..." if len(t.question) > 80 else ""),
            ]
            for t in report.tasks
        ],
    )
    return [overall, repeats, categories, tasks]


def pass_k_figure(report: RepeatsReport) -> Any:
    plt = pyplot()
    figure, axes = plt.subplots(figsize=(6, 3.6))
    ks = report.ks
    # A k no task has that many judged attempts for has no point (pass_at_k lacks it).
    shown = [k for k in ks if k in report.pass_at_k]
    axes.plot(shown, [report.pass_at_k[k] * 100 for k in shown], marker="o", label="pass@k (any of k succeeds)")
    axes.plot(shown, [report.pass_hat_k[k] * 100 for k in shown], marker="s", label="pass^k (all k succeed)")
    axes.set_xticks(ks)
    axes.set_ylim(0, 100)
    axes.set_xlabel("k (attempts)")
    axes.set_ylabel("% of tasks")
    axes.set_title(f"pass@k and pass^k over {report.n_repeats} repeats")
    axes.legend(loc="lower left")
    return figure


def _markdown(report: RepeatsReport, plot_file: str | None) -> str:
    out = ["# Repeated runs", ""]
    who = " ".join(part for part in (report.agent, report.model) if part)
    out += [f"- {markdown_text(who)}: {report.n_repeats} repeats of {report.n_tasks} tasks." if who else f"- {report.n_repeats} repeats of {report.n_tasks} tasks."]
    out += [f"- warning: {markdown_text(warning)}" for warning in report.warnings]
    out.append("")
    if plot_file:
        out += [f"![pass@k]({plot_file})", ""]
    for table in tables(report):
        out += markdown_table(table)
    return "\n".join(out)


def _html(report: RepeatsReport, plot: bytes | None) -> str:
    body = ["<h1>Repeated runs</h1>"]
    body += [f"<p class='note'>warning: {esc(warning)}</p>" for warning in report.warnings]
    if plot:
        body.append("<div class='plots'>" + png_img("pass@k", plot) + "</div>")
    body += [html_table(table) for table in tables(report)]
    return html_page("Repeated runs", body)


def write_repeats_reports(report: RepeatsReport, out_dir: Path, formats: Sequence[str] = ("json", "md", "html")) -> list[Path]:
    out_dir.mkdir(parents=True, exist_ok=True)
    written = []
    if "json" in formats:
        path = out_dir / REPEATS_REPORT
        write_atomic(path, json.dumps(report.model_dump(mode="json"), indent=1, ensure_ascii=False) + "\n")
        written.append(path)
    if "md" in formats or "html" in formats:
        plot = figure_png(pass_k_figure(report))
        plot_file = None
        if "md" in formats:
            (out_dir / "plots").mkdir(exist_ok=True)
            write_atomic(out_dir / "plots" / "pass_k.png", plot)
            plot_file = "plots/pass_k.png"
            write_atomic(out_dir / "repeats.md", _markdown(report, plot_file))
            written.append(out_dir / "repeats.md")
        if "html" in formats:
            write_atomic(out_dir / "repeats.html", _html(report, plot))
            written.append(out_dir / "repeats.html")
    return written
