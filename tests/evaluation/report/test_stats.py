"""Wilson intervals, Cohen's kappa and the exact McNemar test on hand-computed examples."""

from __future__ import annotations

import pytest

from evaluation.report.stats import Confusion, cohen_kappa, confusion, mcnemar_exact, wilson_interval


def test_wilson_interval_known_values() -> None:
    assert wilson_interval(0, 10) == pytest.approx((0.0, 0.2775), abs=1e-4)
    assert wilson_interval(5, 10) == pytest.approx((0.2366, 0.7634), abs=1e-4)
    # No unit, no interval: (0.0, 0.0) was written as a certain 0% beside a rate that is n/a.
    assert wilson_interval(0, 0) is None
    # Exact ends (rounding once left 0/3's lower bound a hair above 0: a negative error bar).
    assert all(wilson_interval(0, n)[0] == 0.0 and wilson_interval(n, n)[1] == 1.0 for n in range(1, 200))


def test_confusion_and_kappa_by_hand() -> None:
    #   judge: S S S S F F F F F F
    #   human: S S S F S F F F F F
    judge = [True] * 4 + [False] * 6
    human = [True, True, True, False, True, False, False, False, False, False]
    table = confusion(judge, human)
    assert table == Confusion(true_success=3, false_success=1, false_failure=1, true_failure=5)
    assert table.agreement == pytest.approx(0.8)
    # p_o = 0.8; p_e = 0.4*0.4 + 0.6*0.6 = 0.52; kappa = 0.28/0.48
    assert cohen_kappa(table) == pytest.approx(0.28 / 0.48)


def test_kappa_is_undefined_when_everyone_always_agrees_on_one_class() -> None:
    assert cohen_kappa(confusion([True, True], [True, True])) is None
    assert cohen_kappa(Confusion()) is None


def test_mcnemar_exact() -> None:
    # 10 discordant pairs all favouring A: p = 2 * 0.5**10
    result = mcnemar_exact([True] * 10 + [True, False], [False] * 10 + [True, False])
    assert (result.only_a, result.only_b) == (10, 0)
    assert result.p_value == pytest.approx(2 * 0.5**10)
    # 2 vs 1 discordant: p = 1 (no evidence)
    close = mcnemar_exact([True, True, False, True], [False, False, True, True])
    assert (close.only_a, close.only_b) == (2, 1) and close.p_value == pytest.approx(1.0)
    assert mcnemar_exact([True], [True]).p_value == 1.0


def test_pass_at_k_and_pass_hat_k_match_their_definitions() -> None:
    import itertools  # noqa: PLC0415

    from evaluation.report.stats import pass_at_k, pass_hat_k  # noqa: PLC0415

    # Brute force over every k-subset of n attempts with c successes: the estimators are exact means.
    for n in range(1, 7):
        for c in range(n + 1):
            attempts = [True] * c + [False] * (n - c)
            for k in range(1, n + 1):
                subsets = list(itertools.combinations(attempts, k))
                assert pass_at_k(n, c, k) == pytest.approx(sum(any(s) for s in subsets) / len(subsets))
                assert pass_hat_k(n, c, k) == pytest.approx(sum(all(s) for s in subsets) / len(subsets))
    with pytest.raises(ValueError):
        pass_at_k(3, 1, 4)


def _paired(both: int, only_a: int, only_b: int, neither: int) -> tuple[list[bool], list[bool]]:
    a = [True] * both + [True] * only_a + [False] * only_b + [False] * neither
    b = [True] * both + [False] * only_a + [True] * only_b + [False] * neither
    return a, b


def test_paired_difference_interval_and_holm() -> None:
    from evaluation.report.stats import holm, paired_difference_interval  # noqa: PLC0415

    low, high = paired_difference_interval(*_paired(10, 2, 8, 20))
    assert low < 6 / 40 < high
    # Every discordant pair one way: a real interval, not the Wald one's single point.
    low, high = paired_difference_interval(*_paired(0, 5, 0, 0))
    assert low == -1.0 and -1.0 < high < 0.0
    low, high = paired_difference_interval(*_paired(0, 0, 5, 0))
    assert 0.0 < low < 1.0 and high == 1.0
    # Swapping the runs negates the interval.
    a, b = _paired(7, 3, 6, 14)
    forward, backward = paired_difference_interval(a, b), paired_difference_interval(b, a)
    assert forward == pytest.approx((-backward[1], -backward[0]))
    # Large samples: close to the Wald interval from the discordant counts.
    both, only_a, only_b, neither = 1000, 200, 400, 2400
    n = both + only_a + only_b + neither
    d = (only_b - only_a) / n
    half = 1.959963984540054 * (only_a + only_b - (only_b - only_a) ** 2 / n) ** 0.5 / n
    assert paired_difference_interval(*_paired(both, only_a, only_b, neither)) == pytest.approx((d - half, d + half), abs=2e-3)
    assert paired_difference_interval([], []) is None  # no pairs: nothing to bound (was (0.0, 0.0))
    low, high = paired_difference_interval(*_paired(3, 0, 0, 7))
    assert low < 0.0 < high
    assert holm([0.01, 0.04, 0.03]) == pytest.approx([0.03, 0.06, 0.06])


def test_the_interval_of_pass_at_1_over_one_task_is_the_whole_range() -> None:
    from evaluation.report.stats import task_rate_interval  # noqa: PLC0415

    assert task_rate_interval([(1, 2)]) == (0.0, 1.0)  # was (0.5, 0.5): certainty from one task
    low, high = task_rate_interval([(1, 4), (2, 4), (2, 4), (3, 4)])
    assert 0.0 < low < 0.5 < high < 1.0
    assert task_rate_interval([]) is None  # no task, no mean (was (0.0, 0.0): "n/a (95% CI 0.0%-0.0%)")
    assert task_rate_interval([(0, 0), (0, 0)]) is None  # tasks never judged are no units


@pytest.mark.parametrize(("successes", "units"), [(0, 24), (3, 24), (2, 72)])
def test_pass_at_1_over_tasks_that_do_not_spread_is_no_narrower_than_its_units_allow(successes: int, units: int) -> None:
    # 24 tasks at the same k of 3: a normal interval around the mean of the tasks' rates had zero
    # width ("0.0% (95% CI 0.0%-0.0%)", "66.7%-66.7%") where one repeat alone read 0.0%-13.8%. All
    # 0 or all 3 of 3 is what tasks decided before they start give: the 24 tasks are the units (the
    # first fix counted all 72 attempts, 0.0%-5.1%); all 2 of 3 shows attempts differing: 72 units.
    from evaluation.report.stats import task_rate_interval, wilson_interval  # noqa: PLC0415

    low, high = task_rate_interval([(successes, 3)] * 24)
    reference_low, reference_high = wilson_interval(successes * units // 3, units)
    assert low <= reference_low + 1e-12 and high >= reference_high - 1e-12
    assert high - low <= (reference_high - reference_low) * 1.15  # only Student's t for 23 degrees of freedom wider


def test_pass_at_1_of_a_single_run_is_about_the_wilson_interval_over_its_tasks() -> None:
    from evaluation.report.stats import task_rate_interval, wilson_interval  # noqa: PLC0415

    low, high = task_rate_interval([(1, 1)] * 7 + [(0, 1)] * 13)
    wilson_low, wilson_high = wilson_interval(7, 20)
    assert low < wilson_low < wilson_high < high  # Student's t for 19 degrees of freedom
    assert high - low < (wilson_high - wilson_low) * 1.1


def test_repeats_of_tasks_that_always_or_never_succeed_count_as_one_attempt_each() -> None:
    # A task solved every time (or never) teaches nothing more from its second attempt: 10 tasks
    # each run 5 times, 4 always solved, are 10 units, not 50.
    from evaluation.report.stats import task_rate_interval  # noqa: PLC0415

    assert task_rate_interval([(5, 5)] * 4 + [(0, 5)] * 6) == pytest.approx(task_rate_interval([(1, 1)] * 4 + [(0, 1)] * 6))
    assert task_rate_interval([(0, 5)] * 10) == pytest.approx(task_rate_interval([(0, 1)] * 10))


def test_a_paired_rate_difference_reduces_to_newcombe_on_single_runs_and_stays_wide_without_spread() -> None:
    from evaluation.report.stats import paired_rate_difference_interval  # noqa: PLC0415

    a = [(1, 1)] * 6 + [(0, 1)] * 14
    b = [(1, 1)] * 12 + [(0, 1)] * 8
    low, high = paired_rate_difference_interval(a, b)
    assert 0.0 < low < 0.3 < high  # B solved every task A did and 6 more
    # Every task at 0 of 3 in A and 3 of 3 in B: +100 pt, but not "+100 to +100".
    low, high = paired_rate_difference_interval([(0, 3)] * 10, [(3, 3)] * 10)
    assert low < 0.9 and high == 1.0
    # The same rate on every task: no difference, but not "0 to 0" (the correlation, 1, is
    # continuity-corrected as Newcombe's phi is for single runs).
    same = [(3, 3)] * 12 + [(0, 3)] * 12
    low, high = paired_rate_difference_interval(same, same)
    assert low < -0.05 and high > 0.05 and low == pytest.approx(-high)
    assert paired_rate_difference_interval([(0, 0)], [(1, 1)]) is None  # no pair with attempts in both


def test_the_sign_flip_test_is_exact_for_few_tasks_and_repeatable_for_many() -> None:
    from evaluation.report.stats import sign_flip_p_value  # noqa: PLC0415

    assert sign_flip_p_value([0.0, 0.0]) == 1.0
    assert sign_flip_p_value([1 / 3] * 5) == pytest.approx(2 / 32)  # only all + or all - are as extreme
    assert sign_flip_p_value([1.0, -1.0, 0.5]) == pytest.approx(1.0)
    many = [0.1 * (i % 7) - 0.2 for i in range(40)]
    assert sign_flip_p_value(many) == sign_flip_p_value(list(many))
    assert 0.0 < sign_flip_p_value(many) < 1.0


def test_one_more_success_never_lowers_pass_at_1s_upper_bound() -> None:
    # Counting every attempt once any task was in between: 24 tasks at 0/3 read 0%-15.1%, and with
    # one of them at 1/3 instead, 0.2%-8.0%.
    from evaluation.report.stats import task_rate_interval  # noqa: PLC0415

    never = task_rate_interval([(0, 3)] * 24)
    once = task_rate_interval([(0, 3)] * 23 + [(1, 3)])
    assert never is not None and once is not None and once[1] >= never[1] and once[0] >= never[0]
    always = task_rate_interval([(3, 3)] * 24)
    nearly = task_rate_interval([(3, 3)] * 23 + [(2, 3)])
    assert always is not None and nearly is not None and nearly[0] <= always[0] and nearly[1] <= always[1]
