"""What the child pool tells and asks the rest of the copilot: listeners of changes in children,
the link that answers what children send on their own, the guard of tool listings, and the observer
of starts and stops (``server.pool.sessions.ChildPool`` takes them; ``server.aggregate``,
``server.relay``, ``server.guard`` and ``server.telemetry`` implement them)."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any, Literal, Protocol

import mcp.types as types

from index.catalog.servers import ServerConfig

__all__ = ["RESTART_AFTER", "ChildLink", "ListingGuard", "PoolListener", "PoolObserver"]


class PoolListener:
    """Told about changes in children (override what you need). Called on the event loop; must
    not block or raise."""

    def tools_listed(self, server: str, tools: list[types.Tool], held_back: frozenset[str]) -> None:
        """``server`` listed tools that differ from its previous listing (or its first one).

        ``held_back``: names whose listed definition the guard did not approve (changed since it
        was pinned, or new and not yet reviewed); their listed definition must not be used."""

    def list_changed(self, server: str, kind: Literal["prompts", "resources"]) -> None:
        """``server``'s child said its prompts or resources changed."""

    def resource_updated(self, server: str, uri: str) -> None:
        """``server``'s child said the resource ``uri`` (its own URI) changed."""

    def keeps_alive(self, server: str) -> bool:
        """Whether ``server``'s child must not be stopped for being idle (a host's resource
        subscription is held at it: stopped, it would send no more updates and nobody would say)."""
        return False

    def child_started(self, server: str, restart: bool) -> None:
        """A process of ``server`` is ready (``restart``: not the first one in this pool, whatever
        ended the one before -- a crash, an idle stop, an eviction: a new process knows no
        subscriptions and may offer other items. ``status()`` counts only failures as restarts)."""


class ChildLink(Protocol):
    """Answers what children send the copilot on their own (``server.relay.hub.Relay`` implements it).

    ``calls`` are the relays of the child's calls in flight (what ``call_tool`` was given), oldest first;
    ``others`` counts the host requests in flight on the child that no relay stands for (a
    resource subscription; ``prompts/get``, ``resources/read`` and ``completion/complete`` come
    with one, as ``execute`` does), which the child's request may belong to as well: then it
    belongs to no call for certain.
    """

    def user_root(self) -> Path | None:
        """The user's directory: where ``works_in: roots`` children run, what ``${COPILOT_ROOT}`` names."""
        ...

    async def answer(
        self, server: str, calls: list[Any], request: types.InputRequest, *, others: int = 0
    ) -> types.InputResponse | types.ErrorData: ...

    async def log(
        self, server: str, calls: list[Any], params: types.LoggingMessageNotificationParams, *, others: int = 0
    ) -> None: ...


class ListingGuard(Protocol):
    """Checks a child's tool listing against pinned definitions (``server.guard.DefinitionGuard``)."""

    async def review_listing(self, server: str, config: ServerConfig, tools: list[types.Tool]) -> Mapping[str, Any]:
        """Held-back tools of this listing: tool name -> verdict (with a ``message()``)."""
        ...

    def blocked(self, server: str, tool: str) -> Any:
        """The current verdict for a tool (``None`` once it is approved)."""
        ...


#: Stop reasons after which the server's next start is a restart: its process failed.
#: A start after the copilot stopped a child on purpose (idle, evicted, replaced, ...) is not one.
RESTART_AFTER = frozenset({"crashed", "timeout"})


class PoolObserver(Protocol):
    """Told when children start (or fail to) and stop, with why (``server.telemetry``)."""

    def child_started(
        self,
        server: str,
        config: ServerConfig,
        pid: int | None,
        seconds: float,
        error: BaseException | None,
        restart: bool = False,
    ) -> None:
        """``restart``: the start brought the server back after its process failed (see RESTART_AFTER)."""

    def child_stopped(self, server: str, reason: str, uptime: float) -> None: ...
