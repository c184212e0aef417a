"""Sources that vary, on a manual clock: the records a rate curve releases are its integral.

Each expected figure is worked out here by hand (a trapezoid, a burst's extra share, a sum of
rates), not read back from the curve under test.
"""

from __future__ import annotations

import itertools
import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from bpmon.model.clock import ManualClock
from bpmon.runtime.pacing import RateLimiter, source_limiter
from bpmon.scenario import parse_scenario
from bpmon.scenario.rates import Ramp, RateBurst, RateCurve, Sine, Steps

STEP_S = 0.001


def _drive(limiter: RateLimiter, clock: ManualClock, seconds: float, ask: int = 64) -> int:
    """Poll the limiter every millisecond for ``seconds``; the records it released."""
    released = 0
    for _ in range(round(seconds / STEP_S)):
        released += limiter.permits(ask)
        clock.advance(STEP_S)
    return released


def _limiter(
    rate: float, curve: RateCurve | None = None, backlog: int = 0
) -> tuple[RateLimiter, ManualClock]:
    clock = ManualClock()
    return RateLimiter(rate, curve=curve, backlog=backlog, now=clock.now, max_catchup_s=1.0), clock


def test_a_ramp_releases_its_trapezoid() -> None:
    """1,000/s for 1 s, up to 3,000/s over 2 s, then 3,000/s for 1 s: 1,000 + 4,000 + 3,000."""
    limiter, clock = _limiter(1000, Ramp(1000, 3000, over_s=2.0, start_s=1.0))
    released = _drive(limiter, clock, 4.0)
    assert abs(released - 8000) <= 2


def test_a_burst_adds_its_share() -> None:
    """1 s in every 4 at 3x: over 8 s, 8,000 base records and 2 x 1 s x 2,000 extra."""
    limiter, clock = _limiter(1000, RateBurst(1000, every_s=4.0, for_s=1.0, factor=3.0))
    assert abs(_drive(limiter, clock, 8.0) - 12_000) <= 2
    # inside the first burst the rate is 3,000/s, after it 1,000/s
    limiter, clock = _limiter(1000, RateBurst(1000, every_s=4.0, for_s=1.0, factor=3.0))
    assert abs(_drive(limiter, clock, 0.5) - 1500) <= 2
    assert abs(_drive(limiter, clock, 1.0) - (1500 + 500)) <= 2


def test_steps_release_each_rate_from_its_time_on() -> None:
    """500/s until 2 s, then 2,000/s: 1,000 + 2,000 by 3 s."""
    limiter, clock = _limiter(500, Steps(500, ((2.0, 2000.0),)))
    assert abs(_drive(limiter, clock, 3.0) - 3000) <= 2


def test_a_full_sine_period_releases_the_base_rate() -> None:
    limiter, clock = _limiter(1000, Sine(1000, amplitude=0.8, period_s=2.0))
    assert abs(_drive(limiter, clock, 4.0) - 4000) <= 2
    # the first half period is the crest: base x (T/2 + amplitude x T / pi)
    limiter, clock = _limiter(1000, Sine(1000, amplitude=0.8, period_s=2.0))
    assert abs(_drive(limiter, clock, 1.0) - 1000 * (1 + 0.8 * 2 / math.pi)) <= 2


def test_the_schedule_reports_the_rate_of_the_moment() -> None:
    limiter, clock = _limiter(1000, Ramp(1000, 3000, over_s=2.0))
    _drive(limiter, clock, 1.0)
    reading = limiter.schedule()
    assert reading is not None and reading.rate == pytest.approx(2000, rel=1e-3)


def test_a_ramp_after_a_stall_forgives_beyond_its_last_second() -> None:
    """Held for 3 s while the ramp rises from 1,000 to 4,000/s: the last second of the curve
    (3,500/s on average) is owed, the rest forgiven; all of it is pending."""
    limiter, clock = _limiter(1000, Ramp(1000, 4000, over_s=3.0))
    limiter.permits(1)
    clock.advance(3.0)
    released = limiter.permits(100_000)
    assert abs(released - 3500) <= 2
    reading = limiter.schedule()
    assert reading is not None
    assert abs(reading.forgiven - (7500 - 3500)) <= 2
    assert reading.pending == reading.due - reading.released
    assert reading.behind == 0


def test_a_backlog_is_pending_from_the_start_and_drains_as_fast_as_asked() -> None:
    limiter, clock = _limiter(100, backlog=5000)
    reading = limiter.schedule()
    assert reading is not None and reading.pending == 5000  # before the first record
    assert _drive(limiter, clock, 0.05, ask=64) == 64 * 50  # all it asks for, never paced
    released = 64 * 50 + _drive(limiter, clock, 0.95, ask=64)
    assert abs(released - (5000 + 100)) <= 1  # the backlog and the schedule's second
    drained = limiter.schedule()
    assert drained is not None and drained.pending <= 1
    # then the schedule alone: 100/s
    assert abs(_drive(limiter, clock, 1.0) - 100) <= 1


def test_a_backlog_falls_at_what_the_job_takes_beyond_the_rate() -> None:
    """The job takes 10 records a millisecond (10,000/s); 1,000/s arrive: the 20,000 waiting
    fall by 9,000 a second, and a slow drain forgives none of them."""
    limiter, clock = _limiter(1000, backlog=20_000)
    pending = []
    for _ in range(2):
        _drive(limiter, clock, 1.0, ask=10)
        reading = limiter.schedule()
        assert reading is not None
        pending.append(reading.pending)
    assert abs(pending[0] - 11_000) <= 2 and abs(pending[1] - 2_000) <= 2
    assert limiter.forgiven == 0


def test_subtask_rates_give_each_subtask_its_own_rate_and_scaled_profile() -> None:
    scenario = parse_scenario(
        """
name = "uneven"
[[operators]]
name = "src"
kind = "source"
parallelism = 3
rate = 1000
subtask_rates = { "0" = 500, "2" = 1200 }
rate_profile = [[1, 2000]]
[[operators]]
name = "sink"
kind = "sink"
parallelism = 3
inputs = [{ from = "src" }]
""",
        "uneven.toml",
    )
    spec = scenario.operator("src")
    # 1 s at each base, then 1 s at twice it (the step doubles the rate)
    for index, base in enumerate([500, 1000, 1200]):
        clock = ManualClock()
        limiter = source_limiter(spec, index, clock.now)
        assert abs(_drive(limiter, clock, 2.0) - 3 * base) <= 2, index


def test_no_profile_keeps_the_constant_schedule() -> None:
    scenario = parse_scenario(
        'name = "plain"\n[[operators]]\nname = "s"\nkind = "source"\nrate = 250\n'
        '[[operators]]\nname = "k"\nkind = "sink"\ninputs = [{ from = "s" }]\n',
        "plain.toml",
    )
    clock = ManualClock()
    limiter = source_limiter(scenario.operator("s"), 0, clock.now)
    assert limiter.time_until_next() == 0.0
    assert abs(_drive(limiter, clock, 2.0) - 500) <= 1


curves = st.one_of(
    st.builds(
        Steps,
        st.floats(10, 5000),
        st.lists(st.tuples(st.floats(0, 5), st.floats(10, 5000)), max_size=4).map(
            lambda steps: tuple(sorted({t: r for t, r in steps}.items()))
        ),
    ),
    st.builds(
        RateBurst,
        st.floats(10, 5000),
        st.just(2.0),
        st.floats(0.1, 1.9),
        st.floats(0.1, 5),
        st.floats(0, 2),
    ),
    st.builds(Ramp, st.floats(10, 5000), st.floats(10, 5000), st.floats(0.1, 3), st.floats(0, 2)),
    st.builds(Sine, st.floats(10, 5000), st.floats(0, 1), st.floats(0.2, 3)),
)


@settings(max_examples=60, deadline=None)
@given(curve=curves, gaps=st.lists(st.floats(0.0001, 0.05), min_size=1, max_size=80))
def test_a_fast_reader_releases_the_integral_however_unevenly_it_polls(
    curve: RateCurve, gaps: list[float]
) -> None:
    """A reader that asks for plenty, polled at uneven gaps, never gets ahead of the integral
    and ends on it (no drift), and every reading keeps ``pending = due - released``."""
    clock = ManualClock()
    limiter = RateLimiter(curve.rate_at(0.0), curve=curve, now=clock.now, max_catchup_s=1.0)
    limiter.permits(1_000_000)
    for gap in gaps:
        clock.advance(gap)
        limiter.permits(1_000_000)
        reading = limiter.schedule()
        assert reading is not None
        assert reading.pending == reading.due - reading.released == 0
    elapsed = sum(gaps)
    integral, error = _riemann(curve, elapsed)
    assert integral - 1 - error <= limiter.released <= integral + 1 + error


def _riemann(curve: RateCurve, t: float, steps: int = 20_000) -> tuple[float, float]:
    """The records due by ``t`` by the midpoint rule over the curve's rate (independent of the
    closed forms under test), the one due at 0 included, and the rule's error bound: a jump
    of the rate costs at most the highest rate times a step."""
    dt = t / steps
    rates = [curve.rate_at((i + 0.5) * dt) for i in range(steps)]
    jumps = sum(1 for a, b in itertools.pairwise(rates) if abs(a - b) > 1e-6 * a + 1)
    return 1.0 + sum(rates) * dt, (jumps + 1) * max(rates) * dt + 1e-6 * sum(rates) * dt
