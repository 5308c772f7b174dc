"""What a judged run's report holds (``report.json``): typed records, one definition shared by
the builder, the renderings, ``compare`` and ``leaderboard``."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, Field

from evaluation.report.stats import Confusion, wilson_interval
from server.trajectory import utc_now

Outcome = Literal["success", "failure", "abstain", "not_judged", "no_trajectory"]


class TaskInfo(BaseModel):
    task_id: str
    question: str
    category: str
    gold_tools: list[str] = Field(default_factory=list)


class JudgeInfo(BaseModel):
    models: list[str]
    prompt: str
    key_points: str
    base_url: str | None = None


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


class Rate(BaseModel):
    n: int
    success: int
    rate: float
    ci95: tuple[float, float]

    @classmethod
    def of(cls, success: int, n: int) -> Rate:
        return cls(n=n, success=success, rate=success / n if n else 0.0, ci95=wilson_interval(success, n))


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
    gold_tools: list[str] = Field(default_factory=list)
    gold_retrieved: bool | None = None
    gold_rank: int | None = None
    gold_executed: bool | None = None
    unavailable_servers: list[str] = Field(default_factory=list)
    thoughts: str = ""


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
    success_rate: float
    human_agreement: float | None = None
    cohen_kappa: float | None = None


class EfficiencyGroup(BaseModel):
    n: int
    turns: float | None
    route_calls: float | None
    execute_calls: float | None
    distinct_tools: float | None
    tool_errors: float | None
    tokens: float | None = None
    cost: float | None = None


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
        "gold = tool names in the task's Annotator Metadata.Tools; rank = best 1-based position in any route result"
    )


class ServerHealth(BaseModel):
    server: str
    calls: int
    errors: int
    timeouts: int
    error_rate: float
    error_kinds: dict[str, int] = Field(default_factory=dict)
    tasks: int = 0


class Health(BaseModel):
    servers: list[ServerHealth] = Field(default_factory=list)
    failures_from_unavailable_servers: list[dict[str, object]] = Field(default_factory=list)


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
    n_tasks: int
    n_with_trajectory: int
    n_judged: int
    success: int
    failure: int
    success_rate: float
    ci95: tuple[float, float]
    by_category: dict[str, Rate]
    abstains: list[str]
    not_judged: list[str]
    missing_trajectories: list[str]
    judges: list[JudgeStats]
    human_agreement: float | None = None
    cohen_kappa: float | None = None
    confusion: Confusion | None = None
    human: HumanAgreement | None = None
    efficiency: dict[str, EfficiencyGroup]
    usage: Usage
    retrieval: Retrieval
    health: Health
    tasks: list[TaskRow]


