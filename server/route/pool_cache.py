"""The index's servers and tool names as route's description last read them, kept for the next start.

Reading them from the index loads the whole index (over a second for 500 tools, Chroma's import
included), so the copilot does it in the background after ``initialize``. A host lists the tools
right after ``initialize`` and many never list them again, so without this file the description
they keep would be the servers file's alone: no tool count, and category words from the servers'
descriptions only. The copilot writes the file whenever it reads a new index build and reads it
at start; the background read corrects a stale file (a build since the last run) and hosts are
told with ``notifications/tools/list_changed``. A missing or unreadable file is no error.
"""

from __future__ import annotations

import logging
from pathlib import Path

from pydantic import BaseModel, ValidationError

from index.storage.atomic import write_text_atomic
from server.route.description import PoolServer

logger = logging.getLogger(__name__)

FILE_NAME = "route-pool.json"
CACHE_VERSION = 1


class CachedServer(BaseModel):
    description: str = ""
    category: str = ""
    tools: list[str] = []


class PoolCache(BaseModel):
    version: int = CACHE_VERSION
    #: The index build these servers were read from.
    build: str
    servers: dict[str, CachedServer]


def pool_cache_path(index_dir: Path) -> Path:
    return index_dir / FILE_NAME


def save_pool(path: Path, build: str, pool: dict[str, PoolServer]) -> None:
    """Keep ``pool`` (read from index build ``build``) for the next start; a failure is only logged."""
    cache = PoolCache(
        build=build,
        servers={
            name: CachedServer(description=server.description, category=server.category, tools=server.tools)
            for name, server in pool.items()
        },
    )
    try:
        write_text_atomic(path, cache.model_dump_json() + "\n")
    except OSError as error:
        logger.debug("cannot keep route's pool in %s: %s", path, error)


def load_pool(path: Path) -> tuple[str, dict[str, PoolServer]] | None:
    """(index build, servers) as last kept, or None when there is no usable file."""
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return None
    except (OSError, UnicodeDecodeError) as error:
        logger.debug("ignoring %s: %s", path, error)
        return None
    try:
        cache = PoolCache.model_validate_json(text)
    except ValidationError as error:
        logger.debug("ignoring %s: %s", path, error.errors()[0]["msg"])
        return None
    if cache.version != CACHE_VERSION:
        return None
    return cache.build, {
        name: PoolServer(name, server.description, server.category, list(server.tools))
        for name, server in cache.servers.items()
    }
