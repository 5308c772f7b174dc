"""Rules that label an unsuccessful task from its log, with the call ids that show why.

The paper's classes, decided per annotated ("gold") tool and then for the task:

- **Other** -- the run itself broke (the runner ended the task with ``llm_error``, ``max_turns``,
  ``timeout``, ``copilot_failed`` …), or a gold tool's calls failed only because its server was
  unavailable, crashed or timed out;
- **Tool** -- a gold tool was called and its calls failed on the agent's side: the copilot's own
  validation (``invalid_params``, ``unknown_tool``, ``unknown_server``), a tool error, or a result
  that reports an error; or the agent asked for the gold tool, was shown it and never called it
  (shown only in answer to queries about something else, it is a Query error);
- **Retrieve** -- a route query asked for a gold tool's capability (the query's tool part, searched
  again against the index, ranks the gold tool among the first ``top_n``, or is close to the gold
  tool's own description) but no route call returned it;
- **Query** -- no route query asked for it (or the agent never called ``route``).

A task takes the first class in the order Other, Tool (called), Retrieve, Query, Tool (shown but
not called); a task whose gold tools all worked is Other (``answer``: the tools answered, the
final answer or file still fell short). Without annotated tools only Other and Tool can be read
from the log; the rest is ``undecided``.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, field

from evaluation.taxonomy.capability import CapabilityCheck, CapabilityVerdict
from evaluation.taxonomy.model import Diagnosis, ErrorClass, Evidence
from evaluation.tasks import normalise_tool_name
from evaluation.trajectories import UNAVAILABLE_KINDS, ToolCall, Trajectory

#: How the runner ends a task that never got to a proper answer.
RUN_FAILURES = frozenset(
    {
        "llm_error", "tools_refused", "copilot_failed", "timeout", "max_turns", "agent_failed", "no_answer",
        "agent_not_found", "missing_files", "workspace", "internal",
    }
)
#: The copilot's validation errors: the agent named or called the tool wrongly.
VALIDATION_KINDS = frozenset({"invalid_params", "unknown_tool", "unknown_server", "invalid_arguments"})
#: A result that is not flagged as an error but says it failed (``{"error": "…"}``, ``"status":
#: "error"``, a text starting with ``Error``), also inside LiveMCPBench's escaped JSON.
_SOFT_ERROR = re.compile(
    r"""\\*"error\\*"\s*:\s*\\*"|\\*"status\\*"\s*:\s*\\*"(?:error|failed|failure)|\\*"text\\*"\s*:\s*\\*"Error\b|^\s*Error\b""",
    re.IGNORECASE,
)
_EXCERPT = 160


def excerpt(text: str, limit: int = _EXCERPT) -> str:
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 1] + "…"


def soft_error(call: ToolCall) -> bool:
    return not call.is_error and bool(_SOFT_ERROR.search(call.output[:4000]))


def failed(call: ToolCall) -> bool:
    return call.is_error or soft_error(call)


@dataclass
class _GoldFinding:
    """What happened to one gold tool: its class (``None``: it worked) and the evidence."""

    tool: str
    label: ErrorClass | None
    strong: bool = True
    cause: str | None = None
    reason: str = ""
    evidence: list[Evidence] = field(default_factory=list)


def _run_failure(trajectory: Trajectory) -> Diagnosis | None:
    kind = trajectory.end_error_kind
    if kind not in RUN_FAILURES:
        return None
    return Diagnosis(
        task_id=trajectory.task_id,
        label="other",
        cause=kind,
        reason=f"the run ended the task: {excerpt(trajectory.end_reason or kind, 240)}",
        evidence=[Evidence(note=f"session_end: {excerpt(trajectory.end_reason or kind)}")],
    )


def _executed(trajectory: Trajectory, gold: str) -> list[ToolCall]:
    return [call for call in trajectory.execute_calls if normalise_tool_name(call.tool or "") == gold]


def _returned(trajectory: Trajectory, gold: str) -> list[tuple[ToolCall, int]]:
    found = []
    for call in trajectory.route_calls:
        for rank, (_server, tool) in enumerate(call.hits, 1):
            if normalise_tool_name(tool) == gold:
                found.append((call, rank))
                break
    return found


def _executions(gold: str, calls: list[ToolCall]) -> _GoldFinding:
    if any(not failed(call) for call in calls):
        return _GoldFinding(gold, None)
    infra = [call for call in calls if call.error_kind in UNAVAILABLE_KINDS]
    if infra:
        kind = infra[-1].error_kind or "server_unavailable"
        return _GoldFinding(
            gold,
            "other",
            cause=kind,
            reason=f"{gold} was called {len(calls)} time(s) and never answered: its server was unavailable ({kind})",
            evidence=[Evidence(call=call.label, note=f"{call.error_kind}: {excerpt(call.error or call.output)}") for call in infra[:3]],
        )
    kinds = [call.error_kind if call.is_error else "error_in_result" for call in calls]
    cause = next((kind for kind in kinds if kind in VALIDATION_KINDS), kinds[-1] or "tool_error")
    return _GoldFinding(
        gold,
        "tool",
        cause=cause,
        reason=f"{gold} was called {len(calls)} time(s) and every call failed ({cause})",
        evidence=[
            Evidence(call=call.label, note=f"{call.error_kind or 'result reports an error'}: {excerpt(call.error or call.output)}")
            for call in calls[:3]
        ],
    )


def _misnamed(trajectory: Trajectory, gold: str) -> list[ToolCall]:
    """Calls the copilot refused as unknown whose name or message points at the gold tool."""
    readable = gold.replace("_", " ")
    return [
        call
        for call in trajectory.execute_calls
        if call.error_kind in ("unknown_tool", "unknown_server")
        and (gold in normalise_tool_name(call.error or "") or readable in (call.error or "").lower().replace("_", " "))
    ]


def _queries(trajectory: Trajectory, gold: str, check: CapabilityCheck | None) -> _GoldFinding:
    routes = trajectory.route_calls
    if not routes:
        return _GoldFinding(gold, "query", cause="no_route", reason=f"the agent never called route, so {gold} was never asked for")
    verdicts: list[tuple[ToolCall, CapabilityVerdict | None]] = [
        (call, check.about(call.query or "", gold) if check is not None else None) for call in routes
    ]
    right = [(call, verdict) for call, verdict in verdicts if verdict is not None and verdict.right]
    if right:
        return _GoldFinding(
            gold,
            "retrieve",
            cause="not_returned",
            reason=f"a route query asked for {gold}'s capability but no route call returned it",
            evidence=[
                Evidence(call=call.label, note=f"query {excerpt(call.query or '', 100)!r}: {verdict.how}")  # type: ignore[union-attr]
                for call, verdict in right[:3]
            ],
        )
    if any(verdict is None for _, verdict in verdicts):
        return _GoldFinding(
            gold,
            "undecided",
            cause="no_capability_check",
            reason=f"{gold} was never returned; whether a query asked for it cannot be checked (it is not in the index or the tool descriptions)",
            evidence=[Evidence(call=call.label, note=f"query {excerpt(call.query or '', 100)!r}") for call in routes[:3]],
        )
    return _GoldFinding(
        gold,
        "query",
        cause="off_target",
        reason=f"none of the {len(routes)} route queries asked for {gold}'s capability",
        evidence=[
            Evidence(call=call.label, note=f"query {excerpt(call.query or '', 100)!r}: {verdict.how}")  # type: ignore[union-attr]
            for call, verdict in verdicts[:3]
        ],
    )


def _asked_for(call: ToolCall, gold: str, check: CapabilityCheck | None) -> bool | None:
    verdict = check.about(call.query or "", gold) if check is not None else None
    return None if verdict is None else verdict.right


def _asked_how(call: ToolCall, gold: str, check: CapabilityCheck | None) -> str:
    verdict = check.about(call.query or "", gold) if check is not None else None
    return verdict.how if verdict is not None else "not checked"


def _gold_finding(trajectory: Trajectory, gold: str, check: CapabilityCheck | None) -> _GoldFinding:
    calls = _executed(trajectory, gold)
    if calls:
        return _executions(gold, calls)
    misnamed = _misnamed(trajectory, gold)
    if misnamed:
        return _GoldFinding(
            gold,
            "tool",
            cause=misnamed[-1].error_kind,
            reason=f"the agent tried to call {gold} under a wrong server or tool name",
            evidence=[Evidence(call=call.label, note=excerpt(call.error or call.output)) for call in misnamed[:3]],
        )
    returned = _returned(trajectory, gold)
    asked = [(c, r) for c, r in returned if _asked_for(c, gold, check) is not False]
    if returned and not asked:
        # Returned only to queries about something else (a small catalogue returns everything).
        call, rank = returned[0]
        return _GoldFinding(
            gold,
            "query",
            cause="off_target",
            reason=f"route returned {gold} only to queries about something else, and the agent never asked for it",
            evidence=[Evidence(call=c.label, note=f"query {excerpt(c.query or '', 100)!r}: {_asked_how(c, gold, check)}") for c, _ in returned[:3]],
        )
    if asked:
        call, rank = asked[0]
        return _GoldFinding(
            gold,
            "tool",
            strong=False,
            cause="not_called",
            reason=f"route returned {gold} (rank {rank}) but the agent never called it",
            evidence=[Evidence(call=c.label, note=f"returned {gold} at rank {r}") for c, r in asked[:3]],
        )
    return _queries(trajectory, gold, check)


#: Which gold finding decides the task (earlier wins).
_ORDER: tuple[tuple[ErrorClass, bool], ...] = (
    ("other", True),
    ("tool", True),
    ("retrieve", True),
    ("query", True),
    ("tool", False),
    ("undecided", True),
)


def _without_gold(trajectory: Trajectory) -> Diagnosis:
    task_id = trajectory.task_id
    down: dict[str, ToolCall] = {}
    for call in trajectory.execute_calls:
        if call.server and call.error_kind in UNAVAILABLE_KINDS:
            down[call.server] = call
        elif call.server and not call.is_error:
            down.pop(call.server, None)
    if down:
        calls = list(down.values())
        return Diagnosis(
            task_id=task_id,
            label="other",
            cause=calls[-1].error_kind,
            reason=f"server(s) {', '.join(sorted(down))} never answered after failing",
            evidence=[Evidence(call=call.label, note=f"{call.error_kind}: {excerpt(call.error or call.output)}") for call in calls[:3]],
        )
    invalid = [call for call in trajectory.execute_calls if call.error_kind in VALIDATION_KINDS]
    if invalid:
        return Diagnosis(
            task_id=task_id,
            label="tool",
            cause=invalid[-1].error_kind,
            reason="the copilot refused calls with wrong parameters or names (no annotated tools to compare with)",
            evidence=[Evidence(call=call.label, note=f"{call.error_kind}: {excerpt(call.error or '')}") for call in invalid[:3]],
        )
    if not trajectory.route_calls:
        return Diagnosis(task_id=task_id, label="query", cause="no_route", reason="the agent never called route")
    return Diagnosis(
        task_id=task_id,
        label="undecided",
        cause="no_gold_tools",
        reason="the task has no annotated tools to check the route queries and calls against",
    )


def classify(trajectory: Trajectory, gold_tools: Sequence[str], check: CapabilityCheck | None = None) -> Diagnosis:
    """The error class of one unsuccessful task (see the module docstring for the rules)."""
    broken = _run_failure(trajectory)
    if broken is not None:
        return broken
    golds = list(dict.fromkeys(normalise_tool_name(name) for name in gold_tools if name.strip()))
    if not golds:
        return _without_gold(trajectory)
    findings = [_gold_finding(trajectory, gold, check) for gold in golds]
    for label, strong in _ORDER:
        chosen = [f for f in findings if f.label == label and f.strong == strong]
        if chosen:
            first = chosen[0]
            # Gold tools alike often cite the same calls (every route query, for each tool never
            # returned): each piece of evidence once, not once per tool.
            evidence = list({(e.call, e.note): e for f in chosen for e in f.evidence}.values())[:6]
            others = [f"{f.tool}: {f.reason}" for f in findings if f not in chosen and f.label is not None]
            alike = [f.tool for f in chosen[1:]]
            reason = first.reason + (f" (also {len(alike)} more gold tool(s) alike: {excerpt(', '.join(alike), 200)})" if alike else "")
            if others:
                evidence.append(Evidence(note="other gold tools: " + excerpt("; ".join(others), 300)))
            return Diagnosis(task_id=trajectory.task_id, label=label, cause=first.cause, reason=reason, evidence=evidence)
    worked = [call for gold in golds for call in _executed(trajectory, gold) if not failed(call)]
    return Diagnosis(
        task_id=trajectory.task_id,
        label="other",
        cause="answer",
        reason="every annotated tool was called and answered; the final answer or the files still fell short of the task",
        evidence=[Evidence(call=call.label, note=f"{call.tool} answered") for call in worked[:3]],
    )
