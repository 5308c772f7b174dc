"""The report's plots (matplotlib, Agg backend; imported only when a report is rendered).

Each plot is built by its own function returning a figure (tests inspect them) and rendered to
PNG by :func:`render_plots`.
"""

from __future__ import annotations

import io
from typing import Any

from evaluation.report.models import Rate, Report
from evaluation.report.tables import num, pct

Figure = Any  # matplotlib.figure.Figure, imported lazily


def pyplot() -> Any:
    import matplotlib  # noqa: PLC0415 -- seconds of import time, only when plotting

    matplotlib.use("Agg")
    # A matplotlibrc with usetex would send every label through LaTeX, where a task's category or a
    # model name with _ % & # is a LaTeX error: the labels here are plain text.
    matplotlib.rcParams["text.usetex"] = False
    import matplotlib.pyplot as plt  # noqa: PLC0415

    return plt


def literal(text: str) -> str:
    """``text`` drawn as written. Categories, model and run names are user data: matplotlib reads
    a pair of ``$`` in a label as mathtext, which garbles it or (``$$``, ``$^$``) stops the whole
    report with a parse error. An escaped ``\\$`` is drawn as a plain ``$``."""
    return text.replace("$", r"\$")


def figure_png(figure: Figure) -> bytes:
    buffer = io.BytesIO()
    figure.savefig(buffer, format="png", dpi=110, bbox_inches="tight")
    pyplot().close(figure)
    return buffer.getvalue()


def category_figure(report: Report) -> Figure:
    """Success by category with Wilson intervals; the counts are part of the category labels,
    so they can never be drawn over an error bar, however high the interval reaches."""
    plt = pyplot()
    names = [*report.by_category, "All"]
    # The report's own rate: over the tasks with an outcome, as the headline and the table say.
    overall = Rate(n=report.n_with_outcome, success=report.success, rate=report.success_rate, ci95=report.ci95)
    rates = [*report.by_category.values(), overall]
    figure, axes = plt.subplots(figsize=(7, 0.45 * len(names) + 1.2))
    # A category of no task has no rate (``None``): drawn as an empty bar.
    values = [(rate.rate or 0.0) * 100 for rate in rates]
    low = [max(0.0, ((rate.rate or 0.0) - rate.ci95[0]) * 100) if rate.ci95 else 0.0 for rate in rates]
    high = [max(0.0, (rate.ci95[1] - (rate.rate or 0.0)) * 100) if rate.ci95 else 0.0 for rate in rates]
    colors = ["#4C78A8"] * (len(names) - 1) + ["#F58518"]
    labels = [literal(f"{name}  {rate.success}/{rate.n}") for name, rate in zip(names, rates, strict=True)]
    axes.barh(labels, values, xerr=[low, high], color=colors, capsize=3)
    axes.invert_yaxis()
    axes.set_xlim(0, 100)
    axes.set_xlabel("success rate, % (95% Wilson CI)")
    axes.set_title("Success by category (succeeded/tasks)")
    return figure


def agreement_figure(report: Report) -> Figure | None:
    plt = pyplot()
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
        # The tables' formatting: 62.5% here read 62% beside the table's 62.5%.
        axes.set_title(f"Judge vs people: agreement {pct(report.human_agreement)}, kappa {num(report.cohen_kappa)}", fontsize=9)
        return figure
    if len(report.judges) > 1 and report.success_rate is not None:
        figure, axes = plt.subplots(figsize=(6, 0.45 * len(report.judges) + 1.2))
        # Each judge has a rate whenever the jury has: both rest on the same tasks with an outcome.
        axes.barh([literal(judge.model) for judge in report.judges], [judge.success_rate * 100 for judge in report.judges])  # type: ignore[operator]
        axes.axvline(report.success_rate * 100, color="#F58518", label="jury")
        axes.set_xlim(0, 100)
        axes.set_xlabel("success rate, %")
        axes.legend()
        axes.set_title("Each judge vs the jury")
        return figure
    return None


def usage_figure(report: Report) -> Figure | None:
    """Tokens (or cost) per task, successes next to the rest, with a legend and every point inside.
    A task the judge never decided is neither (it was drawn as "not success")."""
    rows = [row for row in report.tasks if row.input_tokens is not None and row.has_outcome]
    if not rows:
        return None
    plt = pyplot()
    use_cost = any(row.cost is not None for row in rows)
    figure, axes = plt.subplots(figsize=(6, 3.6))
    highest = 0.0
    for offset, (label, wanted, color) in enumerate((("success", True, "#1a7f37"), ("not success", False, "#b42318"))):
        values = [
            float(row.cost if use_cost else (row.input_tokens or 0) + (row.output_tokens or 0))  # type: ignore[arg-type]
            for row in rows
            if (row.verdict == "success") == wanted and (row.cost is not None or not use_cost)
        ]
        xs = [offset + (i % 7 - 3) * 0.04 for i in range(len(values))]
        axes.scatter(xs, values, alpha=0.7, color=color, label=f"{label} (n={len(values)})")
        highest = max([highest, *values])
    axes.set_xticks([0, 1], ["success", "not success"])
    axes.set_xlim(-0.6, 1.6)
    axes.set_ylim(0, highest * 1.1 if highest > 0 else 1)
    axes.set_ylabel("agent cost, $" if use_cost else "agent tokens (in+out)")
    axes.set_title(("Cost" if use_cost else "Tokens") + " per task vs outcome")
    axes.legend(loc="upper center", bbox_to_anchor=(0.5, -0.12), ncol=2, frameon=False)
    return figure


def render_plots(report: Report) -> dict[str, bytes]:
    """``name -> PNG``: success by category, agreement/confusion, tokens-or-cost vs success."""
    figures = {
        # No verdict, no rate: bars at 0% would draw an agent that failed every task.
        "by_category": category_figure(report) if report.by_category and report.success_rate is not None else None,
        "agreement": agreement_figure(report),
        "usage": usage_figure(report),
    }
    return {name: figure_png(figure) for name, figure in figures.items() if figure is not None}
