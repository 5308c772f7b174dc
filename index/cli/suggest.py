"""Nearest names for an unknown one (server names, ``--only`` names): the hint in "did you mean"."""

from __future__ import annotations

from collections.abc import Iterable

#: rapidfuzz WRatio below this is noise rather than a likely typo.
MIN_SCORE = 60


def nearest_names(name: str, choices: Iterable[str], limit: int = 3) -> list[str]:
    """Up to ``limit`` of ``choices`` closest to ``name``, best first (none when nothing is close)."""
    from rapidfuzz import process

    return [match for match, score, _ in process.extract(name, list(choices), limit=limit) if score >= MIN_SCORE]
