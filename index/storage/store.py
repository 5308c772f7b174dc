"""The persistent store of record: Chroma, embedded under ``COPILOT_HOME`` or a Chroma server.

Two collections: ``<name>`` holds one entry per tool (id ``server/tool``, its embedding, the
embedded text and the full record as metadata), ``<name>-servers`` one entry per server
(embedding of its description). The tool collection's metadata says which model, document
format and catalog built the index. Embeddings are always passed in explicitly: Chroma's own
default embedding function downloads a model and is never used.
"""

from __future__ import annotations

import functools
import json
import logging
import threading
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib.parse import urlparse

import numpy as np
from pydantic import BaseModel, Field, ValidationError, field_serializer, field_validator

from index.models.embedding import force_offline
from index.errors import ConfigError, CopilotError
from index.catalog.records import ToolRecord
from index.catalog.redact import redact_text, redact_url
from index.json_text import os_text, shown_os_text
from index.settings import CopilotSettings
from index.search.text import tokenize, tool_lexical_text
from index.storage.build_manifest import CHROMA_DATABASE, store_signature

if TYPE_CHECKING:
    from chromadb.api import ClientAPI
    from chromadb.api.models.Collection import Collection

logger = logging.getLogger(__name__)

_PAGE = 5000


# SQLite's own words (Chroma passes them on) for files that are fine but cannot be written now.
_READ_ONLY = ("readonly database", "read-only file system", "permission denied")
_FULL = ("database or disk is full", "no space left on device", "disk quota exceeded")


def open_failure_message(path: Path | str, error: str, build_command: str) -> str:
    """Why the index at ``path`` could not be opened, and the fix: removing it is advice only for
    damaged files -- an index that is read-only here or on a full disk is fine, and deleting it
    lost a good index (and a rebuild on a full disk fails anyway).

    Paths and the command are shown as the text they are (:func:`shown_os_text`): under a locale
    that is not UTF-8 Python holds a non-ASCII path as lone surrogates, which cannot be pasted (and
    which no JSON parser of an MCP host takes)."""
    path, error, build_command = shown_os_text(str(path)), shown_os_text(error), shown_os_text(build_command)
    lowered = error.lower()
    if any(words in lowered for words in _READ_ONLY):
        return (
            f"cannot open the index at {path} ({error}): this user cannot write its files, and opening it "
            f"writes (even to search). Give this user write access to {path}, or set COPILOT_HOME to a "
            "home of its own; the index itself is not damaged."
        )
    if any(words in lowered for words in _FULL):
        return (
            f"cannot open the index at {path} ({error}): the disk holding it is full. Free some space "
            "there and try again; the index itself is not damaged."
        )
    return f"cannot open the index at {path} ({error}). If its files are damaged, remove {path} and build it again: {build_command}"

class IndexStoreError(CopilotError):
    """The Chroma store cannot be opened, reached or read."""


@functools.lru_cache(maxsize=16)
def _warn_damaged_skipped_tools(damaged: str) -> None:
    # Once per damaged content, not at every read of the state (a copilot reads it every few seconds).
    logger.warning("index build metadata: unreadable skipped_tools; treating them as none")


class IndexState(BaseModel):
    """What built the index (kept in the tool collection's metadata)."""

    model: str
    document_version: int
    catalog: str = ""
    catalog_digest: str = ""
    built_at: str = ""
    build_id: str = ""
    tool_count: int = 0
    #: Per server, the tools its crawl or listing left out: name -> what is wrong (a broken
    #: definition, or under ``LISTING_CUT`` the cut at the listing cap). Stored as JSON text
    #: (collection metadata holds only scalars); none in older stores.
    skipped_tools: dict[str, dict[str, str]] = Field(default_factory=dict)

    @field_validator("skipped_tools", mode="before")
    @classmethod
    def _from_text(cls, value: Any) -> Any:
        # Damaged, they must not make the whole index read as unbuilt: they are only advice.
        try:
            data = json.loads(value) if isinstance(value, str) and value else value or {}
        except ValueError:
            data = None
        if not isinstance(data, dict) or not all(
            isinstance(tools, dict) and all(isinstance(why, str) for why in tools.values()) for tools in data.values()
        ):
            _warn_damaged_skipped_tools(value if isinstance(value, str) else repr(value))
            return {}
        return data

    @field_serializer("skipped_tools")
    def _as_text(self, value: dict[str, dict[str, str]]) -> str:
        return json.dumps(value, sort_keys=True, ensure_ascii=False) if value else ""


@dataclass(frozen=True)
class LoadedTools:
    ids: list[str]
    servers: list[str]
    records_json: list[str]  # parsed on demand: 100,000 parsed records would take ~1 GB
    tokens: list[list[str]]
    vectors: np.ndarray
    kinds: list[str]  # "tool", "prompt", "resource" or "resource_template", aligned with ids


class StoredTool(BaseModel):
    id: str
    server: str
    tool: str
    content_hash: str


def parse_chroma_url(url: str) -> tuple[str, int, bool]:
    """``http://host:port`` -> (host, port, ssl); the default port is Chroma's 8000."""
    parsed = urlparse(url if "://" in url else f"http://{url}")
    if parsed.scheme not in ("http", "https") or not parsed.hostname:
        raise ConfigError(f"COPILOT_CHROMA_URL={redact_url(url)!r} is not an http(s)://host:port URL of a Chroma server.")
    ssl = parsed.scheme == "https"
    try:
        port = parsed.port or (443 if ssl else 8000)
    except ValueError:
        raise ConfigError(f"COPILOT_CHROMA_URL={redact_url(url)!r} has an invalid port.") from None
    return parsed.hostname, port, ssl


def _record_metadata(record: ToolRecord) -> dict[str, Any]:
    kind = {} if record.kind == "tool" else {"kind": record.kind}  # tools stored before kinds existed have none
    return {
        **kind,
        "server": record.server,
        "tool": record.name,
        "content_hash": record.content_hash,
        "record": record.model_dump_json(exclude={"content_hash"}),
        # BM25 tokens, so loading the index needs neither re-tokenizing nor jieba's dictionary.
        "lexical": " ".join(tokenize(tool_lexical_text(record))),
    }


#: Per embedded store path: how many times this process dropped Chroma's cached state of it. Chroma
#: keeps one "system" per path and process, with segments read into memory once; after another
#: process (an ``index build``, another copilot's re-index) changed the files, reads through it fail
#: ("Error finding id") or return what was there before. A store whose client is of an older
#: generation reconnects before its next call.
_generations: dict[str, int] = {}
#: Per embedded store path: the build id this process last read or wrote.
_known_builds: dict[str, str] = {}
_shared_lock = threading.Lock()


#: Where chromadb 1.x keeps its per-path client state: the lock, the systems and their reference counts.
_CHROMA_REGISTRY = ("_refcount_lock", "_identifier_to_system", "_identifier_to_refcount")


def store_path_text(path: Path) -> str:
    """``path`` as the text to give Chroma, whose Rust side opens it as UTF-8.

    Under a locale that is not UTF-8 (``LC_ALL=C`` with ``PYTHONUTF8=0``) Python holds a non-ASCII
    path as lone surrogates (``surrogateescape``), which Chroma cannot encode ("surrogates not
    allowed"); the path's bytes decoded as UTF-8 are text it encodes back to the same bytes. Bytes
    that are no UTF-8 at all cannot be given to it: an :class:`IndexStoreError` says so."""
    text = os_text(str(path))
    if text is None:
        raise IndexStoreError(
            f"cannot use {shown_os_text(str(path))} for the index: the path is not UTF-8 text (the bytes "
            "shown as \\xNN escapes), and the index store (Chroma) only opens UTF-8 paths. Set COPILOT_HOME "
            "to a directory whose path is UTF-8 (or ASCII), or rename the directory."
        )
    return text


def _drop_cached_system(path: str) -> None:
    """Make Chroma forget this process's state of ``path``: the next client reads the files afresh.

    Chroma has no per-path API for this, so it is done through its private registry; a chromadb
    whose registry looks different gets its public ``clear_system_cache()`` instead, which forgets
    every path (other stores of this process then reconnect too: slower, never stale)."""
    try:
        from chromadb.api.shared_system_client import SharedSystemClient
    except ImportError:  # pragma: no cover - another chromadb layout: nothing cached to drop
        return
    lock, systems, refcounts = (getattr(SharedSystemClient, name, None) for name in _CHROMA_REGISTRY)
    if lock is None or not isinstance(systems, dict) or not isinstance(refcounts, dict):
        logger.debug("chromadb's client registry is not as expected: clearing all of it to read %s afresh", path)
        SharedSystemClient.clear_system_cache()
        return
    with lock:
        system = systems.pop(path, None)
        refcounts.pop(path, None)
    if system is not None:
        try:
            system.stop()
        except Exception:  # noqa: BLE001 -- it is being thrown away
            logger.debug("stopping Chroma's old state of %s failed", path, exc_info=True)


def _guarded(method: Callable[..., Any]) -> Callable[..., Any]:
    """Chroma's own exceptions (server gone, disk full, corrupt files) become an IndexStoreError.

    An embedded store is read afresh and the call made once more first: what failed may be this
    process's stale view of files another process changed (every call here may be repeated:
    reads, upserts, deletes by id).
    """

    @functools.wraps(method)
    def wrapper(self: ChromaStore, *args: Any, **kwargs: Any) -> Any:
        try:
            return method(self, *args, **kwargs)
        except CopilotError:
            raise
        except Exception as error:  # noqa: BLE001 -- chromadb raises many unrelated types
            if not self.settings.chroma_url:
                logger.debug("index store %s: %s failed (%s); reading the store afresh and trying again", self.location, method.__name__, error)
                self.refresh()
                try:
                    return method(self, *args, **kwargs)
                except CopilotError:
                    raise
                except Exception as again:  # noqa: BLE001
                    error = again
            raise IndexStoreError(f"index store {self.location}: {method.__name__} failed ({redact_text(str(error))}).") from error

    return wrapper


class ChromaStore:
    """Thin, typed access to the two collections; the client is created on first use."""

    def __init__(self, settings: CopilotSettings) -> None:
        self.settings = settings
        self.collection_name = settings.collection
        self.server_collection_name = f"{settings.collection}-servers"
        self._client: ClientAPI | None = None
        self._client_generation = 0
        self._lock = threading.Lock()

    @functools.cached_property
    def location(self) -> str:
        """Where the store is, fit to show: a Chroma server's URL with its credentials masked. Also
        the key of the process-wide state of its path (read at every use of the client: made once)."""
        if self.settings.chroma_url:
            return redact_url(self.settings.chroma_url)
        # The text Chroma is given (its per-path registry is keyed by it), readable and pasteable.
        return shown_os_text(str(self.settings.chroma_dir))

    def client(self) -> ClientAPI:
        with self._lock:
            generation = _generations.get(self.location, 0)
            if self._client is None or self._client_generation != generation:
                self._client = self._connect()
                self._client_generation = generation
            return self._client

    def refresh(self) -> None:
        """Drop this process's cached view of an embedded store (every store of its path reconnects)."""
        if self.settings.chroma_url:
            return
        with _shared_lock:
            _generations[self.location] = _generations.get(self.location, 0) + 1
            _drop_cached_system(self.location)
        logger.debug("index store %s: read afresh from now on", self.location)

    def _note_build(self, build_id: str | None, *, ours: bool) -> None:
        """Remember the store's build; one this process did not write means another process changed the
        files, so what Chroma cached of them is dropped before anything else is read."""
        if self.settings.chroma_url or build_id is None:
            return
        with _shared_lock:
            known = _known_builds.get(self.location)
            _known_builds[self.location] = build_id
        if not ours and known is not None and known != build_id:
            self.refresh()

    def _connect(self) -> ClientAPI:
        force_offline()
        import chromadb
        from chromadb.config import Settings

        chroma_settings = Settings(anonymized_telemetry=False)
        if self.settings.chroma_url:
            host, port, ssl = parse_chroma_url(self.settings.chroma_url)
            try:
                return chromadb.HttpClient(host=host, port=port, ssl=ssl, settings=chroma_settings)
            except Exception as error:  # noqa: BLE001 -- chromadb raises several kinds here
                raise IndexStoreError(
                    f"cannot reach the Chroma server at {self.location} ({redact_text(str(error))}); "
                    "start it (chroma run --path DIR --port PORT) or unset COPILOT_CHROMA_URL."
                ) from None
        path = self.settings.chroma_dir
        native = store_path_text(path)
        try:
            path.mkdir(parents=True, exist_ok=True)
        except OSError as error:
            # Not damaged files but an unusable COPILOT_HOME (a file, a read-only or missing mount):
            # removing the index would not help, choosing another home does.
            raise IndexStoreError(
                f"cannot use {native} for the index ({error.strerror or error}); COPILOT_HOME "
                f"({shown_os_text(str(self.settings.home))}) must be a writable directory: fix it or set COPILOT_HOME elsewhere."
            ) from None
        try:
            return chromadb.PersistentClient(path=native, settings=chroma_settings)
        except Exception as error:  # noqa: BLE001
            from index.cli.hints import index_command

            # Chroma keeps the half-built system of a failed open for the next one, which then fails
            # with a meaningless cause ("'RustBindingsAPI' object has no attribute 'bindings'").
            with _shared_lock:
                _drop_cached_system(native)

            raise IndexStoreError(open_failure_message(native, str(error), index_command(self.settings, "build"))) from None

    def signature(self) -> str | None:
        """The embedded store's written state, read without Chroma (:func:`store_signature`): equal
        as long as nothing writes the store. None for a Chroma server, or a store not readable so."""
        if self.settings.chroma_url:
            return None
        return store_signature(self.settings.chroma_dir)

    def note_read_elsewhere(self, state: IndexState) -> None:
        """``state`` was read without Chroma (:mod:`index.storage.read_copy`): what this process's
        Chroma client cached of an older build is dropped, as a read through it would."""
        self._note_build(state.build_id or None, ours=False)

    # -- collections -------------------------------------------------------------------------

    def _never_written(self) -> bool:
        """An embedded store whose database file was never written holds no collection: said without
        loading Chroma (~0.4 s of CPU at each start of a copilot that has no index yet). Anything
        else in the way (a file where the home should be) is for opening the store to explain."""
        if self.settings.chroma_url:
            return False
        try:
            (self.settings.chroma_dir / CHROMA_DATABASE).stat()
        except FileNotFoundError:
            return True
        except OSError:
            return False
        return False

    def _get(self, name: str) -> Collection | None:
        if self._never_written():
            return None
        client = self.client()
        try:
            return client.get_collection(name, embedding_function=None)
        except Exception as error:  # noqa: BLE001 -- "does not exist" is NotFoundError/ValueError by version
            if "does not exist" in str(error).lower() or type(error).__name__ == "NotFoundError":
                return None
            raise IndexStoreError(f"cannot read the index at {self.location} ({redact_text(str(error))}).") from None

    def _get_or_create(self, name: str) -> Collection:
        try:
            return self.client().get_or_create_collection(
                name, embedding_function=None, configuration={"hnsw": {"space": "cosine"}}
            )
        except Exception as error:  # noqa: BLE001
            raise IndexStoreError(f"cannot create collection {name!r} at {self.location} ({redact_text(str(error))}).") from None

    def tools(self, *, create: bool = False) -> Collection | None:
        return self._get_or_create(self.collection_name) if create else self._get(self.collection_name)

    def servers(self, *, create: bool = False) -> Collection | None:
        return self._get_or_create(self.server_collection_name) if create else self._get(self.server_collection_name)

    @_guarded
    def reset(self) -> None:
        """Drop both collections (the model or document format changed: nothing is reusable)."""
        client = self.client()
        for name in (self.collection_name, self.server_collection_name):
            if self._get(name) is not None:
                client.delete_collection(name)

    # -- state -------------------------------------------------------------------------------

    @_guarded
    def read_state(self) -> IndexState | None:
        collection = self.tools()
        if collection is None:
            return None
        metadata = dict(collection.metadata or {})
        if "model" not in metadata:
            return None
        try:
            state = IndexState.model_validate(metadata)
        except ValidationError:
            logger.warning("index at %s has unreadable build metadata; treating it as unbuilt", self.location)
            return None
        self._note_build(state.build_id, ours=False)
        return state

    @_guarded
    def write_state(self, state: IndexState) -> None:
        collection = self.tools(create=True)
        assert collection is not None
        collection.modify(metadata=state.model_dump())
        self._note_build(state.build_id, ours=True)

    # -- reading -----------------------------------------------------------------------------

    def _pages(self, collection: Collection, include: list[str]) -> Iterator[dict[str, Any]]:
        total = collection.count()
        for offset in range(0, total, _PAGE):
            yield dict(collection.get(include=include, limit=_PAGE, offset=offset))  # type: ignore[arg-type]

    @_guarded
    def stored_tools(self) -> dict[str, StoredTool]:
        """id -> (server, content hash) of every stored tool, without embeddings."""
        collection = self.tools()
        if collection is None:
            return {}
        stored: dict[str, StoredTool] = {}
        for page in self._pages(collection, ["metadatas"]):
            for tool_id, metadata in zip(page["ids"], page["metadatas"] or [], strict=True):
                stored[tool_id] = StoredTool(
                    id=tool_id,
                    server=str(metadata.get("server", "")),
                    tool=str(metadata.get("tool", "")),
                    content_hash=str(metadata.get("content_hash", "")),
                )
        return stored

    @_guarded
    def load_tools(self) -> LoadedTools:
        """Every tool's server, record JSON, BM25 tokens and embedding, in id order (stable across processes)."""
        collection = self.tools()
        rows: list[tuple[str, str, str, list[str], Any, str]] = []
        if collection is not None:
            for page in self._pages(collection, ["metadatas", "embeddings"]):
                embeddings = page["embeddings"]
                for tool_id, metadata, vector in zip(page["ids"], page["metadatas"] or [], embeddings, strict=True):
                    raw = str(metadata["record"])
                    lexical = metadata.get("lexical")
                    if lexical is not None:
                        tokens = str(lexical).split()
                    else:  # written before tokens were stored
                        tokens = tokenize(tool_lexical_text(ToolRecord.model_validate_json(raw)))
                    kind = str(metadata.get("kind") or "tool")
                    rows.append((tool_id, str(metadata.get("server", "")), raw, tokens, vector, kind))
        rows.sort(key=lambda row: row[0])
        matrix = np.asarray([row[4] for row in rows], dtype=np.float32) if rows else np.zeros((0, 0), dtype=np.float32)
        return LoadedTools(
            ids=[row[0] for row in rows],
            servers=[row[1] for row in rows],
            records_json=[row[2] for row in rows],
            tokens=[row[3] for row in rows],
            vectors=matrix,
            kinds=[row[5] for row in rows],
        )

    @_guarded
    def stored_servers(self) -> dict[str, str]:
        """server -> hash of its embedded document."""
        collection = self.servers()
        if collection is None:
            return {}
        hashes: dict[str, str] = {}
        for page in self._pages(collection, ["metadatas"]):
            for name, metadata in zip(page["ids"], page["metadatas"] or [], strict=True):
                hashes[name] = str(metadata.get("content_hash", ""))
        return hashes

    @_guarded
    def load_servers(self) -> tuple[list[str], np.ndarray]:
        collection = self.servers()
        if collection is None:
            return [], np.zeros((0, 0), dtype=np.float32)
        rows: list[tuple[str, Any]] = []
        for page in self._pages(collection, ["embeddings"]):
            rows.extend(zip(page["ids"], page["embeddings"], strict=True))
        rows.sort(key=lambda row: row[0])
        matrix = np.asarray([row[1] for row in rows], dtype=np.float32) if rows else np.zeros((0, 0), dtype=np.float32)
        return [row[0] for row in rows], matrix

    # -- writing -----------------------------------------------------------------------------

    def _batch_size(self) -> int:
        try:
            return max(1, min(int(self.client().get_max_batch_size()), _PAGE))
        except Exception:  # noqa: BLE001 -- older servers do not report it
            return 1000

    @_guarded
    def upsert_tools(self, records: Sequence[ToolRecord], documents: Sequence[str], vectors: np.ndarray) -> None:
        collection = self.tools(create=True)
        assert collection is not None
        step = self._batch_size()
        for start in range(0, len(records), step):
            chunk = records[start : start + step]
            collection.upsert(
                ids=[r.id for r in chunk],
                embeddings=vectors[start : start + step],
                metadatas=[_record_metadata(r) for r in chunk],
                documents=list(documents[start : start + step]),
            )

    @_guarded
    def delete_tools(self, ids: Sequence[str]) -> None:
        collection = self.tools()
        if collection is None or not ids:
            return
        step = self._batch_size()
        for start in range(0, len(ids), step):
            collection.delete(ids=list(ids[start : start + step]))

    @_guarded
    def upsert_servers(self, names: Sequence[str], documents: Sequence[str], hashes: Sequence[str], vectors: np.ndarray) -> None:
        collection = self.servers(create=True)
        assert collection is not None
        step = self._batch_size()
        for start in range(0, len(names), step):
            end = start + step
            collection.upsert(
                ids=list(names[start:end]),
                embeddings=vectors[start:end],
                metadatas=[{"content_hash": h} for h in hashes[start:end]],
                documents=list(documents[start:end]),
            )

    @_guarded
    def delete_servers(self, names: Sequence[str]) -> None:
        collection = self.servers()
        if collection is not None and names:
            collection.delete(ids=list(names))
