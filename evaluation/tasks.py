"""The LiveMCPBench task list (``all_annotations.json``) and the paper's category names."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

from pydantic import BaseModel, Field

from index.errors import CopilotError

#: The six categories of the paper, in its order.
CATEGORIES = ("Office", "Lifestyle", "Leisure", "Finance", "Travel", "Shopping")
#: Names used in LiveMCPBench's published trajectory files.
CATEGORY_ALIASES = {
    "work": "Office",
    "office": "Office",
    "daily": "Lifestyle",
    "lifestyle": "Lifestyle",
    "entertainment": "Leisure",
    "leisure": "Leisure",
    "financing": "Finance",
    "finance": "Finance",
    "travel": "Travel",
    "shopping": "Shopping",
}
UNCATEGORISED = "Other"

_NUMBERED = re.compile(r"^\s*(?:\d+[.)]|[-*•])\s*")


class TaskError(CopilotError):
    """A task list or human-label file is missing or malformed."""


def canonical_category(name: str | None) -> str:
    """Paper name for a category or alias (case-insensitive); unknown names pass through."""
    if not name or not name.strip():
        return UNCATEGORISED
    return CATEGORY_ALIASES.get(name.strip().lower(), name.strip())


def normalise_tool_name(name: str) -> str:
    """Annotated tool names and logged ones compare case-, ``-``/``_``- and space-insensitively."""
    return re.sub(r"[\s_\-]+", "_", name.strip().lower())


def normalise_server_name(name: str) -> str:
    """``Yahoo Finance``, ``yahoo_finance`` and ``yahoo-finance`` are one server in reports."""
    return re.sub(r"[\s_\-]+", "-", name.strip().lower())


def split_numbered(text: str | None) -> list[str]:
    """``"1. a\\n2. b"`` -> ``["a", "b"]``; un-numbered lines continue the previous item."""
    items: list[str] = []
    for raw in (text or "").splitlines():
        line = raw.strip()
        if not line:
            continue
        if _NUMBERED.match(line) or not items:
            items.append(_NUMBERED.sub("", line).strip())
        else:
            items[-1] = f"{items[-1]} {line}"
    return [item for item in items if item]


class Task(BaseModel):
    task_id: str
    question: str
    category: str = UNCATEGORISED
    steps: list[str] = Field(default_factory=list)
    #: Names of the annotated ("gold") tools, for retrieval diagnostics.
    gold_tools: list[str] = Field(default_factory=list)
    answers: str = ""

    @classmethod
    def from_annotation(cls, entry: dict[str, Any]) -> Task:
        meta = entry.get("Annotator Metadata") or {}
        return cls(
            task_id=str(entry["task_id"]),
            question=str(entry.get("Question") or entry.get("question") or ""),
            category=canonical_category(entry.get("category")),
            steps=split_numbered(meta.get("Steps")),
            gold_tools=split_numbered(meta.get("Tools")),
            answers=str(entry.get("answers") or ""),
        )


def read_json_file(
    path: Path, what: str, error_class: type[CopilotError] = TaskError, not_found_hint: str = ""
) -> Any:
    """A JSON input file (task list, labels, price table); errors name the file and line.

    ``not_found_hint`` (e.g. ``" (expected …)"``) is appended to the not-found message."""
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise error_class(f"{path}: {what} not found{not_found_hint}.") from None
    except OSError as error:
        raise error_class(f"{path}: cannot read {what} ({error.strerror or error}).") from None
    except UnicodeDecodeError as error:
        raise error_class(f"{path}: {what} is not UTF-8 text ({error.reason} at byte {error.start}).") from None
    try:
        return json.loads(text)
    except json.JSONDecodeError as error:
        raise error_class(f"{path}:{error.lineno}: {what} is not valid JSON ({error.msg}).") from None


def load_tasks(path: str | Path) -> dict[str, Task]:
    """Tasks by id, in file order, from a LiveMCPBench annotation list."""
    path = Path(path)
    data = read_json_file(path, "task list")
    if not isinstance(data, list):
        raise TaskError(f"{path}: a task list must be a JSON list of tasks with task_id and Question.")
    tasks: dict[str, Task] = {}
    for number, entry in enumerate(data, 1):
        if not isinstance(entry, dict) or "task_id" not in entry:
            raise TaskError(f"{path}: entry {number} has no task_id (expected LiveMCPBench all_annotations.json form).")
        task = Task.from_annotation(entry)
        tasks[task.task_id] = task
    return tasks


def load_human_labels(path: str | Path) -> dict[str, bool]:
    """``task_id -> success`` from LiveMCPBench's human annotation (``task_success`` field)."""
    path = Path(path)
    data = read_json_file(path, "human labels")
    if not isinstance(data, list):
        raise TaskError(f"{path}: human labels must be a JSON list of objects with task_id and task_success.")
    labels: dict[str, bool] = {}
    for number, entry in enumerate(data, 1):
        if not isinstance(entry, dict) or "task_id" not in entry or "task_success" not in entry:
            raise TaskError(f'{path}: entry {number} needs task_id and task_success ("success"/"failure").')
        value = str(entry["task_success"]).strip().strip("\"'").lower()
        if value not in ("success", "failure"):
            raise TaskError(
                f"{path}: entry {number} ({entry['task_id']}): task_success is {entry['task_success']!r}, "
                'expected "success" or "failure".'
            )
        labels[str(entry["task_id"])] = value == "success"
    return labels
