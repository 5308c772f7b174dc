"""Argument types the benchmarks share: a bad value is argparse's one-line error (exit 2), not a
traceback after minutes of work, and a path typed on the command line must exist (a default
data path may be absent: the benchmark then says it skips)."""

from __future__ import annotations

import argparse
import math
from pathlib import Path


def positive_int(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a whole number, got {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1, got {value}")
    return value


def non_negative_float(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number, got {text!r}") from None
    if not (value >= 0 and math.isfinite(value)):
        raise argparse.ArgumentTypeError(f"must be a finite number of at least 0, got {text}")
    return value


def existing_file(text: str) -> Path:
    path = Path(text)
    if not path.is_file():
        raise argparse.ArgumentTypeError(f"{path}: no such file")
    return path


def output_file(text: str) -> Path:
    """A file to write at the end of a run: its directory must exist now, not after the work."""
    path = Path(text)
    if not path.parent.is_dir():
        raise argparse.ArgumentTypeError(f"{path.parent}: no such directory to write {path.name} in")
    return path


def checkout(text: str) -> Path:
    """Another checkout of this project (its ``server`` package is what gets measured)."""
    path = Path(text)
    if not (path / "server" / "__init__.py").is_file():
        raise argparse.ArgumentTypeError(f"{path}: not a checkout of this project (no server/__init__.py)")
    return path
