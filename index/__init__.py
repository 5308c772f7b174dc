"""Knowing the tools: server lists, crawling, catalog snapshots, the search index.

Nothing heavy happens at import time; the embedding model and Chroma load on first use.
"""

from typing import Any

#: Exported lazily: importing ``index`` must stay cheap (no numpy, Chroma or torch).
_LAZY_EXPORTS = {
    "ToolIndex": "index.search.tool_index",
    "SearchHit": "index.search.tool_index",
    "BuildReport": "index.search.tool_index",
}


def __getattr__(name: str) -> Any:
    module = _LAZY_EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'index' has no attribute {name!r}")
    import importlib

    return getattr(importlib.import_module(module), name)
