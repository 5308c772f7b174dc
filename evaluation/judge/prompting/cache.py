"""On-disk cache of LLM completions, keyed by model + request (messages, temperature).

Re-judging the same trajectory with the same model and prompt is free and returns the same
reply. One small JSON file per entry, written atomically (temp file + rename), so concurrent
writers and a Ctrl-C never leave a half-written entry, and a failed write leaves no temporary file.
"""

from __future__ import annotations

import hashlib
import json
import logging
from pathlib import Path
from typing import Any

from pydantic import BaseModel, Field, ValidationError

from index.storage.atomic import write_atomic

logger = logging.getLogger(__name__)


class CachedCompletion(BaseModel):
    model: str
    text: str | None
    # Bounded: a garbled entry's NaN would be written to the verdict log as null, which no
    # later run could read back (the task judged again on every run).
    input_tokens: int = Field(0, ge=0)
    output_tokens: int = Field(0, ge=0)
    latency_ms: float = Field(0.0, ge=0, allow_inf_nan=False)
    #: Cut at the model's output limit (``finish_reason: length``); absent in older entries.
    cut: bool = False


def request_key(model: str, messages: list[dict[str, Any]], **params: Any) -> str:
    payload = {"model": model, "messages": messages, **params}
    return hashlib.sha256(json.dumps(payload, sort_keys=True, ensure_ascii=False).encode()).hexdigest()


class CompletionCache:
    def __init__(self, directory: str | Path) -> None:
        self.directory = Path(directory)
        self.hits = 0
        self.misses = 0
        #: errno of the read and write failures reported: a full disk or a directory that is no
        #: directory fails every entry alike, and a warning per entry buried the run's output.
        self._reported: set[tuple[str, int | None]] = set()

    def _report(self, action: str, path: Path, error: OSError) -> None:
        if (action, error.errno) in self._reported:
            logger.debug("cannot %s judge cache entry %s (%s)", action, path, error)
            return
        self._reported.add((action, error.errno))
        logger.warning(
            "cannot %s judge cache entry %s (%s); other entries failing so are not reported",
            action, path, error.strerror or error,
        )

    def _path(self, key: str) -> Path:
        return self.directory / key[:2] / f"{key}.json"

    def get(self, key: str) -> CachedCompletion | None:
        path = self._path(key)
        try:
            entry = CachedCompletion.model_validate_json(path.read_bytes())
        except FileNotFoundError:
            self.misses += 1
            return None
        except OSError as error:
            self._report("read", path, error)
            self.misses += 1
            return None
        except (ValidationError, ValueError) as error:
            logger.warning("ignoring unreadable cache entry %s (%s)", path, error)
            self.misses += 1
            return None
        self.hits += 1
        return entry

    def put(self, key: str, entry: CachedCompletion) -> None:
        path = self._path(key)
        try:
            # The temporary file goes whatever fails: a full disk left one per entry behind.
            write_atomic(path, entry.model_dump_json())
        except OSError as error:
            # A cache that cannot be written costs money on the next run, not correctness now.
            self._report("write", path, error)
