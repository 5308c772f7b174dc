"""The index's servers and tool names as route's description last read them, kept for the next start.

Reading them from the index loads the whole index (over a second for 500 tools, Chroma's import
included), so the copilot does it in the background after ``initialize``. A host lists the tools
right after ``initialize`` and many never list them again, so without this file the description
they keep would be the servers file's alone: no tool count, and category words from the servers'
descriptions only. ``python -m index build`` writes the file after a build that changed the index,
and the copilot whenever it reads a new index build; the copilot reads it at start. Its background
read corrects a stale file (the index changed since) and hosts are then told with
``notifications/tools/list_changed``. A missing or unreadable file is no error.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable
from pathlib import Path

from pydantic import BaseModel

from index.catalog.records import ToolRecord
from index.storage.atomic import UnusableFile, read_model, write_atomic

logger = logging.getLogger(__name__)

FILE_NAME = "route-pool.json"
POOL_VERSION = 1


class KeptServer(BaseModel):
    description: str = ""
    category: str = ""
    #: Names of its indexed tools (prompts and resources too), in index order.
    tools: list[str] = []


class KeptPool(BaseModel):
    version: int = POOL_VERSION
    #: The index build these servers were read from ("" when the writer did not know it).
    build: str = ""
    servers: dict[str, KeptServer]


def pool_of_records(records: Iterable[ToolRecord]) -> dict[str, KeptServer]:
    """Each server of ``records`` with its description, category and record names."""
    servers: dict[str, KeptServer] = {}
    for record in records:
        server = servers.setdefault(record.server, KeptServer(description=record.server_description, category=record.category))
        server.tools.append(record.name)
    return servers


def pool_path(index_dir: Path) -> Path:
    return index_dir / FILE_NAME


def keep_pool(path: Path, servers: dict[str, KeptServer], build: str = "") -> None:
    """Keep ``servers`` (read from index build ``build``) for the next start; a failure is only logged."""
    try:
        write_atomic(path, KeptPool(build=build, servers=servers).model_dump_json() + "\n")
    except OSError as error:
        logger.debug("cannot keep route's pool in %s: %s", path, error)


def kept_pool(path: Path) -> KeptPool | None:
    """The pool as last kept, or None when there is no usable file."""
    try:
        pool = read_model(path, KeptPool)
    except UnusableFile as error:
        logger.debug("ignoring %s (%s)", path, error)
        return None
    return pool if pool is not None and pool.version == POOL_VERSION else None
