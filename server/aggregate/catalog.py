"""The children's tools, prompts and resources as the copilot lists them to hosts.

Everything comes from the search index (records of every kind, kept current by the crawl, the
background indexer and :mod:`server.aggregate.live`), so listing never starts a child. Only
servers that are enabled and visible under the allow/deny lists appear, and of those only the
items the lists allow (``server/name`` globs match a prompt's or resource's name like a tool's).

Names and URIs are decided over the whole pool the index holds (every visible record of every
kind), learned again whenever the index or the set of visible servers changes, so they never
depend on which list a host asked for first (:mod:`server.aggregate.names`).
"""

from __future__ import annotations

import fnmatch
from collections.abc import Callable, Collection
from typing import Any

import anyio
import mcp.types as types

from index.errors import IndexNotBuiltError
from index.catalog.records import RECORD_KINDS, ToolRecord
from server.aggregate.names import BareUris, NameTable, resource_uri

#: What the learned pool was made from: the index build and the visible servers.
_PoolKey = tuple[str | None, frozenset[str]]


class ChildCatalog:
    """Host-facing views of the indexed records; names come from one :class:`NameTable`."""

    def __init__(
        self,
        index: Any,
        names: NameTable,
        *,
        routable_servers: Callable[[], list[str]],
        allowed: Callable[[str, str], bool],
        tool_usable: Callable[[str, str], bool] = lambda server, tool: True,
        item_usable: Callable[[ToolRecord], bool] = lambda record: True,
        unprefixed: Collection[str] = (),
    ) -> None:
        self._index = index
        self.names = names
        self._routable = routable_servers
        self._allowed = allowed
        self._tool_usable = tool_usable
        self._item_usable = item_usable
        self._unprefixed = list(unprefixed)
        self.bare_uris = BareUris()
        self._learned: _PoolKey | None = None

    async def records(self, kinds: Collection[str], *, visible_only: bool = True) -> list[ToolRecord]:
        """Visible records of these kinds (or every one), sorted by server then name (stable pages)."""
        # Both read in a worker thread: the index may look at its store (never waiting for a sync).
        key, records = await anyio.to_thread.run_sync(
            lambda: (self._pool_key(), self._read_all()), abandon_on_cancel=True
        )
        self._learn(key, records)
        visible = set(key[1])

        def keep() -> list[ToolRecord]:
            return [
                r
                for r in records
                if r.kind in kinds
                and (
                    not visible_only
                    or (
                        r.server in visible
                        and self._allowed(r.server, r.name)
                        and (self._tool_usable(r.server, r.name) if r.kind == "tool" else self._item_usable(r))
                    )
                )
            ]

        # In a worker thread too: an item not approved as it is gets the trust scan, up to a second
        # of CPU for a hostile 100 KB description (a listing of many stalled every session).
        kept = await anyio.to_thread.run_sync(keep, abandon_on_cancel=True)
        return sorted(kept, key=lambda r: (r.server, r.kind, r.name, r.uri or ""))

    # -- the pool names are decided over ----------------------------------------------------------
    def _read_all(self) -> list[ToolRecord]:
        try:
            return list(self._index.records_of(RECORD_KINDS))
        except IndexNotBuiltError:
            return []

    def _pool_key(self) -> _PoolKey:
        state = self._index.state()
        return (state.build_id if state is not None else None, frozenset(self._routable()))

    def _learn(self, key: _PoolKey, records: list[ToolRecord]) -> None:
        """Teach the name table and the bare URIs the pool of ``records`` (once per index build and
        set of visible servers). Per-item trust verdicts do not count: they would rename others."""
        if key == self._learned:
            return
        pool = [r for r in records if r.server in key[1] and self._allowed(r.server, r.name)]
        self.names.learn((r.server, r.name, self.bare(r.server)) for r in pool)
        self.bare_uris.learn(
            (r.server, r.uri)
            for r in pool
            if r.kind in ("resource", "resource_template") and r.uri and self.bare(r.server)
        )
        self._learned = key

    def _current_pool(self) -> None:
        """Make sure the pool is learned before a name or URI is given out (reads the index only
        when it changed since: a new build, or other visible servers). For callers that just
        searched or listed, so the index is loaded; others ``await refresh()`` first."""
        key = self._pool_key()
        if key != self._learned:
            self._learn(key, self._read_all())

    async def refresh(self) -> None:
        """Learn the pool if it changed, reading the index in a worker thread (it may have to load)."""

        def changed() -> tuple[_PoolKey, list[ToolRecord] | None]:
            key = self._pool_key()
            return key, (self._read_all() if key != self._learned else None)

        key, records = await anyio.to_thread.run_sync(changed, abandon_on_cancel=True)
        if records is not None:
            self._learn(key, records)

    async def tools_named(self, pairs: Collection[tuple[str, str]]) -> list[ToolRecord]:
        """The visible tool records of these (server, tool) pairs, in their order (missing ones skipped)."""

        def read() -> list[ToolRecord | None]:
            try:
                return [self._index.get(server, tool) for server, tool in pairs]
            except IndexNotBuiltError:
                return []

        records = await anyio.to_thread.run_sync(read, abandon_on_cancel=True)
        await self.refresh()  # their names are given out next
        return [
            r for r in records if r is not None and self.visible(r.server, r.name) and self._tool_usable(r.server, r.name)
        ]

    def visible(self, server: str, name: str) -> bool:
        """Whether ``server``'s item ``name`` may be listed and used now."""
        return server in self._routable() and self._allowed(server, name)

    def bare(self, server: str) -> bool:
        return any(fnmatch.fnmatchcase(server, pattern) for pattern in self._unprefixed)

    async def resolve_name(self, exposed: str) -> tuple[str, str] | None:
        """The (server, name) an exposed name stands for in the current pool, if any."""
        await self.refresh()
        return self.names.resolve(exposed)

    def host_uri(self, server: str, uri: str) -> str:
        """The URI (or URI template) hosts use for ``server``'s own ``uri``: the child's own for an
        unprefixed server that keeps it, else ``copilot://<server>/<uri>``."""
        self._current_pool()
        return self._host_uri(server, uri)

    def ensure_current(self) -> None:
        """Learn the pool now if it changed (see :meth:`host_uri`): once before many lookups."""
        self._current_pool()

    # The conversions below follow a records(), refresh() or ensure_current() call, which learned
    # the pool: no check per item (a check reads the index state and the routable servers).
    def learned_name(self, server: str, name: str) -> str:
        """The name hosts use for ``server``'s tool or prompt ``name`` (see :mod:`server.aggregate.names`), in the pool just learned."""
        return self._exposed(server, name)

    def learned_uri(self, server: str, uri: str) -> str:
        """:meth:`host_uri` for items of the pool just learned."""
        return self._host_uri(server, uri)

    def _exposed(self, server: str, name: str) -> str:
        return self.names.name(server, name, bare=self.bare(server))

    def _host_uri(self, server: str, uri: str) -> str:
        return uri if self.bare(server) and self.bare_uris.keeps(server, uri) else resource_uri(server, uri)

    # -- conversions ----------------------------------------------------------------------------
    def tool(self, record: ToolRecord) -> types.Tool:
        annotations = types.ToolAnnotations.model_validate(record.annotations) if record.annotations else None
        return types.Tool(
            name=self._exposed(record.server, record.name),
            title=f"{record.title or record.name} ({record.server})",
            description=record.description,
            input_schema=record.input_schema or {"type": "object", "properties": {}},
            output_schema=record.output_schema,
            annotations=annotations,
        )

    def prompt(self, record: ToolRecord) -> types.Prompt:
        properties = record.input_schema.get("properties") or {}
        required = set(record.required)
        arguments = [
            types.PromptArgument(
                name=str(name),
                description=(spec or {}).get("description") if isinstance(spec, dict) else None,
                required=name in required,
            )
            for name, spec in properties.items()
        ]
        return types.Prompt(
            name=self._exposed(record.server, record.name),
            title=f"{record.title or record.name} ({record.server})",
            description=record.description or None,
            arguments=arguments or None,
        )

    def _uri(self, record: ToolRecord) -> str:
        return self._host_uri(record.server, record.uri or record.name)

    def resource(self, record: ToolRecord) -> types.Resource:
        return types.Resource(
            uri=self._uri(record),
            name=self._exposed(record.server, record.name),
            title=f"{record.title or record.name} ({record.server})",
            description=record.description or None,
            mime_type=record.mime_type,
            annotations=types.Annotations.model_validate(record.annotations) if record.annotations else None,
        )

    def resource_template(self, record: ToolRecord) -> types.ResourceTemplate:
        return types.ResourceTemplate(
            uri_template=self._uri(record),
            name=self._exposed(record.server, record.name),
            title=f"{record.title or record.name} ({record.server})",
            description=record.description or None,
            mime_type=record.mime_type,
            annotations=types.Annotations.model_validate(record.annotations) if record.annotations else None,
        )
