"""The session prior: what ``route`` adds to the tools of servers this session has already used.

Mid-task an agent routes once per sub-step, and the next sub-step is often served by a server it
has just used: the presentation it created is saved by the same server, the paper it found is
downloaded by the search's own server, the file it read is written back by the filesystem. Nothing
in a short step query says which of several same-kind servers the task is on; the session's own
calls do. ``route`` therefore adds ``weight`` (z-score units, as the usage prior: the dense signal's
weight is 1) to every tool of the servers this session ran a tool of without error, the
:data:`SESSION_MEMORY` most recent of them.

Measured with ``python -m bench.retrieval.studies.session`` (the README's retrieval section): on
the agent-steps set, each task's steps routed in order with the servers of its earlier steps as the
session's, it gains on hit@3 and prec@3 beyond noise, whether the earlier steps ran their annotated
tools or ``route``'s first answer; the paper agent's real queries, in their own sessions, rank the
same; a task's first query (every task question) is unchanged by construction. The weight was
chosen by cross-validation across tasks.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Collection, Mapping

import numpy as np

#: How many of the session's most recently used servers are lifted: a long host session moves on
#: from one task to the next, and the servers of a task long finished should stop counting.
SESSION_MEMORY = 4


class RecentServers:
    """The servers one session ran a tool of without error, most recent last (thread-safe, bounded)."""

    def __init__(self, memory: int = SESSION_MEMORY) -> None:
        self._memory = memory
        self._servers: OrderedDict[str, None] = OrderedDict()
        self._lock = threading.Lock()

    def note(self, server: str) -> None:
        with self._lock:
            self._servers[server] = None
            self._servers.move_to_end(server)
            while len(self._servers) > self._memory:
                self._servers.popitem(last=False)

    def servers(self) -> tuple[str, ...]:
        """The remembered servers, most recent first."""
        with self._lock:
            return tuple(reversed(self._servers))


def session_boost(
    tool_servers: np.ndarray, server_index: Mapping[str, int], used: Collection[str], weight: float
) -> np.ndarray | None:
    """What ``route`` adds to each tool's fused score: ``weight`` for a tool of a ``used`` server,
    0 otherwise; None when nothing is added (no weight, no used server in the index)."""
    known = [server_index[name] for name in used if name in server_index]
    if weight <= 0 or not known:
        return None
    lift = np.zeros(len(server_index), dtype=np.float32)
    lift[known] = weight
    return lift[tool_servers]
