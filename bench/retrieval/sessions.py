"""Query sets replayed as sessions, for ``route``'s session prior (:mod:`index.search.session_prior`).

``route`` lifts the tools of the servers its session last ran a tool of without error. A query set
holds single queries, so each dev-set task is replayed as one session: its steps are routed in
order, and before step s the session has used the servers of steps 1..s-1, by one of two stand-ins
for what the agent ran:

- *annotated* (:func:`annotated_ran`): each earlier step ran its annotated tools;
- *route's first answer* (:func:`first_answer_ran`): each earlier step ran the tool the shipped
  ranker puts first for its ``<tool_assistant>`` query, right or wrong (no label is read), alone
  or itself ranked in its session.

A task's question is its session's first query (nothing used yet). The real agent queries carry
their own sessions (:attr:`bench.retrieval.sets.Query.session`).
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Mapping, Sequence

import numpy as np

from bench.retrieval.lab import Ranked, Space, fused, parts, rank_lifted, top_indices
from bench.retrieval.sets import Query
from index.search.ranking import HYBRID
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


def first_answer_ran(steps: Sequence[Query], scores: Sequence[np.ndarray], space: Space, weight: float = 0.0) -> Ran:
    """Each step ran the first tool of its ``<tool_assistant>`` query's ``scores``; with a
    ``weight``, that first answer ranked as ``route`` ranks it within its session, lifted by the
    servers of the answers before it (an agent looping on ``route``'s first answer)."""
    ran: dict[str, dict[int, list[str]]] = defaultdict(dict)
    asked = sorted(
        ((query, score) for query, score in zip(steps, scores, strict=True) if query.form == AGENT_FORM),
        key=lambda pair: (pair[0].task_id, pair[0].step),
    )
    for query, score in asked:
        lift = session_lift(space, session_before(ran[query.task_id], query.step), weight)
        ran[query.task_id][query.step] = [server_of(space, top_indices(score if lift is None else score + lift, 1)[0])]
    return ran


def session_before(steps: Mapping[int, Sequence[str]], step: int) -> tuple[str, ...]:
    """The session before ``step``: the servers its task's earlier steps ran, remembered in order
    as the copilot remembers them (most recent first, at most its memory)."""
    recent = RecentServers()
    for earlier in sorted(s for s in steps if s < step):
        for server in steps[earlier]:
            recent.note(server)
    return recent.servers()


def sessions_of(sets: Sets, ran: Ran) -> Sessions:
    """Each query's session: a dev-set step's is its task's earlier steps; a real agent query's is
    its own; a task question starts one."""
    return {
        query: query.session if query.form == "real" else session_before(ran.get(query.task_id, {}), query.step)
        for queries in sets.values()
        for query in queries
    }


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

    def boost(query: Query) -> np.ndarray | float:
        lift = session_lift(space, sessions.get(query, ()), weight)
        return 0.0 if lift is None else lift

    return rank_lifted(space, queries, fused_of if fused_of is not None else fused_scores(space, queries), boost, depth)


def server_of(space: Space, position: int) -> str:
    return space.space.server_names[int(space.space.tool_servers[position])]
