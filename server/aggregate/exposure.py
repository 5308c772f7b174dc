"""Which child tools the copilot lists as its own tools (``COPILOT_EXPOSE``).

- ``meta`` (default): only ``route``, ``execute`` and ``execute-tool``.
- ``routed``: also every tool ``route`` returned in this session, under its namespaced name
  (:mod:`server.aggregate.names`), newest last, at most ``expose_max_tools`` (the oldest make
  room); the host is told with ``notifications/tools/list_changed``, so it can call the tool
  natively with its real schema. Handshake-era sessions each have their own set; 2026-07-28
  requests carry no session, so they share one.
- ``all``: every tool the copilot can route to (for small pools: 488 tools are ~108k tokens).

Calls of these names are turned into ``execute`` calls (``server.aggregate.handlers``), so they
pass the same checks, confirmation and trajectory logging.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Hashable, Iterable
from typing import Literal

import mcp.types as types

from index.catalog.records import ToolRecord
from server.aggregate.catalog import ChildCatalog

Mode = Literal["meta", "routed", "all"]


Pair = tuple[str, str]


class Exposure:
    def __init__(self, mode: Mode, catalog: ChildCatalog, *, max_tools: int = 50) -> None:
        self.mode = mode
        self._catalog = catalog
        self._max_tools = max_tools
        # Per session, the (server, tool) pairs route returned, oldest first. Pairs, not names: a
        # pair's name follows the pool (names.py), so it is looked up when listed or called.
        self._routed: dict[Hashable, OrderedDict[Pair, None]] = {}

    # -- routed mode ------------------------------------------------------------------------------
    def add_routed(self, key: Hashable, pairs: Iterable[Pair]) -> bool:
        """Expose these (server, tool) pairs to session ``key``; whether its list changed."""
        if self.mode != "routed":
            return False
        exposed = self._routed.setdefault(key, OrderedDict())
        before = set(exposed)
        for pair in pairs:
            exposed.pop(pair, None)
            exposed[pair] = None
        while len(exposed) > self._max_tools:
            exposed.popitem(last=False)
        return set(exposed) != before

    def forget(self, key: Hashable) -> None:
        self._routed.pop(key, None)

    def sessions_with(self, server: str) -> list[Hashable]:
        """Sessions whose listed tools include one of ``server``'s (routed mode)."""
        return [key for key, exposed in self._routed.items() if any(s == server for s, _ in exposed)]

    # -- listing and resolving --------------------------------------------------------------------
    async def tools(self, key: Hashable) -> list[types.Tool]:
        """The child tools listed to session ``key`` (none in ``meta`` mode)."""
        if self.mode == "all":
            return [self._catalog.tool(record) for record in await self._catalog.records({"tool"})]
        if self.mode == "routed":
            records = await self._routed_records(key)
            return [self._catalog.tool(record) for record in records]
        return []

    async def _routed_records(self, key: Hashable) -> list[ToolRecord]:
        return await self._catalog.tools_named(list(self._routed.get(key, {})))

    async def resolve(self, key: Hashable, name: str) -> Pair | None:
        """The (server, tool) that exposed ``name`` stands for in session ``key``, if any."""
        if self.mode == "routed":
            await self._catalog.refresh()
            return next(
                (pair for pair in self._routed.get(key, {}) if self._catalog.learned_name(*pair) == name), None
            )
        if self.mode == "all":
            pair = await self._catalog.resolve_name(name)
            if pair is None:  # not listed since the pool changed (or at all): names are deterministic
                await self.tools(key)
                pair = await self._catalog.resolve_name(name)
            if pair is not None and self._catalog.visible(*pair):
                return pair
        return None
