"""Descriptions of the tools a trajectory used, for the judge prompt.

Read from a copilot catalog snapshot (``index.catalog.records``) or LiveMCPBench's ``tools.json`` (read
by the index's own importer, which validates every entry). A file of neither shape, or one that
lists no tool, is an error naming the file and the entry: the judge would otherwise run without
descriptions and nobody would notice.
"""

from __future__ import annotations

import json
from pathlib import Path

from index.json_text import parse_json
from index.errors import CatalogError
from index.catalog.livemcpbench import load_livemcpbench
from index.catalog.records import Catalog, load_catalog

#: ``(server, tool) -> description``
ToolDescriptions = dict[tuple[str, str], str]

_SHAPES = "a copilot catalog snapshot ({\"servers\": …, \"tools\": [...]}) or LiveMCPBench's tools.json (a list of server entries)"


def load_tool_descriptions(path: str | Path) -> ToolDescriptions:
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8-sig") if path.suffix != ".gz" else None
    except FileNotFoundError:
        raise CatalogError(
            f"{path}: tool list not found (expected a copilot catalog or LiveMCPBench's tools.json)."
        ) from None
    except OSError as error:
        raise CatalogError(f"{path}: cannot read tool list ({error.strerror}).") from None
    except UnicodeDecodeError as error:
        raise CatalogError(f"{path}: tool list is not UTF-8 text ({error.reason} at byte {error.start}).") from None
    catalog = _read(path, text)
    if not catalog.tools:
        raise CatalogError(f"{path}: the tool list holds no tools; expected {_SHAPES}.")
    return {(tool.server, tool.name): tool.description for tool in catalog.tools}


def _read(path: Path, text: str | None) -> Catalog:
    if text is None:
        return load_catalog(path)  # a gzipped catalog snapshot
    try:
        data = parse_json(text)
    except json.JSONDecodeError as error:
        raise CatalogError(f"{path}:{error.lineno}: tool list is not valid JSON ({error.msg}).") from None
    if isinstance(data, list):
        return load_livemcpbench(path)
    if not isinstance(data, dict) or "tools" not in data:
        got = f"an object with keys {', '.join(sorted(map(str, data))[:5]) or 'none'}" if isinstance(data, dict) else type(data).__name__
        raise CatalogError(f"{path}: not a tool list (got {got}); expected {_SHAPES}.")
    return load_catalog(path)
