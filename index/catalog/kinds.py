"""Prompts, resources and resource templates of a child server as records typed like tools.

The crawler (``index.catalog.crawl``) and the copilot's live re-listing (``server.aggregate``) both list a
child's prompts and resources here, following ``nextCursor`` page by page, and turn each into a
:class:`~index.catalog.records.ToolRecord` of its kind, so one index searches tools, prompts and
resources alike (``route``'s ``kind`` filter). A prompt's arguments become its ``input_schema``
(string properties, ``required``); a resource template's URI variables likewise.

A server that does not declare the ``prompts`` or ``resources`` capability is not asked; a server
that declares one and then fails to answer it costs a warning, never the crawl of its tools.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from typing import Any

import mcp.types as types
from mcp.client.session import ClientSession
from mcp.shared.exceptions import MCPError
from mcp.shared.uri_template import UriTemplate
from pydantic import ValidationError

from index.catalog.records import ToolRecord
from index.catalog.servers import ServerConfig

logger = logging.getLogger(__name__)

#: Pages followed per list method; a server that keeps returning cursors is cut here.
MAX_PAGES = 100

Lister = Callable[[types.PaginatedRequestParams | None], Awaitable[Any]]


async def list_pages(lister: Lister, field: str, what: str, warnings: list[str]) -> list[Any]:
    """Every item of a paginated list method (``field`` of each page), duplicate cursors stopped."""
    items: list[Any] = []
    cursor: str | None = None
    seen: set[str] = set()
    for _ in range(MAX_PAGES):
        page = await lister(types.PaginatedRequestParams(cursor=cursor) if cursor else None)
        items.extend(getattr(page, field))
        cursor = page.next_cursor
        if not cursor:
            return items
        if cursor in seen:
            warnings.append(f"{what} returned cursor {cursor!r} twice; stopped paging")
            return items
        seen.add(cursor)
    warnings.append(f"{what} still had more pages after {MAX_PAGES}; kept the first {MAX_PAGES}")
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
    return await list_pages(lambda p: session.list_prompts(params=p), "prompts", "prompts/list", warnings)


async def list_resources(session: ClientSession, warnings: list[str]) -> list[types.Resource]:
    return await list_pages(lambda p: session.list_resources(params=p), "resources", "resources/list", warnings)


async def list_resource_templates(session: ClientSession, warnings: list[str]) -> list[types.ResourceTemplate]:
    return await list_pages(
        lambda p: session.list_resource_templates(params=p), "resource_templates", "resources/templates/list", warnings
    )


#: Problems of a reply named in a crawl's "bad reply" reason; the rest are counted.
SHOWN_SCHEMA_PROBLEMS = 2


def describe_schema_error(error: ValidationError, depth: int = 0) -> str:
    """The first problems of a reply that broke the MCP schema, where and what (``tools[0].inputSchema.type:
    should be 'object' (got 'string')``): enough for the user or the server's author to find the tool.
    ``depth`` leading parts of each location are left out (2: ``inputSchema.type`` of the one tool checked)."""
    problems = []
    for item in error.errors()[:SHOWN_SCHEMA_PROBLEMS]:
        location = item["loc"][depth:]
        where = "".join(f"[{part}]" if isinstance(part, int) else f".{part}" for part in location).lstrip(".")
        message = str(item["msg"]).replace("Input should", "should", 1)
        shown = item.get("input")
        if item["type"] != "missing" and isinstance(shown, str | int | float | bool) and len(repr(shown)) <= 60:
            message += f" (got {shown!r})"
        problems.append(f"{where}: {message}" if where else message)
    more = error.error_count() - len(problems)
    return "; ".join(problems) + (f" (and {more} more)" if more > 0 else "")


async def _guarded(what: str, call: Callable[[], Awaitable[list[Any]]], warnings: list[str]) -> list[Any]:
    """A list method's items, or none with a warning when the child answers it wrongly."""
    try:
        return await call()
    except MCPError as error:
        if error.code == types.CONNECTION_CLOSED:
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
) -> list[ToolRecord]:
    """Records of the prompts, resources and resource templates the server declares it has."""
    records: list[ToolRecord] = []
    if capabilities is not None and capabilities.prompts is not None:
        for prompt in await _guarded("prompts/list", lambda: list_prompts(session, warnings), warnings):
            records.append(prompt_record(prompt, config, server_description))
    if capabilities is not None and capabilities.resources is not None:
        for resource in await _guarded("resources/list", lambda: list_resources(session, warnings), warnings):
            records.append(resource_record(resource, config, server_description))
        templates = await _guarded(
            "resources/templates/list", lambda: list_resource_templates(session, warnings), warnings
        )
        for template in templates:
            records.append(resource_template_record(template, config, server_description))
    return unique_records(records, warnings)


def unique_records(records: list[ToolRecord], warnings: list[str]) -> list[ToolRecord]:
    """The first record of each id (a server listing one name or URI twice gets a warning)."""
    seen: dict[str, ToolRecord] = {}
    for record in records:
        if record.id in seen:
            warnings.append(f"{record.kind} '{record.uri or record.name}' listed twice; kept the first")
            continue
        seen[record.id] = record
    return list(seen.values())
