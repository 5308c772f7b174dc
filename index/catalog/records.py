"""Tool records and catalog snapshots (the README's "Tool index and search").

A catalog is a JSON file: ``{"version": 1, "created": ..., "source": ..., "servers": {name:
{description, category, launch_hash, skipped_tools, ...}}, "tools": [ToolRecord, ...]}``. The crawler
writes it, ``import-livemcpbench`` writes it from the paper's snapshot, ``index build`` reads it.
A server's ``skipped_tools`` are the tools the crawl left out for a broken definition, with what is
wrong (catalogs written before it have none), and, under ``LISTING_CUT`` (``"(tools past the cap)"``,
no tool's name), the cut of a listing of more tools than the copilot reads: the index keeps them,
so ``execute`` of one -- or of a tool past the cut -- says why.
"""

from __future__ import annotations

import gzip
import hashlib
import json
import zlib
from collections.abc import Mapping
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, Field, ValidationError, computed_field

from index.json_text import parse_json
from index.errors import CatalogError
from index.storage.atomic import write_atomic

CATALOG_VERSION = 1

#: What a record describes: a tool (``tools/list``), a prompt (``prompts/list``), a resource
#: (``resources/list``) or a resource template (``resources/templates/list``).
RecordKind = Literal["tool", "prompt", "resource", "resource_template"]
RECORD_KINDS: tuple[RecordKind, ...] = ("tool", "prompt", "resource", "resource_template")
#: Fields only prompts and resources use; left out of the content hash while unset, so adding
#: them kept every existing tool's hash (and embedding) valid.
_KIND_FIELDS = {"kind": "tool", "uri": None, "mime_type": None}


class ToolRecord(BaseModel):
    """One tool, prompt or resource of one server, as its list method returned it.

    Prompts and resources are typed like tools so one index searches them all: a prompt's
    arguments are its ``input_schema`` (properties, required), a resource template's URI
    variables likewise; ``uri`` is the child's own resource URI or URI template.
    """

    server: str
    name: str
    kind: RecordKind = "tool"
    uri: str | None = None
    mime_type: str | None = None
    title: str | None = None
    description: str = ""
    input_schema: dict[str, Any] = Field(default_factory=lambda: {"type": "object", "properties": {}})
    output_schema: dict[str, Any] | None = None
    annotations: dict[str, Any] | None = None
    server_description: str = ""
    category: str = ""

    @property
    def id(self) -> str:
        """``server/name`` for tools; ``prompt:server/name``, ``resource:server/URI`` and
        ``resource_template:server/URI-template`` for the others (resource names need not be unique)."""
        if self.kind == "tool":
            return f"{self.server}/{self.name}"
        if self.kind == "prompt":
            return f"prompt:{self.server}/{self.name}"
        return f"{self.kind}:{self.server}/{self.uri or self.name}"

    @property
    def required(self) -> list[str]:
        required = self.input_schema.get("required") or []
        return [str(r) for r in required] if isinstance(required, list) else []

    @computed_field  # type: ignore[prop-decorator]
    @property
    def content_hash(self) -> str:
        """Hash of everything that is embedded or shown; a rebuild re-embeds only on change."""
        payload = self.model_dump(mode="json", exclude={"content_hash"})
        for key, default in _KIND_FIELDS.items():
            if payload.get(key) == default:
                del payload[key]
        return hashlib.sha256(json.dumps(payload, sort_keys=True, ensure_ascii=False).encode()).hexdigest()[:16]


class CatalogServer(BaseModel):
    description: str = ""
    category: str = ""
    launch_hash: str | None = None
    tool_count: int = 0
    #: Seconds the crawl measured from launch to the answer to initialize (with the package caches
    #: as they were: a first npx/uvx run includes the download): how slow the server is to start.
    start_seconds: float | None = None
    #: Tools the crawl left out because their definition is broken: name -> what is wrong with it; and
    #: under ``index.children.listing_limits.LISTING_CUT``, how its listing was cut at the cap.
    skipped_tools: dict[str, str] = Field(default_factory=dict)


def skipped_tools_by_server(servers: Mapping[str, CatalogServer]) -> dict[str, dict[str, str]]:
    """Per server, the tools left out for a broken definition (copies, so callers may keep them)."""
    return {name: dict(info.skipped_tools) for name, info in servers.items()}


class Catalog(BaseModel):
    version: int = CATALOG_VERSION
    created: str = Field(default_factory=lambda: datetime.now(UTC).isoformat(timespec="seconds"))
    source: str = ""
    servers: dict[str, CatalogServer] = Field(default_factory=dict)
    tools: list[ToolRecord] = Field(default_factory=list)

    def digest(self) -> str:
        """Identifies the tool set (not the crawl time): logged with every benchmark run.

        Skipped tools count too (a build must carry a change of them into the index); a catalog
        without any keeps the digest it had before they were recorded."""
        hashes = sorted(f"{t.id}:{t.content_hash}" for t in self.tools)
        hashes += sorted(
            f"skipped:{server}/{name}:{why}"
            for server, info in self.servers.items()
            for name, why in info.skipped_tools.items()
        )
        return hashlib.sha256("\n".join(hashes).encode()).hexdigest()[:16]

    def skipped_tools(self) -> dict[str, dict[str, str]]:
        """Every server's tools left out for a broken definition (an empty dict for a server with none)."""
        return skipped_tools_by_server(self.servers)

    def save(self, path: str | Path) -> Path:
        """Write atomically (a temp file, then rename); failures are a :class:`CatalogError`."""
        path = Path(path)
        text = self.model_dump_json(indent=1, exclude={"tools": {"__all__": {"content_hash"}}})
        try:
            write_atomic(path, gzip.compress(text.encode()) if path.suffix == ".gz" else text + "\n")
        except OSError as error:
            raise CatalogError(f"{path}: cannot write the catalog ({error}).") from None
        return path


def load_catalog(path: str | Path) -> Catalog:
    path = Path(path)
    try:
        raw = path.read_bytes()
        if path.suffix == ".gz":
            raw = gzip.decompress(raw)
    except FileNotFoundError:
        from index.cli.hints import create_catalog_commands

        raise CatalogError(f"{path}: catalog not found. Create one with: {create_catalog_commands(None, path)}") from None
    except (OSError, EOFError, zlib.error) as error:  # unreadable, a directory, or a corrupt/truncated .gz
        raise CatalogError(f"{path}: cannot read the catalog ({error}).") from None
    try:
        data = parse_json(raw)
    except json.JSONDecodeError as error:
        from index.cli.hints import create_catalog_commands

        # The copilot writes catalogs whole (temporary file, then rename): one cut short was edited,
        # copied or downloaded incompletely, so the advice is to write it again.
        raise CatalogError(
            f"{path}:{error.lineno}: catalog is not valid JSON ({error.msg}). Restore the file, or write it "
            f"again with: {create_catalog_commands(None, path)}"
        ) from None
    except UnicodeDecodeError as error:
        raise CatalogError(f"{path}: catalog is not UTF-8 text ({error.reason} at byte {error.start}).") from None
    if isinstance(data, dict) and _looks_like_servers_file(data):
        raise CatalogError(
            f"{path}: not a catalog snapshot but a servers file; crawl it into a catalog with "
            f"python -m index crawl --servers {path} --out CATALOG."
        )
    if isinstance(data, dict) and "tools" in data and not isinstance(data["tools"], list):
        raise CatalogError(
            f"{path}: not a catalog snapshot ('tools' must be a list of tool records, got {_json_type(data['tools'])})."
        )
    if not isinstance(data, dict) or not isinstance(data.get("tools"), list):
        # Reading such a file as an empty catalog would let ``build`` empty the index.
        got = f"a JSON {type(data).__name__}" if not isinstance(data, dict) else f"keys {sorted(data)[:6]}"
        raise CatalogError(f"{path}: not a catalog snapshot (expected a JSON object with a 'tools' list, got {got}).")
    version = data.get("version", CATALOG_VERSION)
    if isinstance(version, int) and not isinstance(version, bool) and version > CATALOG_VERSION:
        raise CatalogError(
            f"{path}: catalog version {version} was written by a newer copilot (this one reads up to "
            f"{CATALOG_VERSION}); upgrade, or crawl the servers again with this one."
        )
    try:
        return Catalog.model_validate(data)
    except ValidationError as error:
        raise CatalogError(f"{path}: not a catalog snapshot {_describe_invalid(data, error)}.") from None


def _json_type(value: object) -> str:
    """``value``'s kind as JSON names it (an object, not a dict)."""
    names = {dict: "an object", list: "a list", str: "a string", bool: "a boolean", type(None): "null"}
    return names.get(type(value), "a number")


def _looks_like_servers_file(data: dict[str, Any]) -> bool:
    """A server list (Claude Desktop's ``mcpServers``, VS Code's ``servers`` of launch entries) and no catalog.

    Every catalog has a ``servers`` mapping too: it is a servers file only when there are no ``tools``
    and its entries say how to launch something."""
    if "tools" in data:
        return False
    if isinstance(data.get("mcpServers"), dict):
        return True
    entries = data.get("servers")
    return isinstance(entries, dict) and any(
        isinstance(entry, dict) and ("command" in entry or "url" in entry) for entry in entries.values()
    )


def _describe_invalid(data: dict[str, Any], error: ValidationError) -> str:
    """The first problem by its path (``tools.3.input_schema: ...``), the record it is in when that
    record names itself (``in the record of time/now``), and how many more problems there are."""
    first = error.errors()[0]
    location = first["loc"]
    where = ".".join(str(part) for part in location)
    text = f"({where}: {first['msg']})"
    if len(location) >= 2 and location[0] == "tools" and isinstance(location[1], int):
        record = data["tools"][location[1]]
        ids = [record.get(key) for key in ("server", "name")] if isinstance(record, dict) else []
        if ids and all(isinstance(part, str) for part in ids):
            text += f" in the record of {ids[0]}/{ids[1]}"
    more = len(error.errors()) - 1
    return text + (f"; and {more} more problem(s)" if more else "")
