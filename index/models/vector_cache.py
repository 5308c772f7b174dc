"""Document vectors kept beside the traced encoder that made them, so no text is embedded twice.

At int8 a document is embedded alone (:meth:`index.models.embedding.Embedder.embed`), so its vector
depends on its text and the encoder only, and the encoder's cache entry (:mod:`index.models.compiled`)
is keyed by everything the encoder depends on. A vector stored in that entry is therefore the one
the model would give again: an index built in another home, rebuilt after its store was deleted, or
built again after switching models and back, embeds only the texts no earlier build had (the
project's catalog built in a fresh home in 23.4 s here; from kept vectors in 8.6 s).
The vectors die with their entry (a replaced model, torch or code; a damaged encoder).

SQLite (standard library) lets every process that builds read and add vectors at once. The cache
only ever saves work: any failure to read or write it is a debug line and the model embeds.
"""

from __future__ import annotations

import hashlib
import logging
import sqlite3
from collections.abc import Mapping, Sequence
from contextlib import closing
from pathlib import Path

import numpy as np

logger = logging.getLogger(__name__)

FILE_NAME = "vectors.sqlite3"
#: Most vectors kept per encoder (~1.5 KB each at 384 dimensions: ~30 MB); the least recently used go first.
MAX_VECTORS = 20_000
#: A build waits at most this long for another process's write before embedding without the cache.
BUSY_TIMEOUT_SECONDS = 5.0
#: ``used`` counts lookups and writes (a clock could tie or go back); the least recently used go first.
_SCHEMA = "CREATE TABLE IF NOT EXISTS vectors (digest BLOB PRIMARY KEY, vector BLOB NOT NULL, used INTEGER NOT NULL)"
_NEXT_USE = "SELECT COALESCE(MAX(used), 0) + 1 FROM vectors"
#: SQLite's default limit on a statement's parameters is 999 (older builds).
_CHUNK = 500


def _digest(text: str) -> bytes:
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).digest()


class VectorCache:
    """The vectors of one encoder entry (``entry`` is its directory, which must exist)."""

    def __init__(self, entry: Path, *, max_vectors: int = MAX_VECTORS) -> None:
        self.path = entry / FILE_NAME
        self.max_vectors = max_vectors

    def _connect(self) -> sqlite3.Connection:
        connection = sqlite3.connect(self.path, timeout=BUSY_TIMEOUT_SECONDS, isolation_level=None)
        try:
            # A cache: a write lost to a power cut is embedded again, so no sync per transaction.
            connection.execute("PRAGMA journal_mode=WAL")
            connection.execute("PRAGMA synchronous=OFF")
            connection.execute(_SCHEMA)
        except BaseException:
            connection.close()
            raise
        return connection

    def _discard_if_damaged(self, error: Exception) -> None:
        """A file that is no database (a torn copy, another program's) would fail every build's
        lookup: delete it, and the next build keeps its vectors anew."""
        if isinstance(error, sqlite3.DatabaseError) and not isinstance(error, sqlite3.OperationalError):
            logger.warning("the kept vectors in %s are damaged (%s); deleting them", self.path, error)
            for suffix in ("", "-wal", "-shm"):
                Path(f"{self.path}{suffix}").unlink(missing_ok=True)

    def get(self, texts: Sequence[str], dimension: int) -> dict[str, np.ndarray]:
        """The kept vectors (of ``dimension`` values) of those of ``texts`` that have one; marks them used."""
        wanted = {_digest(text): text for text in dict.fromkeys(texts)}
        if not wanted or not self.path.is_file():
            return {}
        found: dict[str, np.ndarray] = {}
        try:
            with closing(self._connect()) as connection:
                digests = list(wanted)
                for start in range(0, len(digests), _CHUNK):
                    chunk = digests[start : start + _CHUNK]
                    rows = connection.execute(
                        f"SELECT digest, vector FROM vectors WHERE digest IN ({','.join('?' * len(chunk))})", chunk
                    ).fetchall()
                    for digest, blob in rows:
                        vector = np.frombuffer(blob, dtype=np.float32)
                        if vector.shape[0] == dimension and np.isfinite(vector).all():  # else embedded again
                            found[wanted[bytes(digest)]] = vector
                if found:
                    (use,) = connection.execute(_NEXT_USE).fetchone()
                    connection.executemany(
                        "UPDATE vectors SET used = ? WHERE digest = ?", [(use, _digest(text)) for text in found]
                    )
        except (sqlite3.Error, OSError, ValueError, KeyError) as error:
            logger.debug("cannot read the kept vectors in %s; embedding instead", self.path, exc_info=True)
            self._discard_if_damaged(error)
            return {}
        return found

    def put(self, vectors: Mapping[str, np.ndarray]) -> None:
        """Keep ``vectors`` (text -> vector), then drop the least recently used beyond the bound."""
        if not vectors:
            return
        rows = [(_digest(text), np.ascontiguousarray(vector, dtype=np.float32).tobytes()) for text, vector in vectors.items()]
        try:
            with closing(self._connect()) as connection:
                connection.execute("BEGIN IMMEDIATE")
                try:
                    (use,) = connection.execute(_NEXT_USE).fetchone()
                    connection.executemany(
                        "INSERT OR REPLACE INTO vectors (digest, vector, used) VALUES (?, ?, ?)", [(*row, use) for row in rows]
                    )
                    (count,) = connection.execute("SELECT COUNT(*) FROM vectors").fetchone()
                    if count > self.max_vectors:
                        connection.execute(
                            "DELETE FROM vectors WHERE digest IN (SELECT digest FROM vectors ORDER BY used, rowid LIMIT ?)",
                            (count - self.max_vectors,),
                        )
                    connection.execute("COMMIT")
                except BaseException:
                    connection.execute("ROLLBACK")
                    raise
        except (sqlite3.Error, OSError) as error:
            logger.debug("cannot keep vectors in %s", self.path, exc_info=True)
            self._discard_if_damaged(error)
