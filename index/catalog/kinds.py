"""Prompts, resources and resource templates of a child server as records typed like tools.

The crawler (``index.catalog.crawl``) and the copilot's live re-listing (``server.aggregate``) both list a
child's prompts and resources here, following ``nextCursor`` page by page, and turn each into a
:class:`~index.catalog.records.ToolRecord` of its kind, so one index searches tools, prompts and
resources alike (``route``'s ``kind`` filter). A prompt's arguments become its ``input_schema``
(string properties, ``required``); a resource template's URI variables likewise.

A server that does not declare the ``prompts`` or ``resources`` capability is not asked; a server
that declares one and then fails to answer it costs a warning, never the crawl of its tools.
Whatever a child sends, each listing is bounded as its tools are (``index.children.listing_limits``):
see :func:`list_pages`.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

import anyio
import mcp.types as types
from mcp.client.session import ClientSession
from mcp.shared.exceptions import MCPError
from mcp.shared.uri_template import UriTemplate
from pydantic import BaseModel, ValidationError

from index.catalog.records import ToolRecord
from index.catalog.servers import ServerConfig
from index.children.errors import connection_lost
from index.children.raw_pages import checked_page, describe_schema_error, raw_page, within_room
from index.children.listing_limits import (
    MAX_DEFINITION_CHARS,
    MAX_PAGES,
    MAX_TOOLS,
    SHOWN_NAME_CHARS,
    Repeats,
    left_out_words,
    size_problem,
)

logger = logging.getLogger(__name__)

#: The bounds of a child's tool listing hold for each of these kinds too: at most MAX_PAGES pages
#: followed, the first MAX_ITEMS items of each kind kept, a definition over MAX_DEFINITION_CHARS skipped.
MAX_ITEMS = MAX_TOOLS


@dataclass(frozen=True)
class ListMethod:
    """One list method of a kind: where its items are in a page and how warnings call them."""

    method: str  # "prompts/list"
    field: str  # the typed page's attribute holding the items
    kind: str  # one item, in warnings: "prompt"
    plural: str  # "prompts"
    wire_field: str  # ``field`` as the child sends it: "resourceTemplates"
    key: str  # what tells an item from the others (its record's id), as the child sends it: "uriTemplate"
    request: type[BaseModel]  # types.ListPromptsRequest
    result: type[BaseModel]  # types.ListPromptsResult


PROMPTS = ListMethod(
    "prompts/list", "prompts", "prompt", "prompts", "prompts", "name", types.ListPromptsRequest, types.ListPromptsResult
)
RESOURCES = ListMethod(
    "resources/list", "resources", "resource", "resources", "resources", "uri",
    types.ListResourcesRequest, types.ListResourcesResult,
)
RESOURCE_TEMPLATES = ListMethod(
    "resources/templates/list", "resource_templates", "resource template", "resource templates",
    "resourceTemplates", "uriTemplate", types.ListResourceTemplatesRequest, types.ListResourceTemplatesResult,
)


def _item_name(item: Any) -> str:
    name = getattr(item, "name", None) or getattr(item, "uri", None) or getattr(item, "uri_template", None)
    return str(name)[:SHOWN_NAME_CHARS]


async def list_pages(session: ClientSession, listing: ListMethod, warnings: list[str]) -> list[Any]:
    """The items of a paginated list method, bounded whatever the child sends: at most
    :data:`MAX_PAGES` pages (a cursor seen before ends the listing, and so does reaching the cap:
    no further page is asked for), the first :data:`MAX_ITEMS` distinct items kept (an item listed
    again is left out and does not count, so repeats cannot push others out), an item whose
    definition is broken or over :data:`MAX_DEFINITION_CHARS` skipped; each cut said in ``warnings``.

    Each page is read as the child sent it and only the items there is room for are checked
    (``index.children.raw_pages``): the rest of a page is counted, never built, and a broken item
    costs only itself.
    """
    items: list[Any] = []
    read_keys: set[str] = set()  # the keys of the items read (checked): a key listed again is a repeat
    repeats = Repeats()
    cursor: str | None = None
    seen: set[str] = set()
    left_out = 0
    skipped = 0  # definitions broken or over the size limit (the first MAX_ITEMS named)
    for _ in range(MAX_PAGES):
        params = types.PaginatedRequestParams(cursor=cursor) if cursor else None
        raw = await raw_page(session, listing.request(params=params))
        wire_items = raw.get(listing.wire_field)
        if isinstance(wire_items, list):
            room = MAX_ITEMS - len(items)
            read, cut = within_room(wire_items, room, (), read_keys, listing.key, listing.kind, repeats)
            left_out += cut
            raw = {**raw, listing.wire_field: read}
        broken: dict[str, str] = {}
        page: Any = checked_page(
            session.protocol_version, listing.method, raw, listing.wire_field, listing.key, listing.result, broken
        )
        for name, problem in broken.items():
            skipped += 1
            if skipped <= MAX_ITEMS:
                warnings.append(f"{listing.kind} '{name[:SHOWN_NAME_CHARS]}' skipped, its definition is broken: {problem}")
        # Only what ``within_room`` read is here: distinct keys, within the room the cap leaves.
        for item in getattr(page, listing.field):
            if (problem := size_problem(item)) is not None:
                skipped += 1
                if skipped <= MAX_ITEMS:
                    warnings.append(f"{listing.kind} '{_item_name(item)}' skipped, its definition is too big: {problem}")
            else:
                items.append(item)
        cursor = page.next_cursor
        if not cursor or len(items) >= MAX_ITEMS:
            break
        if cursor in seen:
            warnings.append(f"{listing.method} returned cursor {cursor[:SHOWN_NAME_CHARS]!r} twice; stopped paging")
            cursor = None
            break
        seen.add(cursor)
    else:
        warnings.append(f"{listing.method} still had more pages after {MAX_PAGES}; kept the first {MAX_PAGES}")
        cursor = None
    repeats.warn(warnings)
    if skipped > MAX_ITEMS:
        warnings.append(
            f"{skipped - MAX_ITEMS:,} more {listing.plural} skipped, their definitions are broken or over the "
            f"copilot's limit of {MAX_DEFINITION_CHARS:,} characters"
        )
    if left_out or cursor:  # cut at the cap (a cursor is left only then)
        warnings.append(
            f"{listing.method} offered more than {MAX_ITEMS:,} {listing.plural}; "
            f"kept the first {MAX_ITEMS:,} ({left_out_words(left_out, bool(cursor))} left out)"
        )
    return items


def _annotations(value: Any) -> dict[str, Any] | None:
    return value.model_dump(by_alias=True, exclude_none=True, mode="json") or None if value is not None else None


def prompt_record(prompt: types.Prompt, config: ServerConfig, server_description: str) -> ToolRecord:
    properties = {
        argument.name: {"type": "string", **({"description": argument.description} if argument.description else {})}
        for argument in prompt.arguments or []
    }
    required = [argument.name for argument in prompt.arguments or [] if argument.required]
    schema: dict[str, Any] = {"type": "object", "properties": properties, **({"required": required} if required else {})}
    return ToolRecord(
        server=config.name,
        name=prompt.name,
        kind="prompt",
        title=prompt.title,
        description=prompt.description or "",
        input_schema=schema,
        server_description=server_description,
        category=config.category,
    )


def resource_record(resource: types.Resource, config: ServerConfig, server_description: str) -> ToolRecord:
    return ToolRecord(
        server=config.name,
        name=resource.name or str(resource.uri),
        kind="resource",
        uri=str(resource.uri),
        mime_type=resource.mime_type,
        title=resource.title,
        description=resource.description or "",
        annotations=_annotations(resource.annotations),
        server_description=server_description,
        category=config.category,
    )


def template_variables(uri_template: str) -> list[str]:
    try:
        return list(UriTemplate.parse(uri_template).variable_names)
    except Exception:  # noqa: BLE001 -- a malformed template is still listed, just without variables
        return []


def template_input_schema(uri_template: str) -> dict[str, Any]:
    """A resource template's URI variables as an input schema (string properties, all required)."""
    variables = template_variables(uri_template)
    return {
        "type": "object",
        "properties": {name: {"type": "string"} for name in variables},
        **({"required": variables} if variables else {}),
    }


def resource_template_record(template: types.ResourceTemplate, config: ServerConfig, server_description: str) -> ToolRecord:
    schema = template_input_schema(template.uri_template)
    return ToolRecord(
        server=config.name,
        name=template.name or template.uri_template,
        kind="resource_template",
        uri=template.uri_template,
        mime_type=template.mime_type,
        title=template.title,
        description=template.description or "",
        input_schema=schema,
        annotations=_annotations(template.annotations),
        server_description=server_description,
        category=config.category,
    )


async def list_prompts(session: ClientSession, warnings: list[str]) -> list[types.Prompt]:
    return await list_pages(session, PROMPTS, warnings)


async def list_resources(session: ClientSession, warnings: list[str]) -> list[types.Resource]:
    return await list_pages(session, RESOURCES, warnings)


async def list_resource_templates(session: ClientSession, warnings: list[str]) -> list[types.ResourceTemplate]:
    return await list_pages(session, RESOURCE_TEMPLATES, warnings)


async def _guarded(
    what: str, call: Callable[[], Awaitable[list[Any]]], warnings: list[str], closed: anyio.Event | None
) -> list[Any]:
    """A list method's items, or none with a warning when the child answers it wrongly."""
    try:
        return await call()
    except MCPError as error:
        if connection_lost(error, closed):
            raise
        warnings.append(f"{what} failed: error {error.code}: {error.message}")
    except ValidationError as error:
        warnings.append(f"{what}: reply does not follow the MCP schema: {describe_schema_error(error)}")
    return []


async def list_other_kinds(
    session: ClientSession,
    capabilities: types.ServerCapabilities | None,
    config: ServerConfig,
    server_description: str,
    warnings: list[str],
    closed: anyio.Event | None = None,
) -> list[ToolRecord]:
    """Records of the prompts, resources and resource templates the server declares it has.

    ``closed`` is the transport's end (:func:`index.children.errors.connection_lost`): a list the
    child answers with its own error is skipped with a warning, an ended connection is raised.
    """
    records: list[ToolRecord] = []
    if capabilities is not None and capabilities.prompts is not None:
        for prompt in await _guarded("prompts/list", lambda: list_prompts(session, warnings), warnings, closed):
            records.append(prompt_record(prompt, config, server_description))
    if capabilities is not None and capabilities.resources is not None:
        listed = await _guarded("resources/list", lambda: list_resources(session, warnings), warnings, closed)
        for resource in listed:
            records.append(resource_record(resource, config, server_description))
        templates = await _guarded(
            "resources/templates/list", lambda: list_resource_templates(session, warnings), warnings, closed
        )
        for template in templates:
            records.append(resource_template_record(template, config, server_description))
    return unique_records(records, warnings)


def unique_records(records: list[ToolRecord], warnings: list[str]) -> list[ToolRecord]:
    """The first record of each id (a server listing one name or URI twice gets a warning; a few
    are named, the rest counted: a child listing one prompt on every page must not flood the log)."""
    seen: dict[str, ToolRecord] = {}
    repeats = Repeats()
    for record in records:
        if record.id in seen:
            repeats.add(f"{record.kind} '{(record.uri or record.name)[:SHOWN_NAME_CHARS]}'")
            continue
        seen[record.id] = record
    repeats.warn(warnings)
    return list(seen.values())
