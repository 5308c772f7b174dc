"""The significance level ``compare`` and ``leaderboard`` test at: one ``--alpha`` option, its
default and its check, for both commands."""

from __future__ import annotations

import argparse

from index.errors import ConfigError

DEFAULT_ALPHA = 0.05


def add_alpha_argument(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--alpha", type=float, default=DEFAULT_ALPHA, help=f"significance level (default {DEFAULT_ALPHA})")


def checked_alpha(alpha: float) -> float:
    """``alpha`` if it is a usable significance level (NaN is not); else a :class:`ConfigError` naming the option."""
    if not 0 < alpha < 1:
        raise ConfigError(f"--alpha must be between 0 and 1 (got {alpha}).")
    return alpha
