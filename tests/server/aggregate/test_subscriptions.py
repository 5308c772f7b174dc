"""Resource subscriptions through the copilot (server.aggregate.subscriptions): the child stays
subscribed exactly while some host holds the resource, whatever order the hosts' requests and
the child's answers come in.

The end-to-end tests (a real child behind the real copilot) are in ``test_proxy.py`` and
``test_unprefixed.py``; here the child is a recorder whose answers the test releases one by one,
to put the requests in the orders that only a slow child produces -- and, for floods of updates,
the hostile fixture (a real process in the real pool) with a host connection that reads when the
test says.
"""

from __future__ import annotations

import logging
import math
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from typing import Any

import anyio
import pytest
from mcp.server.connection import Connection
from mcp.server.subscriptions import InMemorySubscriptionBus

from index.catalog.servers import ServerConfig
from server.aggregate import subscriptions as subscriptions_module
from server.aggregate.notify import Broadcaster
from server.aggregate.subscriptions import UPDATE_INTERVAL, ResourceSubscriptions
from server.pool.sessions import ChildPool, PoolSettings
from tests.fixtures.hostile.hostile_server import UPDATED_URI
from tests.server.aggregate.outbound import StreamOutbound
from tests.server.pool.pool_support import running_pool, settings  # noqa: F401 -- settings is a fixture
from tests.support.processes import hostile_entry


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
        #: When set, subscribe requests are refused (a restarted child that does not take them yet).
        self.refuse = False

    async def _held(self, method: str) -> None:
        if self.hold == method:
            self.arrived.set()
            with anyio.fail_after(10):
                await self.release.wait()

    async def subscribe_resource(self, uri: str) -> None:
        self.asked.append(("subscribe", uri))
        await self._held("subscribe")
        if self.refuse:
            raise RuntimeError("no subscriptions today")
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


async def test_a_host_subscribing_again_after_a_refused_renewal_reaches_the_child(caplog: pytest.LogCaptureFixture) -> None:
    # The renewal failed after a restart, and the host's new subscribe was answered "subscribed"
    # without asking the child: the subscription was dead and could not be restored.
    child = SlowChild()
    async with anyio.create_task_group() as group:
        subscriptions = ResourceSubscriptions(requester(child), Broadcaster(InMemorySubscriptionBus()), group)
        await subscriptions.subscribe("A", HOST_URI, "docs", URI)
        child.subscribed.clear()
        child.refuse = True
        with caplog.at_level(logging.WARNING, logger="server.aggregate.subscriptions"):
            subscriptions.child_started("docs", restart=True)
            await anyio.wait_all_tasks_blocked()
        assert child.subscribed == set() and "could not renew the subscription" in caplog.text
        child.refuse = False
        await subscriptions.subscribe("A", HOST_URI, "docs", URI)
        assert child.subscribed == {URI} and child.asked.count(("subscribe", URI)) == 3
        await subscriptions.unsubscribe("A", HOST_URI)  # counted once: one unsubscribe frees it
        assert child.subscribed == set()


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


# -- floods of updates from a real child ----------------------------------------------------------
WAIT = 60.0
#: The hostile child is a 2025-era server: the copilot subscribes at it the 2025 way.
old_subscribe = pytest.mark.filterwarnings("ignore:resources/(un)?subscribe is removed")
UPDATED = "notifications/resources/updated"


@asynccontextmanager
async def subscribed_host(
    pool_settings: PoolSettings, buffer: float, uris: list[str]
) -> AsyncIterator[tuple[ChildPool, ResourceSubscriptions, StreamOutbound]]:
    """The hostile child in a real pool, and a host subscribed to its ``uris`` through the copilot's
    subscriptions, as ``server.aggregate.service`` wires them."""
    host = StreamOutbound(buffer)
    # The host waits as long as the test does: deliveries must not be given up on the clock.
    broadcaster = Broadcaster(InMemorySubscriptionBus(), notify_timeout=WAIT)
    connection = Connection(host, protocol_version="2025-11-25")  # type: ignore[arg-type]
    connection.initialized.set()
    broadcaster.register("host", connection)
    async with running_pool({"evil": ServerConfig(name="evil", **hostile_entry())}, pool_settings) as pool:
        async with anyio.create_task_group() as group:
            subscriptions = ResourceSubscriptions(pool.request, broadcaster, group)
            pool.subscribe(subscriptions)
            for uri in uris:
                await subscriptions.subscribe("host", f"copilot://evil/{uri}", "evil", uri)
            yield pool, subscriptions, host
            group.cancel_scope.cancel()


@old_subscribe
async def test_a_storm_of_updates_of_one_resource_reaches_the_host_merged_and_the_last_one_always(
    settings: PoolSettings,  # noqa: F811
) -> None:
    """One update, whose delivery waits for the host to read, then 10,000 more: they merge into one
    delivery after it (before: 10,001 notifications to every subscribed host)."""
    async with subscribed_host(settings, 0, [UPDATED_URI]) as (pool, subscriptions, host):
        await pool.call_tool("evil", "storm", {"kind": "updated", "count": 1})
        await pool.call_tool("evil", "storm", {"kind": "updated", "count": 10_000})
        expected = (UPDATED, {"uri": f"copilot://evil/{UPDATED_URI}"})
        with anyio.fail_after(WAIT):
            assert await host.receive.receive() == expected  # the first update
            assert await host.receive.receive() == expected  # the 10,000 after it: the trailing delivery
            await subscriptions.settled()
        assert host.received() == []
        assert subscriptions.updates.pending == 0


@old_subscribe
async def test_a_storm_to_a_host_that_reads_costs_at_most_one_notification_per_interval(
    settings: PoolSettings,  # noqa: F811
) -> None:
    async with subscribed_host(settings, math.inf, [UPDATED_URI]) as (pool, subscriptions, host):
        started = time.monotonic()
        await pool.call_tool("evil", "storm", {"kind": "updated", "count": 10_000})
        with anyio.fail_after(WAIT):
            await subscriptions.settled()  # the last update delivered
        delivered = host.received()
        assert 1 <= len(delivered) <= (time.monotonic() - started) / UPDATE_INTERVAL + 2
        assert all(item == (UPDATED, {"uri": f"copilot://evil/{UPDATED_URI}"}) for item in delivered)


@old_subscribe
async def test_updates_of_ever_new_resources_hold_a_bounded_number_and_the_drops_are_counted(
    settings: PoolSettings,  # noqa: F811
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
) -> None:
    """A child announcing a new URI with every notification: those nobody subscribed to cost
    nothing, and past MAX_PENDING_UPDATES resources waiting for the host, updates are dropped,
    logged once, then counted."""
    monkeypatch.setattr(subscriptions_module, "MAX_PENDING_UPDATES", 3)
    caplog.set_level(logging.WARNING, logger="server.aggregate.coalesce")
    subscribed = [f"{UPDATED_URI}/{n}" for n in range(5)]
    async with subscribed_host(settings, 0, subscribed) as (pool, subscriptions, host):
        await pool.call_tool("evil", "storm", {"kind": "updated_each", "count": 10_000})
        assert subscriptions.updates.pending == 3  # the host reads none yet: 3 wait, the rest was dropped
        dropping = [r.getMessage() for r in caplog.records]
        assert dropping == [
            "updates of 3 resources are waiting to be delivered, the most the copilot holds; dropping updates of "
            f"further resources until some are out (the first dropped: '{UPDATED_URI}/3' of server 'evil')"
        ]
        with anyio.fail_after(WAIT):
            delivered = [await host.receive.receive() for _ in range(3)]
            await subscriptions.settled()
        assert sorted(params["uri"] for _, params in delivered) == [f"copilot://evil/{uri}" for uri in subscribed[:3]]
        assert host.received() == []
        # /3 and /4: counted once the flood is over.
        assert [r.getMessage() for r in caplog.records][1:] == [
            "dropped 2 update(s) of resources while too many waited to be delivered"
        ]


async def test_a_held_subscription_keeps_its_child_from_the_idle_stop() -> None:
    # Before: the child stopped when idle and its updates ended, with nothing telling the host.
    child = SlowChild()
    async with anyio.create_task_group() as group:
        subscriptions = ResourceSubscriptions(requester(child), Broadcaster(InMemorySubscriptionBus()), group)
        assert not subscriptions.keeps_alive("docs")
        await subscriptions.subscribe("A", HOST_URI, "docs", URI)
        assert subscriptions.keeps_alive("docs") and not subscriptions.keeps_alive("other")
        subscriptions.forget("A")
        await anyio.wait_all_tasks_blocked()
        assert not subscriptions.keeps_alive("docs")
