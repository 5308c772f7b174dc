"""The query sets ``bench retrieval`` reports side by side.

* ``agent-steps`` -- the committed agent-query dev set (:mod:`bench.retrieval.agent_queries`):
  one query per annotated step in five forms; relevant = the step's tools.
* ``questions`` -- each LiveMCPBench task's question; relevant = the task's annotated tools.
* ``real-agent`` -- the 12 ``route`` queries the paper's agent wrote in ``sample_trajectories.json``;
  relevant = their task's annotated tools.
* ``off-catalog`` -- requests the pool has no tool for (``bench/data/off_catalog.jsonl``): no
  relevant tool; used to measure weak-match answers.

Relevance is by tool name (a name several servers share counts as the same tool), as in the
paper. Queries none of whose relevant tools is in the catalog are left out and counted.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from pathlib import Path

from bench.retrieval.agent_queries import DATA_FILE, GUIDED_FORMS, load_dev_set
from evaluation.tasks import read_json_file
from index.errors import ConfigError

OFF_CATALOG_FILE = Path(__file__).resolve().parents[1] / "data" / "off_catalog.jsonl"
_NUMBERED = re.compile(r"^\s*\d+[.)]\s*")


@dataclass(frozen=True)
class Query:
    text: str
    relevant: frozenset[str]
    task_id: str
    category: str
    form: str
    #: The dev set's step number (0 elsewhere): a task's steps are routed in this order.
    step: int = 0
    #: The servers the agent's session had run a tool of without error before it sent this query,
    #: most recent first (the real agent queries; see :mod:`index.search.session_prior`).
    session: tuple[str, ...] = ()


@dataclass
class QuerySet:
    name: str
    queries: list[Query] = field(default_factory=list)
    skipped: int = 0
    note: str = ""

    def __len__(self) -> int:
        return len(self.queries)


def annotated_tools(task: dict) -> list[str]:
    text = str((task.get("Annotator Metadata") or {}).get("Tools") or "")
    return [_NUMBERED.sub("", line).strip() for line in text.splitlines() if line.strip()]


def read_annotations(path: Path) -> list[dict]:
    """LiveMCPBench's annotated tasks (``all_annotations.json``; none when the file is absent). A file
    that is not such a list is a :class:`ConfigError` naming the file and the entry."""
    if not path.exists():
        return []
    data = read_json_file(path, "task list", ConfigError)
    if not isinstance(data, list):
        raise ConfigError(f"{path}: expected LiveMCPBench's annotation list (a JSON list of tasks), got {type(data).__name__}.")
    for number, task in enumerate(data, 1):
        if not isinstance(task, dict) or not isinstance(task.get("Question"), str) or not isinstance(task.get("task_id"), str):
            raise ConfigError(
                f'{path}: entry {number} has no "Question" and "task_id" text (is this LiveMCPBench\'s all_annotations.json?).'
            )
        metadata = task.get("Annotator Metadata") or {}
        if not isinstance(metadata, dict):
            raise ConfigError(f'{path}: entry {number}: "Annotator Metadata" must be an object.')
        # Read as text: a number there named no tool, and the task was left out as one without tools.
        for field in ("Steps", "Tools"):
            if not isinstance(metadata.get(field) or "", str):
                raise ConfigError(
                    f'{path}: entry {number}: "Annotator Metadata"."{field}" must be text (numbered lines), '
                    f"got {type(metadata[field]).__name__}."
                )
    return data


def question_set(annotations: list[dict], known: set[str]) -> QuerySet:
    result = QuerySet("questions", note="task question; relevant = the task's annotated tools")
    for task in annotations:
        relevant = frozenset(n for n in annotated_tools(task) if n in known)
        if not relevant:
            result.skipped += 1
            continue
        result.queries.append(
            Query(str(task["Question"]), relevant, str(task["task_id"]), str(task.get("category") or ""), "question")
        )
    return result


def route_queries(path: Path) -> list[tuple[str, str]]:
    """``(task_id, query)`` of every ``route`` call in LiveMCPBench's sample trajectories."""
    return [(task_id, query) for task_id, query, _ in route_sessions(path)]


def route_sessions(path: Path) -> list[tuple[str, str, tuple[str, ...]]]:
    """``(task_id, query, session)`` of every ``route`` call in LiveMCPBench's sample trajectories;
    ``session`` is what the copilot's session prior would lift: the servers of the ``execute``
    calls before it that returned without error, most recent first."""
    from index.search.session_prior import RecentServers

    if not path.exists():
        return []
    calls = []
    for item in _trajectory_entries(path):
        recent = RecentServers()
        executed: dict[str, str] = {}  # tool call id -> server, until its result is read
        for message in item.get("messages") or []:
            for call in message.get("tool_calls") or []:
                function = call.get("function") or {}
                try:
                    arguments = json.loads(function.get("arguments") or "{}")
                except json.JSONDecodeError:
                    continue
                if not isinstance(arguments, dict):
                    continue
                if function.get("name") == "route":
                    query = arguments.get("query")
                    if isinstance(query, str) and query.strip():
                        calls.append((str(item.get("task_id")), query, recent.servers()))
                elif str(function.get("name") or "").startswith("execute") and isinstance(arguments.get("server_name"), str):
                    executed[str(call.get("id"))] = arguments["server_name"]
            server = executed.pop(str(message.get("tool_call_id")), None) if message.get("role") == "tool" else None
            if server is not None and _succeeded(str(message.get("content") or "")):
                recent.note(server)
    return calls


def _trajectory_entries(path: Path) -> list[dict]:
    """The entries of LiveMCPBench's trajectory file, checked for the shape :func:`route_sessions`
    reads: a :class:`ConfigError` naming the file and the entry (it was an AttributeError traceback)."""
    data = read_json_file(path, "trajectory file", ConfigError)
    if not isinstance(data, list):
        raise ConfigError(f"{path}: expected LiveMCPBench's trajectories (a JSON list of tasks), got {type(data).__name__}.")
    for number, item in enumerate(data, 1):
        # An entry without "messages" is no trajectory either: the annotation file given in its place
        # was read as trajectories without a route call, and the run measured no real agent queries.
        messages = item.get("messages") if isinstance(item, dict) else None
        if not isinstance(messages, list):
            raise ConfigError(f'{path}: entry {number} is not a trajectory (an object with a "messages" list; is this sample_trajectories.json?).')
        for index, message in enumerate(messages, 1):
            calls = message.get("tool_calls") if isinstance(message, dict) else None
            if not isinstance(message, dict) or not isinstance(calls or [], list) or not all(
                isinstance(call, dict) and isinstance(call.get("function") or {}, dict) for call in calls or []
            ):
                raise ConfigError(f"{path}: entry {number}, message {index}: not a chat message with a list of tool calls.")
    return data


def _succeeded(content: str) -> bool:
    """Whether a logged ``execute`` result is one the copilot would count: not a timeout, not an
    error result (the agent's log holds the child's result as JSON inside the printed one)."""
    return not content.startswith("Tool call timed out") and '"isError": true' not in content and "isError=True" not in content


def real_agent_set(path: Path, questions: QuerySet) -> QuerySet:
    by_task = {q.task_id: q for q in questions.queries}
    result = QuerySet("real-agent", note="route queries the paper's agent wrote; relevant = the task's tools")
    for task_id, text, session in route_sessions(path):
        task = by_task.get(task_id)
        if task is None:
            result.skipped += 1
            continue
        result.queries.append(Query(text, task.relevant, task_id, task.category, "real", session=session))
    return result


def agent_step_set(known: set[str], path: Path = DATA_FILE, *, task_level: dict[str, frozenset[str]] | None = None) -> QuerySet:
    """The dev set; with ``task_level`` (task -> its tools) relevant = the whole task's tools instead of the step's."""
    name = "agent-steps (task-level)" if task_level is not None else "agent-steps"
    result = QuerySet(name, note="generated step queries (5 forms); relevant = the step's tools")
    if not path.exists():
        result.note = f"{path} not found"
        return result
    for item in load_dev_set(path):
        relevant = frozenset(n for n in item.relevant if n in known)
        if task_level is not None:
            relevant = task_level.get(item.task_id, frozenset()) | relevant
        if not relevant:
            result.skipped += 1
            continue
        result.queries.append(Query(item.query, relevant, item.task_id, item.category, item.form, step=item.step))
    return result


def off_catalog_set(path: Path = OFF_CATALOG_FILE) -> QuerySet:
    result = QuerySet("off-catalog", note="requests the pool has no tool for (weak-match detection)")
    if not path.exists():
        return result
    for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
        if line.strip():
            result.queries.append(Query(json.loads(line)["query"], frozenset(), f"off-{number}", "off-catalog", "off"))
    return result


def guided(query: Query) -> bool:
    """Whether a dev-set query follows route's guidance (one operation per query)."""
    return query.form in GUIDED_FORMS
