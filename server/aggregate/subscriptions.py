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

A child's updates of one resource are coalesced (:mod:`server.aggregate.coalesce`): a child sending
100,000 of them costs each host one notification per :data:`UPDATE_INTERVAL`, the last update
always delivered; updates of resources nobody subscribed to cost nothing, and at most
:data:`MAX_PENDING_UPDATES` resources wait for delivery at once.
"""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator, Awaitable, Callable, Hashable
from contextlib import asynccontextmanager

import anyio
import anyio.abc

from server.aggregate.coalesce import Coalescer
from server.aggregate.notify import Broadcaster
from server.bounded import shown_name
from server.keyed_locks import KeyedLocks
from server.pool.interfaces import PoolListener
from server.pool.sessions import RELIST_INTERVAL

logger = logging.getLogger(__name__)

#: ``request(server, what, operation)``: the pool's way to send one request to a child.
Request = Callable[..., Awaitable[object]]
Target = tuple[str, str]  # (server, the child's URI)
#: Seconds between two deliveries of one resource's updates (as a flood of list_changed costs one listing each).
UPDATE_INTERVAL = RELIST_INTERVAL
#: Resources whose updates wait to be delivered at once; an update of one more is dropped (logged, counted).
MAX_PENDING_UPDATES = 1000


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
        #: The child resources the children are subscribed to now (as far as the copilot asked).
        self._at_child: set[Target] = set()
        #: Per child resource being changed: whose turn it is to talk to the child about it.
        self._turns: KeyedLocks[Target] = KeyedLocks()
        self.updates: Coalescer[Target] = Coalescer(
            self._deliver,
            task_group,
            interval=UPDATE_INTERVAL,
            max_pending=MAX_PENDING_UPDATES,
            what="resources",
            describe=lambda target: f"'{shown_name(target[1])}' of server '{shown_name(target[0])}'",
        )

    def keeps_alive(self, server: str) -> bool:
        return any(target[0] == server for target in self._at_child)

    async def subscribe(self, key: Hashable, uri: str, server: str, original: str) -> None:
        """Subscribe session ``key`` to ``uri``; raises the child's error if it refuses."""
        subscribed = self._by_session.setdefault(key, {})
        target = (server, original)
        if uri in subscribed and target in self._at_child:
            return
        async with self._turn(target):
            if self._by_session.get(key) is not subscribed:
                return  # the session ended while waiting its turn
            if target not in self._at_child:
                # Also for a subscription the host holds already: a restarted child that refused its
                # renewal is asked again (the host's retry was answered "subscribed" and did nothing).
                await self._subscribe_at_child(target)
                self._at_child.add(target)
            if uri in subscribed:
                return  # the same subscription, asked twice at once (or renewed): counted once
            if self._by_session.get(key) is not subscribed:  # the session ended while the child answered
                await self._settle(target)
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
        if self._refs[target] <= 0:
            del self._refs[target]
        async with self._turn(target):
            await self._settle(target)

    @asynccontextmanager
    async def _turn(self, target: Target) -> AsyncIterator[None]:
        """One subscribe or unsubscribe at a time per child resource, so the child's state
        (``_at_child``) follows the hosts' subscriptions in the order they changed: an unsubscribe
        still on its way must not land after a later subscribe of another host."""
        async with self._turns.hold(target, keep=lambda: target in self._refs or target in self._at_child):
            yield

    async def _settle(self, target: Target) -> None:
        """Unsubscribe at the child if no host holds ``target`` any more (called in its turn)."""
        if target in self._at_child and self._refs.get(target, 0) == 0:
            self._at_child.discard(target)
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
        target = (server, uri)
        if self._refs.get(target, 0) > 0:  # else nobody asked (children may announce more than they were asked for)
            self.updates.add(target)

    async def _deliver(self, target: Target) -> None:
        # The subscribers now: a host that left while the update waited does not hear it.
        found = self.subscribers(*target)
        for host_uri in sorted(found):  # one task: the spellings go out in a fixed order
            await self._broadcaster.resource_updated(host_uri, found[host_uri])

    async def settled(self) -> None:
        """Until every update of a child told so far reached the hosts (callers bound the wait)."""
        await self.updates.settled()

    def child_started(self, server: str, restart: bool) -> None:
        # A new process knows no subscriptions (after a crash, or a stop for being idle).
        gone = [target for target in self._at_child if target[0] == server]
        self._at_child.difference_update(gone)
        for target in sorted(gone):
            if self._refs.get(target, 0) > 0:
                self._task_group.start_soon(self._renew, target)

    async def _renew(self, target: Target) -> None:
        async with self._turn(target):
            if target in self._at_child or self._refs.get(target, 0) == 0:
                return  # subscribed again meanwhile, or nobody holds it any more
            try:
                await self._subscribe_at_child(target)
            except Exception as error:  # noqa: BLE001 -- reported; the hosts keep their subscription
                logger.warning(
                    "could not renew the subscription to %s of restarted server '%s': %s; a host subscribing to it "
                    "again asks the server again", target[1], target[0], error
                )
                return
            self._at_child.add(target)
