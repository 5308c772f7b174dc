"""The bundled model loads offline; other names fail clearly instead of downloading."""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import pytest

from index.embedding import EmbeddingModelError, bundled_model_path, get_embedder, resolve_model
from index.errors import ConfigError
from index.settings import CopilotSettings
from index.tool_index import ToolIndex

pytestmark = pytest.mark.timeout(180)


@pytest.mark.parametrize("name", ["all-MiniLM-L6-v2", "sentence-transformers/all-MiniLM-L6-v2", "ALL-MINILM-L6-V2", ""])
def test_names_of_the_bundled_model(name: str) -> None:
    label, path = resolve_model(name)
    assert label == "all-MiniLM-L6-v2" and path == bundled_model_path()
    assert (path / "modules.json").is_file()


def test_a_local_model_directory_is_accepted() -> None:
    label, path = resolve_model(str(bundled_model_path()))
    assert path == bundled_model_path().resolve() and label == str(path)


@pytest.mark.parametrize("name", ["BAAI/bge-small-en-v1.5", "nomic-embed-text"])
def test_anything_else_is_refused_without_downloading(name: str) -> None:
    with pytest.raises(EmbeddingModelError, match="never downloaded") as raised:
        resolve_model(name)
    assert isinstance(raised.value, ConfigError)


def test_a_directory_that_is_not_a_model_is_refused(tmp_path: Path) -> None:
    with pytest.raises(EmbeddingModelError, match="not a sentence-transformers model"):
        resolve_model(str(tmp_path))


def test_open_fails_early_on_a_bad_model_setting(tmp_path: Path) -> None:
    with pytest.raises(EmbeddingModelError, match="COPILOT_EMBEDDING_MODEL"):
        ToolIndex.open(CopilotSettings(home=tmp_path, embedding_model="some/online-model"))


def test_embeddings_are_normalized_and_keep_input_order() -> None:
    embedder = get_embedder()
    texts = ["a much longer sentence about converting Word documents into PDF files", "weather", "time zones"]
    together = embedder.embed(texts)
    assert together.shape == (3, 384) and together.dtype == np.float32
    assert np.allclose(np.linalg.norm(together, axis=1), 1.0, atol=1e-5)
    one_by_one = np.vstack([embedder.embed([t]) for t in texts])
    assert np.allclose(together, one_by_one, atol=1e-5)
    queries = embedder.embed_queries(texts)
    assert embedder.traced_queries  # the fast path is in use for the bundled model ...
    assert np.allclose(queries, together, atol=1e-5)  # ... and agrees with encode()
    assert embedder.embed([]).shape == (0, 384)


def test_loading_keeps_the_process_offline() -> None:
    get_embedder().load()
    assert os.environ["HF_HUB_OFFLINE"] == "1" and os.environ["TRANSFORMERS_OFFLINE"] == "1"
    assert os.environ["ORT_DISABLE_TELEMETRY"] == "1"
