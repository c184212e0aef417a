"""Noisy costs (``cost_cv``): the draws against the log-normal's arithmetic, and the services
(``ServiceTime``, a chain's ``MemberService``) paying exactly the drawn costs on a manual clock.

A log-normal with ``sigma² = ln(1 + cv²)`` and ``mu = ln(mean) - sigma²/2`` has mean ``mean`` and
coefficient of variation ``cv``. Over 200,000 seeded draws the sample mean's standard error is
``cv / sqrt(200,000)`` (0.22% at cv 1), and the sample cv's is under 1% at cv 1 (the
log-normal's kurtosis is 38 there): the tolerances are several times those.
"""

from __future__ import annotations

import math
import random
import statistics

import pytest
from hypothesis import given
from hypothesis import strategies as st

from bpmon.model.clock import ManualClock
from bpmon.runtime.chain import MemberService
from bpmon.runtime.noise import CostNoise, cost_noise
from bpmon.runtime.pacing import ServiceTime

DRAWS = 200_000


def _draws(cost_s: float, cv: float, seed: int = 1) -> list[float]:
    noise = CostNoise(cost_s, cv, random.Random(seed))
    return [noise.seconds(1) for _ in range(DRAWS)]


@pytest.mark.parametrize("cv", [0.3, 1.0])
def test_the_mean_cost_is_kept_and_the_spread_is_the_cv(cv: float) -> None:
    draws = _draws(500e-6, cv)
    mean = statistics.fmean(draws)
    assert mean == pytest.approx(500e-6, rel=0.015)
    assert statistics.pstdev(draws) / mean == pytest.approx(cv, rel=0.05)
    assert min(draws) > 0


def test_the_median_is_below_the_mean_as_a_log_normal_s() -> None:
    # median = exp(mu) = mean / sqrt(1 + cv²): 500 / sqrt(2) = 354 us at cv 1
    draws = sorted(_draws(500e-6, 1.0))
    assert draws[DRAWS // 2] == pytest.approx(500e-6 / math.sqrt(2), rel=0.02)


def test_a_charge_of_n_records_is_the_sum_of_n_draws() -> None:
    one_by_one = CostNoise(200e-6, 0.5, random.Random(9))
    at_once = CostNoise(200e-6, 0.5, random.Random(9))
    singles = sum(one_by_one.seconds(1) for _ in range(37))
    assert at_once.seconds(37) == pytest.approx(singles)
    assert at_once.seconds(0) == 0


def test_costs_repeat_for_a_seed_and_differ_between_subtasks() -> None:
    def first(seed: int, index: int) -> list[float]:
        noise = cost_noise(300, 0.8, seed, "enrich", index)
        assert noise is not None
        return [noise.seconds(1) for _ in range(20)]

    assert first(5, 0) == first(5, 0)
    assert first(5, 0) != first(5, 1)
    assert first(5, 0) != first(6, 0)


def test_constant_costs_have_no_noise() -> None:
    assert cost_noise(300, 0.0, 1, "enrich", 0) is None
    assert cost_noise(0, 0.5, 1, "enrich", 0) is None


@given(st.floats(1e-7, 0.1), st.floats(0.01, 3.0), st.integers(0, 300), st.integers(0, 2**32))
def test_any_charge_costs_a_positive_finite_time(
    cost_s: float, cv: float, records: int, seed: int
) -> None:
    spent = CostNoise(cost_s, cv, random.Random(seed)).seconds(records)
    assert math.isfinite(spent)
    assert (spent > 0) == (records > 0)


def test_a_noisy_service_sleeps_exactly_the_drawn_costs() -> None:
    clock = ManualClock()
    noise = CostNoise(500e-6, 1.0, random.Random(4))
    twin = CostNoise(500e-6, 1.0, random.Random(4))
    service = ServiceTime(500, now=clock.now, sleep=clock.sleep, noise=noise)
    sizes = random.Random(2)
    batches = [sizes.randint(1, 40) for _ in range(500)]
    for batch in batches:
        service.charge(batch)
    service.settle()
    assert clock.slept == pytest.approx(sum(twin.seconds(b) for b in batches))
    # and on average the cost per record is cost_us: 500 x ~20 records, sd of the mean ~1.4%
    assert clock.slept / sum(batches) == pytest.approx(500e-6, rel=0.08)


def test_a_noisy_chain_member_serves_the_drawn_costs() -> None:
    clock = ManualClock()
    member = MemberService(800, clock.now, clock.sleep, CostNoise(800e-6, 0.5, random.Random(11)))
    twin = CostNoise(800e-6, 0.5, random.Random(11))
    for _ in range(200):
        member.charge(10)
    assert clock.slept == pytest.approx(sum(twin.seconds(10) for _ in range(200)))


def test_invalid_noise_is_refused() -> None:
    with pytest.raises(ValueError, match="must be > 0"):
        CostNoise(0.0, 0.5, random.Random(1))
