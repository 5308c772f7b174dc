"""Tasks to run: the LiveMCPBench ``all_annotations.json`` entries with the fields a run needs
(``file_name``: the inputs its workspace must hold), and ``--only``/``--category``/``--limit``.

Entries are validated by :mod:`evaluation.tasks` exactly as the judge validates them (the
run also needs the question); category names are canonicalised the same way (``work`` -> ``Office`` …).
"""

from __future__ import annotations

from pathlib import Path

from pydantic import Field, field_validator
from rapidfuzz import process

from evaluation.tasks import CATEGORIES, CATEGORY_ALIASES, TaskEntry, canonical_category, read_task_entries
from index.errors import ConfigError


class BenchmarkTask(TaskEntry):
    """One task to run; unlike the judge, a run needs the question itself."""

    question: str = Field(alias="Question", min_length=1)

    @field_validator("question")
    @classmethod
    def _not_blank(cls, value: str) -> str:
        # Spaces and newlines are no question: the agent would run with nothing to do.
        if value and not value.strip():
            raise ValueError("must not be blank (it holds only whitespace)")
        return value


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
                raise ConfigError(f"--only {wanted}: no such task id{_suggest(wanted, list(by_id))}")
            if len(matches) > 1:
                raise ConfigError(
                    f"--only {wanted}: prefix matches {len(matches)} tasks "
                    f"({', '.join(t.task_id for t in matches[:4])}{'…' if len(matches) > 4 else ''}); give more characters."
                )
            if matches[0] not in picked:
                picked.append(matches[0])
        selected = picked
    if category:
        wanted = canonical_category(category).lower()
        known = sorted({t.category for t in tasks if t.category})
        if wanted not in {c.lower() for c in known}:
            raise ConfigError(_category_error(category, known))
        selected = [t for t in selected if t.category.lower() == wanted]
    if limit is not None:
        selected = selected[: max(limit, 0)]
    return selected


#: How alike (rapidfuzz WRatio, 0-100) a name must be to be offered as "did you mean".
_SUGGEST_SCORE = 70


def _suggest(wanted: str, names: list[str]) -> str:
    """``. Did you mean: a, b?`` with the names alike enough to be typos of ``wanted``, else ``.``:
    three arbitrary ids offered for a string that resembles none of them mislead."""
    near = [match[0] for match in process.extract(wanted, names, limit=3, score_cutoff=_SUGGEST_SCORE)]
    if near:
        return f". Did you mean: {', '.join(near)}?"
    # Nothing alike: show what an id of this list looks like (a row number or a name is not one).
    return f" (the task list holds {len(names)} tasks; their ids look like {names[0]})." if names else "."


def _category_error(category: str, known: list[str]) -> str:
    """A paper category the task list has no task of is not "unknown"; a typo gets its nearest name."""
    canonical = canonical_category(category)
    listed = f"Categories in the task list: {', '.join(known)}."
    if canonical in CATEGORIES:
        return f"--category {category}: no task in the task list is in category {canonical}. {listed}"
    candidates = sorted(set(known) | set(CATEGORIES) | set(CATEGORY_ALIASES))
    near = process.extractOne(category, candidates, score_cutoff=_SUGGEST_SCORE)
    hint = f" Did you mean {canonical_category(near[0])}?" if near else ""
    return f"--category {category}: unknown category.{hint} {listed}"
