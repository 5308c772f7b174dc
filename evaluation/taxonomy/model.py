"""Error classes and the evidence behind each label."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, Field

ErrorClass = Literal["retrieve", "query", "tool", "other", "undecided"]
#: The paper's four classes, in its order (``undecided``: the log cannot tell).
CLASSES: tuple[ErrorClass, ...] = ("query", "retrieve", "tool", "other")
CLASS_NAMES = {
    "query": "Query error",
    "retrieve": "Retrieve error",
    "tool": "Tool error",
    "other": "Other error",
    "undecided": "undecided",
}


class Evidence(BaseModel):
    """One fact from the log: the call it is about (``#n (call id)``) and what it shows."""

    call: str | None = None
    note: str


class Diagnosis(BaseModel):
    """The error class of one unsuccessful task."""

    task_id: str
    label: ErrorClass
    #: One line a reader can check against the log.
    reason: str
    #: A finer cause inside the class, e.g. ``invalid_params``, ``server_unavailable``, ``max_turns``.
    cause: str | None = None
    evidence: list[Evidence] = Field(default_factory=list)
    #: ``log`` (decided by rules on the log) or ``llm`` (second opinion on an undecided case).
    source: Literal["log", "llm"] = "log"
