"""Telling sessions that lists changed (server.aggregate.notify): one client that never reads
cannot hold the others' notifications back."""

from __future__ import annotations

import anyio
from mcp.server.connection import Connection
from mcp.server.subscriptions import InMemorySubscriptionBus

from server.aggregate.notify import Broadcaster
from tests.server.aggregate.outbound import StreamOutbound

def _connection(outbound: StreamOutbound) -> Connection:
    connection = Connection(outbound, protocol_version="2025-11-25")  # type: ignore[arg-type]
    connection.initialized.set()
    return connection


async def test_a_session_that_never_reads_does_not_hold_back_the_others() -> None:
    broadcaster = Broadcaster(InMemorySubscriptionBus(), notify_timeout=0.2)
    stuck, reading = StreamOutbound(0), StreamOutbound(10)
    connections = {"stuck": _connection(stuck), "reading": _connection(reading)}  # held: the registry is weak
    for key, connection in connections.items():
        broadcaster.register(key, connection)
    with anyio.fail_after(10):
        await broadcaster.changed("tools")
        await broadcaster.resource_updated("notes://a", ["stuck", "reading"])
    assert reading.received() == [
        ("notifications/tools/list_changed", None),
        ("notifications/resources/updated", {"uri": "notes://a"}),
    ]
    assert stuck.received() == []


async def test_sessions_not_yet_initialized_or_not_asked_hear_nothing() -> None:
    broadcaster = Broadcaster(InMemorySubscriptionBus())
    early, other, asked = StreamOutbound(10), StreamOutbound(10), StreamOutbound(10)
    connections = {"early": _connection(early), "other": _connection(other), "asked": _connection(asked)}
    connections["early"].initialized = anyio.Event()
    for key, connection in connections.items():
        broadcaster.register(key, connection)
    with anyio.fail_after(10):
        await broadcaster.changed("prompts", ["early", "asked"])
    assert asked.received() == [("notifications/prompts/list_changed", None)]
    assert early.received() == [] and other.received() == []
