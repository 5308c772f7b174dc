"""What a search loads from the store, kept beside it so the next reader needs no Chroma.

Every copilot start and ``index search`` loaded the whole index through Chroma: importing and
opening it cost ~1-1.5 s of CPU before the first ``route``, for data that changes only when the
index is written. After a process has read the store, or written it (``index build``), it keeps
what it holds in ``COPILOT_HOME/index/read-copy.<collection>.npz``: the build state, each record's server, JSON, BM25 tokens and
kind, and the tool and server vectors, with the store's signature at the time
(:func:`index.storage.build_manifest.store_signature`, read from Chroma's SQLite file with the
standard library). A reader uses the copy only when the store's signature is still that one: any
write by any process -- a build, a copilot indexing a new server, a deleted or replaced store --
changes it, and reads do not. A copy that is missing, stale, damaged or of another collection is
passed over for Chroma, which is the store of record; a copy that cannot be written only costs the
next reader that shortcut. A store behind ``COPILOT_CHROMA_URL`` has no copy (it is not on this disk).
"""

from __future__ import annotations

import hashlib
import io
import json
import logging
import zipfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
from pydantic import ValidationError

from index.settings import CopilotSettings
from index.storage.atomic import write_atomic
from index.storage.store import IndexState, LoadedTools

logger = logging.getLogger(__name__)

#: 2: the version, collection and signature in a header of their own, read before the records.
COPY_VERSION = 2
#: Per collection (``COPILOT_COLLECTION``: Chroma's names are letters, digits, ``-``, ``_`` and ``.``;
#: one longer than a file name may be is named by its digest).
FILE_NAME = "read-copy.{collection}.npz"
_LONGEST_NAMED = 100


@dataclass(frozen=True)
class StoreContents:
    """Everything a search reads from the store."""

    state: IndexState
    tools: LoadedTools
    server_names: list[str]
    server_vectors: np.ndarray


def copy_path(settings: CopilotSettings) -> Path:
    name = settings.collection
    if len(name) > _LONGEST_NAMED:
        name = hashlib.sha256(name.encode()).hexdigest()[:32]
    return settings.index_dir / FILE_NAME.format(collection=name)


def save_read_copy(settings: CopilotSettings, signature: str, contents: StoreContents) -> None:
    """Keep ``contents`` (read from the store whose signature is ``signature``) for the next reader."""
    tools = contents.tools
    header = {"version": COPY_VERSION, "collection": settings.collection, "signature": signature}
    meta = {
        "state": contents.state.model_dump(mode="json"),
        "ids": tools.ids,
        "servers": tools.servers,
        "records": tools.records_json,
        "lexical": [" ".join(tokens) for tokens in tools.tokens],
        "kinds": tools.kinds,
        "server_names": contents.server_names,
    }
    buffer = io.BytesIO()
    np.savez(
        buffer,
        header=_json_array(header),
        meta=_json_array(meta),
        tool_vectors=np.asarray(tools.vectors, dtype=np.float32),
        server_vectors=np.asarray(contents.server_vectors, dtype=np.float32),
    )
    try:
        write_atomic(copy_path(settings), buffer.getvalue())
    except OSError as error:
        logger.debug("cannot keep the read copy of the index at %s (%s)", copy_path(settings), error)


def load_read_copy(settings: CopilotSettings, signature: str) -> StoreContents | None:
    """The kept copy when it was read from the store as it is now (same ``signature``), else None."""
    path = copy_path(settings)
    try:
        with np.load(path, allow_pickle=False) as arrays:
            # The header alone first: a stale copy is passed over without reading its records.
            if not _current(_json_of(arrays["header"]), settings, signature):
                return None
            meta = _json_of(arrays["meta"])
            tool_vectors = np.asarray(arrays["tool_vectors"], dtype=np.float32)
            server_vectors = np.asarray(arrays["server_vectors"], dtype=np.float32)
    except FileNotFoundError:
        return None
    except (OSError, ValueError, KeyError, zipfile.BadZipFile, EOFError) as error:
        logger.debug("passing over the read copy %s (%s)", path, error)
        return None
    try:
        return _contents(meta, tool_vectors, server_vectors)
    except (ValidationError, ValueError, KeyError, TypeError) as error:
        logger.debug("passing over the read copy %s (%s)", path, error)
        return None


def _json_array(value: Any) -> np.ndarray:
    return np.frombuffer(json.dumps(value, ensure_ascii=False).encode("utf-8"), dtype=np.uint8)


def _json_of(array: np.ndarray) -> Any:
    return json.loads(bytes(array).decode("utf-8"))


def _current(header: Any, settings: CopilotSettings, signature: str) -> bool:
    return (
        isinstance(header, dict)
        and header.get("version") == COPY_VERSION
        and header.get("collection") == settings.collection
        and header.get("signature") == signature
    )


def _strings(meta: dict[str, Any], key: str, length: int | None = None) -> list[str]:
    values = meta[key]
    if not isinstance(values, list) or not all(isinstance(value, str) for value in values):
        raise ValueError(f"{key}: not a list of strings")
    if length is not None and len(values) != length:
        raise ValueError(f"{key}: {len(values)} entries for {length} tools")
    return values


def _contents(meta: dict[str, Any], tool_vectors: np.ndarray, server_vectors: np.ndarray) -> StoreContents:
    ids = _strings(meta, "ids")
    count = len(ids)
    if tool_vectors.ndim != 2 or tool_vectors.shape[0] != count:
        raise ValueError(f"tool vectors of shape {tool_vectors.shape} for {count} tools")
    server_names = _strings(meta, "server_names")
    if server_vectors.ndim != 2 or server_vectors.shape[0] != len(server_names):
        raise ValueError(f"server vectors of shape {server_vectors.shape} for {len(server_names)} servers")
    tools = LoadedTools(
        ids=ids,
        servers=_strings(meta, "servers", count),
        records_json=_strings(meta, "records", count),
        tokens=[text.split() for text in _strings(meta, "lexical", count)],
        vectors=tool_vectors,
        kinds=_strings(meta, "kinds", count),
    )
    return StoreContents(IndexState.model_validate(meta["state"]), tools, server_names, server_vectors)
