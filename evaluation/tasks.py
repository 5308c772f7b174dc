"""The LiveMCPBench task list (``all_annotations.json``) and the paper's category names."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any, TypeVar

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from index.json_text import parse_json
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
#: A task id names its files (log, workspace, retried logs): file names stop at 255 bytes.
MAX_TASK_ID_BYTES = 200

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


def _null_is_empty(value: object) -> object:
    """Optional text: null (an empty cell in a list exported from a spreadsheet) reads as absent,
    as a missing key does -- no steps, no category, not an error."""
    return "" if value is None else value


class AnnotatorMetadata(BaseModel):
    model_config = ConfigDict(extra="allow", populate_by_name=True)

    steps: str = Field(default="", alias="Steps")
    tools: str = Field(default="", alias="Tools")

    _null_text_is_empty = field_validator("steps", "tools", mode="before")(_null_is_empty)


class TaskEntry(BaseModel):
    """One entry of a task list as the file holds it (``Question``, ``Annotator Metadata`` …).

    The judge and the runner validate entries with this model (the runner's subclass also
    requires the question), so a list one accepts the other does not silently read differently:
    a ``task_id`` must be a non-empty string (``7`` is refused, not turned into ``"7"``)."""

    model_config = ConfigDict(extra="allow", populate_by_name=True)

    task_id: str = Field(min_length=1)
    question: str = Field(default="", alias="Question")
    category: str = ""
    file_name: str = ""
    answers: str = ""
    metadata: AnnotatorMetadata = Field(default_factory=AnnotatorMetadata, alias="Annotator Metadata")

    _null_text_is_empty = field_validator("category", "file_name", "answers", mode="before")(_null_is_empty)

    @field_validator("metadata", mode="before")
    @classmethod
    def _null_metadata_is_empty(cls, value: object) -> object:
        return {} if value is None else value

    @field_validator("task_id", "question", mode="before")
    @classmethod
    def _required_not_null(cls, value: object) -> object:
        # A null id or question is a broken entry, not an empty one: say so rather than guess.
        if value is None:
            raise ValueError("must be a non-empty string, not null")
        return value

    @field_validator("task_id")
    @classmethod
    def _one_path_component(cls, value: str) -> str:
        # The runner names each task's log and workspace after its id: "../x" would write, and a
        # retry delete, outside --out.
        if value in (".", "..") or any(char in value for char in "/\\\0") or value != value.strip():
            raise ValueError(
                "must be usable as a file name (no '/', '\\', NUL, surrounding spaces, '.' or '..')"
            )
        if len(value.encode("utf-8", "surrogatepass")) > MAX_TASK_ID_BYTES:
            # File names stop at 255 bytes, and the runner adds ".attempt-N.jsonl.old" to retried logs.
            raise ValueError(f"must be at most {MAX_TASK_ID_BYTES} bytes long (it names the task's files)")
        return value


EntryT = TypeVar("EntryT", bound=TaskEntry)


class Task(BaseModel):
    """A task as the judge uses it: steps and annotated tools split into lists."""

    task_id: str
    question: str
    category: str = UNCATEGORISED
    steps: list[str] = Field(default_factory=list)
    #: Names of the annotated ("gold") tools, for retrieval diagnostics.
    gold_tools: list[str] = Field(default_factory=list)
    answers: str = ""

    @classmethod
    def from_entry(cls, entry: TaskEntry) -> Task:
        return cls(
            task_id=entry.task_id,
            question=entry.question,
            category=canonical_category(entry.category),
            steps=split_numbered(entry.metadata.steps),
            gold_tools=split_numbered(entry.metadata.tools),
            answers=entry.answers,
        )


def read_json_file(
    path: Path, what: str, error_class: type[CopilotError] = TaskError, not_found_hint: str = ""
) -> Any:
    """A JSON input file (task list, labels, price table); errors name the file and line.

    ``not_found_hint`` (e.g. ``" (expected …)"``) is appended to the not-found message."""
    try:
        # utf-8-sig: a list saved by a Windows editor starts with a BOM, which json.loads refuses.
        text = path.read_text(encoding="utf-8-sig")
    except FileNotFoundError:
        raise error_class(f"{path}: {what} not found{not_found_hint}.") from None
    except OSError as error:
        raise error_class(f"{path}: cannot read {what} ({error.strerror or error}).") from None
    except UnicodeDecodeError as error:
        raise error_class(f"{path}: {what} is not UTF-8 text ({error.reason} at byte {error.start}).") from None
    try:
        return parse_json(text)
    except json.JSONDecodeError as error:
        raise error_class(f"{path}:{error.lineno}: {what} is not valid JSON ({error.msg}).") from None


def _entry_error(path: Path, number: int, raw: object, error: ValidationError) -> str:
    if not isinstance(raw, dict):
        return f"{path}: entry {number}: expected an object with task_id and Question (got {type(raw).__name__} {raw!r:.60})."
    first = error.errors()[0]
    field = ".".join(str(part) for part in first["loc"])
    task_id = raw.get("task_id")
    which = f"entry {number}" + (f" (task_id {task_id!r})" if field != "task_id" and task_id is not None else "")
    message = "expected an object" if first["type"] in ("model_type", "dict_type") else first["msg"].removeprefix("Value error, ")
    got = "" if first["type"] == "missing" else f" (got {first['input']!r:.60})"
    return f"{path}: {which}: {field}: {message}{got}."


def read_task_entries(
    path: Path, model: type[EntryT], error_class: type[CopilotError] = TaskError
) -> list[EntryT]:
    """Every entry of a task list (a JSON list, or ``{"tasks": [...]}``), validated; the first
    bad entry is an ``error_class`` naming the file, the entry (1-based) and the field."""
    data = read_json_file(path, "task list", error_class, not_found_hint=" (expected LiveMCPBench's all_annotations.json)")
    if isinstance(data, dict) and isinstance(data.get("tasks"), list):
        data = data["tasks"]
    if not isinstance(data, list):
        raise error_class(f"{path}: expected a JSON list of tasks with 'task_id' and 'Question'.")
    if not data:
        raise error_class(f"{path}: the task list holds no task (expected a JSON list of tasks with 'task_id' and 'Question').")
    entries: list[EntryT] = []
    #: task_id -> the entry (1-based) that first had it, so a duplicate names both places to look.
    seen: dict[str, int] = {}
    for number, raw in enumerate(data, 1):
        try:
            entry = model.model_validate(raw)
        except ValidationError as error:
            raise error_class(_entry_error(path, number, raw, error)) from None
        if entry.task_id in seen:
            raise error_class(
                f"{path}: entry {number}: duplicate task_id {entry.task_id!r} (also entry {seen[entry.task_id]})."
            )
        seen[entry.task_id] = number
        entries.append(entry)
    return entries


def load_tasks(path: str | Path) -> dict[str, Task]:
    """Tasks by id, in file order, from a LiveMCPBench annotation list."""
    return {entry.task_id: Task.from_entry(entry) for entry in read_task_entries(Path(path), TaskEntry)}


def load_human_labels(path: str | Path) -> dict[str, bool]:
    """``task_id -> success`` from LiveMCPBench's human annotation (``task_success`` field)."""
    path = Path(path)
    data = read_json_file(path, "human labels")
    if not isinstance(data, list):
        raise TaskError(f"{path}: human labels must be a JSON list of objects with task_id and task_success.")
    labels: dict[str, bool] = {}
    entry_of: dict[str, int] = {}
    for number, entry in enumerate(data, 1):
        if not isinstance(entry, dict) or "task_id" not in entry or "task_success" not in entry:
            raise TaskError(f'{path}: entry {number} needs task_id and task_success ("success"/"failure").')
        value = str(entry["task_success"]).strip().strip("\"'").lower()
        if value not in ("success", "failure"):
            raise TaskError(
                f"{path}: entry {number} ({entry['task_id']}): task_success is {entry['task_success']!r}, "
                'expected "success" or "failure".'
            )
        task_id = str(entry["task_id"])
        if task_id in labels:
            raise TaskError(f"{path}: entry {number}: duplicate task_id {task_id!r} (also entry {entry_of[task_id]}).")
        labels[task_id] = value == "success"
        entry_of[task_id] = number
    return labels
