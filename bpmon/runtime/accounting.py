"""Flink's time accounting per subtask: idle, soft/hard backpressured and busy ms per second.

A :class:`TimeAccount` is told by its task thread whenever the task changes state (waiting for
input, waiting for an available output, blocked inside a buffer request, or working); a
:class:`RateMeter` counts records. Both average over a short sliding window (3 s by default, in
250 ms slots) instead of Flink's 60 s / 5 s ``TimerGauge``, so a diagnosis of a few seconds sees
current values, and both are readable at any moment from another thread, the ongoing period
included.

Thread-safety without a lock: there is exactly one writer (the task thread). The writer publishes
its current state as one immutable tuple, replaced by a single attribute assignment, which a reader
reads once, so it can never see half of an update. At each slot boundary the writer stores the
cumulative totals *at the boundary instant* in a ring of keyed tuples, always before publishing the
state that follows them; a reader checks each entry's key and retries in the (practically
impossible) case that the writer overwrote it while the reader was paused for a whole slot. Every
value a reader computes comes from one consistent state and is clamped to ``[0, 1000]``.

The window's far edge falls inside a slot; there the totals are interpolated between the two
checkpoints around it, which is exact when the subtask stayed in one state for that slot.

Both also keep cumulative totals (:meth:`TimeAccount.totals`, :attr:`RateMeter.total`): readings
at the start and the end of an interval give the exact shares and rates over it
(:func:`shares_between`), so a monitoring window reports the span it sampled, not the last 3 s.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from dataclasses import dataclass
from enum import IntEnum

_READ_ATTEMPTS = 8
_NOTHING = (0.0, 0.0, 0.0)


class State(IntEnum):
    """What a task thread is doing, as Flink accounts it."""

    IDLE = 0
    """Waiting for input while the output is available."""
    SOFT_BP = 1
    """The task loop found an output unavailable and waits for it (still responsive)."""
    HARD_BP = 2
    """Blocked inside the request for an output buffer."""
    BUSY = 3
    """Anything else: processing records, serving their cost."""


# Plain module names for the hot paths: reading an enum member off its class costs ~100 ns.
_IDLE, _SOFT, _HARD = State.IDLE, State.SOFT_BP, State.HARD_BP


@dataclass(frozen=True, slots=True)
class TimeShares:
    """One consistent reading of a :class:`TimeAccount`, in Flink's metric units."""

    idle_ms_per_s: float
    soft_backpressured_ms_per_s: float
    hard_backpressured_ms_per_s: float
    backpressured_ms_per_s: float
    busy_ms_per_s: float
    max_soft_ms: float | None
    """Longest single soft-backpressured period ending in the window (or still going on); None
    over an interval of two readings (:func:`shares_between`), which keeps no periods."""
    max_hard_ms: float | None
    """Longest single hard-backpressured period ending in the window (or still going on); None
    over an interval of two readings."""
    window_s: float
    """The span averaged over: the window, or the account's age when younger."""


@dataclass(frozen=True, slots=True)
class AccountTotals:
    """Cumulative seconds a :class:`TimeAccount` counted in each waiting state, at one instant.

    Busy time is what remains of the elapsed time, as in Flink, so it is not stored.
    """

    at: float
    """The instant of the reading, on the account's clock."""
    idle_s: float
    soft_s: float
    hard_s: float


def shares_between(start: AccountTotals, end: AccountTotals) -> TimeShares:
    """The exact shares over ``[start.at, end.at]``, from two readings of the same account.

    Raises:
        ValueError: ``end`` is not later than ``start`` (readings swapped or of another clock).
    """
    span = end.at - start.at
    if span <= 0:
        raise ValueError(f"shares_between: end ({end.at}) must be later than start ({start.at})")
    values = (
        1000.0 * (end.idle_s - start.idle_s) / span,
        1000.0 * (end.soft_s - start.soft_s) / span,
        1000.0 * (end.hard_s - start.hard_s) / span,
    )
    return _shares(values, (None, None), span)


_WAITING = (_IDLE, _SOFT, _HARD)
"""The states a TimeAccount totals; busy is what remains, as in Flink."""

_Current = tuple[State, float, float, float, float]
"""What a TimeAccount publishes: (state, since, idle_s, soft_s, hard_s), totals up to since."""


class _Slots:
    """Slot boundaries of a sliding window, and a ring of checkpoints keyed by boundary index.

    Boundary ``k`` is at ``origin + k * slot_s``. Only the writer calls :meth:`crossed`.
    """

    def __init__(self, window_s: float, slot_s: float, origin: float, first: tuple[float, ...]):
        if not (window_s > 0 and slot_s > 0 and math.isfinite(window_s / slot_s)):
            raise ValueError(f"window_s and slot_s must be > 0, got {window_s}, {slot_s}")
        self.count = max(1, round(window_s / slot_s))
        self.slot_s = slot_s
        self.window_s = self.count * slot_s
        self.origin = origin
        self.size = self.count + 2
        self.ring: list[tuple[int, tuple[float, ...]]] = [(-1, ())] * self.size
        self.ring[0] = (0, first)
        self.next_k = 1
        self.next_boundary = self.boundary(1)

    def boundary(self, k: int) -> float:
        """The instant of boundary ``k``."""
        return self.origin + k * self.slot_s

    def slot_of(self, x: float) -> int:
        """The index ``k`` with ``boundary(k) <= x < boundary(k + 1)``."""
        k = math.floor((x - self.origin) / self.slot_s)
        if self.boundary(k) > x:
            k -= 1
        elif self.boundary(k + 1) <= x:
            k += 1
        return k

    def crossed(self, now: float) -> range:
        """Boundaries passed since the last call (at most one ring's worth); advances the cursor."""
        last = self.slot_of(now)
        first = max(self.next_k, last - self.size + 1)
        self.next_k = last + 1
        self.next_boundary = self.boundary(last + 1)
        return range(first, last + 1)

    def entry(self, k: int) -> tuple[float, ...] | None:
        """The checkpoint stored for boundary ``k``, or None if it was overwritten or never set."""
        key, values = self.ring[k % self.size]
        return values if key == k else None

    def interpolate(
        self, x: float, since: float, at_since: tuple[float, ...]
    ) -> tuple[float, ...] | None:
        """Totals at ``x`` (``origin <= x < since``) between the checkpoints around it."""
        k = self.slot_of(x)
        lo = self.entry(k)
        lo_t = self.boundary(k)
        hi_t = self.boundary(k + 1)
        hi = self.entry(k + 1) if hi_t <= since else at_since
        hi_t = min(hi_t, since)
        if lo is None or hi is None:
            return None
        frac = (x - lo_t) / (hi_t - lo_t) if hi_t > lo_t else 0.0
        return tuple(a + (b - a) * frac for a, b in zip(lo, hi, strict=True))


def _clamp_ms(value: float) -> float:
    """Clamp a ms-per-second value to ``[0, 1000]``."""
    return min(1000.0, max(0.0, value))


class TimeAccount:
    """Idle, backpressured and busy time of one subtask over a short sliding window.

    The task thread calls :meth:`mark` at every state change; the time since the previous mark goes
    to the previous state (repeating the current state costs almost nothing). Any thread reads with
    :meth:`shares` (the sliding window) or :meth:`totals` (cumulative). A new account starts
    :attr:`State.IDLE` so a task that has not received work yet does not look busy.
    """

    def __init__(
        self,
        *,
        now: Callable[[], float] = time.monotonic,
        window_s: float = 3.0,
        slot_s: float = 0.25,
        initial: State = State.IDLE,
    ) -> None:
        """Start accounting now in state ``initial``, over ``window_s`` in ``slot_s`` slots."""
        self._now = now
        start = now()
        self._slots = _Slots(window_s, slot_s, start, (0.0, 0.0, 0.0))
        self._peaks: list[tuple[int, float, float]] = [(-1, 0.0, 0.0)] * self._slots.size
        self._cur: _Current = (initial, start, 0.0, 0.0, 0.0)

    @property
    def state(self) -> State:
        """The state the task is in now."""
        return self._cur[0]

    def mark(self, state: State) -> None:
        """Record that the task enters ``state`` now (task thread only)."""
        cur = self._cur
        if state is cur[0]:
            return
        now = self._now()
        if now >= self._slots.next_boundary:
            self._checkpoint(cur, now)
        prev, since, idle, soft, hard = cur
        spent = now - since
        if prev is _IDLE:
            idle += spent
        elif prev is _SOFT:
            soft += spent
            self._note_peak(1, spent)
        elif prev is _HARD:
            hard += spent
            self._note_peak(2, spent)
        self._cur = (state, now, idle, soft, hard)

    def _checkpoint(self, cur: _Current, now: float) -> None:
        """Store the totals at every slot boundary passed since the last mark (writer only)."""
        slots = self._slots
        for k in slots.crossed(now):
            slots.ring[k % slots.size] = (k, _totals_at(cur, slots.boundary(k)))

    def _note_peak(self, which: int, spent: float) -> None:
        """Remember ``spent`` as a candidate longest period of the current slot (writer only)."""
        k = self._slots.next_k - 1
        index = k % self._slots.size
        key, soft, hard = self._peaks[index]
        if key != k:
            soft = hard = 0.0
        if which == 1:
            soft = max(soft, spent)
        else:
            hard = max(hard, spent)
        self._peaks[index] = (k, soft, hard)

    def shares(self) -> TimeShares:
        """Read all values from one consistent state (any thread)."""
        for _ in range(_READ_ATTEMPTS):
            cur = self._cur
            reading = self._read(cur, self._now())
            if reading is not None:
                return reading
        return self._read_ongoing_only(self._cur, self._now())

    def totals(self) -> AccountTotals:
        """Cumulative idle, soft and hard seconds up to now, the ongoing period included (any
        thread: one consistent state)."""
        cur = self._cur
        at = self._now()
        idle, soft, hard = _totals_at(cur, max(at, cur[1]))
        return AccountTotals(at, idle, soft, hard)

    def _read(self, cur: _Current, t: float) -> TimeShares | None:
        """Compute the shares at ``t`` from ``cur``; None if a checkpoint was overwritten."""
        slots = self._slots
        span = min(slots.window_s, t - slots.origin)
        if span <= 0:
            return _shares(_NOTHING, (0.0, 0.0), 0.0)
        far = t - span
        since = cur[1]
        if far >= since:
            begin: tuple[float, ...] | None = _totals_at(cur, far)
        else:
            begin = slots.interpolate(far, since, cur[2:])
        if begin is None:
            return None
        end = _totals_at(cur, t)
        values = tuple(1000.0 * (e - b) / span for e, b in zip(end, begin, strict=True))
        return _shares(values, self._peaks_between(slots.slot_of(far), cur, t), span)

    def _peaks_between(self, first_k: int, cur: _Current, t: float) -> tuple[float, float]:
        """Longest soft and hard periods (ms) ending in slots ``first_k`` onwards, or ongoing."""
        soft = hard = 0.0
        for key, s, h in self._peaks:
            if key >= first_k:
                soft, hard = max(soft, s), max(hard, h)
        ongoing = t - cur[1]
        if cur[0] is _SOFT:
            soft = max(soft, ongoing)
        elif cur[0] is _HARD:
            hard = max(hard, ongoing)
        return soft * 1000.0, hard * 1000.0

    def _read_ongoing_only(self, cur: _Current, t: float) -> TimeShares:
        """Fallback reading over the current period alone, when the history kept changing."""
        span = t - cur[1]
        if span <= 0:
            return _shares(_NOTHING, (0.0, 0.0), 0.0)
        state = cur[0]
        values = tuple(1000.0 if state is s else 0.0 for s in _WAITING)
        soft = span * 1000.0 if state is _SOFT else 0.0
        hard = span * 1000.0 if state is _HARD else 0.0
        return _shares(values, (soft, hard), span)


def _totals_at(cur: _Current, t: float) -> tuple[float, ...]:
    """Idle, soft and hard totals at ``t >= since``, counting the ongoing period."""
    state, since, idle, soft, hard = cur
    spent = t - since
    if state is _IDLE:
        idle += spent
    elif state is _SOFT:
        soft += spent
    elif state is _HARD:
        hard += spent
    return (idle, soft, hard)


def _shares(
    values: tuple[float, ...], peaks_ms: tuple[float | None, float | None], span: float
) -> TimeShares:
    """Clamp raw idle, soft and hard ms per second; derive backpressured and busy as Flink does."""
    idle, soft, hard = (_clamp_ms(v) for v in values)
    backpressured = _clamp_ms(soft + hard)
    busy = 1000.0 - min(idle + backpressured, 1000.0)
    return TimeShares(idle, soft, hard, backpressured, busy, peaks_ms[0], peaks_ms[1], span)


class RateMeter:
    """Events per second over a short sliding window (``numRecordsInPerSecond`` and the like).

    The task thread calls :meth:`add` (cheap: once per buffer is fine); any thread reads
    :meth:`per_second`. Same window, slots and lock-free publication as :class:`TimeAccount`.
    """

    def __init__(
        self,
        *,
        now: Callable[[], float] = time.monotonic,
        window_s: float = 3.0,
        slot_s: float = 0.25,
    ) -> None:
        """Start counting now, averaging over ``window_s`` in ``slot_s`` slots."""
        self._now = now
        start = now()
        self._slots = _Slots(window_s, slot_s, start, (0.0,))
        self._cur: tuple[float, float] = (0.0, start)  # (total, time of the last add)

    @property
    def total(self) -> float:
        """Everything added since the meter was created."""
        return self._cur[0]

    def add(self, n: float = 1) -> None:
        """Count ``n`` events now (task thread only)."""
        now = self._now()
        cur = self._cur
        if now >= self._slots.next_boundary:
            slots = self._slots
            for k in slots.crossed(now):
                slots.ring[k % slots.size] = (k, (cur[0],))
        self._cur = (cur[0] + n, now)

    def per_second(self) -> float:
        """Events per second over the window (any thread)."""
        for _ in range(_READ_ATTEMPTS):
            cur = self._cur
            rate = self._read(cur, self._now())
            if rate is not None:
                return rate
        return 0.0

    def _read(self, cur: tuple[float, float], t: float) -> float | None:
        """The rate at ``t`` from ``cur``; None if a checkpoint was overwritten meanwhile."""
        slots = self._slots
        span = min(slots.window_s, t - slots.origin)
        if span <= 0:
            return 0.0
        far = t - span
        total, last = cur
        if far >= last:
            return 0.0
        begin = slots.interpolate(far, last, (total,))
        if begin is None:
            return None
        return max(0.0, (total - begin[0]) / span)
