"""A child's ``tools/list``, tool by tool: a tool whose definition is broken is skipped, not its server.

The SDK checks a ``tools/list`` reply as a whole, so one tool without an ``inputSchema``, or with
one that is not an object of ``"type": "object"``, failed the whole listing: the crawl lost every
tool of that server, and the pool every call to it. So a page is taken as plain JSON and checked
against the same schema of the negotiated protocol version, and when that fails for some tools,
each tool is checked alone; the tools that pass are kept and the others skipped, each with what
is wrong with it.
A tool whose ``inputSchema`` is no valid JSON Schema (no draft accepts it; the draft it declares,
when it declares one) is skipped too: ``execute`` could not check params against it.

The crawler and the child pool both list through :func:`list_all_tools`, so a tool the catalog
leaves out is a tool the pool refuses, for the same reason in the same words. A child's listing
is bounded there whatever it sends: a definition over :data:`~index.children.listing_limits.MAX_DEFINITION_CHARS` characters or an
input schema nested deeper than :data:`MAX_SCHEMA_DEPTH` levels is skipped like a broken one, at most
:data:`MAX_PAGES` pages are followed (a cursor seen before ends the listing), and only the first
:data:`MAX_TOOLS` distinct tools listed are read: the rest of their page is counted before anything
is checked, no page past them is asked for, and the cut is one more entry of the skipped tools
(:data:`LISTING_CUT`), so that a call to a tool past it is refused saying so, not as unknown.
"""

from __future__ import annotations

import json
from collections.abc import Collection, Mapping
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Any

import anyio
import mcp.types as types
from jsonschema import exceptions as schema_errors
from jsonschema import validators
from jsonschema.protocols import Validator

from index.children.bounded_schema import bounded, check_schema
from index.children.connect import ChildConnection
# Shared with the listings of prompts and resources (``index.catalog.kinds``).
from index.children.listing_limits import (
    LISTING_CUT,
    MAX_PAGES,
    MAX_TOOLS,
    SHOWN_NAME_CHARS,
    Repeats,
    listing_cut_reason,
    name_problem,
    size_problem,
)
from index.children.raw_pages import checked_page, raw_page, within_room

#: Drafts tried, newest first, for a schema that does not declare one (``$schema``). Older servers
#: still write draft-04 forms (``"exclusiveMinimum": true``), which newer drafts reject.
DRAFTS_BY_AGE = (
    validators.Draft202012Validator,
    validators.Draft201909Validator,
    validators.Draft7Validator,
    validators.Draft6Validator,
    validators.Draft4Validator,
)
#: Characters of a schema problem kept (an error may quote a whole enum back).
_PROBLEM_CHARS = 200
#: JSON levels of an input schema; a deeper one is skipped (the schema checker recurses per level,
#: and Python's stack ends a little past 90 nested objects).
MAX_SCHEMA_DEPTH = 64


@dataclass
class ToolsPage:
    """One page of a child's tools, read as far as the cap allows: the usable ones, the cursor of
    the next page, the skipped ones, and what was not read."""

    tools: list[types.Tool]
    next_cursor: str | None = None
    #: Tool name -> what is wrong with its definition (``inputSchema.type: should be 'object' ...``).
    skipped: dict[str, str] = field(default_factory=dict)
    #: Tools read (checked): at most the room the cap left.
    read: int = 0
    #: The names of the tools read (a name listed again later is not read again).
    read_names: set[str] = field(default_factory=set)
    #: Tools listed past the cap's room: counted, never checked.
    left_out: int = 0
    #: Tools whose name was read already (on an earlier page or earlier on this one).
    repeated: Repeats = field(default_factory=Repeats)


def input_schema_problem(schema: Mapping[str, Any]) -> str | None:
    """What makes ``schema`` (a tool's ``inputSchema``) no valid JSON Schema, or None when it is one."""
    try:
        text = json.dumps(schema, sort_keys=True)
    except (TypeError, ValueError):
        return schema_validator_class(schema)[1]
    return _checked(text)


@lru_cache(maxsize=4096)
def _checked(text: str) -> str | None:
    # A pool lists each child again after every restart and change: a schema is checked once.
    return schema_validator_class(json.loads(text))[1]


def schema_validator_class(schema: Mapping[str, Any]) -> tuple[type[Validator] | None, str | None]:
    """``(the validator class of schema's draft, None)``, or ``(None, what is wrong)`` when it fits none.

    The draft is the one ``schema`` declares (``$schema``), else the newest that accepts it. The
    crawl and the pool skip a tool whose input schema fits none; ``execute`` checks params with it.
    """
    declared = validators.validator_for(schema, default=None) if isinstance(schema.get("$schema"), str) else None
    first: schema_errors.SchemaError | None = None
    for validator_class in (declared,) if declared is not None else DRAFTS_BY_AGE:
        try:
            check_schema(validator_class, schema)  # bounded: the schema is the child's
        except schema_errors.SchemaError as error:
            first = first or error
            continue
        # Params are checked with it: bounded too, since the schema is the child's and the params the host's.
        return bounded(validator_class), None
    assert first is not None
    where = "".join(f"[{part}]" if isinstance(part, int) else f".{part}" for part in first.absolute_path)
    message = first.message if len(first.message) <= _PROBLEM_CHARS else first.message[: _PROBLEM_CHARS - 1] + "…"
    return None, f"inputSchema{where} is not valid JSON Schema: {message}"


def _depth(value: Any) -> int:
    """JSON nesting levels of ``value`` (iterative: a deep value must not exhaust the stack)."""
    deepest = 0
    stack = [(value, 1)]
    while stack:
        item, level = stack.pop()
        if isinstance(item, dict | list):
            deepest = max(deepest, level)
            stack.extend((child, level + 1) for child in (item.values() if isinstance(item, dict) else item))
    return deepest


def definition_problem(tool: types.Tool) -> str | None:
    """What makes ``tool``'s definition unusable, too big or too deep for the copilot to keep, or None."""
    if (problem := name_problem(tool.name)) is not None:
        return problem
    if (problem := size_problem(tool)) is not None:
        return problem
    for field_name, schema in (("inputSchema", tool.input_schema), ("outputSchema", tool.output_schema)):
        depth = _depth(schema)
        if depth > MAX_SCHEMA_DEPTH:
            return f"{field_name} is nested {depth} levels deep, over the copilot's limit of {MAX_SCHEMA_DEPTH}"
    return None


def _usable(tools: list[types.Tool], skipped: dict[str, str]) -> list[types.Tool]:
    kept = []
    for tool in tools:
        problem = definition_problem(tool) or input_schema_problem(tool.input_schema)
        if problem is None:
            kept.append(tool)
        else:
            skipped[tool.name] = problem
    return kept


async def list_all_tools(connection: ChildConnection, warnings: list[str], skipped: dict[str, str]) -> list[types.Tool]:
    """``tools/list`` following ``nextCursor`` until the last page, bounded (see the module docstring).

    The first :data:`MAX_TOOLS` distinct tools listed are read; no page past them is asked for,
    and the rest of a page is counted, never checked. A tool listed twice keeps its first
    definition. Tools whose definitions are broken (or over the limits) are left out and put in
    ``skipped`` (name -> what is wrong), and so is a cut at the cap (under :data:`LISTING_CUT`);
    what else was cut is said in ``warnings``.
    """
    tools: dict[str, types.Tool] = {}
    read = 0
    seen: set[str] = set()  # names read: a name listed again is neither read nor counted again
    cursor: str | None = None
    seen_cursors: set[str] = set()
    left_out = 0
    repeated = Repeats()
    for _ in range(MAX_PAGES):
        page = await list_tools_page(connection, cursor, room=MAX_TOOLS - read, seen=seen)
        read += page.read
        seen |= page.read_names
        for name, problem in page.skipped.items():
            # A broken tool named like the cut's entry must not read as one.
            skipped[name if name != LISTING_CUT else f"{name} (a tool so named)"] = problem
        for tool in page.tools:
            tools.setdefault(tool.name, tool)
        left_out += page.left_out
        repeated.update(page.repeated)
        cursor = page.next_cursor
        if not cursor or read >= MAX_TOOLS:  # at the cap: a further page could only be left out
            break
        if cursor in seen_cursors:
            warnings.append(f"tools/list returned cursor {cursor[:SHOWN_NAME_CHARS]!r} twice; stopped paging")
            break
        seen_cursors.add(cursor)
    else:
        warnings.append(f"tools/list still had more pages after {MAX_PAGES}; kept the first {MAX_PAGES}")
    repeated.warn(warnings)
    if left_out or (cursor and read >= MAX_TOOLS):
        skipped[LISTING_CUT] = listing_cut_reason(left_out, more_pages=bool(cursor))
    return list(tools.values())


def skipped_words(name: str, problem: str) -> str:
    """How an entry of a listing's skipped tools reads in a log: a broken definition, or the cap's cut."""
    if name == LISTING_CUT:
        return problem
    return f"skipped tool '{name}', its definition is broken: {problem}"


async def list_tools_page(
    connection: ChildConnection, cursor: str | None = None, *, room: int = MAX_TOOLS, seen: Collection[str] = ()
) -> ToolsPage:
    """The page of ``tools/list`` at ``cursor``, without the tools whose definitions are broken.

    At most ``room`` tools of it are read, skipping those named in ``seen`` (read before) or
    earlier on the page; the others are counted, never checked: a page of a million tiny tools
    costs no million models. The page is read as plain JSON and checked with the schema of the
    negotiated protocol version, as ``session.list_tools`` would, then each tool alone when some
    are broken.

    Raises what ``session.list_tools`` raises, and its ``ValidationError`` when the reply is wrong
    beyond single tools (``tools`` not a list, a cursor that is not a string).
    """
    session = connection.session
    params = types.PaginatedRequestParams(cursor=cursor) if cursor else None
    raw = await raw_page(session, types.ListToolsRequest(params=params))
    page = ToolsPage([])
    items = raw.get("tools")
    if isinstance(items, list):
        read, page.left_out = within_room(items, room, seen, page.read_names, "name", "tool", page.repeated)
        page.read = len(read)
        raw = {**raw, "tools": read}
    version = session.protocol_version
    result = checked_page(version, "tools/list", raw, "tools", "name", types.ListToolsResult, page.skipped)
    # What session.list_tools does with a reply it took: the per-tool state later calls use (output
    # schemas, x-mcp-header maps; tools with invalid ones dropped), as it computes ``complete``.
    complete = (params is None or params.cursor is None) and result.next_cursor is None
    result = session._absorb_tool_listing(result, complete=complete)
    # In a worker thread: checking a schema against its metaschema costs what its size does (a
    # 100 KB schema: ~2 s), and a child lists up to 1,000 of them -- on the event loop, every
    # other session waited.
    page.tools = await anyio.to_thread.run_sync(_usable, result.tools, page.skipped, abandon_on_cancel=True)
    page.next_cursor = result.next_cursor
    return page
