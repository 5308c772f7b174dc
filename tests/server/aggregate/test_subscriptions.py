"""Resource subscriptions through the copilot (server.aggregate.subscriptions): the child stays
subscribed exactly while some host holds the resource, whatever order the hosts' requests and
the child's answers come in.

The end-to-end tests (a real child behind the real copilot) are in ``test_proxy.py`` and
``test_unprefixed.py``; here the child is a recorder whose answers the test releases one by one,
to put the requests in the orders that only a slow child produces.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

import anyio
from mcp.server.subscriptions import InMemorySubscriptionBus

from server.aggregate.notify import Broadcaster
from server.aggregate.subscriptions import ResourceSubscriptions


URI = "file:///notes.txt"
HOST_URI = "copilot://docs/file:///notes.txt"


class SlowChild:
    """A child's session: records what it was asked and, when ``hold`` names a method, answers
    that method only once the test sets ``release``."""

    def __init__(self) -> None:
        self.subscribed: set[str] = set()
        self.asked: list[tuple[str, str]] = []
        self.hold: str | None = None
        self.release = anyio.Event()
        self.arrived = anyio.Event()

    async def _held(self, method: str) -> None:
        if self.hold == method:
            self.arrived.set()
            with anyio.fail_after(10):
                await self.release.wait()

    async def subscribe_resource(self, uri: str) -> None:
        self.asked.append(("subscribe", uri))
        await self._held("subscribe")
        self.subscribed.add(uri)

    async def unsubscribe_resource(self, uri: str) -> None:
        self.asked.append(("unsubscribe", uri))
        await self._held("unsubscribe")
        self.subscribed.discard(uri)


def requester(child: SlowChild) -> Callable[..., Awaitable[Any]]:
    async def request(server: str, what: str, operation: Callable[[SlowChild], Awaitable[Any]]) -> Any:
        assert server == "docs"
        return await operation(child)

    return request


async def test_an_unsubscribe_on_its_way_does_not_undo_a_later_subscribe() -> None:
    """Host A leaves while host B subscribes: B's subscribe waits for A's unsubscribe to reach the
    child, so the child ends subscribed (it used to end unsubscribed when the two crossed)."""
    child = SlowChild()
    async with anyio.create_task_group() as group:
        subscriptions = ResourceSubscriptions(requester(child), Broadcaster(InMemorySubscriptionBus()), group)
        await subscriptions.subscribe("A", HOST_URI, "docs", URI)
        child.hold = "unsubscribe"
        group.start_soon(subscriptions.unsubscribe, "A", HOST_URI)
        with anyio.fail_after(10):
            await child.arrived.wait()
        done = anyio.Event()

        async def subscribe_b() -> None:
            await subscriptions.subscribe("B", HOST_URI, "docs", URI)
            done.set()

        group.start_soon(subscribe_b)
        await anyio.wait_all_tasks_blocked()
        assert not done.is_set()  # B waits for its turn behind A's unsubscribe
        child.release.set()
        with anyio.fail_after(10):
            await done.wait()
    assert child.asked == [("subscribe", URI), ("unsubscribe", URI), ("subscribe", URI)]
    assert child.subscribed == {URI}
    assert subscriptions.subscribers("docs", URI) == {HOST_URI: ["B"]}


async def test_the_last_host_leaving_unsubscribes_once_and_a_restart_renews_only_what_is_held() -> None:
    child = SlowChild()
    async with anyio.create_task_group() as group:
        subscriptions = ResourceSubscriptions(requester(child), Broadcaster(InMemorySubscriptionBus()), group)
        await subscriptions.subscribe("A", HOST_URI, "docs", URI)
        await subscriptions.subscribe("B", HOST_URI, "docs", URI)
        await subscriptions.subscribe("B", "copilot://docs/file:///other.txt", "docs", "file:///other.txt")
        subscriptions.forget("A")
        await anyio.wait_all_tasks_blocked()
        assert child.subscribed == {URI, "file:///other.txt"}  # B still holds it
        await subscriptions.unsubscribe("B", "copilot://docs/file:///other.txt")
        assert child.subscribed == {URI}

        child.subscribed.clear()  # the child restarted: the new process knows no subscriptions
        subscriptions.child_started("docs", restart=True)
        await anyio.wait_all_tasks_blocked()
        assert child.subscribed == {URI}
        subscriptions.forget("B")
        await anyio.wait_all_tasks_blocked()
    assert child.subscribed == set()
    assert child.asked.count(("unsubscribe", URI)) == 1
    assert subscriptions._turns == {}  # noqa: SLF001 -- nothing kept for resources nobody holds


async def test_a_session_that_ends_while_the_child_answers_leaves_the_child_unsubscribed() -> None:
    child = SlowChild()
    child.hold = "subscribe"
    async with anyio.create_task_group() as group:
        subscriptions = ResourceSubscriptions(requester(child), Broadcaster(InMemorySubscriptionBus()), group)
        group.start_soon(subscriptions.subscribe, "A", HOST_URI, "docs", URI)
        with anyio.fail_after(10):
            await child.arrived.wait()
        subscriptions.forget("A")
        child.release.set()
        await anyio.wait_all_tasks_blocked()
    assert child.asked == [("subscribe", URI), ("unsubscribe", URI)]
    assert child.subscribed == set()
    assert subscriptions.subscribers("docs", URI) == {}
