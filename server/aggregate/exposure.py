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

from index.records import ToolRecord
from server.aggregate.catalog import ChildCatalog

Mode = Literal["meta", "routed", "all"]


class Exposure:
    def __init__(self, mode: Mode, catalog: ChildCatalog, *, max_tools: int = 50) -> None:
        self.mode = mode
        self._catalog = catalog
        self._max_tools = max_tools
        self._routed: dict[Hashable, OrderedDict[str, tuple[str, str]]] = {}

    # -- routed mode ------------------------------------------------------------------------------
    def add_routed(self, key: Hashable, pairs: Iterable[tuple[str, str]]) -> bool:
        """Expose these (server, tool) pairs to session ``key``; whether its list changed."""
        if self.mode != "routed":
            return False
        exposed = self._routed.setdefault(key, OrderedDict())
        before = list(exposed)
        for server, tool in pairs:
            name = self._catalog.exposed_name(server, tool)
            exposed.pop(name, None)
            exposed[name] = (server, tool)
        while len(exposed) > self._max_tools:
            exposed.popitem(last=False)
        return sorted(exposed) != sorted(before)

    def forget(self, key: Hashable) -> None:
        self._routed.pop(key, None)

    def sessions_with(self, server: str) -> list[Hashable]:
        """Sessions whose listed tools include one of ``server``'s (routed mode)."""
        return [key for key, exposed in self._routed.items() if any(s == server for s, _ in exposed.values())]

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
        return await self._catalog.tools_named(list(self._routed.get(key, {}).values()))

    async def resolve(self, key: Hashable, name: str) -> tuple[str, str] | None:
        """The (server, tool) that exposed ``name`` stands for in session ``key``, if any."""
        if self.mode == "routed":
            return self._routed.get(key, {}).get(name)
        if self.mode == "all":
            pair = self._catalog.names.resolve(name)
            if pair is None:  # called before this process listed its tools (names are deterministic)
                await self.tools(key)
                pair = self._catalog.names.resolve(name)
            if pair is not None and self._catalog.visible(*pair):
                return pair
        return None
