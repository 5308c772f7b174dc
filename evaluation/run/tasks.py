"""Tasks to run: the LiveMCPBench ``all_annotations.json`` entries with the fields a run needs
(``file_name``: the inputs its workspace must hold), and ``--only``/``--category``/``--limit``.

Entries are validated by :mod:`evaluation.tasks` exactly as the judge validates them (the
run also needs the question); category names are canonicalised the same way (``work`` -> ``Office`` …).
"""

from __future__ import annotations

from pathlib import Path

from pydantic import Field
from rapidfuzz import process

from evaluation.tasks import TaskEntry, canonical_category, read_task_entries
from index.errors import ConfigError


class BenchmarkTask(TaskEntry):
    """One task to run; unlike the judge, a run needs the question itself."""

    question: str = Field(alias="Question", min_length=1)


def load_tasks(path: Path) -> list[BenchmarkTask]:
    """Read and validate a task list; errors name the file and the entry."""
    return [
        task.model_copy(update={"category": canonical_category(task.category)})
        for task in read_task_entries(path, BenchmarkTask, ConfigError)
    ]


def select_tasks(
    tasks: list[BenchmarkTask],
    only: list[str] | None = None,
    category: str | None = None,
    limit: int | None = None,
) -> list[BenchmarkTask]:
    """``--only`` (full ids or unique prefixes), then ``--category``, then ``--limit``."""
    selected = tasks
    if only:
        by_id = {task.task_id: task for task in tasks}
        picked: list[BenchmarkTask] = []
        for wanted in only:
            matches = [t for t in tasks if t.task_id == wanted] or [t for t in tasks if t.task_id.startswith(wanted)]
            if not matches:
                near = [m[0] for m in process.extract(wanted, list(by_id), limit=3)]
                raise ConfigError(f"--only {wanted}: no such task id. Did you mean: {', '.join(near)}?")
            if len(matches) > 1:
                raise ConfigError(
                    f"--only {wanted}: prefix matches {len(matches)} tasks "
                    f"({', '.join(t.task_id for t in matches[:4])}…); give more characters."
                )
            if matches[0] not in picked:
                picked.append(matches[0])
        selected = picked
    if category:
        wanted = canonical_category(category).lower()
        known = sorted({t.category for t in tasks if t.category})
        if wanted not in {c.lower() for c in known}:
            raise ConfigError(f"--category {category}: unknown category. Known: {', '.join(known)}.")
        selected = [t for t in selected if t.category.lower() == wanted]
    if limit is not None:
        selected = selected[: max(limit, 0)]
    return selected
