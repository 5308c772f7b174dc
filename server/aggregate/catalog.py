"""The children's tools, prompts and resources as the copilot lists them to hosts.

Everything comes from the search index (records of every kind, kept current by the crawl, the
background indexer and :mod:`server.aggregate.live`), so listing never starts a child. Only
servers that are enabled and visible under the allow/deny lists appear, and of those only the
items the lists allow (``server/name`` globs match a prompt's or resource's name like a tool's).
"""

from __future__ import annotations

import fnmatch
from collections.abc import Callable, Collection
from typing import Any

import anyio
import mcp.types as types

from index.errors import IndexNotBuiltError
from index.records import ToolRecord
from server.aggregate.names import NameTable, resource_uri


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
        unprefixed: Collection[str] = (),
    ) -> None:
        self._index = index
        self.names = names
        self._routable = routable_servers
        self._allowed = allowed
        self._tool_usable = tool_usable
        self._unprefixed = list(unprefixed)

    async def records(self, kinds: Collection[str], *, visible_only: bool = True) -> list[ToolRecord]:
        """Visible records of these kinds (or every one), sorted by server then name (stable pages)."""

        def read() -> list[ToolRecord]:
            try:
                return list(self._index.records_of(kinds))
            except IndexNotBuiltError:
                return []

        records = await anyio.to_thread.run_sync(read, abandon_on_cancel=True)
        visible = set(self._routable())
        kept = [
            r
            for r in records
            if not visible_only
            or (
                r.server in visible
                and self._allowed(r.server, r.name)
                and (r.kind != "tool" or self._tool_usable(r.server, r.name))
            )
        ]
        return sorted(kept, key=lambda r: (r.server, r.kind, r.name, r.uri or ""))

    async def tools_named(self, pairs: Collection[tuple[str, str]]) -> list[ToolRecord]:
        """The visible tool records of these (server, tool) pairs, in their order (missing ones skipped)."""

        def read() -> list[ToolRecord | None]:
            try:
                return [self._index.get(server, tool) for server, tool in pairs]
            except IndexNotBuiltError:
                return []

        records = await anyio.to_thread.run_sync(read, abandon_on_cancel=True)
        return [
            r for r in records if r is not None and self.visible(r.server, r.name) and self._tool_usable(r.server, r.name)
        ]

    def visible(self, server: str, name: str) -> bool:
        """Whether ``server``'s item ``name`` may be listed and used now."""
        return server in self._routable() and self._allowed(server, name)

    def bare(self, server: str) -> bool:
        return any(fnmatch.fnmatchcase(server, pattern) for pattern in self._unprefixed)

    def exposed_name(self, server: str, name: str) -> str:
        return self.names.name(server, name, bare=self.bare(server))

    # -- conversions ----------------------------------------------------------------------------
    def tool(self, record: ToolRecord) -> types.Tool:
        annotations = types.ToolAnnotations.model_validate(record.annotations) if record.annotations else None
        return types.Tool(
            name=self.exposed_name(record.server, record.name),
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
            name=self.exposed_name(record.server, record.name),
            title=f"{record.title or record.name} ({record.server})",
            description=record.description or None,
            arguments=arguments or None,
        )

    def _uri(self, record: ToolRecord) -> str:
        original = record.uri or record.name
        return original if self.bare(record.server) else resource_uri(record.server, original)

    def resource(self, record: ToolRecord) -> types.Resource:
        return types.Resource(
            uri=self._uri(record),
            name=self.exposed_name(record.server, record.name),
            title=f"{record.title or record.name} ({record.server})",
            description=record.description or None,
            mime_type=record.mime_type,
            annotations=types.Annotations.model_validate(record.annotations) if record.annotations else None,
        )

    def resource_template(self, record: ToolRecord) -> types.ResourceTemplate:
        return types.ResourceTemplate(
            uri_template=self._uri(record),
            name=self.exposed_name(record.server, record.name),
            title=f"{record.title or record.name} ({record.server})",
            description=record.description or None,
            mime_type=record.mime_type,
            annotations=types.Annotations.model_validate(record.annotations) if record.annotations else None,
        )
