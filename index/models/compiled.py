"""The verified traced encoder of a model, kept on disk so the next process needs no sentence-transformers.

Importing sentence-transformers (with the transformers and scikit-learn modules it pulls in) took
~5 s of a model load here, building and tracing the model ~0.7 s more; the traced encoder an earlier
process saved loads in ~0.1 s once torch is imported (~1 s), with the model's own Rust tokenizer
(``tokenizers``). Every process that embeds gains: the copilot's start-up (its first hybrid
``route``), ``index build``, the benchmark runner's copilots.

An entry is written only after the traced encoder reproduced ``encode()`` on
:data:`~index.models.fast_query.PROBES` and the standalone tokenizer reproduced the model's tokens,
and it is used only after it reproduced those vectors again when loaded; otherwise the model loads
as before. Its key covers everything the encoder depends on (the model directory's files, the
precision, the window, the versions of torch and the model libraries, this module's and the tracer's
code), so anything that changes them makes a new entry; the entry it replaces is deleted.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import shutil
import tempfile
import time
import warnings
from collections.abc import Iterator, Sequence
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass
from importlib import metadata
from pathlib import Path
from typing import Any

import numpy as np

from index.errors import ConfigError
from index.models import fast_query, quantized
from index.models.fast_query import PROBES, TracedEncoder, agrees_on_probes
from index.storage.file_lock import LockBusyError, exclusive_lock

logger = logging.getLogger(__name__)

#: How long a process waits for another storing the entry it needs (a full load takes ~10 s idle,
#: a minute on a busy machine).
STORE_WAIT_SECONDS = 180.0
#: Beside each entry: the lock of whoever is storing it (never an entry: no description in it).
LOCK_SUFFIX = ".lock"
#: Bumped when an entry's files change meaning.
CACHE_FORMAT = 1
ENCODER_FILE = "encoder.pt"
TOKENIZER_FILE = "tokenizer.json"
META_FILE = "meta.json"
#: A staging directory older than this was left by a process that died while storing an entry.
STAGING_MAX_AGE_SECONDS = 3600
#: A model directory holds a dozen files; a stat per file is the key's cost, so bound it.
_MAX_MODEL_FILES = 500
_LIBRARIES = ("torch", "transformers", "sentence-transformers", "tokenizers")


@dataclass(frozen=True)
class CompiledEncoder:
    """A traced encoder loaded from disk with the model's Rust tokenizer: no transformers involved."""

    module: Any
    tokenizer: Any  # tokenizers.Tokenizer, truncating and padding as the model's tokenizer does
    dimension: int

    def __call__(self, texts: Sequence[str]) -> np.ndarray:
        import torch

        encodings = self.tokenizer.encode_batch(list(texts))
        ids = torch.tensor([encoding.ids for encoding in encodings], dtype=torch.long)
        mask = torch.tensor([encoding.attention_mask for encoding in encodings], dtype=torch.long)
        types = torch.tensor([encoding.type_ids for encoding in encodings], dtype=torch.long)
        with torch.inference_mode():
            return self.module(ids, mask, types).numpy()


def _model_files(model_dir: Path) -> list[list[Any]] | None:
    """Name, size, time and inode of each file of the model directory (hidden ones, ``.git``
    say, left out); ``None`` past :data:`_MAX_MODEL_FILES`: a key of the first few would leave
    out the weights when more files sort before them (new weights then kept the old encoder)."""
    files: list[list[Any]] = []
    for root, directories, names in os.walk(model_dir, followlinks=True):
        directories[:] = sorted(name for name in directories if not name.startswith("."))
        for name in sorted(names):
            if name.startswith("."):
                continue
            path = Path(root) / name
            if not path.is_file():  # follows symlinks: a linked model directory is keyed by its targets
                continue
            if len(files) >= _MAX_MODEL_FILES:
                return None
            stat = path.stat()
            files.append([str(path.relative_to(model_dir)), stat.st_size, stat.st_mtime_ns, stat.st_ino, stat.st_dev])
    return files


def _version(library: str) -> str | None:
    try:
        return metadata.version(library)
    except metadata.PackageNotFoundError:
        return None


def cache_key(model_dir: Path, precision: str, max_length: int) -> str | None:
    """The entry's name: a hash of everything the traced encoder depends on; ``None`` (no cache)
    for a model directory of too many files to key them all."""
    code = b"".join(Path(module.__file__).read_bytes() for module in (fast_query, quantized) if module.__file__)
    files = _model_files(model_dir)
    if files is None:
        return None
    described = {
        "format": CACHE_FORMAT,
        "model": str(model_dir.resolve()),
        "files": files,
        "precision": precision,
        "max_length": max_length,
        "libraries": {library: _version(library) for library in _LIBRARIES},
        "code": hashlib.sha256(code).hexdigest(),
    }
    return hashlib.sha256(json.dumps(described, sort_keys=True).encode()).hexdigest()[:32]


def _standalone_tokenizer(serialized: str, max_length: int, padding: dict[str, Any]) -> Any:
    from tokenizers import Tokenizer

    tokenizer = Tokenizer.from_str(serialized)
    tokenizer.no_padding()
    tokenizer.enable_truncation(max_length=max_length)
    tokenizer.enable_padding(**padding)
    return tokenizer


def _same_tokens(standalone: Any, hf_tokenizer: Any, max_length: int) -> bool:
    """Whether the standalone tokenizer gives the model's tokens for each probe and for all of them padded."""
    for batch in [[probe] for probe in PROBES] + [list(PROBES)]:
        expected = hf_tokenizer(batch, padding=True, truncation=True, max_length=max_length)
        actual = standalone.encode_batch(batch)
        for field, attribute in (("input_ids", "ids"), ("attention_mask", "attention_mask"), ("token_type_ids", "type_ids")):
            wanted = expected.get(field)
            if wanted is None and field == "token_type_ids":
                wanted = [[0] * len(row) for row in expected["input_ids"]]
            if [list(getattr(encoding, attribute)) for encoding in actual] != [list(row) for row in wanted]:
                return False
    return True


def save(root: Path, key: str, encoder: TracedEncoder, *, model_dir: Path, precision: str) -> bool:
    """Write ``encoder`` as entry ``key`` under ``root`` (atomically: readers see all of it or none)
    and delete the entries it replaces; False (and a debug line) when it cannot be kept."""
    backend = getattr(encoder.tokenizer, "backend_tokenizer", None)
    if backend is None:
        logger.debug("not caching the traced encoder: the model has no fast tokenizer")
        return False
    padding = {
        "pad_id": int(encoder.tokenizer.pad_token_id or 0),
        "pad_type_id": int(getattr(encoder.tokenizer, "pad_token_type_id", 0) or 0),
        "pad_token": str(encoder.tokenizer.pad_token or "[PAD]"),
        "direction": str(getattr(encoder.tokenizer, "padding_side", "right") or "right"),
    }
    serialized = backend.to_str()
    try:
        if not _same_tokens(_standalone_tokenizer(serialized, encoder.max_length, padding), encoder.tokenizer, encoder.max_length):
            logger.debug("not caching the traced encoder: the standalone tokenizer disagrees with the model's")
            return False
        import torch

        root.mkdir(parents=True, exist_ok=True)
        staging = Path(tempfile.mkdtemp(prefix=f".{key}-", dir=root))
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")  # TorchScript's deprecation notice
                torch.jit.save(encoder.module, str(staging / ENCODER_FILE))
            (staging / TOKENIZER_FILE).write_text(serialized, encoding="utf-8")
            meta = {
                "format": CACHE_FORMAT,
                "model": str(model_dir.resolve()),
                "precision": precision,
                "max_length": encoder.max_length,
                "padding": padding,
                "dimension": int(encoder.probe_vectors.shape[1]),
                "probe_vectors": encoder.probe_vectors.tolist(),
            }
            (staging / META_FILE).write_text(json.dumps(meta), encoding="utf-8")
            try:
                staging.rename(root / key)
            except OSError:  # another process stored the same entry first: keep theirs
                return (root / key / META_FILE).is_file()
        finally:
            shutil.rmtree(staging, ignore_errors=True)
        _prune(root, keep=key, model=meta["model"], precision=precision)
        return True
    except Exception:  # noqa: BLE001 -- an optimisation only: the next process loads the model again
        logger.debug("cannot cache the traced encoder under %s", root, exc_info=True)
        return False


def _prune(root: Path, *, keep: str, model: str, precision: str) -> None:
    """Delete what no process will use again: the other entries of this model and precision (left by
    an older torch, model or code), entries of model directories that are gone (a removed local
    model, an old virtualenv's bundled one), and staging directories a killed process left behind
    (each up to ~70 MB; an hour old, so none still being written)."""
    stale_before = time.time() - STAGING_MAX_AGE_SECONDS
    for entry in root.iterdir():
        if entry.name == keep:
            continue
        if entry.name.startswith("."):
            try:
                abandoned = entry.stat().st_mtime < stale_before
            except OSError:
                continue
            if abandoned:
                logger.debug("deleting the abandoned staging directory %s", entry)
                shutil.rmtree(entry, ignore_errors=True)
            continue
        try:
            meta = json.loads((entry / META_FILE).read_text(encoding="utf-8"))
        except (OSError, ValueError):
            continue
        if not isinstance(meta, dict):
            continue
        replaced = meta.get("model") == model and meta.get("precision") == precision
        orphaned = isinstance(meta.get("model"), str) and not Path(meta["model"]).exists()
        if replaced or orphaned:
            logger.debug("deleting the cached encoder %s (%s)", entry, "replaced" if replaced else "its model is gone")
            shutil.rmtree(entry, ignore_errors=True)


@contextmanager
def one_store_at_a_time(root: Path, key: str) -> Iterator[None]:
    """Hold entry ``key``'s lock under ``root`` for the block: processes that start together on an
    empty cache (a benchmark's copilots, hosts after an install) would each load sentence-transformers
    (~10 s of CPU and ~1 GB) to store the same entry; the ones that wait take it from the first.
    The wait is bounded (:data:`STORE_WAIT_SECONDS`); past it, or without a lock file, a process
    loads the model itself, as before."""
    with ExitStack() as held:
        try:
            held.enter_context(
                exclusive_lock(
                    root / f"{key}{LOCK_SUFFIX}", wait=STORE_WAIT_SECONDS,
                    what=f"loading the embedding model to keep its traced encoder in {root}",
                )
            )
        except (ConfigError, LockBusyError) as error:
            logger.info("%s; loading the model without waiting for it", error)
        yield


def kept_entry(root: Path, key: str) -> tuple[Path, int] | None:
    """The directory and vector dimension of entry ``key`` under ``root`` when its description reads
    (nothing is loaded: the document vectors kept there need no encoder, :mod:`index.models.vector_cache`)."""
    entry = root / key
    try:
        meta = json.loads((entry / META_FILE).read_text(encoding="utf-8"))
        if meta.get("format") == CACHE_FORMAT and int(meta["dimension"]) > 0:
            return entry, int(meta["dimension"])
    except (OSError, ValueError, TypeError, KeyError, AttributeError):
        pass
    return None


def load(root: Path, key: str) -> CompiledEncoder | None:
    """Entry ``key`` under ``root`` when it exists and still embeds the probes as stored; None otherwise
    (a damaged entry is deleted, so the model's next load writes it again)."""
    entry = root / key
    if not entry.exists():
        return None
    try:
        import torch

        if not (entry / META_FILE).is_file():
            # An interrupted copy or restore: left in place, it also kept the next load from
            # writing the entry again (its rename failed), so every start paid the full load.
            raise ValueError(f"no {META_FILE}")
        meta = json.loads((entry / META_FILE).read_text(encoding="utf-8"))
        if meta.get("format") != CACHE_FORMAT:
            raise ValueError(f"format {meta.get('format')!r}, not {CACHE_FORMAT!r}")
        tokenizer = _standalone_tokenizer(
            (entry / TOKENIZER_FILE).read_text(encoding="utf-8"), int(meta["max_length"]), dict(meta["padding"])
        )
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # TorchScript's deprecation notice
            module = torch.jit.load(str(entry / ENCODER_FILE), map_location="cpu")
        encoder = CompiledEncoder(module, tokenizer, int(meta["dimension"]))
        if agrees_on_probes(encoder, np.asarray(meta["probe_vectors"], dtype=np.float32)):
            return encoder
        logger.warning("the cached encoder %s no longer embeds as it did when stored; loading the model instead", entry)
    except Exception as error:  # noqa: BLE001 -- a damaged entry is a slower start, never a failure
        logger.warning("cannot use the cached encoder %s (%s); loading the model instead", entry, error)
    shutil.rmtree(entry, ignore_errors=True)
    return None

