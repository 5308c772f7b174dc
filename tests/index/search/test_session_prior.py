"""The session prior's memory and boost (index.search.session_prior); ranking with it is in
``test_tool_index.py``, a copilot's sessions in ``tests/server/copilot/test_copilot.py``."""

from __future__ import annotations

import threading

import numpy as np

from index.search.session_prior import SESSION_MEMORY, RecentServers, session_boost


def test_the_servers_are_remembered_most_recent_first_and_each_once() -> None:
    recent = RecentServers()
    assert recent.servers() == ()
    for server in ("maps", "files", "maps", "office"):
        recent.note(server)
    assert recent.servers() == ("office", "maps", "files")


def test_only_the_most_recent_servers_are_remembered() -> None:
    recent = RecentServers()
    names = [f"server-{n}" for n in range(SESSION_MEMORY + 2)]
    for name in names:
        recent.note(name)
    assert recent.servers() == tuple(reversed(names))[:SESSION_MEMORY]
    recent.note(names[2])  # used again: it is recent again, and the oldest left goes
    assert recent.servers()[0] == names[2] and len(recent.servers()) == SESSION_MEMORY


def test_notes_from_many_threads_are_all_counted() -> None:
    recent = RecentServers(memory=1000)
    threads = [threading.Thread(target=lambda n=n: [recent.note(f"s{n}-{i}") for i in range(100)]) for n in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=30)
    assert len(recent.servers()) == 800


def test_the_boost_lifts_every_tool_of_a_used_server_by_the_weight() -> None:
    index = {"maps": 0, "files": 1, "office": 2}
    tool_servers = np.array([2, 0, 1, 0, 2], dtype=np.int32)
    boost = session_boost(tool_servers, index, ("maps", "gone"), 2.0)
    assert boost is not None and boost.tolist() == [0.0, 2.0, 0.0, 2.0, 0.0]
    assert session_boost(tool_servers, index, ("office", "files"), 0.5).tolist() == [0.5, 0.0, 0.5, 0.0, 0.5]
    # nothing to add: no server used, none of them indexed, or no weight
    assert session_boost(tool_servers, index, (), 2.0) is None
    assert session_boost(tool_servers, index, ("gone",), 2.0) is None
    assert session_boost(tool_servers, index, ("maps",), 0.0) is None
