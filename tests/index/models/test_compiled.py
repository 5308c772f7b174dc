"""The traced encoder kept on disk (``COPILOT_MODEL_CACHE``): a later process embeds exactly as the
model does without importing sentence-transformers, and a damaged, replaced or unusable entry only
costs the full load again."""

from __future__ import annotations

import json
import logging
import os
import shutil
import subprocess
import sys
import threading
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pytest

from index.models import compiled
from index.models.embedding import Embedder, get_embedder
from tests.index.index_support import linked_model_dir
from index.storage.file_lock import exclusive_lock
from tests.support.cli import PROJECT, cli_env, run_python

pytestmark = pytest.mark.timeout(240)

TEXTS = [
    "what time is it in Tokyo",
    "<tool_assistant>\nserver: spreadsheet tools\ntool: read the rows of an Excel sheet\n</tool_assistant>",
    "图表生成工具，支持柱状图和折线图",
    "a very long tool description that goes on and on " * 30,
]

#: Run in a fresh interpreter with COPILOT_MODEL_CACHE set: what it embedded and what it imported.
FRESH_PROCESS = """
import json, sys
from index.settings import CopilotSettings
from index.search.tool_index import ToolIndex
embedder = ToolIndex.open(CopilotSettings.load()).embedder
texts = json.loads(sys.argv[1])
queries = embedder.embed_queries(texts).tolist()
documents = embedder.embed(texts).tolist()
print(json.dumps({
    "from_cache": embedder.from_cache,
    "imported": sorted(m for m in ("sentence_transformers", "transformers", "sklearn") if m in sys.modules),
    "queries": queries, "documents": documents, "dimension": embedder.dimension,
}))
"""


@dataclass(frozen=True)
class Stored:
    """A cache holding the bundled model's entry, made by an embedder of this process."""

    cache: Path
    entry: str
    embedder: Embedder

    def copy(self, target: Path) -> Path:
        return shutil.copytree(self.cache, target)


@pytest.fixture(scope="module")
def stored(tmp_path_factory: pytest.TempPathFactory) -> Stored:
    cache = tmp_path_factory.mktemp("model-cache") / "models"
    embedder = Embedder(cache_dir=cache)
    embedder.load()
    assert not embedder.from_cache and embedder.traced_queries  # nothing was stored yet: the model itself
    [entry] = _entries(cache)
    assert {path.name for path in entry.iterdir()} == {compiled.ENCODER_FILE, compiled.TOKENIZER_FILE, compiled.META_FILE}
    return Stored(cache, entry.name, embedder)


def _reference(texts: list[str]) -> np.ndarray:
    """The model itself, no cache involved."""
    return get_embedder().embed_queries(texts)


def _fresh_process(cache: Path, home: Path) -> tuple[dict, str]:
    env = cli_env(COPILOT_MODEL_CACHE=str(cache), COPILOT_HOME=str(home))
    result = run_python(FRESH_PROCESS, json.dumps(TEXTS), env=env)
    return json.loads(result.stdout), result.stderr


def _entries(cache: Path) -> list[Path]:
    """The cache's entries (and staging directories), not the locks of whoever stored them."""
    return sorted(path for path in cache.iterdir() if not path.name.endswith(compiled.LOCK_SUFFIX)) if cache.is_dir() else []


def test_a_later_process_embeds_from_the_cache_exactly_as_the_model_does(stored: Stored, tmp_path: Path) -> None:
    cache = stored.copy(tmp_path / "cache")
    run, stderr = _fresh_process(cache, tmp_path / "home")
    assert run["from_cache"] and run["imported"] == []  # none of the heavy model libraries
    assert stderr == ""  # torch's notice about quantized tensors stays off a user's screen
    assert np.allclose(np.asarray(run["queries"]), _reference(TEXTS), atol=1e-6)
    assert np.array_equal(np.asarray(run["documents"]), np.asarray(run["queries"]))  # int8: one by one
    assert run["dimension"] == 384
    assert [path.name for path in _entries(cache)] == [stored.entry]


def test_a_damaged_entry_is_deleted_and_the_model_loads_instead(
    stored: Stored, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    cache = stored.copy(tmp_path / "cache")
    entry = cache / stored.entry
    (entry / compiled.ENCODER_FILE).write_bytes(b"not a TorchScript archive")

    caplog.set_level(logging.WARNING, logger=compiled.__name__)
    embedder = Embedder(cache_dir=cache)
    vectors = embedder.embed_queries(TEXTS)
    assert not embedder.from_cache and embedder.traced_queries
    assert np.allclose(vectors, _reference(TEXTS), atol=1e-6)
    [warning] = [record.getMessage() for record in caplog.records]
    assert f"cannot use the cached encoder {entry}" in warning and "loading the model instead" in warning
    # ... and stored again, whole, for the next process.
    assert _entries(cache) == [entry]
    reloaded = compiled.load(cache, entry.name)
    assert reloaded is not None and np.allclose(reloaded(TEXTS[:1]), vectors[:1], atol=1e-6)


def test_an_entry_that_embeds_otherwise_than_stored_is_not_used(
    stored: Stored, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    cache = stored.copy(tmp_path / "cache")
    entry = cache / stored.entry
    assert compiled.load(cache, entry.name) is not None
    meta = json.loads((entry / compiled.META_FILE).read_text())
    meta["probe_vectors"][0][0] += 0.01
    (entry / compiled.META_FILE).write_text(json.dumps(meta))

    caplog.set_level(logging.WARNING, logger=compiled.__name__)
    assert compiled.load(cache, entry.name) is None
    assert "no longer embeds as it did when stored" in caplog.text and not entry.exists()


def test_any_change_to_the_model_s_files_precision_or_window_is_another_key(tmp_path: Path) -> None:
    model = linked_model_dir(tmp_path / "model")
    keys = {compiled.cache_key(model, precision, window) for precision in ("int8", "float32") for window in (128, 256)}
    assert len(keys) == 4
    before = compiled.cache_key(model, "int8", 128)
    assert compiled.cache_key(model, "int8", 128) == before
    readme = model / "README.md"  # any file: here one the model still loads with
    readme.unlink()
    readme.write_text("a local copy of the model\n")
    assert compiled.cache_key(model, "int8", 128) != before


def test_an_entry_without_its_meta_or_of_another_format_is_deleted(
    stored: Stored, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    # Before: left in place, it also failed the next store's rename: every start paid the full load, silently.
    caplog.set_level(logging.WARNING, logger=compiled.__name__)
    for damage in ("no meta", "another format"):
        cache = stored.copy(tmp_path / damage)
        entry = cache / stored.entry
        if damage == "no meta":
            (entry / compiled.META_FILE).unlink()
        else:
            meta = json.loads((entry / compiled.META_FILE).read_text())
            (entry / compiled.META_FILE).write_text(json.dumps({**meta, "format": "an-older-one"}))
        assert compiled.load(cache, entry.name) is None and not entry.exists()
        traced = stored.embedder._query_encoder  # noqa: SLF001 -- the traced encoder this process made
        assert compiled.save(cache, entry.name, traced, model_dir=stored.embedder.path, precision="int8")
        assert compiled.load(cache, entry.name) is not None
    assert "no meta.json" in caplog.text and "format 'an-older-one'" in caplog.text


def test_the_key_covers_every_file_but_hidden_ones_or_there_is_no_key(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Before: only the first 500 files (sorted) were keyed: 600 in a folder sorting before the
    # weights left them out, and new weights kept the old encoder.
    model = linked_model_dir(tmp_path / "model")
    before = compiled.cache_key(model, "int8", 128)
    (model / ".git").mkdir()
    (model / ".git" / "HEAD").write_text("ref: refs/heads/main\n")
    assert compiled.cache_key(model, "int8", 128) == before  # a hidden folder is no part of the model
    keyed = compiled._model_files(model)  # noqa: SLF001 -- what the key covers now
    assert keyed is not None and not any(name.startswith(".git") for name, *_ in keyed)
    monkeypatch.setattr(compiled, "_MAX_MODEL_FILES", len(keyed))
    (model / "0_extra").mkdir()
    for number in range(3):
        (model / "0_extra" / f"f{number}").write_text("x")
    assert compiled.cache_key(model, "int8", 128) is None  # too many to key them all: no cache


def test_a_new_entry_replaces_the_model_s_old_one_and_keeps_others(stored: Stored, tmp_path: Path) -> None:
    cache = stored.copy(tmp_path / "cache")
    traced = stored.embedder._query_encoder  # noqa: SLF001 -- the traced encoder this process made
    assert compiled.save(cache, "f" * 32, traced, model_dir=stored.embedder.path, precision="float32")
    assert compiled.save(cache, "e" * 32, traced, model_dir=stored.embedder.path, precision="int8")  # e.g. after an upgrade
    assert [path.name for path in _entries(cache)] == ["e" * 32, "f" * 32]  # the old int8 entry is gone


def test_storing_an_entry_another_process_stored_first_keeps_theirs(stored: Stored, tmp_path: Path) -> None:
    cache = stored.copy(tmp_path / "cache")
    entry = cache / stored.entry
    written = (entry / compiled.META_FILE).stat().st_mtime_ns
    traced = stored.embedder._query_encoder  # noqa: SLF001 -- the traced encoder this process made
    assert compiled.save(cache, stored.entry, traced, model_dir=stored.embedder.path, precision="int8")
    assert _entries(cache) == [entry]  # no second entry, no staging directory left behind
    assert (entry / compiled.META_FILE).stat().st_mtime_ns == written


def test_an_unwritable_cache_only_costs_the_full_load(tmp_path: Path) -> None:
    blocked = tmp_path / "a-file"
    blocked.write_text("not a directory")
    embedder = Embedder(cache_dir=blocked / "models")
    assert np.allclose(embedder.embed_queries(TEXTS[:2]), _reference(TEXTS[:2]), atol=1e-6)
    assert embedder.loaded and not embedder.from_cache


def test_the_setting_names_the_directory(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from index.settings import CopilotSettings

    monkeypatch.setenv("COPILOT_MODEL_CACHE", str(tmp_path / "models"))
    assert CopilotSettings.load().model_cache == tmp_path / "models"
    monkeypatch.setenv("COPILOT_MODEL_CACHE", "")  # empty: the default, in the user's cache directory
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert CopilotSettings.load().model_cache == tmp_path / "xdg" / "mcp-copilot" / "models"


def test_storing_deletes_entries_of_models_that_are_gone_and_abandoned_staging(stored: Stored, tmp_path: Path) -> None:
    cache = stored.copy(tmp_path / "cache")
    gone = cache / ("a" * 32)
    shutil.copytree(cache / stored.entry, gone)
    meta = json.loads((gone / compiled.META_FILE).read_text())
    (gone / compiled.META_FILE).write_text(json.dumps({**meta, "model": str(tmp_path / "a-removed-model")}))
    other_model = cache / ("b" * 32)  # another model that still exists: kept
    shutil.copytree(cache / stored.entry, other_model)
    meta = json.loads((other_model / compiled.META_FILE).read_text())
    (other_model / compiled.META_FILE).write_text(json.dumps({**meta, "model": str(tmp_path)}))
    abandoned, in_progress = cache / ".abandoned-staging", cache / ".staging-being-written"
    for staging in (abandoned, in_progress):
        staging.mkdir()
        (staging / compiled.ENCODER_FILE).write_bytes(b"half an encoder")
    old = os.stat(abandoned).st_mtime - compiled.STAGING_MAX_AGE_SECONDS - 60
    os.utime(abandoned, (old, old))

    traced = stored.embedder._query_encoder  # noqa: SLF001 -- the traced encoder this process made
    assert compiled.save(cache, "c" * 32, traced, model_dir=stored.embedder.path, precision="float32")
    names = [path.name for path in _entries(cache)]
    # Gone: the abandoned staging and the entry of the removed model. Kept: a staging being written,
    # the stored int8 entry, another model's and the new one.
    assert names == sorted([".staging-being-written", stored.entry, "b" * 32, "c" * 32])


#: Loads the embedder as a copilot does, in a process of its own, and says where its encoder came from.
LOAD_IN_A_PROCESS = """
from index.models.embedding import Embedder
from index.settings import CopilotSettings
settings = CopilotSettings.load()
embedder = Embedder(settings.embedding_model, settings.embedding_precision, cache_dir=settings.model_cache)
embedder.load()
print("from the cache" if embedder.from_cache else "the model itself")
"""


def test_a_process_waits_for_another_storing_the_entry_and_takes_it(stored: Stored, tmp_path: Path) -> None:
    # Processes started together on an empty cache each loaded sentence-transformers (~10 s of CPU)
    # to store the same entry. Here this test is the process storing it: it holds the entry's lock.
    cache = tmp_path / "cache"
    cache.mkdir()
    env = cli_env(COPILOT_MODEL_CACHE=str(cache), COPILOT_HOME=str(tmp_path / "home"))
    with exclusive_lock(cache / f"{stored.entry}{compiled.LOCK_SUFFIX}", wait=5, what="storing the entry in this test"):
        waiting = subprocess.Popen(
            [sys.executable, "-c", LOAD_IN_A_PROCESS], cwd=PROJECT, env=env,
            stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        )
        deadline = threading.Timer(120, waiting.kill)  # bounds the reads below
        deadline.start()
        try:
            assert waiting.stderr is not None
            said = ""
            while "waiting up to" not in said and (line := waiting.stderr.readline()):
                said += line
            assert "another process is loading the embedding model to keep its traced encoder" in said, said
            shutil.copytree(stored.cache / stored.entry, cache / stored.entry)
        finally:
            deadline.cancel()
    out, err = waiting.communicate(timeout=120)
    assert waiting.returncode == 0 and out.strip() == "from the cache", said + err
