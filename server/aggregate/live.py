"""Keeping the index current while children change, in the background.

The pool tells :class:`LiveUpdater` when a server listed tools that differ from before (after its
``notifications/tools/list_changed``, or a restart that lists different tools), when a child
says its prompts or resources changed, and when a child restarted (crash, idle stop then start:
a new process may offer other prompts and resources). The updater re-lists what is needed (prompts/resources
through :meth:`ChildPool.request`; tools arrive already listed, through the pool's one listing
path and its trust guard; re-listed prompts and resource templates pass ``review_items``, the
same guard's pins), writes the server's records to the index in a worker thread -- one
server at a time, repeated changes of a server coalesced, its prompts and resources listed at most
once per ``RELIST_INTERVAL`` (as the pool lists tools) -- and then calls ``on_changed`` so
hosts hear the copilot's own ``list_changed``. ``route`` keeps answering from the previous
snapshot meanwhile (``ToolIndex`` never makes a search wait for a sync).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Awaitable, Callable, Mapping
from typing import Any, Literal

import anyio
import anyio.abc
import mcp.types as types

from index.catalog.crawl import scrub_machine_paths, tool_record
from index.errors import IndexNotBuiltError
from index.catalog.kinds import list_other_kinds
from index.catalog.records import ToolRecord
from index.catalog.servers import ServerConfig
from server.pool.interfaces import PoolListener
from server.pool.sessions import RELIST_INTERVAL

logger = logging.getLogger(__name__)

Change = Literal["tools", "prompts", "resources"]
#: ``on_changed(server, kinds)`` after the index holds a server's new records.
OnChanged = Callable[[str, set[Change]], Awaitable[None]]
#: ``review_items(server, records)``: the withheld ones among a server's listed prompts and
#: resources, by record id (``server.guard.DefinitionGuard.review_items``).
ReviewItems = Callable[[str, list[ToolRecord]], Awaitable[Mapping[str, Any]]]
_OTHER_KINDS = ("prompt", "resource", "resource_template")


def _kind_change(kind: str) -> Change:
    return "tools" if kind == "tool" else "prompts" if kind == "prompt" else "resources"


class LiveUpdater(PoolListener):
    """A :class:`~server.pool.interfaces.PoolListener` that re-indexes changed servers; see the module docstring."""

    def __init__(
        self,
        index: Any,
        pool: Any,
        servers: Callable[[], Mapping[str, ServerConfig]],
        on_changed: OnChanged,
        review_items: ReviewItems | None = None,
    ) -> None:
        self._index = index
        self._pool = pool
        self._servers = servers
        self._on_changed = on_changed
        self._review_items = review_items
        # Newest listing not yet indexed, per server, with the names the guard held back.
        self._tools: dict[str, tuple[list[types.Tool], frozenset[str]]] = {}
        self._others: set[str] = set()  # servers whose prompts/resources need listing
        #: Monotonic time each server's prompts/resources were last listed: a child announcing changes
        #: nonstop is listed once per interval, not back to back.
        self._others_listed_at: dict[str, float] = {}
        self._wake = anyio.Event()
        self._updated = anyio.Event()
        self._progress = anyio.Event()
        self._working = False
        self.updates = 0  # how many times a server's records changed in the index

    # -- PoolListener ---------------------------------------------------------------------------
    def tools_listed(self, server: str, tools: list[types.Tool], held_back: frozenset[str]) -> None:
        self._tools[server] = (tools, held_back)
        self._kick()

    def list_changed(self, server: str, kind: Literal["prompts", "resources"]) -> None:
        self._others.add(server)
        self._kick()

    def child_started(self, server: str, restart: bool) -> None:
        # A new process may offer other prompts and resources than the one before (its tools are
        # re-listed by the pool itself); the first process's are what the crawl indexed.
        if restart:
            self._others.add(server)
            self._kick()

    def _kick(self) -> None:
        self._wake.set()

    async def wait_for_updates(self, count: int) -> None:
        """Until ``count`` updates reached the index in total (callers bound the wait)."""
        while self.updates < count:
            await self._updated.wait()

    async def settled(self) -> None:
        """Until every change reported so far is processed, whether or not it changed the index."""
        while self._tools or self._others or self._working:
            await self._progress.wait()

    # -- worker ---------------------------------------------------------------------------------
    async def run(self) -> None:
        """Process changes until cancelled (run in the copilot's task group)."""
        while True:
            await self._wake.wait()
            self._wake = anyio.Event()
            while self._tools or self._others:
                server, wait = self._next()
                if server is None:  # only prompts/resources listed less than an interval ago
                    with anyio.move_on_after(wait):
                        await self._wake.wait()  # new tools need not wait for them
                    self._wake = anyio.Event()
                    continue
                listing = self._tools.pop(server, None)
                others = server in self._others and self._due(server) <= 0
                if others:
                    self._listing_others(server)
                self._working = True
                try:
                    await self._update(server, listing, others)
                except anyio.get_cancelled_exc_class():
                    raise
                except Exception:  # noqa: BLE001 -- one server's failure must not stop the others
                    logger.exception("could not update the index for server '%s'", server)
                finally:
                    self._working = False
                    self._progress.set()
                    self._progress = anyio.Event()

    def _listing_others(self, server: str) -> None:
        """``server``'s prompts and resources are listed now: nothing waits for it, the interval restarts."""
        self._others.discard(server)
        self._others_listed_at[server] = time.monotonic()

    def _due(self, server: str) -> float:
        """Seconds until ``server``'s prompts and resources may be listed again (<= 0: now)."""
        return self._others_listed_at.get(server, float("-inf")) + RELIST_INTERVAL - time.monotonic()

    def _next(self) -> tuple[str | None, float]:
        """The next server to update, or ``None`` and the seconds until one is due."""
        if self._tools:
            return next(iter(self._tools)), 0.0
        waits = {server: self._due(server) for server in self._others}
        server = min(waits, key=waits.__getitem__)
        return (server, 0.0) if waits[server] <= 0 else (None, waits[server])

    async def _update(
        self, server: str, listing: tuple[list[types.Tool], frozenset[str]] | None, others: bool
    ) -> None:
        config = self._servers().get(server)
        if config is None or not config.is_enabled:
            return
        current = await anyio.to_thread.run_sync(self._records_of, server, abandon_on_cancel=True)
        if current is None:
            logger.info("not indexing the changes of '%s': there is no index yet (python -m index build)", server)
            return
        if listing is not None and not current and not others and self._due(server) <= 0:
            # A server the crawl never listed (added since the build): its prompts and resources
            # are new too, not only its tools.
            others = True
            self._listing_others(server)
        # The tools this listing left out for a broken definition: the index says why of them (execute).
        skipped = self._pool.skipped_tools(server) if listing is not None else None
        if skipped is not None:
            skipped = scrub_machine_paths(skipped, self._pool.settings.server_workdir(server))
        description = next((r.server_description for r in current), "") or config.description
        tool_records = [r for r in current if r.kind == "tool"]
        other_records = [r for r in current if r.kind != "tool"]
        if listing is not None:
            tools, held_back = listing
            # Scrubbed like the crawler's records, so an unchanged tool keeps its content hash.
            workdir = self._pool.settings.server_workdir(server)
            indexed = {r.name: r for r in tool_records}
            tool_records = [
                ToolRecord.model_validate(scrub_machine_paths(tool_record(tool, config, description).model_dump(), workdir))
                if tool.name not in held_back
                else indexed[tool.name]  # a changed definition the guard holds back: keep the approved one
                for tool in tools
                if tool.name not in held_back or tool.name in indexed  # a held-back new tool is not indexed
            ]
        if others:
            listed = await self._list_others(server, config, description)
            if listed is not None:
                workdir = self._pool.settings.server_workdir(server)
                listed = [ToolRecord.model_validate(scrub_machine_paths(r.model_dump(), workdir)) for r in listed]
                other_records = await self._reviewed_items(server, listed, other_records)
        wanted = tool_records + other_records
        before = {r.id: r.content_hash for r in current}
        after = {r.id: r.content_hash for r in wanted}
        if before == after and (
            skipped is None
            or skipped == await anyio.to_thread.run_sync(self._index.skipped_tools, server, abandon_on_cancel=True)
        ):
            return
        changed = {_kind_change(r.kind) for r in wanted if before.get(r.id) != r.content_hash}
        changed |= {_kind_change(r.kind) for r in current if r.id not in after}
        left_out = {server: skipped} if skipped is not None else None
        report = await anyio.to_thread.run_sync(
            lambda: self._index.sync(wanted, servers=[server], skipped=left_out), abandon_on_cancel=True
        )
        self.updates += 1
        self._updated.set()
        self._updated = anyio.Event()
        logger.info(
            "re-indexed server '%s' after it changed: %d added, %d updated, %d removed",
            server,
            report.added,
            report.updated,
            report.removed,
        )
        await self._on_changed(server, changed)

    async def _reviewed_items(
        self, server: str, listed: list[ToolRecord], indexed: list[ToolRecord]
    ) -> list[ToolRecord]:
        """What to index of a listing: a prompt or template the guard holds back keeps its approved
        (indexed) record, a held-back new one is left out -- as for tools."""
        if self._review_items is None:
            return listed
        held = await self._review_items(server, listed)
        if not held:
            return listed
        before = {record.id: record for record in indexed}
        return [before[r.id] if r.id in held else r for r in listed if r.id not in held or r.id in before]

    def _records_of(self, server: str) -> list[ToolRecord] | None:
        """The server's indexed records (``None`` when no index is built: one server's changes do
        not make an index; ``python -m index build`` does)."""
        try:
            if not self._index.built:
                return None
            return list(self._index.records_of(server=server))
        except IndexNotBuiltError:
            return None

    async def _list_others(self, server: str, config: ServerConfig, description: str) -> list[ToolRecord] | None:
        """The server's prompts and resources now, or ``None`` when it cannot say (not running, failed)."""
        capabilities = self._pool.capabilities(server)
        connection = self._pool.connection(server)
        if capabilities is None or connection is None:
            return None
        warnings: list[str] = []
        try:
            records = await self._pool.request(
                server,
                "prompts/resources listing",
                lambda session: list_other_kinds(
                    session, capabilities, config, description, warnings, connection.closed
                ),
            )
        except Exception as error:  # noqa: BLE001 -- the next change tries again
            logger.warning("could not list the prompts/resources of '%s': %s", server, error)
            return None
        for warning in warnings:
            logger.warning("server '%s': %s", server, warning)
        return records
