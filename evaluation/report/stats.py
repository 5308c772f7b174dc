"""Small statistics for judged runs: Wilson intervals (also over repeated runs), Cohen's kappa, exact
McNemar, paired differences and a paired permutation test."""

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
    return _wilson(successes / n, n, z)


def _wilson(p: float, n: float, z: float = Z_95) -> tuple[float, float]:
    """The Wilson interval of a proportion ``p`` observed over ``n`` units (``n`` may be an
    effective size, not a whole number)."""
    denominator = 1 + z * z / n
    centre = (p + z * z / (2 * n)) / denominator
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / denominator
    # Exact at the ends: rounding leaves 0/n's lower bound at ~1e-17, which a plot's error bar
    # below a 0% point turns into a negative length.
    low = 0.0 if p <= 0 else max(0.0, centre - half)
    high = 1.0 if p >= 1 else min(1.0, centre + half)
    return (low, high)


def effective_size(counts: Sequence[tuple[int, int]]) -> float:
    """Kish's effective sample size of the mean of per-task success rates, from ``(successes,
    attempts)`` per task (each with at least one attempt).

    Attempts of one task are correlated (a task an agent cannot do fails every time), so the mean's
    variance is the spread of the *tasks'* rates over their number; the effective size is the number
    of independent attempts with that variance, p(1-p) / var. It is at most the number of units the
    run can show independent: a task that always or never succeeded shows nothing of its attempts
    differing, so it is one unit; a task in between is as many as its attempts (a design effect of
    at least 1 over those units, as Korn and Graubard take it over attempts). So a run that never
    succeeds is as many units as it has tasks, 24 tasks all at 2/3 are 72, and one success more can
    only widen the interval's reach upwards (counting every attempt once any task was in between, a
    run of 23 tasks at 0/3 and one at 1/3 read 0.2%-8.0%, 24 at 0/3 0%-15.1%). For one run (rates 0
    or 1) it is the number of tasks.
    """
    rates = [successes / attempts for successes, attempts in counts]
    units = sum(1 if successes in (0, attempts) else attempts for successes, attempts in counts)
    k = len(rates)
    mean = sum(rates) / k
    variance = sum((rate - mean) ** 2 for rate in rates) / k / k
    if variance <= 0:
        return float(units)
    return min(float(units), mean * (1 - mean) / variance)


def _small_sample_size(size: float, tasks: int, z: float = Z_95) -> float:
    """``size`` shrunk for the few tasks its variance rests on: Korn and Graubard's degrees-of-freedom
    adjustment, size x (z / t_(tasks-1))^2 (an interval over 10 tasks is as wide as Student's t with
    9 degrees of freedom makes it, not the normal's)."""
    from scipy.special import stdtrit  # noqa: PLC0415 -- imported here: scipy costs a second at import

    t = float(stdtrit(tasks - 1, 1 - (1 - math.erf(z / math.sqrt(2))) / 2))
    return size * (z / t) ** 2


def task_rate_interval(counts: Sequence[tuple[int, int]], z: float = Z_95) -> tuple[float, float] | None:
    """95% interval of the mean per-task success rate (pass@1) from ``(successes, attempts)`` per task.

    The Wilson interval at the Kish effective size (:func:`effective_size`) with Korn and Graubard's
    degrees-of-freedom adjustment (:func:`_small_sample_size`): tasks, not attempts, are the units
    where rates spread, and it never collapses to a point where they do not (a normal interval
    around the mean of 24 tasks all at 0/3 read "0.0%-0.0%"). Tasks without an attempt are left out;
    ``None`` when none is left. One task says nothing of the spread between tasks: the whole range.
    """
    held = [(successes, attempts) for successes, attempts in counts if attempts > 0]
    if not held:
        return None
    if len(held) == 1:
        return (0.0, 1.0)
    mean = sum(successes / attempts for successes, attempts in held) / len(held)
    return _wilson(mean, _small_sample_size(effective_size(held), len(held), z), z)


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


def fleiss_kappa(votes: Sequence[Sequence[bool]]) -> float | None:
    """Fleiss' kappa of yes/no votes, one row per item, every row the same raters: agreement of
    all raters beyond chance. ``None`` when undefined (no item, fewer than two raters, or every vote
    the same, where chance agreement is 1)."""
    if not votes:
        return None
    m = len(votes[0])
    if m < 2 or any(len(row) != m for row in votes):
        return None
    yes_share = sum(sum(row) for row in votes) / (len(votes) * m)
    expected = yes_share**2 + (1 - yes_share) ** 2
    if math.isclose(expected, 1.0):
        return None
    observed = sum(
        (yes * (yes - 1) + (m - yes) * (m - yes - 1)) / (m * (m - 1)) for yes in (sum(row) for row in votes)
    ) / len(votes)
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


def paired_rate_difference_interval(
    a: Sequence[tuple[int, int]], b: Sequence[tuple[int, int]], z: float = Z_95
) -> tuple[float, float] | None:
    """95% interval of pass@1(B) - pass@1(A) over paired tasks, from ``(successes, attempts)`` per task.

    Newcombe's method 10 (as :func:`paired_difference_interval` for single runs), with each run's
    interval :func:`task_rate_interval` (Wilson at the Kish effective size, with the degrees-of-freedom
    adjustment: for 0/1 outcomes a little wider than :func:`paired_difference_interval`) and the
    correlation that of the tasks' rates, continuity-corrected as his. Pairs where either run has no attempt are left out;
    ``None`` when none is left.
    """
    pairs = [(x, y) for x, y in zip(a, b, strict=True) if x[1] > 0 and y[1] > 0]
    if not pairs:
        return None
    rates_a = [s / n for (s, n), _ in pairs]
    rates_b = [s / n for _, (s, n) in pairs]
    k = len(pairs)
    p_a, p_b = sum(rates_a) / k, sum(rates_b) / k
    if k == 1:
        return (max(-1.0, -p_a), min(1.0, 1.0 - p_a))  # one task: whatever B's rate could be
    low_a, high_a = defined(task_rate_interval([x for x, _ in pairs], z))
    low_b, high_b = defined(task_rate_interval([y for _, y in pairs], z))
    spread_a = sum((x - p_a) ** 2 for x in rates_a) / k
    spread_b = sum((y - p_b) ** 2 for y in rates_b) / k
    # Newcombe's continuity correction of the correlation, on the rates' covariance: for single runs
    # (rates 0 or 1) it is his corrected phi; without it two runs with the same rate on every task
    # had correlation 1 and the interval (0, 0).
    together = sum((x - p_a) * (y - p_b) for x, y in zip(rates_a, rates_b, strict=True)) / k
    corrected = together - 1 / (2 * k) if together > 1 / (2 * k) else (together if together < 0 else 0.0)
    rho = corrected / math.sqrt(spread_a * spread_b) if spread_a > 0 and spread_b > 0 else 0.0
    difference = p_b - p_a
    below = math.sqrt(max(0.0, (p_b - low_b) ** 2 - 2 * rho * (p_b - low_b) * (high_a - p_a) + (high_a - p_a) ** 2))
    above = math.sqrt(max(0.0, (high_b - p_b) ** 2 - 2 * rho * (high_b - p_b) * (p_a - low_a) + (p_a - low_a) ** 2))
    return (max(-1.0, difference - below), min(1.0, difference + above))


#: Sign patterns a permutation test enumerates before it samples instead (2^16: exact up to 16
#: tasks that differ).
_EXACT_FLIPS = 16
_SAMPLED_FLIPS = 20_000


def sign_flip_p_value(differences: Sequence[float]) -> float:
    """Two-sided p-value of a paired permutation test that the mean difference is 0.

    Under the null each task's difference is as likely negated: the p-value is the share of sign
    patterns whose mean is at least as far from 0 as the observed one. Exact up to
    2^:data:`_EXACT_FLIPS` patterns, else :data:`_SAMPLED_FLIPS` patterns drawn with a fixed seed
    (the same input always gives the same p-value). Zero differences carry no sign.
    """
    import random  # noqa: PLC0415 -- only the sampled case needs it

    moved = [d for d in differences if d != 0]
    if not moved:
        return 1.0
    observed = abs(math.fsum(moved)) - 1e-12  # a pattern as extreme as the observed counts
    if len(moved) <= _EXACT_FLIPS:
        extreme = sum(
            1
            for pattern in range(2 ** len(moved))
            if abs(math.fsum(d if pattern >> i & 1 else -d for i, d in enumerate(moved))) >= observed
        )
        return extreme / 2 ** len(moved)
    rng = random.Random(0)
    extreme = sum(
        1 for _ in range(_SAMPLED_FLIPS) if abs(math.fsum(d if rng.random() < 0.5 else -d for d in moved)) >= observed
    )
    return (extreme + 1) / (_SAMPLED_FLIPS + 1)


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
