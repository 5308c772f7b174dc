"""Tasks to run: the LiveMCPBench ``all_annotations.json`` entries with the fields a run needs
(``file_name``: the inputs its workspace must hold), and ``--only``/``--category``/``--limit``.

The judge reads the same file through :mod:`evaluation.tasks`; category names are canonicalised
the same way (``work`` -> ``Office`` …).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError
from rapidfuzz import process

from evaluation.tasks import canonical_category, read_json_file
from index.errors import ConfigError

class AnnotatorMetadata(BaseModel):
    model_config = ConfigDict(extra="allow", populate_by_name=True)

    steps: str = Field(default="", alias="Steps")
    tools: str = Field(default="", alias="Tools")


class BenchmarkTask(BaseModel):
    """One task; field names follow the LiveMCPBench file (``Question``, ``file_name`` …)."""

    model_config = ConfigDict(extra="allow", populate_by_name=True)

    task_id: str = Field(min_length=1)
    question: str = Field(alias="Question", min_length=1)
    category: str = ""
    file_name: str = ""
    answers: str = ""
    metadata: AnnotatorMetadata = Field(default_factory=AnnotatorMetadata, alias="Annotator Metadata")


def load_tasks(path: Path) -> list[BenchmarkTask]:
    """Read and validate a task list; errors name the file and the entry."""
    data: Any = read_json_file(
        path, "task list", ConfigError, not_found_hint=" (expected LiveMCPBench's all_annotations.json)"
    )
    if isinstance(data, dict) and isinstance(data.get("tasks"), list):
        data = data["tasks"]
    if not isinstance(data, list):
        raise ConfigError(f"{path}: expected a JSON list of tasks with 'task_id' and 'Question'.")
    tasks: list[BenchmarkTask] = []
    seen: set[str] = set()
    for number, raw in enumerate(data):
        try:
            task = BenchmarkTask.model_validate(raw)
        except ValidationError as error:
            first = error.errors()[0]
            where = ".".join(str(p) for p in first["loc"]) or "entry"
            raise ConfigError(f"{path}: task #{number}: {where}: {first['msg']}.") from None
        if task.task_id in seen:
            raise ConfigError(f"{path}: task #{number}: duplicate task_id {task.task_id!r}.")
        seen.add(task.task_id)
        tasks.append(task.model_copy(update={"category": canonical_category(task.category)}))
    return tasks


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
