"""A child's list page as it sent it, checked item by item.

The SDK's session checks a list reply as a whole: one prompt without a name, or one resource
without a URI, failed the page, and the copilot lost every item of that kind of the server. And it
builds a model of every item before anyone can count them: a page of a million tiny items cost a
million models, however few the copilot keeps. So ``tools/list`` (``index.children.tool_listing``)
and ``prompts/list``, ``resources/list``, ``resources/templates/list`` (``index.catalog.kinds``)
take each page as plain JSON, keep only the items they have room for (looking at nothing but each
item's key), and check those with the negotiated version's schema, as the session would -- each
alone when some are broken, so that only those are skipped, with what is wrong with each.
"""

from __future__ import annotations

from collections.abc import Collection
from typing import Any, TypeVar

from mcp.client.session import ClientSession
from pydantic import BaseModel, ValidationError

from index.children.direct import typed_result
from index.children.listing_limits import SHOWN_NAME_CHARS, Repeats

ResultT = TypeVar("ResultT", bound=BaseModel)

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


async def raw_page(session: ClientSession, request: BaseModel) -> dict[str, Any]:
    """The reply to a list ``request`` as the child sent it: the request the session's own
    ``list_*`` method makes, without its check of the reply as a whole -- the session has no public
    way to take a result unchecked (mcp 2.3)."""
    data = request.model_dump(by_alias=True, mode="json", exclude_none=True)
    opts: Any = {}
    session._stamp(data, opts)  # the protocol version header an HTTP child expects
    if session._session_read_timeout_seconds is not None:
        opts["timeout"] = session._session_read_timeout_seconds
    return await session._dispatcher.send_raw_request(data["method"], data.get("params"), opts)


def within_room(
    items: list[Any], room: int, seen: Collection[str], read_keys: set[str], key: str, kind: str, repeated: Repeats
) -> tuple[list[Any], int]:
    """The items of a raw page to read, and how many were left out: the first ``room`` whose ``key``
    was neither read before (``seen``) nor earlier on the page (added to ``read_keys``); each repeat
    is counted in ``repeated`` as a ``kind``. Only each item's key is looked at: nothing is built
    for the rest."""
    read: list[Any] = []
    left_out = 0
    for item in items:
        name = item.get(key) if isinstance(item, dict) else None
        if isinstance(name, str) and (name in seen or name in read_keys):
            repeated.add(f"{kind} '{name[:SHOWN_NAME_CHARS]}'")
        elif len(read) >= room:
            left_out += 1
        else:
            read.append(item)
            if isinstance(name, str):
                read_keys.add(name)
    return read, left_out


def checked_page(
    version: str | None, method: str, raw: dict[str, Any], field: str, key: str, result_type: type[ResultT],
    broken: dict[str, str],
) -> ResultT:
    """``raw`` (a reply to ``method`` whose items are in ``field``) typed as the session types it,
    less its broken items: each is put in ``broken`` (its ``key``, or its position -> what is wrong).

    Raises ``ValidationError`` when the reply is wrong beyond single items (``field`` not a list,
    a cursor that is not a string).
    """
    try:
        return typed_result(version, method, raw, result_type)
    except ValidationError as error:
        if not _only_items_broken(error, field):
            raise
    good: list[Any] = []
    for index, item in enumerate(raw[field]):
        try:
            typed_result(version, method, {field: [item]}, result_type)
        except ValidationError as error:
            broken[item_label(item, index, key)] = describe_schema_error(error, depth=2)
            continue
        good.append(item)
    return typed_result(version, method, {**raw, field: good}, result_type)


def item_label(item: Any, index: int, key: str) -> str:
    """How a listed item is named: its ``key`` (name, URI), else its name, else its place."""
    for field in (key, "name"):
        name = item.get(field) if isinstance(item, dict) else None
        if isinstance(name, str) and name:
            return name
    return f"#{index + 1} (no {_KEY_WORDS.get(key, key)})"


_KEY_WORDS = {"uriTemplate": "URI template", "uri": "URI"}


def _only_items_broken(error: ValidationError, field: str) -> bool:
    """Whether every problem of the reply lies inside one of the items in ``field`` (``tools[i]...``)."""
    return all(
        len(item["loc"]) >= 2 and item["loc"][0] == field and isinstance(item["loc"][1], int)
        for item in error.errors()
    )


__all__ = ["checked_page", "describe_schema_error", "item_label", "raw_page", "within_room"]
