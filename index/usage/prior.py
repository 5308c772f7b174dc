"""The usage prior: what ``route`` adds to the tools this copilot's agents have run before.

A tool's count is the number of trajectories in which it was executed and returned a result that
is not an error (:mod:`index.usage.learning` reads them from the trajectory logs). ``route`` adds
``weight * log(1 + count)`` to the tool's fused score (z-score units: the dense signal's weight
is 1), so a tool used in many tasks moves up a few places and an unused one keeps its score. The
log damps the loop in which a tool ranked high is run more and then ranked higher still.

Why a prior at all: most needs an agent meets are met by a few tools (write a file, search the web,
geocode an address), and nothing in a tool's text says which. Learned from successful runs of
other tasks (``python -m bench.retrieval.studies.usage``, cross-validated across tasks) it is the one change
measured here that gains on every query set; learned from every run of an agent that executes
``route``'s first answer, the gain at the default weight is smaller and it still loses on none.

The file is as trusted as the index (both are under ``COPILOT_HOME``); a child server cannot write
it, and reaches it only by being executed without error.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from pathlib import Path
from typing import Literal

import numpy as np
from pydantic import BaseModel, Field, NonNegativeInt, model_validator

from index.errors import ConfigError
from index.storage.atomic import UnusableFile, read_model, write_atomic

logger = logging.getLogger(__name__)

_FORMAT = "mcp-copilot/usage-prior"


class UsagePrior(BaseModel):
    """How often each tool ran without error, counted once per trajectory."""

    format: Literal["mcp-copilot/usage-prior"] = _FORMAT
    version: Literal[1] = 1
    learned_at: str = ""
    #: Trajectories read (those without a successful execute count too: they are the denominator).
    trajectories: int = Field(default=0, ge=0)
    #: server -> tool -> trajectories in which the tool returned a result that is not an error.
    tools: dict[str, dict[str, NonNegativeInt]] = Field(default_factory=dict)

    @model_validator(mode="after")
    def _counts_within_trajectories(self) -> UsagePrior:
        # A tool is counted at most once per trajectory; a count past them is a damaged or hand-made
        # file (10^309 ended every route in an OverflowError, 10^300 outranked every other tool).
        for server, tools in self.tools.items():
            for tool, count in tools.items():
                if count > self.trajectories:
                    digits = str(count)
                    shown = f"{count:,}" if len(digits) <= 15 else f"{digits[:3]}… ({len(digits):,} digits)"
                    raise ValueError(
                        f"{server}/{tool} is counted {shown} times over {self.trajectories:,} trajectories "
                        "(a tool counts at most once per trajectory)"
                    )
        return self

    def by_id(self) -> dict[str, int]:
        """The counts keyed by the index's record id of a tool (``server/name``, ``ToolRecord.id``)."""
        return {f"{server}/{tool}": count for server, tools in self.tools.items() for tool, count in tools.items()}

    @property
    def tool_total(self) -> int:
        return sum(len(tools) for tools in self.tools.values())


def usage_boost(counts: np.ndarray, weight: float) -> np.ndarray:
    """What ``route`` adds to each tool's fused score for its count."""
    return (weight * np.log1p(np.asarray(counts, dtype=np.float64))).astype(np.float32)


def prior_vector(prior: UsagePrior, ids: Sequence[str], kinds: Sequence[str], weight: float) -> np.ndarray:
    """The boost of each record of an index (``ids`` and ``kinds`` aligned with it); prompts and
    resources, which are never executed, get none."""
    counts = prior.by_id()
    values = (counts.get(record_id, 0) if kind == "tool" else 0 for record_id, kind in zip(ids, kinds, strict=True))
    return usage_boost(np.fromiter(values, dtype=np.float64, count=len(ids)), weight)


class UsagePriorFile:
    """The prior file as ``route`` reads it: read again when it changes (a new ``index usage`` is in
    use from the next route), a broken one warned about once and routed without."""

    def __init__(self, path: Path, weight: float) -> None:
        self.path = path
        self.weight = weight
        self._stamp: tuple[int, int, int] | None = None
        self._prior: UsagePrior | None = None
        self._vector: tuple[UsagePrior, Sequence[str], np.ndarray] | None = None

    def current(self) -> UsagePrior | None:
        if self.weight <= 0:
            return None
        try:
            stat = self.path.stat()
        except FileNotFoundError:
            self._stamp, self._prior = None, None
            return None
        except OSError as error:
            stamp = (-1, -1, -1)
            if self._stamp != stamp:
                logger.warning("%s: cannot read the usage prior (%s); routing without it", self.path, error)
            self._stamp, self._prior = stamp, None
            return None
        stamp = (stat.st_mtime_ns, stat.st_size, stat.st_ino)
        if stamp != self._stamp:
            try:
                prior = read_usage_prior(self.path)
            except ConfigError as error:
                logger.warning("%s; routing without it", error)
                prior = None
            self._stamp, self._prior = stamp, prior
        return self._prior

    def boost(self, ids: Sequence[str], kinds: Sequence[str]) -> np.ndarray | None:
        """What ``route`` adds to each record of an index, or None without a prior. Computed once per
        prior and index snapshot (``ids`` is the snapshot's own list, so it stands for the snapshot)."""
        prior = self.current()
        if prior is None:
            return None
        cached = self._vector
        if cached is not None and cached[0] is prior and cached[1] is ids:
            return cached[2]
        vector = prior_vector(prior, ids, kinds, self.weight)
        self._vector = (prior, ids, vector)
        return vector

    def info(self) -> dict[str, object] | None:
        """What a trajectory's ``session_start`` records of the prior in use (None: none is)."""
        prior = self.current()
        if prior is None:
            return None
        return {"file": str(self.path), "trajectories": prior.trajectories, "tools": prior.tool_total, "weight": self.weight}


def read_usage_prior(path: Path) -> UsagePrior | None:
    """The prior in ``path``; None when there is no such file; :class:`ConfigError` (naming the
    file, what is wrong and how to rebuild it) when it cannot be read or is not a prior."""
    try:
        return read_model(path, UsagePrior)
    except UnusableFile as error:
        what = "cannot read the usage prior" if error.unreadable else "not a usage prior"
        raise ConfigError(f"{path}: {what} ({error}); {_REBUILD}") from None


def write_usage_prior(prior: UsagePrior, path: Path) -> None:
    """Replace ``path`` with ``prior`` atomically (a copilot reading it meanwhile sees the old or the new one)."""
    write_atomic(path, prior.model_dump_json(indent=1) + "\n")


_REBUILD = "learn it again with `python -m index usage`, or delete it to route without one"
