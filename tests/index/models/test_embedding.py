"""The bundled model loads offline; other names fail clearly instead of downloading."""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import pytest

from index.models.embedding import EmbeddingModelError, bundled_model_path, get_embedder, model_label, resolve_model
from index.errors import ConfigError
from index.settings import CopilotSettings
from index.search.tool_index import ToolIndex

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


def test_precision_is_part_of_the_label() -> None:
    assert model_label("all-MiniLM-L6-v2", "int8") == "all-MiniLM-L6-v2 (int8)"
    assert model_label("bundled", "float32") == "all-MiniLM-L6-v2"
    assert get_embedder().label == "all-MiniLM-L6-v2 (int8)"  # int8 is the default
    assert get_embedder(precision="float32") is get_embedder("all-MiniLM-L6-v2", "float32")
    assert get_embedder(precision="float32") is not get_embedder()


def test_an_unknown_precision_names_the_variable(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("COPILOT_EMBEDDING_PRECISION", "fp16")
    with pytest.raises(ConfigError, match="COPILOT_EMBEDDING_PRECISION: .*'int8' or 'float32'.*'fp16'"):
        CopilotSettings.load()


def test_int8_weights_are_quantized_and_rank_like_float32() -> None:
    """The quantized model really runs int8 layers, yet finds the same nearest documents."""
    import torch

    int8, float32 = get_embedder(), get_embedder(precision="float32")
    layers = dict(int8.model()[0].auto_model.named_modules())
    feed_forward = [layers[f"encoder.layer.{n}.{part}.dense"] for n in range(6) for part in ("intermediate", "output")]
    assert all("quantized" in type(layer).__module__ for layer in feed_forward)
    assert type(layers["encoder.layer.0.attention.self.query"]) is torch.nn.Linear  # attention stays float32
    documents = [
        "convert a Word document to PDF",
        "get the weather forecast for a city",
        "generate a bar chart from data",
        "list the files in a directory",
        "current time in a time zone",
    ]
    queries = ["turn my docx into a pdf", "will it rain in Paris tomorrow", "plot these numbers", "what files are in this folder", "what time is it in Tokyo"]
    for embedder in (int8, float32):
        similarity = embedder.embed_queries(queries) @ embedder.embed(documents).T
        assert list(similarity.argmax(axis=1)) == [0, 1, 2, 3, 4], embedder.label
    closeness = np.sum(int8.embed(documents) * float32.embed(documents), axis=1)
    assert closeness.min() > 0.95 and closeness.max() < 0.9999  # close, and really different arithmetic


def test_an_int8_document_vector_does_not_depend_on_what_is_embedded_with_it() -> None:
    """int8 activations are scaled per batch, so documents are embedded one by one: a text's vector
    is the same alone, among others, and as a query (an incremental build equals a full one)."""
    embedder = get_embedder()
    text = "read the rows of an Excel sheet"
    others = ["a very long description " * 20, "x", "图表生成工具，支持柱状图和折线图"]
    alone = embedder.embed([text])[0]
    among = embedder.embed([others[0], text, *others[1:]])[1]
    assert np.array_equal(alone, among)
    assert np.array_equal(alone, embedder.embed_queries([text])[0])
    assert np.array_equal(embedder.embed_queries([text, others[0]])[0], alone)


def test_a_forward_pass_takes_the_cores_other_threads_leave_free(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """torch's threads waiting for each other at every layer made a query 58-209 ms instead of
    16-19 ms whenever another process wanted a core (index/models/torch_threads.py)."""
    import torch

    from index.models import torch_threads

    before = torch.get_num_threads()
    loadavg = tmp_path / "loadavg"
    monkeypatch.setattr(torch_threads, "_LOADAVG", str(loadavg))
    # This process's running threads as the kernel would list them: the caller alone (torch's workers
    # of the last pass may still be spinning in the real list, which would make the count vary).
    (tmp_path / "task" / "4242").mkdir(parents=True)
    (tmp_path / "task" / "4242" / "stat").write_text("4242 (python) R 1 4242 4242 0 -1 4194560 0 0\n")
    monkeypatch.setattr(torch_threads, "_OWN_TASKS", str(tmp_path / "task"))
    monkeypatch.setattr(torch_threads, "_own", 3)  # torch's own number and the cores, whatever this machine's
    monkeypatch.setattr(torch_threads, "_cores", 4)
    int8, float32 = get_embedder(), get_embedder(precision="float32")
    passes = {
        "a query": lambda: int8.embed_queries(["current time in Tokyo"]),
        "int8 documents, one by one": lambda: int8.embed(["read the rows of an Excel sheet", "current time in a zone"]),
        "a float32 batch": lambda: float32.embed(["read the rows of an Excel sheet", "current time in a zone"]),
    }
    try:
        for running, expected in (("1/80", 3), ("2/80", 3), ("3/80", 2), ("9/80", 1)):  # the reader is one of them
            loadavg.write_text(f"1.52 1.21 0.98 {running} 4242\n")
            for name, forward in passes.items():
                torch.set_num_threads(7)
                forward()
                assert torch.get_num_threads() == expected, (running, name)
        loadavg.unlink()  # unknown (not Linux): one thread, the choice that never collapses
        for forward in passes.values():
            forward()
            assert torch.get_num_threads() == 1
    finally:
        torch.set_num_threads(before)


def test_a_model_without_bert_style_feed_forward_layers_is_refused_in_int8() -> None:
    import torch

    from index.models.quantized import feed_forward_layers, quantize_feed_forward

    other = torch.nn.Sequential(torch.nn.Linear(4, 4), torch.nn.ReLU(), torch.nn.Linear(4, 4))
    assert feed_forward_layers(other) == [] and quantize_feed_forward(other) is False
    assert all(type(layer) is torch.nn.Linear for layer in (other[0], other[2]))  # left as it was
