"""``python -m bench retrieval`` as a page to look at: every query set side by side in one plot, the
tables the run prints, and the shipped ranker's misses to read one by one.

Written next to the misses file (``bench/results/retrieval.html``; a ``--quick`` run's to
``retrieval-quick.html``, for the same reason its misses have their own file). One self-contained
HTML file: the plot is embedded as PNG, nothing is fetched. It holds no date or machine name, so two
runs with the same rankings write the same page.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from bench.retrieval.lab import SHIPPED, Ranked
from bench.retrieval.metrics import KEYS, Summaries, interval_cell, summarize
from bench.retrieval.sets import Query
from evaluation.report.plots import figure_png, pyplot
from evaluation.report.render import MAX_LISTED, esc, html_page, html_table, png_img
from evaluation.report.tables import Table

#: The metrics the plot shows, one column each.
PLOTTED = ("hit@3", "prec@3", "nDCG@10")
#: Issue 10's targets, drawn where they apply.
TARGETS = {("agent-steps", "hit@3"): 0.70, ("agent-steps", "prec@3"): 0.33, ("questions", "nDCG@10"): 0.50}
SHIPPED_COLOR = "#F58518"
OTHER_COLOR = "#4C78A8"


def report_path(quick: bool, results_dir: Path) -> Path:
    """Where the page goes: a ``--quick`` run's beside the full run's, never over it."""
    return results_dir / ("retrieval-quick.html" if quick else "retrieval.html")


def miss_records(queries: Sequence[Query], ranked: Ranked, set_name: str) -> list[dict[str, Any]]:
    """The queries of a set with no relevant tool in the top 3, with what was ranked instead."""
    misses = []
    for query, names, row in zip(queries, ranked.names, ranked.rows, strict=True):
        if row.get("hit@3", 1.0) >= 1.0:
            continue
        misses.append(
            {
                "set": set_name, "task_id": query.task_id, "category": query.category, "form": query.form,
                "query": query.text, "relevant": sorted(query.relevant), "top5": names[:5],
                "rank_of_first_relevant": next((i + 1 for i, n in enumerate(names) if n in query.relevant), None),
            }
        )
    return misses


def summaries_of(sets: Mapping[str, Sequence[Query]], results: Mapping[str, Mapping[str, Ranked]]) -> Summaries:
    """Every set's methods with every metric's task-clustered estimate, computed once for the printed
    tables, the JSON and the page."""
    return {
        name: {method: summarize(ranked.rows, [q.task_id for q in sets[name]]) for method, ranked in by_method.items()}
        for name, by_method in results.items()
    }


def comparison_figure(sets: Mapping[str, Sequence[Query]], summaries: Summaries) -> Any:
    """One row per query set, one column per metric in :data:`PLOTTED`: each method's mean with its
    task-clustered 95% interval, the shipped ranker in its own colour, issue 10's targets dashed."""
    plt = pyplot()
    names = list(summaries)
    methods = list(dict.fromkeys(m for name in names for m in summaries[name]))
    figure, grid = plt.subplots(
        len(names), len(PLOTTED), figsize=(4.2 * len(PLOTTED), 0.32 * len(methods) * len(names) + 1.4 * len(names)),
        squeeze=False,
    )
    for row, name in enumerate(names):
        shown = [m for m in methods if m in summaries[name]]
        estimates = summaries[name]
        for column, key in enumerate(PLOTTED):
            axes = grid[row][column]
            for y, method in enumerate(shown):
                estimate = estimates[method][key]
                color = SHIPPED_COLOR if method == SHIPPED else OTHER_COLOR
                axes.errorbar(
                    estimate.mean, y, xerr=[[estimate.mean - estimate.low], [estimate.high - estimate.mean]],
                    fmt="o", color=color, capsize=3,
                )
            if (target := TARGETS.get((name, key))) is not None:
                axes.axvline(target, color="#777", linestyle="--", linewidth=1, label=f"target {target:g}")
                axes.legend(loc="lower right", fontsize=7, frameon=False)
            axes.set_yticks(range(len(shown)), shown, fontsize=8)
            axes.tick_params(axis="y", labelleft=column == 0)  # the methods are named once per row
            axes.set_ylim(len(shown) - 0.5, -0.5)
            axes.set_xlim(0, 1)
            axes.grid(axis="x", alpha=0.3)
            axes.set_title(f"{name} ({len(sets[name])} queries): {key}", fontsize=9)
    figure.suptitle("Retrieval on every query set (mean, 95% CI with tasks resampled; shipped ranker in orange)", fontsize=10)
    figure.tight_layout()
    return figure


def set_table(name: str, queries: Sequence[Query], summaries: Mapping[str, Mapping[str, Any]]) -> Table:
    return Table(
        title=f"{name} ({len(queries)} queries from {len({q.task_id for q in queries})} tasks)",
        header=["method", *KEYS],
        rows=[[method, *(interval_cell(estimates[k]) for k in KEYS)] for method, estimates in summaries.items()],
        note="mean (95% CI, tasks resampled)",
    )


def misses_table(name: str, misses: Sequence[Mapping[str, Any]], misses_file: Path) -> Table:
    shown = misses[:MAX_LISTED]
    note = f"{len(misses)} queries with no relevant tool in the shipped ranker's top 3"
    if len(misses) > len(shown):
        note += f"; the first {len(shown)} shown, all of them in {misses_file.name}"
    rows = [
        [
            miss["query"], miss["form"], ", ".join(miss["relevant"]), ", ".join(miss["top5"][:3]),
            str(miss["rank_of_first_relevant"] or "not in the top 10"),
        ]
        for miss in shown
    ]
    return Table(title=f"Misses: {name}", header=["question", "form", "relevant", "top 3", "first relevant at"], rows=rows, note=note)


def report_html(
    sets: Mapping[str, Sequence[Query]],
    results: Mapping[str, Mapping[str, Ranked]],
    summaries: Summaries,
    misses_sets: Sequence[str],
    misses_file: Path,
) -> str:
    plot = figure_png(comparison_figure(sets, summaries))
    body = [
        "<h1>route: retrieval on every query set</h1>",
        f"<p class='note'>The shipped ranker is <b>{esc(SHIPPED)}</b>. Produced by <code>python -m bench retrieval</code>; "
        "the run's printed output has the candidates, models, cross-validation and latency as well.</p>",
        f"<div class='plots'>{png_img('every query set side by side', plot)}</div>",
        *(html_table(set_table(name, sets[name], summaries[name])) for name in summaries),
        *(
            html_table(misses_table(name, miss_records(sets[name], results[name][SHIPPED], name), misses_file))
            for name in misses_sets
            if name in results and SHIPPED in results[name]
        ),
    ]
    return html_page("route: retrieval on every query set", body)


def write_report(
    sets: Mapping[str, Sequence[Query]],
    results: Mapping[str, Mapping[str, Ranked]],
    summaries: Summaries,
    misses_sets: Sequence[str],
    misses_file: Path,
    quick: bool,
    results_dir: Path,
) -> Path:
    path = report_path(quick, results_dir)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(report_html(sets, results, summaries, misses_sets, misses_file), encoding="utf-8")
    return path
