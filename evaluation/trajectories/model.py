"""One typed :class:`Trajectory` per task, whatever it was read from, and what reading skipped."""

from __future__ import annotations

import hashlib
import json
from typing import Any, Literal

from pydantic import BaseModel, Field

from server.trajectory.records import WorkspaceFile

#: Execute error kinds that mean the server itself could not serve the call.
UNAVAILABLE_KINDS = frozenset({"server_unavailable", "child_crashed", "timeout"})
#: How the runner ends a task when the run itself broke, not the agent (``session_end``'s error
#: kind): the model endpoint, the copilot, the task's files or the runner. Such a task is judged and
#: counted like any other, and reports name it, since rerunning it (``--retry-failed``) may change it.
RUN_BROKE_KINDS = frozenset(
    {"missing_files", "workspace", "agent_not_found", "tools_refused", "llm_error", "copilot_failed", "internal"}
)
#: The copilot's answer when a call needs the user's OK and no elicitation answered it.
CONFIRMATION_REQUIRED = "confirmation_required"


class ToolCall(BaseModel):
    """One ``route`` or ``execute`` call, numbered in trajectory order (``#index``)."""

    index: int
    kind: Literal["route", "execute"]
    call_id: str = ""
    ts: str | None = None
    query: str | None = None
    #: Ranked ``(server, tool)`` results of a route call.
    hits: list[tuple[str | None, str]] = Field(default_factory=list)
    server: str | None = None
    tool: str | None = None
    params: Any = None
    #: The call's arguments as the agent sent them (what the paper's judge is shown).
    arguments: str = ""
    output: str = ""
    is_error: bool = False
    error: str | None = None
    error_kind: str | None = None
    latency_ms: float | None = None

    @property
    def label(self) -> str:
        """How reports cite the call: ``#3`` plus its id when the log has one."""
        return f"#{self.index}" + (f" ({self.call_id})" if self.call_id else "")


class UsageTotals(BaseModel):
    input_tokens: int = 0
    output_tokens: int = 0
    cost: float | None = None
    model: str | None = None


class Confirmation(BaseModel):
    """A confirmation the copilot asked for: elicited (answered by the runner's client) or a
    confirm token handed to the agent (``answer`` ``token``)."""

    server: str | None = None
    tool: str | None = None
    answer: Literal["approved", "declined", "cancelled", "token"]
    ts: str | None = None


class Trajectory(BaseModel):
    task_id: str
    format: Literal["copilot", "livemcpbench"]
    question: str | None = None
    #: The task's question as the task list states it, when the log also has a rewritten one
    #: (the runner maps ``/root`` to the task's workspace in ``question``).
    original_question: str | None = None
    category: str | None = None
    steps: list[str] = Field(default_factory=list)
    gold_tools: list[str] = Field(default_factory=list)
    final_answer: str | None = None
    calls: list[ToolCall] = Field(default_factory=list)
    usage: UsageTotals | None = None
    workspace: list[WorkspaceFile] = Field(default_factory=list)
    confirmations: list[Confirmation] = Field(default_factory=list)
    #: The runner's ``--confirm`` policy (``host`` for external agents), when logged.
    confirm_policy: str | None = None
    agent: str | None = None
    model: str | None = None
    #: Time of the first event (ISO 8601); tasks are time-varying, so reports keep the dates.
    started: str | None = None
    #: Wall-clock seconds of the task's sessions (first event to last, summed over sessions), and of
    #: its ``execute`` calls (their logged latencies); ``None`` when the log does not say.
    seconds: float | None = None
    tool_seconds: float | None = None
    #: LLM turns of the agent; ``None`` when the log does not say.
    turns: int | None = None
    sessions: int = 1
    #: ``False`` when the last session has no ``session_end`` (the agent crashed or was killed).
    complete: bool = True
    #: How the runner says the task ended (``session_end``): status and error kind, when logged.
    end_status: str | None = None
    end_error_kind: str | None = None
    end_reason: str | None = None
    human_success: bool | None = None
    sources: list[str] = Field(default_factory=list)

    @property
    def run_broke(self) -> str | None:
        """The error kind when the run itself ended the task (:data:`RUN_BROKE_KINDS`), else ``None``."""
        kind = self.end_error_kind
        return kind if kind in RUN_BROKE_KINDS and self.end_status != "completed" else None

    @property
    def route_calls(self) -> list[ToolCall]:
        return [call for call in self.calls if call.kind == "route"]

    @property
    def execute_calls(self) -> list[ToolCall]:
        return [call for call in self.calls if call.kind == "execute"]

    @property
    def distinct_tools(self) -> int:
        return len({(call.server, call.tool) for call in self.execute_calls})

    @property
    def tool_errors(self) -> int:
        return sum(1 for call in self.execute_calls if call.is_error)

    @property
    def confirmations_requested(self) -> int:
        return len(self.confirmations)

    @property
    def estimated_turns(self) -> int:
        """Known turns, else an upper bound: one turn per call plus the answer."""
        if self.turns is not None:
            return self.turns
        return len(self.calls) + (1 if self.final_answer else 0)

    @property
    def task_question(self) -> str | None:
        """The question as the task list would state it (before the runner's path mapping)."""
        return self.original_question or self.question

    def content_hash(self) -> str:
        """Identifies what the judge sees; a changed trajectory is judged again on resume."""
        payload = self.model_dump(
            mode="json",
            include={"task_id", "question", "category", "steps", "gold_tools", "final_answer", "calls", "workspace", "complete"},
        )
        return hashlib.sha256(json.dumps(payload, sort_keys=True, ensure_ascii=False).encode()).hexdigest()[:16]


ProblemKind = Literal[
    "malformed_line", "malformed_entry", "skipped_file", "unreadable_file", "no_task", "duplicate_task", "duplicate_session",
    "mixed_runs",
]


class Problem(BaseModel):
    """Something in the input that was skipped or is doubtful; ``line`` and ``entry`` are 1-based."""

    kind: ProblemKind
    file: str
    line: int | None = None
    entry: int | None = None
    message: str

    def __str__(self) -> str:
        if self.entry is not None:
            return f"{self.file}: entry {self.entry}: {self.message}"
        where = f"{self.file}:{self.line}" if self.line else self.file
        return f"{where}: {self.message}"


class LoadResult(BaseModel):
    trajectories: dict[str, Trajectory] = Field(default_factory=dict)
    problems: list[Problem] = Field(default_factory=list)
    files_read: int = 0

    @property
    def malformed_lines(self) -> int:
        return sum(1 for problem in self.problems if problem.kind in ("malformed_line", "malformed_entry"))
