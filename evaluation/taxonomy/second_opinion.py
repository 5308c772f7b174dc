"""An LLM's second opinion for the tasks the log cannot decide (``--taxonomy-llm``).

Asked only about ``undecided`` tasks, with the judge's endpoint, model and reply cache (so a
rerun costs nothing). The reply must end with ``Class: query|retrieve|tool|other``; anything else
leaves the task ``undecided``. The label is marked as the LLM's (``source: llm``) in the report.
"""

from __future__ import annotations

import logging
import re

from evaluation.judge.prompting.completions import CompletionService
from evaluation.judge.prompting.prompts import truncate_middle
from evaluation.llm import LLMError
from evaluation.taxonomy.classify import excerpt, failed
from evaluation.taxonomy.model import Diagnosis, Evidence
from evaluation.trajectories import Trajectory

logger = logging.getLogger(__name__)

SYSTEM = """You diagnose why an AI agent failed a task. The agent had two tools: `route`, which searches a large tool catalogue with a query, and `execute`, which calls a tool that route found. Classify the failure into exactly one class:

- query: the agent never searched for the capability the task needed (its route queries asked for other things, or it never called route);
- retrieve: the agent searched for the right capability, but route did not return a suitable tool;
- tool: a suitable tool was returned, but the agent did not call it, or called it with wrong parameters or names;
- other: anything else -- servers unavailable, timeouts, model or endpoint errors, running out of turns, or the tools worked and the answer was still wrong.

Reply with one line `Reason: <one sentence>` and then one line `Class: query`, `Class: retrieve`, `Class: tool` or `Class: other`."""

#: A "Class:" line and the word on it; only one of the four classes, and nothing that names another, is a label.
_CLASS_LINE = re.compile(r"^\s*[*_`]*class[*_`]*\s*:\s*(?P<value>.*)$", re.IGNORECASE | re.MULTILINE)
_CLASS_NAMES = re.compile(r"\b(query|retrieve|tool|other)\b", re.IGNORECASE)
_REASON = re.compile(r"^\s*[*_`]*reason[*_`]*\s*:\s*(.+)$", re.IGNORECASE | re.MULTILINE)
_HISTORY_CHARS = 12000


def _history(trajectory: Trajectory) -> str:
    lines = []
    for call in trajectory.calls:
        if call.kind == "route":
            found = ", ".join(f"{server}/{tool}" for server, tool in call.hits[:5]) or "nothing"
            lines.append(f"#{call.index} route {excerpt(call.query or '', 300)!r} -> {found}")
        else:
            state = f"ERROR {call.error_kind}" if call.is_error else ("reports an error" if failed(call) else "ok")
            lines.append(f"#{call.index} execute {call.server}/{call.tool} params={excerpt(str(call.params), 300)} -> {state}: {excerpt(call.error or call.output, 300)}")
    return truncate_middle("\n".join(lines) or "(no tool calls)", _HISTORY_CHARS)


def messages(trajectory: Trajectory, question: str, gold_tools: list[str], finding: Diagnosis) -> list[dict[str, str]]:
    user = (
        f"Task: {question}\n\n"
        f"Annotated tools (what a person used): {', '.join(gold_tools) or '(none)'}\n\n"
        f"Tool calls:\n{_history(trajectory)}\n\n"
        f"Final answer: {excerpt(trajectory.final_answer or '(none)', 1500)}\n\n"
        f"What the log shows: {finding.reason}"
    )
    return [{"role": "system", "content": SYSTEM}, {"role": "user", "content": user}]


async def second_opinion(
    service: CompletionService, model: str, trajectory: Trajectory, question: str, gold_tools: list[str], finding: Diagnosis
) -> Diagnosis:
    """The LLM's label for an undecided task; the task stays undecided when it gives none."""
    try:
        completion = await service.complete(model, messages(trajectory, question, gold_tools, finding))
    except LLMError as error:
        logger.warning("taxonomy second opinion for %s failed: %s", trajectory.task_id, error)
        return finding
    text = completion.text or ""
    lines = _CLASS_LINE.findall(text)
    named = {name.lower() for name in _CLASS_NAMES.findall(lines[-1])} if lines else set()
    if len(named) != 1:
        # No class, one that is none of the four ("planning"), or several ("query/retrieve"): the
        # task stays undecided, and the log says what the model answered (it said nothing before).
        said = excerpt(lines[-1] if lines else text, 200)
        logger.warning(
            "taxonomy second opinion for %s: %s named %s, not one of query, retrieve, tool, other (%r); the task "
            "stays undecided", trajectory.task_id, model, "several classes" if len(named) > 1 else "no class", said,
        )
        return finding
    reason = _REASON.search(text)
    return Diagnosis(
        task_id=finding.task_id,
        label=named.pop(),  # type: ignore[arg-type]
        cause=finding.cause,
        reason=f"{model}: {excerpt(reason.group(1) if reason else text, 300)}",
        evidence=[*finding.evidence, Evidence(note=f"the log alone: {finding.reason}")],
        source="llm",
    )
