"""Resource subscriptions through the copilot: hosts subscribe to ``copilot://`` URIs, children to
their own URIs, and a child's ``notifications/resources/updated`` reaches the hosts that asked.

A 2025-11-25 session subscribes with ``resources/subscribe`` (and hears
``notifications/resources/updated`` on its connection); a 2026-07-28 client names the URIs in its
``subscriptions/listen`` request (and hears ``ResourceUpdated`` events on that stream). Either way
the copilot subscribes at the child once per (server, URI), however many hosts asked, unsubscribes
when the last one leaves, and subscribes again when the child restarts (a new process knows no
subscriptions).

One child resource may have several host spellings (an unprefixed server's own URI and its
``copilot://`` URI, or a percent-encoded server name): each subscription is kept under the
spelling the host used, and every spelling subscribed gets the child's updates under that
spelling; leaving one spelling leaves the others subscribed.
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
Target = tuple[str, str]  # (server, the child's URI)


class ResourceSubscriptions(PoolListener):
    """Who subscribed to which resource, under which spelling; see the module docstring."""

    def __init__(self, request: Request, broadcaster: Broadcaster, task_group: anyio.abc.TaskGroup) -> None:
        self._request = request
        self._broadcaster = broadcaster
        self._task_group = task_group
        #: Per session: the host URI it subscribed to -> the child resource it stands for.
        self._by_session: dict[Hashable, dict[str, Target]] = {}
        #: Per child resource: how many (session, host URI) subscriptions hold it.
        self._refs: dict[Target, int] = {}

    async def subscribe(self, key: Hashable, uri: str, server: str, original: str) -> None:
        """Subscribe session ``key`` to ``uri``; raises the child's error if it refuses."""
        subscribed = self._by_session.setdefault(key, {})
        if uri in subscribed:
            return
        target = (server, original)
        if self._refs.get(target, 0) == 0:
            await self._subscribe_at_child(target)
        if uri in subscribed:
            return  # the same subscription, asked twice at once: counted once
        if self._by_session.get(key) is not subscribed:  # the session ended while the child answered
            if self._refs.get(target, 0) == 0:
                self._task_group.start_soon(self._unsubscribe_at_child, target)
            return
        self._refs[target] = self._refs.get(target, 0) + 1
        subscribed[uri] = target

    async def unsubscribe(self, key: Hashable, uri: str) -> None:
        target = self._by_session.get(key, {}).pop(uri, None)
        if target is not None:
            await self._release(target)

    def forget(self, key: Hashable) -> None:
        """Session ``key`` ended: drop its subscriptions (children unsubscribed in the background)."""
        for target in self._by_session.pop(key, {}).values():
            self._task_group.start_soon(self._release, target)

    async def _release(self, target: Target) -> None:
        self._refs[target] = self._refs.get(target, 1) - 1
        if self._refs[target] > 0:
            return
        del self._refs[target]
        await self._unsubscribe_at_child(target)

    async def _subscribe_at_child(self, target: Target) -> None:
        server, original = target
        await self._request(server, "resources/subscribe", lambda session: session.subscribe_resource(original))

    async def _unsubscribe_at_child(self, target: Target) -> None:
        server, original = target
        try:
            await self._request(server, "resources/unsubscribe", lambda session: session.unsubscribe_resource(original))
        except Exception as error:  # noqa: BLE001 -- the child may be gone; nothing is left to stop
            logger.debug("could not unsubscribe %s from %s: %s", original, server, error)

    def subscribers(self, server: str, uri: str) -> dict[str, list[Hashable]]:
        """Host URI -> the sessions subscribed under it, for the child resource ``uri`` of ``server``."""
        target = (server, uri)
        found: dict[str, list[Hashable]] = {}
        for key, uris in self._by_session.items():
            for host_uri, subscribed in uris.items():
                if subscribed == target:
                    found.setdefault(host_uri, []).append(key)
        return found

    # -- PoolListener ---------------------------------------------------------------------------
    def resource_updated(self, server: str, uri: str) -> None:
        found = self.subscribers(server, uri)
        if found:  # else nobody asked (children may announce more than they were asked for)
            self._task_group.start_soon(self._announce, found)

    async def _announce(self, found: dict[str, list[Hashable]]) -> None:
        for host_uri in sorted(found):  # one task: the spellings go out in a fixed order
            await self._broadcaster.resource_updated(host_uri, found[host_uri])

    def child_started(self, server: str, restart: bool) -> None:
        if restart:
            for target in [t for t, count in self._refs.items() if count > 0 and t[0] == server]:
                self._task_group.start_soon(self._renew, target)

    async def _renew(self, target: Target) -> None:
        try:
            await self._subscribe_at_child(target)
        except Exception as error:  # noqa: BLE001 -- reported; the hosts keep their subscription
            logger.warning(
                "could not renew the subscription to %s of restarted server '%s': %s", target[1], target[0], error
            )
