"""The per-call token bucket of ``server.relay.rate``, on a clock the test gives it."""

from __future__ import annotations

import pytest

from server.relay.rate import Rate


def test_a_burst_passes_at_once_then_one_per_interval() -> None:
    rate = Rate(3, 10.0)
    assert [rate.take(100.0) for _ in range(4)] == [True, True, True, False]
    assert rate.delay(100.0) == pytest.approx(0.1)
    assert not rate.take(100.05)
    assert rate.take(100.1)
    assert not rate.take(100.1)


def test_a_quiet_call_gets_its_burst_back_but_no_more() -> None:
    rate = Rate(2, 10.0)
    assert rate.take(0.0) and rate.take(0.0) and not rate.take(0.0)
    assert rate.delay(60.0) == 0.0
    assert [rate.take(60.0) for _ in range(3)] == [True, True, False]


def test_spending_past_the_rate_does_not_run_up_a_debt() -> None:
    rate = Rate(1, 10.0)
    assert rate.take(0.0)
    rate.spend(0.0)  # a notification written early (before a result)
    rate.spend(0.0)
    assert rate.delay(0.0) == pytest.approx(0.1)
    assert rate.take(0.1)
