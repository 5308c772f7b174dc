"""Telling hosts that the copilot's tools, prompts or resources changed, in both protocol eras.

A handshake-era (2025-11-25 and before) client hears ``notifications/*/list_changed`` on its
connection's standalone channel (the stdio pipe, or the HTTP session's GET stream); a 2026-07-28
client hears them only on a ``subscriptions/listen`` stream it opened, which the SDK feeds from
the server's :class:`~mcp.server.subscriptions.SubscriptionBus`. Delivery is best effort either
way: a client that went away simply misses it.
"""

from __future__ import annotations

import logging
import weakref
from collections.abc import Hashable, Iterable
from typing import Any, Literal

import anyio

from mcp.server.connection import Connection
from mcp.server.subscriptions import (
    PromptsListChanged,
    ResourcesListChanged,
    ResourceUpdated,
    SubscriptionBus,
    ToolsListChanged,
)

logger = logging.getLogger(__name__)

ListKind = Literal["tools", "prompts", "resources"]
#: The session key every 2026-07-28 (session-less) request shares; handshake sessions are keyed
#: by their connection (``server.app``).
SHARED_SESSION = "shared"
_METHODS: dict[ListKind, str] = {
    "tools": "notifications/tools/list_changed",
    "prompts": "notifications/prompts/list_changed",
    "resources": "notifications/resources/list_changed",
}
_EVENTS = {"tools": ToolsListChanged, "prompts": PromptsListChanged, "resources": ResourcesListChanged}
#: Seconds one session may take to accept a notification. A client that never reads its event
#: stream fills its buffer at last; waiting on it would stall every other session's notifications
#: and the live index's worker that sends them.
NOTIFY_TIMEOUT = 5.0


class Broadcaster:
    """Handshake-era connections by session key, and the bus of 2026-era listen streams."""

    def __init__(self, bus: SubscriptionBus, notify_timeout: float = NOTIFY_TIMEOUT) -> None:
        self.bus = bus
        self.notify_timeout = notify_timeout
        self._connections: weakref.WeakValueDictionary[Hashable, Connection] = weakref.WeakValueDictionary()

    def register(self, key: Hashable, connection: Connection) -> None:
        """Remember a handshake-era connection (forgotten when it closes or is collected)."""
        if key in self._connections:
            return
        self._connections[key] = connection
        connection.exit_stack.callback(self._connections.pop, key, None)

    def knows(self, key: Hashable) -> bool:
        return key in self._connections

    @property
    def connection_count(self) -> int:
        return len(self._connections)

    async def changed(self, kind: ListKind, keys: Iterable[Hashable] | None = None) -> None:
        """Announce a change of ``kind`` to the sessions ``keys`` (``None``: every session).

        2026-era clients share one state (they have no session), so they are told whenever
        the shared key or everyone is meant; see ``server.aggregate.exposure``.
        """
        wanted = None if keys is None else set(keys)
        connections = [
            connection
            for key, connection in list(self._connections.items())
            if (wanted is None or key in wanted)
            # not allowed before the client's notifications/initialized
            and connection.initialized.is_set()
        ]
        await self._notify_all(connections, _METHODS[kind], None)
        if wanted is None or SHARED_SESSION in wanted:
            await self._publish(kind)

    async def resource_updated(self, uri: str, keys: Iterable[Hashable]) -> None:
        """Tell the subscribers ``keys`` that ``uri`` changed: handshake sessions by notification,
        2026-era listen streams (any other key) through the bus, which filters by URI itself."""
        streams = False
        connections = []
        for key in keys:
            connection = self._connections.get(key)
            if connection is None:
                streams = True
            else:
                connections.append(connection)
        await self._notify_all(connections, "notifications/resources/updated", {"uri": uri})
        if streams:
            await self._publish_event(ResourceUpdated(uri=uri))

    async def _notify_all(self, connections: list[Connection], method: str, params: dict[str, Any] | None) -> None:
        """``method`` to every connection at once, each given at most :attr:`notify_timeout`."""

        async def notify(connection: Connection) -> None:
            with anyio.move_on_after(self.notify_timeout) as scope:
                try:
                    await connection.outbound.notify(method, params)
                except Exception:  # noqa: BLE001 -- best effort: a client that left misses it
                    logger.debug("could not send %s to a session", method, exc_info=True)
            if scope.cancelled_caught:
                logger.debug("a session took over %gs to accept %s; it misses it", self.notify_timeout, method)

        if len(connections) == 1:
            await notify(connections[0])  # the common case, without a task group
            return
        async with anyio.create_task_group() as group:
            for connection in connections:
                group.start_soon(notify, connection)

    async def _publish(self, kind: ListKind) -> None:
        await self._publish_event(_EVENTS[kind]())

    async def _publish_event(self, event: Any) -> None:
        try:
            await self.bus.publish(event)
        except Exception:  # noqa: BLE001
            logger.debug("could not publish %r", event, exc_info=True)
