"""A report's tables as CSV, for papers and spreadsheets: ``tasks.csv`` (one row per task, every
task of the report in its order, decided or not) and ``categories.csv`` (success by category with
its 95% interval, then the overall row).

The files are UTF-8 (no BOM) with a header row, written by the stdlib ``csv`` module (RFC 4180:
fields holding commas, quotes or line breaks are quoted). Numbers are unformatted -- integers as
integers, other numbers as Python writes them exactly (``0.43157894736842106``, ``0.0004``) --
and rates are fractions between 0 and 1, their columns named ``…_fraction``. A value the report
does not have (no rate, no tokens logged, no human label) is an empty cell, never 0. Booleans are
``true``/``false``, as in ``report.json``.

Text written by agents, tasks and judges is kept as it is, with one exception: a text cell that
starts with ``=``, ``+``, ``-``, ``@``, a tab or a carriage return gets a leading ``'``, so a
spreadsheet opening the file shows it instead of running it as a formula (a judge's reasoning
quoting ``=HYPERLINK(…)`` from a hostile tool output would be a link that sends the sheet away).
"""

from __future__ import annotations

import csv
import io
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path

from evaluation.judge.outputs import CATEGORIES_CSV, TASKS_CSV, TOOLS_CSV
from evaluation.report.models import Report, TaskRow, ToolUsage
from index.storage.atomic import write_atomic

#: The judge's reasoning in ``tasks.csv``: whitespace collapsed, cut after this many characters
#: (the whole text is in ``report.json`` and ``verdicts.jsonl``).
THOUGHTS_EXCERPT = 300
#: The ``category`` of the last row of ``categories.csv``: all tasks together (the headline rate).
OVERALL = "(all)"
#: A prefix on jury members' vote columns in ``tasks.csv``: ``vote_<model>``.
VOTE_PREFIX = "vote_"

_FORMULA_STARTS = ("=", "+", "-", "@", "\t", "\r")

Cell = str | int | float | bool | None

TASK_COLUMNS = (
    "task_id",
    "category",
    "question",
    # The report's outcome: success, failure, abstain, no_trajectory (counted as a failure) or
    # not_judged (left out of every rate).
    "outcome",
    # The judge's (or jury's) verdict: success, failure or abstain; empty when there is none.
    "judge_verdict",
    # 1 or 0 as the rates count the task; empty when it is left out of them (not judged).
    "success",
    # Here, for a jury: one ``vote_<model>`` column per judge.
    "human_label",
    "has_trajectory",
    "complete",
    "turns",
    "turns_estimated",
    "route_calls",
    "execute_calls",
    "distinct_tools",
    "tool_errors",
    "agent_input_tokens",
    "agent_output_tokens",
    "agent_cost_usd",
    "seconds",
    "tool_seconds",
    "confirmations_requested",
    "gold_retrieved",
    "gold_rank",
    "gold_executed",
    "error_class",
    "error_cause",
    "run_status",
    "run_error_kind",
    "run_broke",
    "started",
    "thoughts_excerpt",
)

CATEGORY_COLUMNS = (
    "category",
    # Every task of the category, then those the judge never decided (left out of the rate).
    "tasks",
    "not_judged",
    # The tasks the rate rests on (with an outcome), and the successes among them.
    "n",
    "successes",
    "success_rate_fraction",
    "ci95_low_fraction",
    "ci95_high_fraction",
)


def _cell(value: Cell) -> str:
    if value is None:
        return ""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int | float):
        return repr(value)
    return "'" + value if value.startswith(_FORMULA_STARTS) else value


def _excerpt(text: str, limit: int = THOUGHTS_EXCERPT) -> str:
    flat = " ".join(text.split())
    return flat if len(flat) <= limit else flat[:limit].rstrip() + " […]"


def _judge_verdict(row: TaskRow) -> str | None:
    return row.verdict if row.verdict in ("success", "failure", "abstain") else None


def _vote_models(report: Report) -> list[str]:
    """The jury's members, in the report's order, then any other judge a row names; none for a
    single judge (its vote is ``judge_verdict``)."""
    models = list(dict.fromkeys([*report.judge.models, *(model for row in report.tasks for model in row.judges)]))
    return models if len(models) > 1 else []


def task_table(report: Report) -> tuple[list[str], list[dict[str, str]]]:
    """``tasks.csv``'s columns and rows: one row per task of ``report.tasks``, in its order."""
    models = _vote_models(report)
    position = TASK_COLUMNS.index("human_label")
    columns = [*TASK_COLUMNS[:position], *(VOTE_PREFIX + model for model in models), *TASK_COLUMNS[position:]]
    rows = []
    for row in report.tasks:
        values: dict[str, Cell] = {
            "task_id": row.task_id,
            "category": row.category,
            "question": row.question,
            "outcome": row.verdict,
            "judge_verdict": _judge_verdict(row),
            "success": (1 if row.verdict == "success" else 0) if row.has_outcome else None,
            **{VOTE_PREFIX + model: row.judges.get(model) for model in models},
            "human_label": None if row.human is None else ("success" if row.human else "failure"),
            "has_trajectory": row.has_trajectory,
            "complete": row.complete,
            "turns": row.turns,
            "turns_estimated": row.turns_estimated,
            "route_calls": row.route_calls,
            "execute_calls": row.execute_calls,
            "distinct_tools": row.distinct_tools,
            "tool_errors": row.tool_errors,
            "agent_input_tokens": row.input_tokens,
            "agent_output_tokens": row.output_tokens,
            "agent_cost_usd": row.cost,
            "seconds": row.seconds,
            "tool_seconds": row.tool_seconds,
            "confirmations_requested": row.confirmations_requested,
            "gold_retrieved": row.gold_retrieved,
            "gold_rank": row.gold_rank,
            "gold_executed": row.gold_executed,
            "error_class": row.diagnosis.label if row.diagnosis else None,
            "error_cause": row.diagnosis.cause if row.diagnosis else None,
            "run_status": row.run_status,
            "run_error_kind": row.run_error_kind,
            "run_broke": row.run_broke,
            "started": row.started,
            "thoughts_excerpt": _excerpt(row.thoughts) if row.thoughts else None,
        }
        rows.append({column: _cell(values[column]) for column in columns})
    return columns, rows


def category_table(report: Report) -> tuple[list[str], list[dict[str, str]]]:
    """``categories.csv``'s columns and rows: ``report.by_category`` in its order, then the
    overall row (:data:`OVERALL`), whose figures are the report's headline."""
    tasks: dict[str, int] = {}
    undecided: dict[str, int] = {}
    for row in report.tasks:
        tasks[row.category] = tasks.get(row.category, 0) + 1
        if not row.has_outcome:
            undecided[row.category] = undecided.get(row.category, 0) + 1

    def line(
        category: str, n_tasks: int, not_judged: int, n: int, success: int, rate: float | None,
        ci95: Sequence[float] | None,
    ) -> dict[str, str]:
        low, high = ci95 if ci95 is not None else (None, None)
        values: Mapping[str, Cell] = {
            "category": category,
            "tasks": n_tasks,
            "not_judged": not_judged,
            "n": n,
            "successes": success,
            "success_rate_fraction": rate,
            "ci95_low_fraction": low,
            "ci95_high_fraction": high,
        }
        return {column: _cell(values[column]) for column in CATEGORY_COLUMNS}

    rows = [
        line(category, tasks.get(category, 0), undecided.get(category, 0), rate.n, rate.success, rate.rate, rate.ci95)
        for category, rate in report.by_category.items()
    ]
    rows.append(
        line(
            OVERALL, report.n_tasks, len(report.not_judged), report.n_with_outcome, report.success,
            report.success_rate, report.ci95,
        )
    )
    return list(CATEGORY_COLUMNS), rows


#: ``tools.csv``: :class:`~evaluation.report.models.ToolUsage`'s fields, in its order.
TOOL_COLUMNS = tuple(ToolUsage.model_fields)


def tool_table(report: Report) -> tuple[list[str], list[dict[str, str]]]:
    """``tools.csv``'s columns and rows: every tool a route listed or the agent called (``report.tools``)."""
    return list(TOOL_COLUMNS), [{column: _cell(getattr(tool, column)) for column in TOOL_COLUMNS} for tool in report.tools]


def csv_text(columns: Sequence[str], rows: Iterable[Mapping[str, str]]) -> str:
    """A header row and ``rows`` as CSV (RFC 4180, ``\\r\\n`` line ends)."""
    buffer = io.StringIO(newline="")
    writer = csv.DictWriter(buffer, fieldnames=list(columns), extrasaction="raise")
    writer.writeheader()
    writer.writerows(rows)
    return buffer.getvalue()


def write_csv_tables(report: Report, out_dir: Path) -> list[Path]:
    """``tasks.csv``, ``categories.csv`` and ``tools.csv`` in ``out_dir``, each replaced atomically."""
    written = []
    tables = ((TASKS_CSV, task_table(report)), (CATEGORIES_CSV, category_table(report)), (TOOLS_CSV, tool_table(report)))
    for name, (columns, rows) in tables:
        path = out_dir / name
        write_atomic(path, csv_text(columns, rows).encode("utf-8"))
        written.append(path)
    return written
