"""How much of a child's listings the copilot keeps, whatever the child sends.

One place for the bounds that ``tool_listing`` (tools) and ``index.catalog.kinds`` (prompts,
resources, resource templates) both apply: ``tool_listing`` imports ``index.catalog.kinds``, so
the shared numbers live here, in a module that imports neither.
"""

from __future__ import annotations

from pydantic import BaseModel

#: List pages followed per list method and server; a server that keeps returning cursors is cut here.
MAX_PAGES = 100
#: Items kept per server and kind, the first ones listed (the largest server of the bundled catalog
#: has 54 tools): every item is pinned, scanned and embedded, so a child listing 100,000 would cost minutes.
MAX_TOOLS = 1000
#: Characters of one item's definition as JSON; a longer one is skipped (the largest of the bundled
#: catalog has 8,586). Every definition is pinned whole, scanned and embedded.
MAX_DEFINITION_CHARS = 100_000
#: Characters of a child's name (of a tool, prompt, resource, cursor) quoted in a warning.
SHOWN_NAME_CHARS = 100


def size_problem(item: BaseModel) -> str | None:
    """Why ``item``'s definition is too long for the copilot to keep, or None."""
    size = len(item.model_dump_json(by_alias=True, exclude_none=True))
    if size > MAX_DEFINITION_CHARS:
        return f"it is {size:,} characters long, over the copilot's limit of {MAX_DEFINITION_CHARS:,} characters"
    return None
