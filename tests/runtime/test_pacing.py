"""ServiceTime and RateLimiter: exact on a manual clock, and holding on the real one under load.

On the real clock only what load cannot change is asserted: never faster than the schedule, never
asking to sleep more than is owed, service overlapping across threads, the schedule's books
balancing. How close to the schedule a loaded machine gets is measured by
``tests/benchmarks/bench_fidelity.py``.
"""

from __future__ import annotations

import random
import threading
import time

import pytest

from bpmon.model.clock import ManualClock, SystemClock
from bpmon.runtime.pacing import RateLimiter, Schedule, ServiceTime


def _service(clock: ManualClock, cost_us: float) -> ServiceTime:
    return ServiceTime(cost_us, now=clock.now, sleep=clock.sleep)


# --- ServiceTime on a manual clock -----------------------------------------------------------


def test_total_sleep_is_records_times_cost() -> None:
    clock = ManualClock()
    service = _service(clock, 500)
    for _ in range(400):
        service.charge(1)
    service.settle()
    assert clock.slept == pytest.approx(0.2)
    assert clock.now() == pytest.approx(0.2)


def test_total_sleep_with_uneven_batches() -> None:
    clock = ManualClock()
    service = _service(clock, 120)
    rng = random.Random(7)
    batches = [rng.randint(0, 60) for _ in range(300)]
    for batch in batches:
        service.charge(batch)
    service.settle()
    assert clock.slept == pytest.approx(sum(batches) * 120e-6)


def test_sleeps_in_slices_not_per_record() -> None:
    clock = ManualClock()
    service = _service(clock, 500)
    for _ in range(400):
        service.charge(1)
    service.settle()
    # 0.2 s of service paid in slices of at least ~2 ms: at most 100 sleeps, far fewer than 400.
    assert 50 <= clock.sleeps <= 101


def test_time_spent_working_between_charges_counts_as_served() -> None:
    clock = ManualClock()
    service = _service(clock, 500)
    service.charge(4)  # 2 ms: served at once
    assert clock.now() == pytest.approx(0.002)
    clock.advance(0.001)  # the thread's own work or a wait for the GIL
    service.charge(4)  # another 2 ms, of which 1 ms already passed
    service.settle()
    assert clock.now() == pytest.approx(0.004)


def test_idle_period_builds_no_credit() -> None:
    clock = ManualClock()
    service = _service(clock, 500)
    service.charge(10)
    service.settle()
    clock.advance(1.0)  # idle: the task waited for input
    before = clock.now()
    service.charge(100)
    service.settle()
    assert clock.now() - before == pytest.approx(0.05)


def test_stall_without_settle_gives_at_most_the_bounded_lag() -> None:
    clock = ManualClock()
    service = ServiceTime(500, now=clock.now, sleep=clock.sleep, max_lag_s=0.005)
    service.charge(4)
    clock.advance(2.0)  # blocked somewhere the task loop did not announce
    before = clock.now()
    service.charge(100)
    service.settle()
    assert 0.045 - 1e-9 <= clock.now() - before <= 0.05 + 1e-9


def test_sparse_records_are_still_paid() -> None:
    clock = ManualClock()
    service = _service(clock, 500)
    for _ in range(10):
        service.charge(1)  # below one slice: no sleep yet
        service.settle()  # the task is about to wait for input
        clock.advance(1.0)
    assert clock.slept == pytest.approx(10 * 0.0005)


def test_outstanding_debt_is_visible_until_settled() -> None:
    clock = ManualClock()
    service = _service(clock, 300)
    service.charge(2)
    assert service.outstanding_s() == pytest.approx(0.0006)
    service.settle()
    assert service.outstanding_s() == 0.0


def test_zero_cost_never_sleeps() -> None:
    clock = ManualClock()
    service = _service(clock, 0)
    service.charge(1_000_000)
    service.settle()
    assert clock.sleeps == 0


def test_slow_subtask_multiplier_is_just_a_larger_cost() -> None:
    clock = ManualClock()
    service = _service(clock, 500 * 4.0)
    service.charge(100)
    service.settle()
    assert clock.now() == pytest.approx(0.2)


def test_negative_cost_is_rejected() -> None:
    with pytest.raises(ValueError, match="cost_us"):
        ServiceTime(-1)


# --- ServiceTime on the real clock -----------------------------------------------------------


def _serve_400_records() -> tuple[float, float]:
    """Serve 400 records of 500 us on the real clock: (elapsed, total sleep asked for)."""
    asked = [0.0]

    def sleep(seconds: float) -> None:
        asked[0] += seconds
        time.sleep(seconds)

    service = ServiceTime(500, now=SystemClock.now, sleep=sleep)
    start = time.monotonic()
    for _ in range(400):
        service.charge(1)
    service.settle()
    return time.monotonic() - start, asked[0]


def test_real_clock_service_time() -> None:
    """Never faster than 400 x 500 us; never asks to sleep for more than it owes (a late
    wake-up counts as service already given)."""
    elapsed, asked = _serve_400_records()
    assert elapsed >= 0.2 - 1e-6
    assert asked <= 0.2 + 1e-6


def test_real_clock_service_time_overlaps_across_20_threads() -> None:
    """Serving sleeps without holding anything another thread needs: 20 threads together take
    less time than one after the other would at the very least (20 x 0.2 s)."""
    results: list[tuple[float, float]] = []

    def run() -> None:
        results.append(_serve_400_records())

    threads = [threading.Thread(target=run) for _ in range(20)]
    start = time.monotonic()
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    wall = time.monotonic() - start
    assert len(results) == 20
    assert min(elapsed for elapsed, _ in results) >= 0.2 - 1e-6  # never faster than the rate
    assert max(asked for _, asked in results) <= 0.2 + 1e-6
    assert wall < 20 * 0.2


# --- RateLimiter ------------------------------------------------------------------------------


def test_rate_holds_exactly_over_ten_seconds_of_uneven_polling() -> None:
    clock = ManualClock()
    limiter = RateLimiter(1000, now=clock.now)
    rng = random.Random(3)
    sent = 0
    elapsed = 0.0
    while elapsed < 10.0:
        sent += limiter.permits(1_000_000)
        # the schedule is absolute: records due by `elapsed` are those at 0, 1 ms, 2 ms, ...
        assert elapsed * 1000 <= sent <= elapsed * 1000 + 1.000001
        step = rng.uniform(0.0, 0.007)
        clock.advance(step)
        elapsed += step
    sent += limiter.permits(1_000_000)
    assert 10.0 <= elapsed < 10.007
    assert elapsed * 1000 <= sent <= elapsed * 1000 + 1.000001


def test_rate_holds_when_sleeping_until_next() -> None:
    clock = ManualClock()
    limiter = RateLimiter(2500, now=clock.now)
    sent = 0
    while clock.now() < 10.0:
        sent += limiter.permits(64)
        clock.sleep(limiter.time_until_next())
    sent += limiter.permits(64)
    assert sent in (25_000, 25_001)
    assert limiter.released == sent


def test_no_burst_after_a_stall() -> None:
    clock = ManualClock()
    limiter = RateLimiter(1000, now=clock.now, max_catchup_s=0.01)
    for _ in range(1000):
        limiter.permits(100)
        clock.advance(0.001)
    clock.advance(2.0)  # the source was backpressured for 2 s
    assert limiter.permits(1_000_000) <= 10
    after = 0
    for _ in range(1000):
        clock.advance(0.001)
        after += limiter.permits(1_000_000)
    assert 999 <= after <= 1001


def test_permits_never_exceed_what_was_asked() -> None:
    clock = ManualClock()
    limiter = RateLimiter(1000, now=clock.now)
    limiter.permits(1)
    clock.advance(0.005)
    assert limiter.permits(2) == 2
    assert limiter.permits(100) == 3
    assert limiter.permits(100) == 0


def test_time_until_next() -> None:
    clock = ManualClock()
    limiter = RateLimiter(100, now=clock.now)
    assert limiter.time_until_next() == 0.0
    assert limiter.permits(10) == 1
    assert limiter.time_until_next() == pytest.approx(0.01)
    clock.advance(0.004)
    assert limiter.time_until_next() == pytest.approx(0.006)


def test_fractional_rate() -> None:
    clock = ManualClock()
    limiter = RateLimiter(0.5, now=clock.now)
    assert limiter.permits(10) == 1
    clock.advance(1.9)
    assert limiter.permits(10) == 0
    clock.advance(0.1)
    assert limiter.permits(10) == 1


def test_zero_rate_is_unlimited() -> None:
    clock = ManualClock()
    limiter = RateLimiter(0, now=clock.now)
    assert limiter.permits(500) == 500
    assert limiter.permits(500) == 500
    assert limiter.time_until_next() == 0.0
    assert limiter.permits(0) == 0


@pytest.mark.parametrize("rate", [-1.0, float("inf"), float("nan")])
def test_invalid_rate_is_rejected(rate: float) -> None:
    with pytest.raises(ValueError, match="rate"):
        RateLimiter(rate)


def test_forgiven_records_balance_the_schedule() -> None:
    clock = ManualClock()
    limiter = RateLimiter(1000, now=clock.now, max_catchup_s=0.01)
    assert limiter.schedule() == Schedule(0.0, 1000, 0, 0, 0)  # not started yet
    limiter.permits(5)  # record 0 is due at once
    clock.advance(2.0)  # a 2 s stall: 2,000 records due, 10 may still catch up
    reading = limiter.schedule()
    assert reading is not None
    assert (reading.due, reading.released, reading.forgiven) == (2001, 1, 0)
    assert reading.behind == 2000
    assert reading.lag_s == pytest.approx(2.0)
    assert limiter.permits(1_000_000) == 10
    after = limiter.schedule()
    assert after is not None
    assert (after.released, after.forgiven, after.behind) == (11, 1990, 0)
    assert after.due == after.released + after.forgiven + after.behind
    assert limiter.forgiven == 1990


def test_an_unlimited_source_has_no_schedule() -> None:
    assert RateLimiter(0).schedule() is None


def test_real_clock_rate() -> None:
    """On the real clock, however late the wake-ups: never ahead of the schedule, and each
    record the schedule called for was released or forgiven (none lost, none invented)."""
    clock = SystemClock()
    limiter = RateLimiter(2000, now=clock.now)
    sent = 0
    start = time.monotonic()
    while time.monotonic() - start < 0.25:
        sent += limiter.permits(1000)
        clock.sleep(limiter.time_until_next())
    called = clock.now()
    sent += limiter.permits(1_000_000)
    reading = limiter.schedule()
    elapsed = time.monotonic() - start
    assert reading is not None
    assert 0 < sent <= 2000 * elapsed + 1
    assert sent == reading.released
    # a generous permits() pays everything owed: only records due since that call are behind
    assert reading.behind <= 1 + 2000 * (reading.at - called)
    assert reading.due == reading.released + reading.forgiven + reading.behind


def test_min_wait_spaces_wake_ups_without_moving_the_schedule() -> None:
    clock = ManualClock()
    limiter = RateLimiter(100_000, now=clock.now, min_wait_s=0.001)
    sent = limiter.permits(64)
    assert limiter.time_until_next() == pytest.approx(0.001)  # the next record: due in 10 us
    wakes = 0
    while clock.now() < 1.0:
        clock.sleep(limiter.time_until_next())
        wakes += 1
        while (granted := limiter.permits(64)) > 0:
            sent += granted
    assert wakes <= 1001  # not one per record: one per millisecond at most
    reading = limiter.schedule()
    assert reading is not None
    assert sent == reading.due and reading.forgiven == 0  # every record due was released
