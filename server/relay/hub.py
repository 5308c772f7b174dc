"""The copilot's relay between hosts and children: one per copilot, shared by every call.

The pool asks it (as its ``link``) what to answer a child's own requests and where to run
``works_in: roots`` servers; ``execute`` asks it for a :class:`~server.relay.host.HostLink` and a
:class:`~server.relay.call.CallRelay` per call, and keeps 2026-07-28 calls that wait for the host
in :attr:`Relay.suspended`. It also serves the host-facing handlers the relay needs:
``logging/setLevel`` (so a legacy host chooses which child log messages it gets) and
``notifications/roots/list_changed`` (forwarded to running children).
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Sequence
from pathlib import Path
from typing import Any

import anyio.abc
import mcp_types as types
from mcp.server.context import ServerRequestContext
from mcp.server.mcpserver import MCPServer

from index.catalog.servers import ServerConfig
from server.relay.call import CallRelay, answer_child, log_from_child
from server.relay.host import LOG_LEVEL_STATE_KEY, HostLink
from server.relay.roots import Roots
from server.relay.suspended import SuspendedCall, SuspendedCalls

logger = logging.getLogger(__name__)


class Relay:
    """See the module docstring."""

    def __init__(self, *, roots: Sequence[Path] = (), input_timeout: float = 300.0, log_level: str = "warning") -> None:
        self.roots = Roots(roots, ask_timeout=input_timeout)
        self.input_timeout = input_timeout
        self.log_level = log_level
        self.suspended = SuspendedCalls(input_timeout)
        #: Set by the copilot: tells running children that the roots changed.
        self.on_roots_changed: Callable[[], Awaitable[None]] | None = None
        #: Set by the copilot: where a call's held-back progress is written from (see ``CallRelay``).
        self.task_group: anyio.abc.TaskGroup | None = None

    # -- per call ------------------------------------------------------------------------------
    def host(self, rc: ServerRequestContext[Any, Any]) -> HostLink:
        return HostLink.from_context(rc, self.log_level)

    def call(self, server: str, host: HostLink, suspended: SuspendedCall | None = None) -> CallRelay:
        return CallRelay(
            server, host, self.roots, input_timeout=self.input_timeout, suspended=suspended, task_group=self.task_group
        )

    async def before_start(self, config: ServerConfig, relay: CallRelay) -> None:
        """Learn the host's roots before starting a server that works in them.

        A legacy host is asked directly (once per connection); a 2026-07-28 host through the call's
        ``input_required`` round trip, unless some host's roots are known already.
        """
        if config.works_in != "roots" or config.cwd or self.roots.fixed:
            return
        host = relay.host
        if host.era == "legacy":
            await self.roots.of_host(host)
        elif self.roots.working_directory() is None and relay.suspended is not None:
            await relay.answer(types.ListRootsRequest())

    async def learn_roots(self, config: ServerConfig, host: HostLink, *, running: bool) -> None:
        """A legacy host's roots, asked before anything may start ``config``'s server (see before_start)."""
        if running or host.era != "legacy" or config.works_in != "roots" or config.cwd or self.roots.fixed:
            return
        await self.roots.of_host(host)

    # -- the pool's link -----------------------------------------------------------------------
    def user_root(self) -> Path | None:
        return self.roots.working_directory()

    async def answer(
        self, server: str, calls: Sequence[CallRelay], request: types.InputRequest, *, others: int = 0
    ) -> types.InputResponse | types.ErrorData:
        return await answer_child(server, calls, request, self.roots, others=others)

    async def log(
        self, server: str, calls: Sequence[CallRelay], params: types.LoggingMessageNotificationParams, *, others: int = 0
    ) -> None:
        await log_from_child(calls, params, others=others)



def install_handlers(app: MCPServer[Any]) -> None:
    """Serve ``logging/setLevel`` and ``notifications/roots/list_changed`` on ``app``.

    The handlers find the :class:`Relay` as ``relay`` of the app's lifespan object (the copilot).
    """
    lowlevel = app._lowlevel_server  # MCPServer has no public hook for these two methods

    async def set_level(ctx: ServerRequestContext[Any, Any], params: types.SetLevelRequestParams) -> types.EmptyResult:
        connection = getattr(ctx.session, "_connection", None)
        if connection is not None:
            connection.state[LOG_LEVEL_STATE_KEY] = params.level
        return types.EmptyResult()

    async def roots_changed(ctx: ServerRequestContext[Any, Any], params: types.NotificationParams | None) -> None:
        relay = getattr(ctx.lifespan_context, "relay", None)
        if not isinstance(relay, Relay) or relay.roots.fixed:
            return
        host = relay.host(ctx)
        relay.roots.forget(host.connection_key)
        await relay.roots.of_host(host)  # children re-list right away: have the new answer ready
        if relay.on_roots_changed is not None:
            await relay.on_roots_changed()

    lowlevel.add_request_handler("logging/setLevel", types.SetLevelRequestParams, set_level)
    lowlevel.add_notification_handler("notifications/roots/list_changed", types.NotificationParams, roots_changed)
