"""Small statistics for judged runs: Wilson intervals, Cohen's kappa, exact McNemar."""

from __future__ import annotations

import math
from collections.abc import Sequence

from pydantic import BaseModel

Z_95 = 1.959963984540054


def wilson_interval(successes: int, n: int, z: float = Z_95) -> tuple[float, float] | None:
    """95% Wilson score interval for a proportion (sensible at 0, n and small n); ``None`` with no
    unit (``n`` 0): (0.0, 0.0) read as a certain 0% beside a rate that is n/a."""
    if n <= 0:
        return None
    p = successes / n
    denominator = 1 + z * z / n
    centre = (p + z * z / (2 * n)) / denominator
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / denominator
    # Exact at the ends: rounding leaves 0/n's lower bound at ~1e-17, which a plot's error bar
    # below a 0% point turns into a negative length.
    low = 0.0 if successes == 0 else max(0.0, centre - half)
    high = 1.0 if successes == n else min(1.0, centre + half)
    return (low, high)


def defined(interval: tuple[float, float] | None) -> tuple[float, float]:
    """An interval the caller knows is defined (it rests on at least one unit)."""
    if interval is None:
        raise ValueError("an interval over no units is undefined")
    return interval


class Confusion(BaseModel):
    """Judge vs people, with "success" as the positive class."""

    true_success: int = 0
    false_success: int = 0  # judge success, people failure
    false_failure: int = 0  # judge failure, people success
    true_failure: int = 0

    @property
    def n(self) -> int:
        return self.true_success + self.false_success + self.false_failure + self.true_failure

    @property
    def agreement(self) -> float | None:
        return (self.true_success + self.true_failure) / self.n if self.n else None


def confusion(judge: Sequence[bool], human: Sequence[bool]) -> Confusion:
    result = Confusion()
    for said, truth in zip(judge, human, strict=True):
        if said and truth:
            result.true_success += 1
        elif said:
            result.false_success += 1
        elif truth:
            result.false_failure += 1
        else:
            result.true_failure += 1
    return result


def cohen_kappa(table: Confusion) -> float | None:
    """Agreement beyond chance; ``None`` when undefined (no items, or chance agreement is 1)."""
    n = table.n
    if n == 0:
        return None
    observed = (table.true_success + table.true_failure) / n
    judge_yes = (table.true_success + table.false_success) / n
    human_yes = (table.true_success + table.false_failure) / n
    expected = judge_yes * human_yes + (1 - judge_yes) * (1 - human_yes)
    if math.isclose(expected, 1.0):
        return None
    return (observed - expected) / (1 - expected)


class McNemar(BaseModel):
    only_a: int  # tasks A solved and B did not
    only_b: int
    p_value: float


def mcnemar_exact(a: Sequence[bool], b: Sequence[bool]) -> McNemar:
    """Exact (binomial) McNemar test on paired outcomes; two-sided."""
    only_a = sum(1 for x, y in zip(a, b, strict=True) if x and not y)
    only_b = sum(1 for x, y in zip(a, b, strict=True) if y and not x)
    discordant = only_a + only_b
    from scipy.stats import binomtest  # imported here: scipy.stats costs seconds at import

    p_value = 1.0 if discordant == 0 else float(binomtest(min(only_a, only_b), discordant, 0.5).pvalue)
    return McNemar(only_a=only_a, only_b=only_b, p_value=min(1.0, p_value))


def pass_at_k(n: int, c: int, k: int) -> float:
    """Unbiased estimate of P(at least one of k attempts succeeds) from c successes in n
    attempts (Chen et al. 2021): 1 - C(n-c, k) / C(n, k)."""
    if not 0 < k <= n:
        raise ValueError(f"k must be between 1 and n={n} (got {k})")
    if n - c < k:
        return 1.0
    return 1.0 - math.comb(n - c, k) / math.comb(n, k)


def pass_hat_k(n: int, c: int, k: int) -> float:
    """Unbiased estimate of P(all of k attempts succeed) -- pass^k (Yao et al. 2024, tau-bench):
    C(c, k) / C(n, k)."""
    if not 0 < k <= n:
        raise ValueError(f"k must be between 1 and n={n} (got {k})")
    return math.comb(c, k) / math.comb(n, k)


def mean_interval(values: Sequence[float], z: float = Z_95) -> tuple[float, float] | None:
    """Normal-approximation 95% interval of a mean (clipped to [0, 1]); per-task rates averaged
    over repeats are the units, so repeats of one task are not counted as independent. ``None``
    without values: there is no mean to put an interval around."""
    n = len(values)
    if n == 0:
        return None
    mean = sum(values) / n
    if n == 1:
        # One task says nothing of how far its rate is from the mean over tasks: the whole range,
        # not (mean, mean), which read as certainty (50.0%-50.0% from one task run twice).
        return (0.0, 1.0)
    variance = sum((value - mean) ** 2 for value in values) / (n - 1)
    half = z * math.sqrt(variance / n)
    return (max(0.0, mean - half), min(1.0, mean + half))


def sample_sd(values: Sequence[float]) -> float | None:
    n = len(values)
    if n < 2:
        return None
    mean = sum(values) / n
    return math.sqrt(sum((value - mean) ** 2 for value in values) / (n - 1))


def paired_difference_interval(a: Sequence[bool], b: Sequence[bool], z: float = Z_95) -> tuple[float, float] | None:
    """95% interval of p_B - p_A for paired outcomes: Newcombe's (1998) hybrid score method 10.

    The Wald interval from the discordant counts collapses to one point when every discordant
    pair goes the same way (5 tasks, all solved by A only: "-100 pt, CI -100 to -100"); this one
    combines the two Wilson intervals through the outcomes' (continuity-corrected) correlation and
    stays inside [-1, 1] without clipping. ``None`` without pairs (no difference to bound).
    """
    n = len(a)
    if n == 0:
        return None
    both = sum(1 for x, y in zip(a, b, strict=True) if x and y)
    only_a = sum(1 for x, y in zip(a, b, strict=True) if x and not y)
    only_b = sum(1 for x, y in zip(a, b, strict=True) if y and not x)
    neither = n - both - only_a - only_b
    p_a, p_b = (both + only_a) / n, (both + only_b) / n
    low_a, high_a = defined(wilson_interval(both + only_a, n, z))
    low_b, high_b = defined(wilson_interval(both + only_b, n, z))
    margins = (both + only_a) * (only_b + neither) * (both + only_b) * (only_a + neither)
    cross = both * neither - only_a * only_b
    corrected = cross - n / 2 if cross > n / 2 else (cross if cross < 0 else 0.0)
    phi = corrected / math.sqrt(margins) if margins else 0.0
    difference = p_b - p_a
    below = math.sqrt(max(0.0, (p_b - low_b) ** 2 - 2 * phi * (p_b - low_b) * (high_a - p_a) + (high_a - p_a) ** 2))
    above = math.sqrt(max(0.0, (high_b - p_b) ** 2 - 2 * phi * (high_b - p_b) * (p_a - low_a) + (p_a - low_a) ** 2))
    return (max(-1.0, difference - below), min(1.0, difference + above))


def holm(p_values: Sequence[float]) -> list[float]:
    """Holm-Bonferroni adjusted p-values (same order as given)."""
    m = len(p_values)
    order = sorted(range(m), key=lambda i: p_values[i])
    adjusted = [0.0] * m
    running = 0.0
    for rank, i in enumerate(order):
        running = max(running, min(1.0, (m - rank) * p_values[i]))
        adjusted[i] = running
    return adjusted
