"""The report's plots (matplotlib, Agg backend; imported only when a report is rendered)."""

from __future__ import annotations

import io

from evaluation.report.models import Rate, Report


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


