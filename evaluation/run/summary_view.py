"""The table a run ends with: one row per selected task."""

from __future__ import annotations

from rich.markup import escape
from rich.table import Table

from evaluation.run.models import RunManifest, TaskRecord
from evaluation.run.tasks import BenchmarkTask


def summary_table(
    tasks: list[BenchmarkTask], manifest: RunManifest, resumed: set[str], title: str = "run summary"
) -> Table:
    """One row per selected task: status (and whether it finished in an earlier run), turns, calls, time, error."""
    table = Table(title=title, show_lines=False)
    labels = _id_labels([task.task_id for task in tasks])
    for column in ("task", "category", "status", "turns", "calls", "time", "error"):
        table.add_column(column, overflow="fold" if column == "error" else "ellipsis")
    for task in tasks:
        record = manifest.summary.tasks.get(task.task_id)
        if record is None:
            table.add_row(escape(labels[task.task_id]), escape(task.category), "not run", "", "", "", "")
            continue
        colour = "green" if record.status == "completed" else "red"
        status = f"[{colour}]{record.status}[/{colour}]" + (" (earlier)" if task.task_id in resumed else "")
        table.add_row(
            escape(labels[task.task_id]),
            escape(record.category),
            status,
            "" if record.turns is None else str(record.turns),
            str(record.tool_calls),
            f"{record.duration_s:.1f}s",
            escape(_short_error(record)),
        )
    return table


def _id_labels(task_ids: list[str], shortest: int = 8) -> dict[str, str]:
    """Each id's label: its first ``shortest`` characters (LiveMCPBench's ids are 36-character UUIDs),
    or as many more as tell it from every other id of the table; a cut id ends with "…"."""
    longest = max((len(task_id) for task_id in task_ids), default=0)
    length = shortest
    while length < longest and len({task_id[:length] for task_id in task_ids}) < len(set(task_ids)):
        length += 1
    return {task_id: task_id if len(task_id) <= length else task_id[:length] + "…" for task_id in task_ids}


def _short_error(record: TaskRecord, limit: int = 90) -> str:
    """The table's error cell: the kind and the start of the message (all of it is in summary.json)."""
    if not record.error:
        return ""
    text = f"{record.error_kind}: {record.error}" if record.error_kind else record.error
    return text if len(text) <= limit else text[: limit - 1] + "…"
