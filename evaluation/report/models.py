"""What a judged run's report holds (``report.json``): typed records, one definition shared by
the builder, the renderings, ``compare`` and ``leaderboard``."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, Field, field_validator

from evaluation.report.stats import Confusion, wilson_interval
from evaluation.taxonomy.model import CLASSES, Diagnosis, ErrorClass
from server.trajectory.records import utc_now

Outcome = Literal["success", "failure", "abstain", "not_judged", "no_trajectory"]


class TaskInfo(BaseModel):
    task_id: str
    question: str
    category: str
    gold_tools: list[str] = Field(default_factory=list)


class JudgeInfo(BaseModel):
    models: list[str]
    prompt: str
    #: Version of the prompt texts (bumped when a prompt changes; verdicts of two versions differ).
    prompt_version: int | None = None
    key_points: str
    base_url: str | None = None
    #: Judges + prompt + key-point mode, hashed: two reports compare like with like only when equal.
    config_hash: str | None = None


class QuestionMismatch(BaseModel):
    """A trajectory whose question differs from the task list's (the task list's is judged)."""

    task_id: str
    task_list: str
    trajectory: str


class InputInfo(BaseModel):
    paths: list[str] = Field(default_factory=list)
    tasks_file: str | None = None
    human_labels: str | None = None
    files_read: int = 0
    malformed_lines: int = 0
    problems: list[str] = Field(default_factory=list)
    unknown_task_ids: list[str] = Field(default_factory=list)
    #: task id -> why it could not be judged in the last run.
    errors: dict[str, str] = Field(default_factory=dict)
    question_mismatches: list[QuestionMismatch] = Field(default_factory=list)


class Rate(BaseModel):
    n: int
    success: int
    #: ``None`` when ``n`` is 0 (no task with an outcome): no rate, not 0%, and no interval.
    rate: float | None
    ci95: tuple[float, float] | None

    @classmethod
    def of(cls, success: int, n: int) -> Rate:
        return cls(n=n, success=success, rate=success / n if n else None, ci95=wilson_interval(success, n))


class TaskRow(BaseModel):
    task_id: str
    category: str
    question: str
    verdict: Outcome
    judges: dict[str, str] = Field(default_factory=dict)
    human: bool | None = None
    has_trajectory: bool = False
    complete: bool | None = None
    turns: int | None = None
    turns_estimated: bool = False
    route_calls: int = 0
    execute_calls: int = 0
    distinct_tools: int = 0
    tool_errors: int = 0
    input_tokens: int | None = None
    output_tokens: int | None = None
    cost: float | None = None
    #: Wall-clock seconds of the task (its sessions, first event to last) and of its tool calls.
    seconds: float | None = None
    tool_seconds: float | None = None
    gold_tools: list[str] = Field(default_factory=list)
    gold_retrieved: bool | None = None
    gold_rank: int | None = None
    gold_executed: bool | None = None
    unavailable_servers: list[str] = Field(default_factory=list)
    thoughts: str = ""
    #: Confirmations the copilot asked for, by answer (approved/declined/cancelled/token).
    confirmations: dict[str, int] = Field(default_factory=dict)
    #: Why the task did not succeed (unsuccessful tasks with a trajectory).
    diagnosis: Diagnosis | None = None
    started: str | None = None
    #: How the runner says the task ended (``completed``, ``failed``, ``timeout``) and why, when logged.
    run_status: str | None = None
    run_error_kind: str | None = None
    #: The error kind when the run itself, not the agent, ended the task (the endpoint, the copilot…).
    run_broke: str | None = None

    @property
    def confirmations_requested(self) -> int:
        return sum(self.confirmations.values())

    @property
    def has_outcome(self) -> bool:
        """Whether the task counts in the rates: all but those the judge never decided (a task
        without a trajectory, or an abstain, is a failure; an undecided one is no outcome)."""
        return self.verdict != "not_judged"


class HumanAgreement(BaseModel):
    n_labelled: int
    human_success_rate: float
    judge_success_rate: float
    agreement: float | None
    cohen_kappa: float | None
    confusion: Confusion
    judge_abstains: int
    false_successes: list[str]
    false_failures: list[str]
    labels_outside_tasks: int = 0


class JudgeStats(BaseModel):
    model: str
    success: int
    failure: int
    abstain: int
    #: ``None`` when no task was judged.
    success_rate: float | None
    human_agreement: float | None = None
    cohen_kappa: float | None = None


class JudgePair(BaseModel):
    """Two judges of a jury on the tasks both voted on (success vs not): no human labels needed."""

    judge_a: str
    judge_b: str
    n: int
    agreement: float | None
    cohen_kappa: float | None


class JuryAgreement(BaseModel):
    #: Tasks every judge voted on (those with a trajectory and an outcome).
    n: int
    #: Fleiss' kappa over all judges; ``None`` when undefined (every vote the same).
    fleiss_kappa: float | None
    #: Tasks the judges did not all decide alike.
    split_tasks: list[str] = Field(default_factory=list)
    pairs: list[JudgePair] = Field(default_factory=list)


class EfficiencyGroup(BaseModel):
    n: int
    turns: float | None
    route_calls: float | None
    execute_calls: float | None
    distinct_tools: float | None
    tool_errors: float | None
    tokens: float | None = None
    cost: float | None = None
    #: Wall-clock seconds per task, and of its tool calls (over the tasks whose logs have times).
    seconds: float | None = None
    tool_seconds: float | None = None


class Retrieval(BaseModel):
    tasks_with_gold: int
    tasks_routed: int
    gold_retrieved: int
    gold_retrieved_rate: float | None
    recall_at_1: float | None
    recall_at_5: float | None
    mean_best_rank: float | None
    median_best_rank: float | None
    gold_executed: int
    note: str = (
        "gold = tool names in the task's Annotator Metadata.Tools; rank = best 1-based position in any route result; "
        "hit@k (recall_at_k in report.json) = share of the tasks that routed with any gold tool in some route's top k"
    )


class ServerHealth(BaseModel):
    server: str
    #: Other spellings of the same server in the logs (differing in case, spaces, ``_`` or ``-``).
    aliases: list[str] = Field(default_factory=list)
    calls: int
    errors: int
    timeouts: int
    error_rate: float
    error_kinds: dict[str, int] = Field(default_factory=dict)
    tasks: int = 0


class ToolUsage(BaseModel):
    """One tool over the run: how often ``route`` showed it and the agent called it."""

    server: str
    tool: str
    #: Route answers that listed it, and the tasks they were in.
    routed: int = 0
    routed_tasks: int = 0
    #: ``execute`` calls of it, those that failed, and the tasks that called it (successful ones too).
    executed: int = 0
    errors: int = 0
    executed_tasks: int = 0
    successful_tasks: int = 0
    #: Tasks that annotate it (the task list's gold tools).
    gold_tasks: int = 0


class Health(BaseModel):
    servers: list[ServerHealth] = Field(default_factory=list)
    failures_from_unavailable_servers: list[dict[str, object]] = Field(default_factory=list)


class RetrievalSplit(BaseModel):
    """Success split by whether any ``route`` returned an annotated tool -- the paper's main
    diagnosis: agents that were shown the right tool succeed far more often."""

    returned: Rate
    not_returned: Rate
    #: Tasks with annotated tools whose agent never called ``route``.
    no_route: Rate


class Confirmations(BaseModel):
    policy: list[str] = Field(default_factory=list)
    requested: int = 0
    tasks_with_confirmations: int = 0
    by_answer: dict[str, int] = Field(default_factory=dict)


class ErrorTaxonomy(BaseModel):
    """Counts of the error classes of unsuccessful tasks, overall and per category."""

    counts: dict[ErrorClass, int] = Field(default_factory=dict)
    by_category: dict[str, dict[ErrorClass, int]] = Field(default_factory=dict)
    unsuccessful: int = 0
    llm_second_opinions: int = 0
    classes: tuple[ErrorClass, ...] = CLASSES


class Usage(BaseModel):
    tasks_with_usage: int
    input_tokens: int
    output_tokens: int
    cost: float | None
    judge_input_tokens: int
    judge_output_tokens: int


class Report(BaseModel):
    generated: str = Field(default_factory=utc_now)
    judge: JudgeInfo
    inputs: InputInfo
    #: The agent and model the logs name (the most frequent, when they differ).
    agent: str | None = None
    model: str | None = None
    #: Dates (ISO) of the first and last task in the logs; tasks are time-varying.
    first_task: str | None = None
    last_task: str | None = None
    n_tasks: int
    n_with_trajectory: int
    n_judged: int
    success: int
    failure: int
    #: Over the tasks with an outcome (:attr:`n_with_outcome`); ``None`` when no task has one (the
    #: judge failed or was not run on any): a 0% would read as an agent that failed every task.
    success_rate: float | None
    #: ``None`` exactly when ``success_rate`` is (an interval of no task read as a certain 0%).
    ci95: tuple[float, float] | None
    by_category: dict[str, Rate]
    abstains: list[str]
    not_judged: list[str]
    missing_trajectories: list[str]
    #: Unsuccessful tasks the run itself ended (task id -> error kind, such as ``llm_error``): counted
    #: as failures like the rest, but a rerun of them (``--retry-failed``) may change the rate.
    run_broke: dict[str, str] = Field(default_factory=dict)
    judges: list[JudgeStats]
    human_agreement: float | None = None
    cohen_kappa: float | None = None
    confusion: Confusion | None = None
    human: HumanAgreement | None = None
    #: Every tool a route showed or the agent called, most called first.
    tools: list[ToolUsage] = Field(default_factory=list)
    #: A jury's judges against each other (``None`` with one judge, and in older reports).
    jury: JuryAgreement | None = None
    efficiency: dict[str, EfficiencyGroup]
    usage: Usage
    retrieval: Retrieval
    retrieval_split: RetrievalSplit | None = None
    health: Health
    confirmations: Confirmations = Field(default_factory=Confirmations)
    taxonomy: ErrorTaxonomy = Field(default_factory=ErrorTaxonomy)
    tasks: list[TaskRow]

    @field_validator("tasks")
    @classmethod
    def _each_task_once(cls, tasks: list[TaskRow]) -> list[TaskRow]:
        # compare and leaderboard key rows by task: a task listed twice silently kept its last row.
        first: dict[str, int] = {}
        for number, row in enumerate(tasks):
            if row.task_id in first:
                raise ValueError(
                    f"task {row.task_id!r} is listed twice (tasks[{first[row.task_id]}] and tasks[{number}]); "
                    "each task has one row"
                )
            first[row.task_id] = number
        return tasks

    @property
    def n_with_outcome(self) -> int:
        """The tasks the rates rest on: all but those the judge never decided (``failure`` counts
        abstains and tasks without a trajectory)."""
        return self.success + self.failure


