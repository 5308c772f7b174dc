"""Records of a benchmark run: per-task outcomes, the run manifest (``summary.json``), prices.

A task is *finished* when ``summary.json`` holds a record for it — status ``completed`` (the agent
gave a final answer, logged as a ``final_answer`` event) or ``failed`` / ``timeout`` (the error is
recorded). Resuming a run skips finished tasks; ``--retry-failed`` reruns the failed ones.
Anything else (no record: the run was interrupted mid-task) is rerun from scratch.
"""

from __future__ import annotations

import logging
import threading
from contextlib import suppress
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from evaluation.json_files import JSONFileError, decode_text, read_json_model, unreadable
from evaluation.tasks import read_json_file
from index.errors import ConfigError
from index.json_text import parse_json
from server.trajectory.records import utc_now

logger = logging.getLogger(__name__)

SUMMARY_FILE = "summary.json"
SUMMARY_VERSION = 1

TaskStatus = Literal["completed", "failed", "timeout"]

#: Machine-readable failure classes (``TaskRecord.error_kind``).
ErrorKind = Literal[
    "missing_files",  # an input file named by the task is not in --task-files
    "workspace",  # the workspace or the per-task servers file could not be prepared
    "agent_not_found",  # the --agent-cmd program does not exist
    "agent_failed",  # the agent command exited non-zero
    "no_answer",  # the agent finished without an answer
    "tools_refused",  # the model endpoint refuses tool-calling requests
    "llm_error",  # the model endpoint failed (unreachable, auth, 5xx after retries)
    "copilot_failed",  # the copilot process could not be started or died
    "max_turns",  # the built-in agent hit --max-turns without a final answer
    "timeout",  # --task-timeout elapsed
    "internal",  # a bug in the runner; the message says what
]


class TaskRecord(BaseModel):
    #: Fields this runner does not know (written by a later one of the same summary version) are
    #: kept when the summary is rewritten, not dropped.
    model_config = ConfigDict(extra="allow")

    task_id: str
    category: str = ""
    status: TaskStatus
    error: str | None = None
    error_kind: ErrorKind | None = None
    turns: int | None = Field(default=None, description="Model calls (built-in agent).")
    tool_calls: int = Field(default=0, description="route + execute calls in the trajectory.")
    duration_s: float = 0.0
    input_tokens: int = 0
    output_tokens: int = 0
    cost: float | None = None
    trajectory: str = ""
    #: Agent log file name (``agent.stdout.log``, ``agent.stderr.log``, the built-in agent's
    #: ``copilot.stderr.log``) -> bytes cut from its middle (it passed ``--max-agent-log-bytes``).
    agent_logs_cut: dict[str, int] | None = None
    finished_at: str = Field(default_factory=utc_now)


class IndexCoverage(BaseModel):
    """What the up-front indexing found and did (logged in ``summary.json``)."""

    location: str = ""
    servers: int = 0
    tools: int = 0
    #: Servers indexed now (from the catalog snapshot or crawled).
    indexed_now: list[str] = Field(default_factory=list)
    #: server -> why it is not in the index (a failed crawl's reason).
    missing: dict[str, str] = Field(default_factory=dict)


class RunSummary(BaseModel):
    #: As for :class:`TaskRecord`: what a later runner added survives a resume by this one.
    model_config = ConfigDict(extra="allow")

    version: int = SUMMARY_VERSION
    runner_version: str = ""
    agent: str = ""
    model: str | None = None
    tasks_file: str = ""
    servers_file: str = ""
    catalog_hash: str | None = None
    #: Who answered the copilot's confirmations (``--confirm``; ``host`` for ``--agent-cmd``).
    confirm: str | None = None
    #: The index the run routed against, as checked before the first task.
    index: IndexCoverage | None = None
    created: str = Field(default_factory=utc_now)
    updated: str = Field(default_factory=utc_now)
    tasks: dict[str, TaskRecord] = Field(default_factory=dict)


class RunManifest:
    """``<out>/summary.json``: rewritten atomically after every task, so nothing finished is lost."""

    def __init__(self, out: Path, summary: RunSummary) -> None:
        self.path = out / SUMMARY_FILE
        self.summary = summary
        self._lock = threading.Lock()

    @classmethod
    def open(cls, out: Path, **metadata: Any) -> RunManifest:
        """Load the manifest of an existing run (for resuming) or start a new one."""
        path = out / SUMMARY_FILE
        if path.exists() and not path.is_file():
            raise ConfigError(
                f"{path}: the run summary's place is taken by a directory; use another --out directory or move it away."
            )
        if path.is_file():
            _refuse_newer(path)
            try:
                summary = read_json_model(path, RunSummary)
            except (JSONFileError, OSError) as error:
                raise ConfigError(
                    unreadable(path, "the run summary", error)
                    + ". Use another --out directory or remove the file to start over."
                ) from None
            summary = summary.model_copy(update={k: v for k, v in metadata.items() if v is not None})
        else:
            summary = RunSummary(**metadata)
        return cls(out, summary)

    def finished(self, task_id: str, retry_failed: bool = False) -> bool:
        record = self.summary.tasks.get(task_id)
        if record is None:
            return False
        return record.status == "completed" or not retry_failed

    def record(self, record: TaskRecord) -> None:
        with self._lock:
            self.summary.tasks[record.task_id] = record
            self.summary.updated = utc_now()
            self._save()

    def save(self) -> None:
        with self._lock:
            self._save()

    def _save(self) -> None:
        tmp = self.path.with_suffix(".json.tmp")
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            tmp.write_text(self.summary.model_dump_json(indent=1) + "\n", encoding="utf-8")
            tmp.replace(self.path)
        except OSError as error:
            # Nothing more can be recorded (a full disk, a directory in the way): stop the run.
            with suppress(OSError):
                tmp.unlink(missing_ok=True)
            raise ConfigError(
                f"cannot save the run summary {self.path}: {error.strerror or error}. The tasks it recorded before "
                "are kept; free space (or fix the directory) and rerun the same command to resume."
            ) from None


def _refuse_newer(path: Path) -> None:
    """A summary a newer runner wrote (``version`` above :data:`SUMMARY_VERSION`) is not resumed.

    Its records may mean what this runner cannot tell (and its format may not even validate):
    resuming would rewrite it in the old format, losing what the newer runner recorded. Checked on
    the raw JSON, before validation, so the reader learns the version is the problem."""
    try:
        data = parse_json(decode_text(path.read_bytes()))
    except (OSError, ValueError):
        return  # unreadable: read_json_model says why
    version = data.get("version") if isinstance(data, dict) else None
    if isinstance(version, int) and not isinstance(version, bool) and version > SUMMARY_VERSION:
        written_by = data.get("runner_version")
        by = f" by runner {written_by}" if isinstance(written_by, str) and written_by else ""
        raise ConfigError(
            f"{path}: the run summary was written{by} in format version {version}; this runner reads "
            f"version {SUMMARY_VERSION} and would lose what it cannot read. Resume the run with the newer "
            "runner, or use another --out directory."
        )


class ModelPrice(BaseModel):
    """US dollars per million tokens."""

    input: float = Field(ge=0)
    output: float = Field(ge=0)

    @model_validator(mode="before")
    @classmethod
    def _accept_pairs(cls, value: Any) -> Any:
        if isinstance(value, (list, tuple)) and len(value) == 2:
            return {"input": value[0], "output": value[1]}
        if isinstance(value, dict):
            aliases = {"input_per_million": "input", "output_per_million": "output", "prompt": "input", "completion": "output"}
            return {aliases.get(k, k): v for k, v in value.items()}
        return value

    def cost(self, input_tokens: int, output_tokens: int) -> float:
        return (input_tokens * self.input + output_tokens * self.output) / 1_000_000


def load_price_table(path: Path) -> dict[str, ModelPrice]:
    """``{"model": {"input": $/1M, "output": $/1M}}`` (or ``[input, output]`` pairs)."""
    data = read_json_file(path, "price table", ConfigError)
    if not isinstance(data, dict):
        raise ConfigError(f'{path}: expected {{"model": {{"input": 2.5, "output": 10.0}}}} ($ per 1M tokens).')
    table: dict[str, ModelPrice] = {}
    for model, raw in data.items():
        try:
            table[model] = ModelPrice.model_validate(raw)
        except ValidationError as error:
            first = error.errors()[0]
            raise ConfigError(
                f"{path}: model {model!r}: {'.'.join(map(str, first['loc'])) or 'price'}: {first['msg']} "
                '(expected {"input": $/1M tokens, "output": $/1M tokens}).'
            ) from None
    return table


def price_for(table: dict[str, ModelPrice] | None, model: str | None) -> ModelPrice | None:
    """Exact model name first, then the name without a ``provider/`` prefix."""
    if not table or not model:
        return None
    return table.get(model) or table.get(model.rsplit("/", 1)[-1])
