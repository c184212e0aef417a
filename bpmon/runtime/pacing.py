"""Pacing of simulated work: service time per record, and a fixed emission rate for sources.

Both keep an absolute schedule against an injected clock instead of sleeping a fixed amount per
record, so whatever else delays the thread (other task threads holding the GIL, a late wake-up)
counts as time already spent, and the long-run rate holds however loaded the machine is. Both are
owned by one task thread and are not thread-safe.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from bpmon.scenario.rates import base_rate, curve_of

if TYPE_CHECKING:
    from bpmon.runtime.noise import CostNoise
    from bpmon.scenario import OperatorSpec
    from bpmon.scenario.rates import RateCurve

_ABSOLUTE_SLACK = 1e-6
"""Records of tolerance when converting elapsed time to records due (float rounding only)."""
_CURVE_WAIT_S = 0.05
"""The longest wait a source on a rate curve is told to take before it looks again."""


class ServiceTime:
    """Makes a subtask spend ``cost_us`` of service time per input record.

    The model: every record costs ``cost`` seconds of the subtask's time, so one subtask processes
    at most ``1 / cost`` records per second however many cores the machine has and however many
    other task threads run (``cost_us = 500`` gives at most 2,000 records/s). A slow instance
    (``slow_subtasks``) simply gets a larger ``cost_us``. With ``noise`` (``cost_cv``), each
    record's cost is drawn around ``cost_us`` instead (``noise.py``); the mean stays the same.

    How it is paid: :meth:`charge` adds ``records x cost`` to a *deadline*, the instant at which all
    work charged so far is served. It sleeps only when the deadline is at least ``slice_s`` ahead
    (sleeping per record would cost more than the record), and then it sleeps *until the deadline*
    measured on the clock, so time lost waiting for the GIL or in a late wake-up counts as service
    already given. The sleeping happens in one named method, :meth:`_serve`, which the stack sampler
    counts as busy time.

    No credit from idleness: when the deadline lies in the past at a new charge, the thread was
    doing something else (its own Python work, a late wake-up, or waiting); at most ``max_lag_s`` of
    that gap is counted as served, so a burst after a stall is bounded by ``max_lag_s / cost``
    records. The task loop calls :meth:`settle` before it waits for input or for output buffers:
    that pays any debt still below one slice (so sparse records are not free and the time shows as
    busy) and forfeits all credit, so the next charge starts from the clock.

    The default lag, 20 ms, covers the GIL waits of a crowded interpreter (several 5 ms switch
    intervals). Measured with 30 serving threads next to 4 CPU-bound ones on 2 cores: with 5 ms the
    subtasks reached 26-53 % of their service rate, with 20 ms 41-89 %. An idle machine holds it.

    The injected ``sleep`` may raise (for example ``WaitCancelledError`` when the job is cancelled)
    to abort a long service period.
    """

    def __init__(
        self,
        cost_us: float,
        *,
        now: Callable[[], float] = time.monotonic,
        sleep: Callable[[float], None] = time.sleep,
        slice_s: float = 0.002,
        max_lag_s: float = 0.02,
        noise: CostNoise | None = None,
    ) -> None:
        """Serve ``cost_us`` microseconds per record.

        Args:
            cost_us: service time per record in microseconds, already multiplied by the
                subtask's ``slow_subtasks`` factor; 0 means records cost nothing.
            now: the clock, seconds.
            sleep: how to wait, seconds.
            slice_s: the smallest debt worth sleeping for inside :meth:`charge`.
            max_lag_s: how much of a gap between two charges may count as service already given.
            noise: draws each record's cost around ``cost_us``; None: every record costs it.
        """
        if cost_us < 0 or slice_s < 0 or max_lag_s < 0:
            raise ValueError(
                f"ServiceTime: cost_us, slice_s and max_lag_s must be >= 0, "
                f"got {cost_us}, {slice_s}, {max_lag_s}"
            )
        self._cost = cost_us / 1_000_000
        self._now = now
        self._sleep = sleep
        self._slice = slice_s
        self._max_lag = max_lag_s
        self._noise = noise
        self._deadline = 0.0
        self._fresh = True

    @property
    def cost_s(self) -> float:
        """Service time per record, in seconds."""
        return self._cost

    def charge(self, records: int = 1) -> None:
        """Account ``records`` processed records; sleeps when the debt reaches one slice."""
        if records <= 0 or self._cost == 0.0:
            return
        now = self._now()
        if self._fresh:
            start = now
            self._fresh = False
        else:
            start = max(self._deadline, now - self._max_lag)
        noise = self._noise
        self._deadline = start + (records * self._cost if noise is None else noise.seconds(records))
        if self._deadline - now >= self._slice:
            self._serve()

    def settle(self) -> None:
        """Serve all outstanding debt now and drop any credit; call before the task waits."""
        if not self._fresh and self._deadline > self._now():
            self._serve()
        self._fresh = True

    def outstanding_s(self) -> float:
        """Seconds of charged work not served yet (0 when none)."""
        if self._fresh:
            return 0.0
        return max(0.0, self._deadline - self._now())

    def _serve(self) -> None:
        """Sleep until the deadline: the subtask is busy serving records (one named frame)."""
        while (remaining := self._deadline - self._now()) > 0:
            self._sleep(remaining)


@dataclass(frozen=True, slots=True)
class Schedule:
    """Where a rate-limited source stands against its schedule at one instant.

    ``due == released + forgiven + behind`` always: every record the schedule called for was
    emitted, forgiven after a stall, or is still owed.
    """

    at: float
    """The instant of the reading, on the limiter's clock."""
    rate: float
    """Records per second the schedule calls for at ``at`` (a profile's rate of the moment)."""
    due: int
    """Records the schedule called for from its start up to ``at``, the backlog it started
    with included."""
    released: int
    """Records released so far."""
    forgiven: int
    """Records dropped from the schedule after stalls longer than the catch-up allowance."""

    @property
    def behind(self) -> int:
        """Records due and still owed (the next ones the source will release)."""
        return max(0, self.due - self.released - self.forgiven)

    @property
    def pending(self) -> int:
        """Records due and not emitted, forgiven ones included: the source's lag.

        A rate-limited source stands for a reader of a queue that is written at ``rate``
        (a Kafka topic): what the schedule called for and the source did not emit is still in
        the queue, whether the pacing will release it (``behind``) or skipped it after a stall
        (``forgiven``). So it grows at ``rate`` minus the rate the source emits, as a Kafka
        source's lag does: FLIP-33's ``pendingRecords``.
        """
        return max(0, self.due - self.released)

    @property
    def lag_s(self) -> float:
        """How far behind its schedule the source is, in seconds (at the rate of the moment)."""
        if self.rate <= 0:
            return 0.0 if self.behind == 0 else math.inf
        return self.behind / self.rate


class RateLimiter:
    """Holds a source at ``rate`` records per second on an absolute schedule.

    Record ``k`` (counting from 0 at the first call of :meth:`permits`) is due at
    ``start + k / rate``. Because the schedule is absolute, rounding and late wake-ups never make
    the rate drift. After a stall (the source was backpressured or starved of CPU) at most
    ``max(1, rate x max_catchup_s)`` records are released at once; the records missed beyond that
    are forgiven, not emitted later in a burst. ``rate == 0`` means unlimited.

    A ``curve`` (``scenario.rates``: steps, a burst, a ramp, a wave) replaces the constant rate:
    record ``k`` is due when the curve's integral since the start reaches ``k``, as absolute as
    before, and the catch-up allowance is the records the curve called for over the last
    ``max_catchup_s``. A ``backlog`` is records due before the start: they count as due from the
    first reading on (FLIP-33's ``pendingRecords``), are released as fast as they are asked for,
    after the records the schedule owes, and are never forgiven.

    ``min_wait_s`` makes :meth:`time_until_next` suggest waits of at least that long: at high rates
    the next record is due within microseconds, and a source that waited for each would spend a
    core on wake-ups (20,000 records/s took a third of a core). Records released a little later
    are still on the absolute schedule, so the rate holds.
    """

    def __init__(
        self,
        rate: float,
        *,
        curve: RateCurve | None = None,
        backlog: int = 0,
        now: Callable[[], float] = time.monotonic,
        max_catchup_s: float = 0.01,
        min_wait_s: float = 0.0,
    ) -> None:
        """Emit ``rate`` records/s (0: unlimited), or as ``curve`` says, after ``backlog``
        records already due; catch up at most ``max_catchup_s`` of a stall; suggest waits of at
        least ``min_wait_s``."""
        if rate < 0 or max_catchup_s < 0 or min_wait_s < 0 or not math.isfinite(rate):
            raise ValueError(
                f"RateLimiter: rate, max_catchup_s and min_wait_s must be finite and >= 0, "
                f"got {rate}, {max_catchup_s}, {min_wait_s}"
            )
        if rate == 0 and (curve is not None or backlog):
            raise ValueError("RateLimiter: a curve or a backlog needs a rate > 0")
        if backlog < 0:
            raise ValueError(f"RateLimiter: backlog must be >= 0, got {backlog}")
        self._rate = float(rate)
        self._curve = curve
        self._backlog = backlog
        self._backlog_left = backlog
        self._now = now
        self._min_wait = min_wait_s
        self._catchup = max_catchup_s
        self._burst = max(1, int(rate * max_catchup_s))
        self._start: float | None = None
        self._next = 0  # schedule index of the next record to release
        self._released = 0
        self._forgiven = 0

    @property
    def rate(self) -> float:
        """Records per second; 0 means unlimited."""
        return self._rate

    @property
    def released(self) -> int:
        """Records released by :meth:`permits` so far."""
        return self._released

    @property
    def forgiven(self) -> int:
        """Records a stall missed beyond the catch-up allowance, dropped from the schedule."""
        return self._forgiven

    def schedule(self) -> Schedule | None:
        """Where the source stands against its schedule now; None when the rate is unlimited.

        Readable from any thread: the counters are plain ints, each read at once, so a reading
        taken while the owner releases a chunk may be off by that chunk (``behind`` is clamped
        at 0), never torn.
        """
        if self._rate == 0.0:
            return None
        at = self._now()
        start = self._start
        due = self._backlog + (0 if start is None else self._due(at, start))
        rate = self._rate
        if self._curve is not None and start is not None:
            rate = self._curve.rate_at(at - start)
        return Schedule(at, rate, due, self._released, self._forgiven)

    def _due(self, now: float, start: float) -> int:
        """Records the schedule called for by ``now``: record ``k`` is due at
        ``start + k / rate``, or when the curve's integral reaches ``k``."""
        if self._curve is None:
            return math.floor((now - start) * self._rate + _ABSOLUTE_SLACK) + 1
        return math.floor(self._curve.due(now - start) + _ABSOLUTE_SLACK) + 1

    def _allowance(self, elapsed: float) -> int:
        """Records owed that a stall may leave to catch up on: ``max_catchup_s`` of them."""
        if self._curve is None:
            return self._burst
        curve = self._curve
        return max(1, int(curve.due(elapsed) - curve.due(elapsed - self._catchup)))

    def permits(self, max_n: int) -> int:
        """Return how many records (0 to ``max_n``) may be emitted now; they count as emitted."""
        if max_n <= 0:
            return 0
        if self._rate == 0.0:
            self._released += max_n
            return max_n
        now = self._now()
        if self._start is None:
            self._start = now
        due = self._due(now, self._start)
        allowance = self._allowance(now - self._start)
        if due - self._next > allowance:
            self._forgiven += due - allowance - self._next
            self._next = due - allowance  # forgive what a stall missed beyond the catch-up
        granted = max(0, min(max_n, due - self._next))
        self._next += granted
        if self._backlog_left and granted < max_n:  # the backlog: as fast as it is asked for
            extra = min(max_n - granted, self._backlog_left)
            self._backlog_left -= extra
            granted += extra
        self._released += granted
        return granted

    def time_until_next(self) -> float:
        """Seconds to wait for the next record (0 when one is due now or the rate is unlimited;
        else at least ``min_wait_s``)."""
        if self._rate == 0.0 or self._start is None:
            return 0.0
        if self._curve is None:
            wait = self._start + self._next / self._rate - self._now()
        else:
            wait = self._curve_wait(self._now() - self._start)
        return max(wait, self._min_wait) if wait > 0 else 0.0

    def _curve_wait(self, elapsed: float) -> float:
        """The records still to come before the next one is due over the rate of the moment,
        at most :data:`_CURVE_WAIT_S`: the rate may change meanwhile, and waking early costs
        nothing on an absolute schedule."""
        assert self._curve is not None
        short = self._next - self._curve.due(elapsed)
        rate = self._curve.rate_at(elapsed)
        if short <= 0:
            return 0.0
        return min(_CURVE_WAIT_S, short / rate) if rate > 0 else _CURVE_WAIT_S


def source_limiter(spec: OperatorSpec, index: int, now: Callable[[], float]) -> RateLimiter:
    """The limiter of source subtask ``index``: its base rate, its profile's curve and backlog.

    Up to 1 s of records a stall held back are still owed, as Guava's limiter (which Flink's
    rate-limited sources use) saves up to 1 s of permits: a backpressured source stays
    backpressured instead of being paced into idleness after each freed buffer.
    """
    return RateLimiter(
        base_rate(spec, index),
        curve=curve_of(spec, index),
        backlog=spec.source_rates.backlog if spec.source_rates is not None else 0,
        now=now,
        max_catchup_s=1.0,
        min_wait_s=0.001,
    )


SOURCE_CHUNK = 64
"""Records a source emits between two looks at its mailbox and its outputs (fewer when that many
would fill more than about one buffer: see :func:`chunk_size`)."""


def chunk_size(spec: OperatorSpec, cost_us: float, segment_size: int | None) -> int:
    """Input records a task processes between two checks of output availability (and mail).

    Flink checks before every record; checking every few records costs far less in Python and
    changes nothing as long as one chunk neither takes long (at most ~2 ms of service time,
    ``cost_us`` per record) nor writes more than about one buffer (``segment_size`` bytes; None
    for a task without outputs) per output, so a backpressured task stops where Flink's would
    and sees checkpoint barriers as soon.
    """
    limit = 256
    if cost_us > 0:
        limit = min(limit, int(0.002 / (cost_us / 1e6)))
    out_bytes = spec.fanout * spec.selectivity * spec.record_bytes
    if segment_size is not None and out_bytes > 0:
        limit = min(limit, int(segment_size / out_bytes))
    return max(1, limit)
