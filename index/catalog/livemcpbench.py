"""Import LiveMCPBench's published tool snapshot (``LiveMCPTool/tools.json``) as a catalog.

The snapshot is a JSON list of server entries (``name``, ``description``, ``category``,
``tools: {server_key: {tools: [{name, description, inputSchema, annotations}, ...]}}``).
The server name used everywhere else is the key under ``tools`` (what the paper's agents
pass to ``execute``), so results compare with the paper on exactly its 527 tools.
"""

from __future__ import annotations

import argparse
import json
import logging
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from index.json_text import has_lone_surrogate, parse_json, without_lone_surrogates
from index.errors import CatalogError
from index.catalog.records import Catalog, CatalogServer, ToolRecord
from index.catalog.servers import server_name_problem
from index.children.listing_limits import name_problem
from index.cli.display import printable
from index.cli.hints import index_command
from index.settings import CopilotSettings

logger = logging.getLogger(__name__)

DEFAULT_CATALOG_NAME = "livemcpbench-catalog.json"


class _SnapshotTool(BaseModel):
    model_config = ConfigDict(extra="ignore")

    name: str
    title: str | None = None
    description: str | None = None
    inputSchema: dict[str, Any] | None = None  # noqa: N815 -- the snapshot's own key
    outputSchema: dict[str, Any] | None = None  # noqa: N815
    annotations: dict[str, Any] | None = None


class _SnapshotServer(BaseModel):
    model_config = ConfigDict(extra="ignore")

    tools: list[_SnapshotTool] = Field(default_factory=list)


class _SnapshotEntry(BaseModel):
    model_config = ConfigDict(extra="ignore")

    name: str = ""
    description: str | None = None
    category: str | None = None
    tools: dict[str, _SnapshotServer] = Field(default_factory=dict)


def _read_json(path: Path) -> Any:
    try:
        text = path.read_text(encoding="utf-8-sig")  # a byte order mark (Notepad's UTF-8) is not JSON
    except FileNotFoundError:
        raise CatalogError(
            f"{path}: file not found (expected LiveMCPBench's tools/LiveMCPTool/tools.json)."
        ) from None
    except (OSError, UnicodeDecodeError) as error:
        raise CatalogError(f"{path}: cannot read ({error}).") from None
    try:
        return parse_json(text)
    except json.JSONDecodeError as error:
        raise CatalogError(f"{path}:{error.lineno}: not valid JSON ({error.msg}).") from None


def _problem(error: ValidationError) -> str:
    """The first problem as a JSON path and plain words (no names of this module's classes)."""
    first = error.errors()[0]
    where = "".join(f"[{part}]" if isinstance(part, int) else f".{part}" for part in first["loc"]).lstrip(".")
    expected = {"model_type": "a JSON object", "dict_type": "a JSON object", "list_type": "a JSON list"}.get(first["type"])
    if expected is not None:
        problem = f"should be {expected}, not {type(first.get('input')).__name__.replace('NoneType', 'null')}"
    elif first["type"] == "missing":
        problem = "is missing"
    else:
        problem = first["msg"][0].lower() + first["msg"][1:]
    return f"{where or 'the entry'} {problem}."


def _text_problem(tool: _SnapshotTool) -> str | None:
    """What makes ``tool``'s name one no catalog can hold (a lone surrogate has no UTF-8 form), or None."""
    if has_lone_surrogate(tool.name):
        return "its name holds a lone UTF-16 surrogate, which UTF-8 (and so the catalog) cannot hold"
    return None


def _without_lone_surrogates(value: Any) -> Any:
    """``value`` (text or JSON) with each lone surrogate replaced by U+FFFD: the catalog is UTF-8,
    and one in a description failed the whole import with a serializer's traceback."""
    if isinstance(value, str):
        return without_lone_surrogates(value)
    if value is None:
        return None
    text = json.dumps(value, ensure_ascii=False)
    return json.loads(without_lone_surrogates(text)) if has_lone_surrogate(text) else value


def load_livemcpbench(path: str | Path) -> Catalog:
    """Read LiveMCPBench's ``tools.json`` into a :class:`Catalog` (one record per listed tool)."""
    path = Path(path)
    data = _read_json(path)
    if not isinstance(data, list):
        raise CatalogError(
            f"{path}: expected a JSON list of server entries (LiveMCPTool/tools.json), got {type(data).__name__}."
        )
    servers: dict[str, CatalogServer] = {}
    tools: list[ToolRecord] = []
    for number, raw_entry in enumerate(data, 1):
        label = raw_entry.get("name") if isinstance(raw_entry, dict) else None
        where_entry = f"{path}: entry {number} of {len(data)}{f' ({label})' if label else ''}"
        try:
            entry = _SnapshotEntry.model_validate(raw_entry)
        except ValidationError as error:
            raise CatalogError(f"{where_entry}: {_problem(error)}") from None
        for server_name, listing in entry.tools.items():
            # The crawl's rules: a name it would refuse failed the build late, naming no entry.
            if (problem := server_name_problem(server_name)) is not None:
                raise CatalogError(f"{where_entry}: {problem}")
            if server_name in servers:
                raise CatalogError(f"{where_entry}: server '{server_name}' is listed twice.")
            description = _without_lone_surrogates((entry.description or "").strip())
            category = _without_lone_surrogates((entry.category or "").strip())
            seen: set[str] = set()
            for tool in listing.tools:
                if (problem := name_problem(tool.name) or _text_problem(tool)) is not None:
                    logger.warning("%s: %s: skipping tool %r: %s", where_entry, server_name, printable(tool.name), problem)
                    continue
                if tool.name in seen:
                    logger.warning("%s: %s lists tool %r twice; keeping the first", path, server_name, tool.name)
                    continue
                seen.add(tool.name)
                record = ToolRecord(
                    server=server_name,
                    name=tool.name,
                    title=_without_lone_surrogates(tool.title),
                    description=_without_lone_surrogates((tool.description or "").strip()),
                    input_schema=_without_lone_surrogates(tool.inputSchema or {"type": "object", "properties": {}}),
                    output_schema=_without_lone_surrogates(tool.outputSchema),
                    annotations=_without_lone_surrogates(tool.annotations),
                    server_description=description,
                    category=category,
                )
                tools.append(record)
            servers[server_name] = CatalogServer(description=description, category=category, tool_count=len(seen))
    if not tools:
        raise CatalogError(f"{path}: no tools found (is this LiveMCPBench's tools.json?).")
    return Catalog(source=f"livemcpbench:{path.resolve()}", servers=servers, tools=tools)


def default_output(settings: CopilotSettings | None = None) -> Path:
    settings = settings or CopilotSettings.load()
    return settings.home / DEFAULT_CATALOG_NAME


def import_command(args: argparse.Namespace) -> int:
    settings = CopilotSettings.load()
    out = Path(args.out) if getattr(args, "out", None) else default_output(settings)
    if out.resolve() == Path(args.tools_json).resolve():
        raise CatalogError(f"--out {out} is the snapshot being imported; write the catalog to another path.")
    catalog = load_livemcpbench(args.tools_json)
    catalog.save(out)
    print(
        f"imported {len(catalog.tools)} tools from {len(catalog.servers)} servers -> {out}\n"
        f"build the index with: {index_command(settings, 'build', '--catalog', str(out))}"
    )
    return 0
