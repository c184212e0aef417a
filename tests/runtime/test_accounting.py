"""TimeAccount and RateMeter: exact values for scripted sequences, sliding, and concurrent reads."""

from __future__ import annotations

import random
import sys
import threading
import time

import pytest

from bpmon.model.clock import ManualClock
from bpmon.runtime.accounting import (
    AccountTotals,
    RateMeter,
    State,
    TimeAccount,
    TimeShares,
    shares_between,
)

IDLE, SOFT, HARD, BUSY = State.IDLE, State.SOFT_BP, State.HARD_BP, State.BUSY


def _account(clock: ManualClock, window_s: float = 1.0, initial: State = IDLE) -> TimeAccount:
    return TimeAccount(now=clock.now, window_s=window_s, slot_s=0.25, initial=initial)


def _play(clock: ManualClock, account: TimeAccount, script: list[tuple[State, float]]) -> None:
    """Enter each state for its duration, in order."""
    for state, seconds in script:
        account.mark(state)
        clock.advance(seconds)


def _total(shares: TimeShares) -> float:
    return shares.idle_ms_per_s + shares.backpressured_ms_per_s + shares.busy_ms_per_s


def test_busy_then_idle_in_one_window() -> None:
    clock = ManualClock()
    account = _account(clock)
    _play(clock, account, [(BUSY, 0.3), (IDLE, 0.7)])
    shares = account.shares()
    assert shares.busy_ms_per_s == pytest.approx(300)
    assert shares.idle_ms_per_s == pytest.approx(700)
    assert shares.backpressured_ms_per_s == pytest.approx(0)
    assert shares.window_s == pytest.approx(1.0)


def test_ongoing_period_counts_when_reading() -> None:
    clock = ManualClock()
    account = _account(clock)
    _play(clock, account, [(IDLE, 0.4), (HARD, 0.6)])  # still hard backpressured now
    assert account.shares().hard_backpressured_ms_per_s == pytest.approx(600)
    assert account.shares().max_hard_ms == pytest.approx(600)
    clock.advance(0.2)  # no mark: the same period goes on
    assert account.shares().hard_backpressured_ms_per_s == pytest.approx(800)
    assert account.shares().idle_ms_per_s == pytest.approx(200)
    assert account.shares().max_hard_ms == pytest.approx(800)


def test_young_account_averages_over_its_age() -> None:
    clock = ManualClock()
    account = TimeAccount(now=clock.now)  # default 3 s window
    _play(clock, account, [(BUSY, 0.25), (SOFT, 0.25)])
    shares = account.shares()
    assert shares.window_s == pytest.approx(0.5)
    assert shares.soft_backpressured_ms_per_s == pytest.approx(500)
    assert shares.busy_ms_per_s == pytest.approx(500)


def test_new_account_starts_idle() -> None:
    clock = ManualClock()
    account = TimeAccount(now=clock.now)
    clock.advance(1.0)
    assert account.state is IDLE
    assert account.shares().idle_ms_per_s == pytest.approx(1000)
    assert account.shares().busy_ms_per_s == pytest.approx(0)


def test_soft_and_hard_are_separate_and_add_up() -> None:
    clock = ManualClock()
    account = _account(clock)
    _play(clock, account, [(SOFT, 0.1), (BUSY, 0.05), (SOFT, 0.3), (HARD, 0.2), (BUSY, 0.35)])
    shares = account.shares()
    assert shares.soft_backpressured_ms_per_s == pytest.approx(400)
    assert shares.hard_backpressured_ms_per_s == pytest.approx(200)
    assert shares.backpressured_ms_per_s == pytest.approx(600)
    assert shares.busy_ms_per_s == pytest.approx(400)
    assert shares.max_soft_ms == pytest.approx(300)
    assert shares.max_hard_ms == pytest.approx(200)


def test_repeating_the_current_state_changes_nothing() -> None:
    clock = ManualClock()
    account = _account(clock)
    account.mark(SOFT)
    for _ in range(10):
        clock.advance(0.05)
        account.mark(SOFT)  # one long period, not ten short ones
    account.mark(BUSY)
    clock.advance(0.5)
    assert account.shares().max_soft_ms == pytest.approx(500)
    assert account.shares().soft_backpressured_ms_per_s == pytest.approx(500)


def test_window_slides_and_forgets() -> None:
    clock = ManualClock()
    account = _account(clock)
    _play(clock, account, [(HARD, 1.0), (IDLE, 0.5)])
    half = account.shares()  # window [0.5, 1.5]
    assert half.hard_backpressured_ms_per_s == pytest.approx(500)
    assert half.idle_ms_per_s == pytest.approx(500)
    assert half.max_hard_ms == pytest.approx(1000)
    clock.advance(1.0)  # window [1.5, 2.5]: the hard period is gone
    later = account.shares()
    assert later.hard_backpressured_ms_per_s == pytest.approx(0)
    assert later.idle_ms_per_s == pytest.approx(1000)
    assert later.max_hard_ms == pytest.approx(0)


def test_long_silence_then_activity() -> None:
    clock = ManualClock()
    account = _account(clock)
    _play(clock, account, [(SOFT, 100.0), (BUSY, 0.25)])  # 400 slots pass without a mark
    shares = account.shares()  # window [99.25, 100.25]
    assert shares.soft_backpressured_ms_per_s == pytest.approx(750)
    assert shares.busy_ms_per_s == pytest.approx(250)


def _expected_ms(
    periods: list[tuple[State, float, float]], state: State, t: float, w: float
) -> float:
    """Brute force: the share of [t - w, t] spent in ``state``, in ms per second."""
    far = t - w
    inside = sum(max(0.0, min(end, t) - max(start, far)) for s, start, end in periods if s == state)
    return 1000.0 * inside / w


def test_random_sequence_matches_brute_force() -> None:
    rng = random.Random(11)
    clock = ManualClock()
    window = 3.0
    account = TimeAccount(now=clock.now, window_s=window, slot_s=0.25, initial=BUSY)
    periods: list[tuple[State, float, float]] = []
    state, start = BUSY, 0.0
    for step in range(1, 2000):
        clock.advance(rng.choice([0.0005, 0.003, 0.02, 0.11, 0.4]))
        t = clock.now()
        if step % 7 == 0 and t > window:
            ongoing = [*periods, (state, start, t)]
            shares = account.shares()
            assert min(_shares_values(shares)) >= 0.0 and max(_shares_values(shares)) <= 1000.0
            assert _total(shares) == pytest.approx(1000.0)
            for s, value in (
                (IDLE, shares.idle_ms_per_s),
                (SOFT, shares.soft_backpressured_ms_per_s),
                (HARD, shares.hard_backpressured_ms_per_s),
            ):
                # exact but for the slot holding the window's far edge (250 ms of 3 s)
                assert value == pytest.approx(_expected_ms(ongoing, s, t, window), abs=84.0)
        new = rng.choice(list(State))
        if new is not state:
            periods.append((state, start, t))
            state, start = new, t
        account.mark(new)


def test_exact_when_the_window_edge_is_on_a_slot_boundary() -> None:
    rng = random.Random(5)
    clock = ManualClock()
    account = TimeAccount(now=clock.now, window_s=1.0, slot_s=0.25, initial=BUSY)
    periods: list[tuple[State, float, float]] = []
    state, start = BUSY, 0.0
    for step in range(1, 41):  # 40 steps of 0.125 s: each read happens on a slot boundary
        clock.advance(0.125)
        t = clock.now()
        if step % 2 == 0 and t >= 1.0:
            ongoing = [*periods, (state, start, t)]
            assert account.shares().idle_ms_per_s == pytest.approx(
                _expected_ms(ongoing, IDLE, t, 1.0)
            )
            assert account.shares().hard_backpressured_ms_per_s == pytest.approx(
                _expected_ms(ongoing, HARD, t, 1.0)
            )
        new = rng.choice(list(State))
        if new is not state:
            periods.append((state, start, t))
            state, start = new, t
        account.mark(new)


def _shares_values(shares: TimeShares) -> list[float]:
    return [
        shares.idle_ms_per_s,
        shares.soft_backpressured_ms_per_s,
        shares.hard_backpressured_ms_per_s,
        shares.backpressured_ms_per_s,
        shares.busy_ms_per_s,
    ]


def test_concurrent_reader_never_sees_torn_state() -> None:
    # The writer never goes busy, so idle + backpressured is exactly 1000 in any consistent
    # state; a reader seeing a period both in the totals and as ongoing would exceed it.
    account = TimeAccount(window_s=0.05, slot_s=0.01)  # a small ring that wraps all the time
    stop = threading.Event()
    bad: list[TimeShares] = []
    reads = 0

    def write() -> None:
        states = [IDLE, SOFT, HARD]
        i = 0
        while not stop.is_set():
            account.mark(states[i % 3])
            i += 1

    def read() -> None:
        nonlocal reads
        while not stop.is_set():
            shares = account.shares()
            reads += 1
            values = _shares_values(shares)
            waiting = shares.idle_ms_per_s + shares.backpressured_ms_per_s
            if min(values) < 0 or max(values) > 1000 or abs(waiting - 1000) > 1e-6:
                bad.append(shares)

    old = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)  # switch threads as often as possible
    try:
        threads = [threading.Thread(target=write), threading.Thread(target=read)]
        for thread in threads:
            thread.start()
        time.sleep(0.4)
        stop.set()
        for thread in threads:
            thread.join()
    finally:
        sys.setswitchinterval(old)
    assert reads > 100
    assert bad == []


def test_invalid_window_is_rejected() -> None:
    with pytest.raises(ValueError, match="window_s"):
        TimeAccount(window_s=0.0)


# --- RateMeter --------------------------------------------------------------------------------


def test_rate_meter_steady_then_stopping() -> None:
    clock = ManualClock()
    meter = RateMeter(now=clock.now, window_s=3.0, slot_s=0.25)
    for i in range(300):  # 100 records every 10 ms, from 5 ms to 2.995 s
        clock.advance(0.005 if i == 0 else 0.01)
        meter.add(100)
    clock.advance(0.005)  # t = 3.0
    assert meter.per_second() == pytest.approx(10_000)
    clock.advance(1.5)  # window [1.5, 4.5]: the adds from 1.505 s to 2.995 s remain
    assert meter.per_second() == pytest.approx(5_000)
    clock.advance(1.6)
    assert meter.per_second() == 0.0
    assert meter.total == 30_000


def test_rate_meter_young() -> None:
    clock = ManualClock()
    meter = RateMeter(now=clock.now)
    for _ in range(100):
        clock.advance(0.01)
        meter.add()
    assert meter.per_second() == pytest.approx(100)


def test_rate_meter_burst_after_silence() -> None:
    clock = ManualClock()
    meter = RateMeter(now=clock.now, window_s=1.0, slot_s=0.25)
    clock.advance(50.0)
    meter.add(400)
    clock.advance(0.5)
    assert meter.per_second() == pytest.approx(400)


# --- cumulative totals and exact intervals -----------------------------------------------------


def test_totals_count_the_ongoing_period() -> None:
    clock = ManualClock(10.0)
    account = _account(clock)
    _play(clock, account, [(SOFT, 0.5), (HARD, 0.25), (IDLE, 1.0), (BUSY, 0.75)])
    totals = account.totals()
    assert totals == AccountTotals(at=12.5, idle_s=1.0, soft_s=0.5, hard_s=0.25)
    clock.advance(0.25)  # still busy: busy is what remains, so the totals do not move
    assert account.totals() == AccountTotals(at=12.75, idle_s=1.0, soft_s=0.5, hard_s=0.25)


def test_shares_between_two_readings_cover_exactly_that_interval() -> None:
    """A 6 s interval (twice the sliding window) read from totals matches brute force exactly."""
    rng = random.Random(23)
    clock = ManualClock()
    account = TimeAccount(now=clock.now, window_s=3.0, slot_s=0.25, initial=BUSY)
    periods: list[tuple[State, float, float]] = []
    state, start, first = BUSY, 0.0, None
    while clock.now() < 10.0:
        clock.advance(rng.choice([0.0004, 0.002, 0.03, 0.2, 0.7]))
        if first is None and clock.now() >= 2.0:
            first = account.totals()
        new = rng.choice(list(State))
        if new is not state:
            periods.append((state, start, clock.now()))
            state, start = new, clock.now()
        account.mark(new)
    assert first is not None
    last = account.totals()
    shares = shares_between(first, last)
    ongoing = [*periods, (state, start, last.at)]
    span = last.at - first.at
    assert shares.window_s == pytest.approx(span)
    for s, value in (
        (IDLE, shares.idle_ms_per_s),
        (SOFT, shares.soft_backpressured_ms_per_s),
        (HARD, shares.hard_backpressured_ms_per_s),
        (BUSY, shares.busy_ms_per_s),
    ):
        assert value == pytest.approx(_expected_ms(ongoing, s, last.at, span), abs=1e-6)
    assert shares.max_soft_ms is None and shares.max_hard_ms is None
    # the sliding view covers only the last 3 s: another figure, as a rule
    assert account.shares().window_s == pytest.approx(3.0)


def test_shares_between_needs_a_later_end() -> None:
    reading = AccountTotals(at=5.0, idle_s=1.0, soft_s=0.0, hard_s=0.0)
    with pytest.raises(ValueError, match="later than start"):
        shares_between(reading, reading)
