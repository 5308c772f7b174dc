"""Resource subscriptions through the copilot: hosts subscribe to ``copilot://`` URIs, children to
their own URIs, and a child's ``notifications/resources/updated`` reaches the hosts that asked.

A 2025-11-25 session subscribes with ``resources/subscribe`` (and hears
``notifications/resources/updated`` on its connection); a 2026-07-28 client names the URIs in its
``subscriptions/listen`` request (and hears ``ResourceUpdated`` events on that stream). Either way
the copilot subscribes at the child once per (server, URI), however many hosts asked, unsubscribes
when the last one leaves, and subscribes again when the child restarts (a new process knows no
subscriptions).
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Hashable

import anyio.abc

from server.aggregate.notify import Broadcaster
from server.pool import PoolListener

logger = logging.getLogger(__name__)

#: ``request(server, what, operation)``: the pool's way to send one request to a child.
Request = Callable[..., Awaitable[object]]


class ResourceSubscriptions(PoolListener):
    """Who subscribed to which resource; see the module docstring."""

    def __init__(self, request: Request, broadcaster: Broadcaster, task_group: anyio.abc.TaskGroup) -> None:
        self._request = request
        self._broadcaster = broadcaster
        self._task_group = task_group
        self._by_session: dict[Hashable, set[str]] = {}
        self._target: dict[str, tuple[str, str]] = {}  # host URI -> (server, the child's URI)
        self._host_uri: dict[tuple[str, str], str] = {}
        self._refs: dict[tuple[str, str], int] = {}

    async def subscribe(self, key: Hashable, uri: str, server: str, original: str) -> None:
        """Subscribe session ``key`` to ``uri``; raises the child's error if it refuses."""
        subscribed = self._by_session.setdefault(key, set())
        if uri in subscribed:
            return
        target = (server, original)
        if self._refs.get(target, 0) == 0:
            await self._request(server, "resources/subscribe", lambda session: session.subscribe_resource(original))
        self._refs[target] = self._refs.get(target, 0) + 1
        self._target[uri], self._host_uri[target] = target, uri
        subscribed.add(uri)

    async def unsubscribe(self, key: Hashable, uri: str) -> None:
        subscribed = self._by_session.get(key, set())
        if uri not in subscribed:
            return
        subscribed.discard(uri)
        await self._release(uri)

    def forget(self, key: Hashable) -> None:
        """Session ``key`` ended: drop its subscriptions (children unsubscribed in the background)."""
        for uri in self._by_session.pop(key, set()):
            self._task_group.start_soon(self._release, uri)

    async def _release(self, uri: str) -> None:
        target = self._target.get(uri)
        if target is None:
            return
        self._refs[target] = self._refs.get(target, 1) - 1
        if self._refs[target] > 0:
            return
        del self._refs[target]
        server, original = target
        try:
            await self._request(server, "resources/unsubscribe", lambda session: session.unsubscribe_resource(original))
        except Exception as error:  # noqa: BLE001 -- the child may be gone; nothing is left to stop
            logger.debug("could not unsubscribe %s from %s: %s", original, server, error)

    # -- PoolListener ---------------------------------------------------------------------------
    def resource_updated(self, server: str, uri: str) -> None:
        host_uri = self._host_uri.get((server, uri))
        if host_uri is None:
            return  # nobody asked (children may announce more than they were asked for)
        keys = [key for key, uris in self._by_session.items() if host_uri in uris]
        self._task_group.start_soon(self._broadcaster.resource_updated, host_uri, keys)

    def child_started(self, server: str, restart: bool) -> None:
        if restart:
            for target in [t for t, count in self._refs.items() if count > 0 and t[0] == server]:
                self._task_group.start_soon(self._renew, target)

    async def _renew(self, target: tuple[str, str]) -> None:
        server, original = target
        try:
            await self._request(server, "resources/subscribe", lambda session: session.subscribe_resource(original))
        except Exception as error:  # noqa: BLE001 -- reported; the hosts keep their subscription
            logger.warning("could not renew the subscription to %s of restarted server '%s': %s", original, server, error)
