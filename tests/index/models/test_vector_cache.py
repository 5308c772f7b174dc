"""Document vectors kept beside the traced encoder (``index.models.vector_cache``): a text an earlier
build embedded is not embedded again -- in another home, another process, after a deleted store --
and what is kept is exactly what the model gives; a damaged, foreign or full file only costs embedding."""

from __future__ import annotations

import logging
import shutil
import sqlite3
from pathlib import Path

import numpy as np
import pytest

from index.models import compiled, vector_cache
from index.models.embedding import Embedder, get_embedder
from index.models.vector_cache import VectorCache
from index.settings import CopilotSettings
from tests.index.index_support import make_catalog, open_index
from tests.support.cli import cli_env, run_cli

pytestmark = pytest.mark.timeout(240)

TEXTS = ["Read the rows of an Excel sheet.", "图表生成工具，支持柱状图和折线图", "Current time in a time zone."]


@pytest.fixture
def cache(tmp_path: Path) -> Path:
    """A model cache holding the bundled model's traced encoder (copied from this run's) and no vectors."""
    shared = CopilotSettings().model_cache
    loader = Embedder(cache_dir=shared)  # not this process's shared one: it stores the entry if another test removed it
    loader.load()
    key = loader._cache_key()  # noqa: SLF001
    assert key is not None and compiled.kept_entry(shared, key) is not None
    target = tmp_path / "models"
    shutil.copytree(shared / key, target / key, ignore=shutil.ignore_patterns(f"{vector_cache.FILE_NAME}*"))
    return target


def _kept_file(cache: Path) -> Path:
    [entry] = [path for path in cache.iterdir() if not path.name.startswith(".")]
    return entry / vector_cache.FILE_NAME


class EncoderCountingEmbedder(Embedder):
    """The real embedder, counting the texts its encoder runs on (``index_support.CountingEmbedder``
    wraps one and sees only what it is asked to embed, not what is encoded)."""

    def __init__(self, cache: Path) -> None:
        super().__init__(cache_dir=cache)
        self.encoded: list[str] = []

    def embed_queries(self, texts):  # type: ignore[no-untyped-def]
        self.encoded.extend(texts)
        return super().embed_queries(texts)


def test_a_text_embedded_once_is_not_embedded_again_and_needs_no_model(cache: Path) -> None:
    first = EncoderCountingEmbedder(cache)
    made = first.embed(TEXTS)
    assert first.encoded == TEXTS and _kept_file(cache).is_file()

    later = EncoderCountingEmbedder(cache)  # another build: a new home, a deleted store, another process
    assert np.array_equal(later.embed(TEXTS), made)
    assert later.encoded == [] and not later.loaded  # the encoder was not even loaded

    mixed = EncoderCountingEmbedder(cache)
    vectors = mixed.embed([TEXTS[1], "A new tool: convert units of length.", TEXTS[1]])
    assert mixed.encoded == ["A new tool: convert units of length."]  # once, though asked twice
    assert np.array_equal(vectors[0], made[1]) and np.array_equal(vectors[2], made[1])
    assert np.allclose(vectors[1], get_embedder().embed_queries(["A new tool: convert units of length."])[0], atol=1e-6)


def test_an_index_built_in_a_new_home_reuses_the_vectors_of_another(cache: Path, tmp_path: Path) -> None:
    records = make_catalog().tools
    first = open_index(tmp_path / "first", model_cache=cache)
    first.sync(records, catalog="tests", catalog_digest="a")
    kept = sqlite3.connect(_kept_file(cache)).execute("SELECT COUNT(*) FROM vectors").fetchone()[0]
    assert kept == len(records) + len({r.server for r in records})  # tool and server documents

    counting = EncoderCountingEmbedder(cache)
    second = open_index(tmp_path / "second", embedder=counting, model_cache=cache)
    report = second.sync(records, catalog="tests", catalog_digest="a")
    assert report.added == len(records) and counting.encoded == [] and not counting.loaded
    query = "what will the weather be like in Paris tomorrow"
    assert [(h.tool, h.score) for h in second.search(query)] == [(h.tool, h.score) for h in first.search(query)]


def test_the_cli_builds_a_new_home_from_the_kept_vectors(cache: Path, tmp_path: Path) -> None:
    catalog = tmp_path / "catalog.json"
    make_catalog().save(catalog)
    env = cli_env(COPILOT_HOME=str(tmp_path / "home"), COPILOT_CATALOG=str(catalog), COPILOT_MODEL_CACHE=str(cache))
    open_index(tmp_path / "earlier", model_cache=cache).sync(make_catalog().tools, catalog="tests")  # another home's build
    rebuilt = run_cli("index", "-v", "build", env=env, timeout=240)
    assert rebuilt.returncode == 0, rebuilt.stderr
    total = len(make_catalog().tools)
    assert f"tools: {total} indexed -- {total} added" in rebuilt.stdout
    assert f"{total} of {total} document vectors were kept from earlier builds" in rebuilt.stderr


def test_float32_keeps_nothing(cache: Path, tmp_path: Path) -> None:
    # A float32 batch's vectors depend on their batch-mates: they cannot be kept per text.
    embedder = Embedder(precision="float32", cache_dir=cache)
    embedder.embed(TEXTS)
    assert not any(path.name.startswith(vector_cache.FILE_NAME) for path in cache.rglob("*"))


def test_a_damaged_file_is_deleted_and_the_texts_embedded(cache: Path, caplog: pytest.LogCaptureFixture) -> None:
    EncoderCountingEmbedder(cache).embed(TEXTS[:1])
    kept = _kept_file(cache)
    kept.write_bytes(b"this is not an SQLite database, but a torn copy of one" * 100)
    caplog.set_level(logging.WARNING, logger=vector_cache.__name__)
    embedder = EncoderCountingEmbedder(cache)
    vectors = embedder.embed(TEXTS)
    assert embedder.encoded == TEXTS
    assert np.allclose(vectors, get_embedder().embed_queries(TEXTS), atol=1e-6)
    assert f"the kept vectors in {kept} are damaged" in caplog.text
    again = EncoderCountingEmbedder(cache)  # kept anew
    assert np.array_equal(again.embed(TEXTS), vectors) and again.encoded == []


def test_a_vector_of_another_length_is_embedded_again(cache: Path) -> None:
    made = EncoderCountingEmbedder(cache).embed(TEXTS)
    with sqlite3.connect(_kept_file(cache)) as connection:
        connection.execute("UPDATE vectors SET vector = ? WHERE digest = ?", (b"\0" * 16, vector_cache._digest(TEXTS[0])))  # noqa: SLF001
    embedder = EncoderCountingEmbedder(cache)
    assert np.array_equal(embedder.embed(TEXTS), made) and embedder.encoded == TEXTS[:1]


def test_the_least_recently_used_vectors_go_first_beyond_the_bound(tmp_path: Path) -> None:
    kept = VectorCache(tmp_path, max_vectors=3)
    vectors = {f"text {n}": np.full(4, n, dtype=np.float32) for n in range(3)}
    kept.put(vectors)
    assert set(kept.get(["text 0"], 4)) == {"text 0"}  # used: now the most recent
    kept.put({"text 3": np.full(4, 3, dtype=np.float32)})
    assert set(kept.get(list(vectors) + ["text 3"], 4)) == {"text 0", "text 2", "text 3"}
    assert kept.get(["text 0"], 5) == {}  # another dimension: not this encoder's


def test_vectors_are_kept_under_the_encoder_that_made_them(cache: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    embedder = EncoderCountingEmbedder(cache)
    embedder.load()
    # The model's files change after the load (an upgrade under a running copilot): their key is another.
    monkeypatch.setattr(embedder, "_cache_key", lambda: "0" * 32)
    embedder.embed(TEXTS)
    assert embedder.encoded == TEXTS and _kept_file(cache).is_file()  # with the loaded encoder's entry
    assert not (cache / ("0" * 32)).exists()
