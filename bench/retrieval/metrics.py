"""Retrieval metrics per query, and means with task-clustered bootstrap confidence intervals.

Queries of one task are not independent (the same tools, often the same words), so the
bootstrap resamples *tasks* and takes every query of a drawn task: the intervals are wider, and
honest, compared with resampling queries.
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

import numpy as np

KEYS = ("hit@1", "hit@3", "hit@5", "prec@3", "R@10", "nDCG@10", "MRR")
BOOTSTRAP_SAMPLES = 1000


def query_metrics(ranked: Sequence[str], relevant: frozenset[str]) -> dict[str, float]:
    """Metrics of one ranking (tool names, best first) against the relevant tool names.

    A relevant name counts once for recall/nDCG (several servers may share a tool name) but
    every position holding a relevant name counts for precision@3.
    """
    first: int | None = None
    positions: list[int] = []
    seen: set[str] = set()
    for position, name in enumerate(ranked):
        if name in relevant:
            if first is None:
                first = position
            if name not in seen:
                seen.add(name)
                positions.append(position)
    dcg = sum(1 / math.log2(p + 2) for p in positions if p < 10)
    ideal = sum(1 / math.log2(p + 2) for p in range(min(10, len(relevant))))
    return {
        "hit@1": float(first is not None and first < 1),
        "hit@3": float(first is not None and first < 3),
        "hit@5": float(first is not None and first < 5),
        "prec@3": sum(1 for name in ranked[:3] if name in relevant) / 3,
        "R@10": len(set(ranked[:10]) & relevant) / len(relevant),
        "nDCG@10": dcg / ideal if ideal else 0.0,
        "MRR": 1 / (first + 1) if first is not None else 0.0,
    }


@dataclass(frozen=True)
class Estimate:
    mean: float
    low: float
    high: float

    def __format__(self, spec: str) -> str:
        return f"{self.mean:.3f} [{self.low:.2f}, {self.high:.2f}]"


def clustered_bootstrap(
    values: Sequence[float], clusters: Sequence[str], samples: int = BOOTSTRAP_SAMPLES, seed: int = 0
) -> Estimate:
    """Mean of ``values`` with a 95% interval from resampling ``clusters`` (tasks) with replacement."""
    if not values:
        return Estimate(float("nan"), float("nan"), float("nan"))
    groups: dict[str, list[float]] = defaultdict(list)
    for value, cluster in zip(values, clusters, strict=True):
        groups[cluster].append(value)
    sums = np.array([sum(v) for v in groups.values()])
    counts = np.array([len(v) for v in groups.values()])
    rng = np.random.default_rng(seed)
    draws = rng.integers(0, len(sums), size=(samples, len(sums)))
    means = sums[draws].sum(axis=1) / counts[draws].sum(axis=1)
    low, high = np.percentile(means, [2.5, 97.5])
    return Estimate(float(np.mean(values)), float(low), float(high))


def interval_cell(estimate: Estimate) -> str:
    """An estimate as a table cell: ``0.781 (0.73-0.83)``."""
    return f"{estimate.mean:.3f} ({estimate.low:.2f}-{estimate.high:.2f})"


#: Per query set, per method: every metric's estimate (what the tables, the JSON and the page show).
Summaries = dict[str, dict[str, dict[str, Estimate]]]


def summarize(
    rows: Sequence[Mapping[str, float]], clusters: Sequence[str], keys: Iterable[str] = KEYS
) -> dict[str, Estimate]:
    return {key: clustered_bootstrap([row[key] for row in rows], clusters) for key in keys}


def paired_difference(
    a: Sequence[float], b: Sequence[float], clusters: Sequence[str], samples: int = BOOTSTRAP_SAMPLES
) -> Estimate:
    """Mean of ``a - b`` per query with a task-clustered 95% interval (is the gap more than noise?)."""
    return clustered_bootstrap([x - y for x, y in zip(a, b, strict=True)], clusters, samples)
