"""Query sets replayed as sessions, for ``route``'s session prior (:mod:`index.search.session_prior`).

``route`` lifts the tools of the servers its session last ran a tool of without error. A query set
holds single queries, so each dev-set task is replayed as one session: its steps are routed in
order, and before step s the session has used the servers of steps 1..s-1, by one of two stand-ins
for what the agent ran:

- *annotated* (:func:`annotated_ran`): each earlier step ran its annotated tools;
- *route's first answer* (:func:`first_answer_ran`): each earlier step ran the tool the shipped
  ranker puts first for its ``<tool_assistant>`` query, right or wrong (no label is read).

A task's question is its session's first query (nothing used yet). The real agent queries carry
their own sessions (:attr:`bench.retrieval.sets.Query.session`).
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Mapping, Sequence

import numpy as np

from bench.retrieval.lab import Ranked, Space, fused, parts, top_indices
from bench.retrieval.metrics import query_metrics
from bench.retrieval.sets import Query
from index.search.ranking import HYBRID, with_providers
from index.search.session_prior import RecentServers, session_boost

#: The form of a step an agent sends in the "route's first answer" stand-in.
AGENT_FORM = "assistant"
#: The shipped ranker with the session prior, as ``bench retrieval`` names it.
IN_SESSION = "shipped, in a session (first answers ran)"

Sets = Mapping[str, Sequence[Query]]
#: Each query's session: the servers it had used before the query, most recent first.
Sessions = Mapping[Query, tuple[str, ...]]
#: task -> step -> the servers that step ran.
Ran = Mapping[str, Mapping[int, Sequence[str]]]


def annotated_ran(steps: Sequence[Query], space: Space) -> Ran:
    """Each step ran its annotated tools: every server holding a tool of that name."""
    holders: dict[str, set[str]] = defaultdict(set)
    for position, name in enumerate(space.names):
        holders[name].add(server_of(space, position))
    ran: dict[str, dict[int, list[str]]] = defaultdict(dict)
    for query in steps:
        if query.form == AGENT_FORM:
            ran[query.task_id][query.step] = sorted({s for name in query.relevant for s in holders[name]})
    return ran


def first_answer_ran(steps: Sequence[Query], scores: Sequence[np.ndarray], space: Space) -> Ran:
    """Each step ran the first tool of its ``<tool_assistant>`` query's ``scores``."""
    ran: dict[str, dict[int, list[str]]] = defaultdict(dict)
    for query, score in zip(steps, scores, strict=True):
        if query.form == AGENT_FORM:
            ran[query.task_id][query.step] = [server_of(space, top_indices(score, 1)[0])]
    return ran


def first_answer_in_session_ran(steps: Sequence[Query], scores: Sequence[np.ndarray], space: Space, weight: float) -> Ran:
    """As :func:`first_answer_ran`, each step's first answer ranked as ``route`` ranks it within
    its session: lifted by the servers of the answers before it (the agent's own loop)."""
    ran: dict[str, dict[int, list[str]]] = defaultdict(dict)
    asked = sorted(
        ((query, score) for query, score in zip(steps, scores, strict=True) if query.form == AGENT_FORM),
        key=lambda pair: (pair[0].task_id, pair[0].step),
    )
    for query, score in asked:
        recent = RecentServers()
        for step in sorted(s for s in ran[query.task_id] if s < query.step):
            for server in ran[query.task_id][step]:
                recent.note(server)
        lift = session_lift(space, recent.servers(), weight)
        ran[query.task_id][query.step] = [server_of(space, top_indices(score if lift is None else score + lift, 1)[0])]
    return ran


def sessions_of(sets: Sets, ran: Ran) -> Sessions:
    """Each query's session: a dev-set step's is its task's earlier steps (in order, remembered as
    the copilot remembers them); a real agent query's is its own; a task question starts one."""
    sessions: dict[Query, tuple[str, ...]] = {}
    for queries in sets.values():
        for query in queries:
            if query.form == "real":
                sessions[query] = query.session
                continue
            recent = RecentServers()
            steps = ran.get(query.task_id, {})
            for step in sorted(s for s in steps if s < query.step):
                for server in steps[step]:
                    recent.note(server)
            sessions[query] = recent.servers()
    return sessions


def shared_steps(ran: Ran) -> tuple[int, int]:
    """(steps after a task's first that share a server with an earlier step, such steps)."""
    shared = total = 0
    for steps in ran.values():
        for step in sorted(steps)[1:]:
            earlier = {s for k in steps if k < step for s in steps[k]}
            total += 1
            shared += bool(earlier & set(steps[step]))
    return shared, total


def session_lift(space: Space, session: Sequence[str], weight: float) -> np.ndarray | None:
    """What ``route`` adds to each tool's fused score for this session (None: nothing)."""
    index = {name: i for i, name in enumerate(space.space.server_names)}
    return session_boost(space.space.tool_servers, index, session, weight)


def fused_scores(space: Space, queries: Sequence[Query]) -> list[np.ndarray]:
    """The shipped ranker's fused scores, before any prior and the input providers."""
    score = fused(HYBRID)
    return [score(space, parts(query.text)) for query in queries]


def rank_in_sessions(
    space: Space,
    queries: Sequence[Query],
    sessions: Sessions,
    weight: float,
    fused_of: Sequence[np.ndarray] | None = None,
    depth: int = 10,
) -> Ranked:
    """The shipped ranker with each query's session lifted, as ``route`` ranks it: the fused score
    (``fused_of``, computed when not given), plus the session's lift, then the input providers of
    the best tools lifted below them."""
    names, rows = [], []
    for query, fused_score in zip(queries, fused_of if fused_of is not None else fused_scores(space, queries), strict=True):
        scores = fused_score
        lift = session_lift(space, sessions.get(query, ()), weight)
        if lift is not None:
            scores = scores + lift
        if space.providers:
            scores = with_providers(scores, space.providers)
        ranked = [space.names[i] for i in top_indices(scores, depth)]
        names.append(ranked)
        rows.append(query_metrics(ranked, query.relevant) if query.relevant else {})
    return Ranked(names, rows)


def server_of(space: Space, position: int) -> str:
    return space.space.server_names[int(space.space.tool_servers[position])]
