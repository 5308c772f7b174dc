"""Descriptions of the tools a trajectory used, for the judge prompt.

Read from a copilot catalog snapshot (``index.records``) or LiveMCPBench's ``tools.json``.
"""

from __future__ import annotations

import json
from pathlib import Path

from index.errors import CatalogError
from index.records import load_catalog

#: ``(server, tool) -> description``
ToolDescriptions = dict[tuple[str, str], str]


def load_tool_descriptions(path: str | Path) -> ToolDescriptions:
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8") if path.suffix != ".gz" else None
    except FileNotFoundError:
        raise CatalogError(
            f"{path}: tool list not found (pass --tools with a catalog or LiveMCPBench tools.json)."
        ) from None
    except OSError as error:
        raise CatalogError(f"{path}: cannot read tool list ({error.strerror}).") from None
    except UnicodeDecodeError as error:
        raise CatalogError(f"{path}: tool list is not UTF-8 text ({error.reason} at byte {error.start}).") from None
    if text is not None:
        try:
            data = json.loads(text)
        except json.JSONDecodeError as error:
            raise CatalogError(f"{path}:{error.lineno}: tool list is not valid JSON ({error.msg}).") from None
        if isinstance(data, list):
            return _from_livemcpbench(data, path)
    catalog = load_catalog(path)
    return {(tool.server, tool.name): tool.description for tool in catalog.tools}


def _from_livemcpbench(data: list, path: Path) -> ToolDescriptions:
    descriptions: ToolDescriptions = {}
    for entry in data:
        servers = entry.get("tools") if isinstance(entry, dict) else None
        if not isinstance(servers, dict):
            raise CatalogError(f"{path}: not a LiveMCPBench tools.json (entries need a 'tools' object).")
        for server in servers.values():
            server_name = server.get("server_name", "")
            for tool in server.get("tools") or []:
                descriptions[(server_name, tool.get("name", ""))] = tool.get("description") or ""
    return descriptions
