"""Where a run's results go: one run directory, or one per repeat (``--repeats N``).

A single run writes into ``--out`` itself. With repeats, ``--out`` holds ``repeat-1/`` …
``repeat-N/`` -- each a complete run directory (``summary.json``, ``tasks.json``, one trajectory
per task) -- and ``repeats.json`` naming them, so the judge judges each repeat on its own and
reports pass@k across them. Rerunning the same command resumes every repeat.
"""

from __future__ import annotations

from pathlib import Path

from pydantic import BaseModel, Field, field_validator

from evaluation.json_files import JSONFileError, read_json_model, unreadable
from evaluation.run.models import SUMMARY_FILE
from index.errors import ConfigError
from server.trajectory.records import utc_now

REPEATS_FILE = "repeats.json"


class RepeatsManifest(BaseModel):
    version: int = 1
    created: str = Field(default_factory=utc_now)
    #: Directory names of the repeats, relative to the run directory, in order.
    repeats: list[str] = Field(default_factory=list)

    @field_validator("repeats")
    @classmethod
    def _directories_inside_the_run(cls, names: list[str]) -> list[str]:
        # Each names a directory the judge reads every log under and writes its report into: "..",
        # "/" or an absolute path reached outside the run (and --out), a name given twice counted one
        # run twice.
        for name in names:
            if not name or name in (".", "..") or any(char in name for char in "/\\\0"):
                raise ValueError(f"{name!r} is not the name of a directory inside the run (such as 'repeat-1')")
        if len(set(names)) != len(names):
            raise ValueError(f"{next(n for i, n in enumerate(names) if n in names[:i])!r} is listed twice")
        return names


def repeat_name(number: int) -> str:
    return f"repeat-{number}"


def read_repeats(directory: Path) -> list[Path] | None:
    """The repeat directories of ``directory`` when it holds a repeated run, else ``None``."""
    manifest = _read_manifest(directory)
    return None if manifest is None else [directory / name for name in manifest.repeats]


def _read_manifest(directory: Path) -> RepeatsManifest | None:
    path = directory / REPEATS_FILE
    if not path.is_file():
        return None
    try:
        return read_json_model(path, RepeatsManifest)
    except (JSONFileError, OSError) as error:
        raise ConfigError(
            unreadable(path, "the repeats manifest", error) + "; fix it, or use another --out to start over."
        ) from None


def run_directories(out: Path, repeats: int | None) -> list[Path]:
    """The run directories this command fills: ``out``, or its ``repeat-k`` directories.

    ``repeats`` ``None`` keeps what ``out`` already holds (a single run, or its repeats);
    a larger number than before adds repeats, a smaller one runs only the first ``repeats``.
    """
    manifest = _read_manifest(out)
    existing = None if manifest is None else [out / name for name in manifest.repeats]
    if existing is None:
        if repeats is None or repeats == 1:
            return [out]
        if (out / SUMMARY_FILE).is_file():
            raise ConfigError(
                f"{out} holds a single run (summary.json); repeats go into their own directories. "
                "Use another --out for --repeats."
            )
        count = repeats
    else:
        count = repeats if repeats is not None else len(existing)
    names = [repeat_name(number) for number in range(1, max(count, len(existing or [])) + 1)]
    manifest = RepeatsManifest(repeats=names, created=manifest.created if manifest else utc_now())
    out.mkdir(parents=True, exist_ok=True)
    tmp = out / (REPEATS_FILE + ".tmp")
    tmp.write_text(manifest.model_dump_json(indent=1) + "\n", encoding="utf-8")
    tmp.replace(out / REPEATS_FILE)
    return [out / name for name in names[:count]]
