"""Fresh metric readings from Flink's REST metric store, and the span a window's rates cover.

The REST API answers metric requests from a store on the JobManager, which a request refreshes
from the TaskManagers only when the last refresh is older than ``metrics.fetcher.update-interval``
(10 s by default), and *asynchronously*: the request that starts a refresh is answered from the
store as it was. After a quiet spell that answer is as old as the spell (30 s was seen). So:

- a reading that may have started a refresh (none was started within the interval) is read
  again, :data:`FRESH_PAUSE_S` apart, up to :data:`FRESH_TRIES` times, until the values change:
  the changed values are fresh. Unchanged ones are as old as the last refresh, at most the
  interval (a store kept fresh by someone else's reads);
- a window's second reading is taken no sooner than one interval after the refresh its first
  reading saw (waiting up to :data:`MAX_FETCH_WAIT_S` for it), so the two differ by a refresh and
  Flink's running totals give the rates over the window itself (records in and out, busy, idle and
  backpressured ms: :func:`~bpmon.collectors.flink.metrics.window_accounting`).

Where thread dumps sample the job, the rates and time accounting come from a span the dumps did
not slow: the time since the previous window when it is long enough (:data:`QUIET_MIN_S`), else a
quiet span read just before the dumps (:meth:`Readings.quiet_span`), for bursts planned
:data:`QUIET_FROM_S` or longer.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass

from bpmon.collectors.sampler import StopSignal

VertexValues = Mapping[str, Mapping[str, float]]
"""Per Flink vertex id, its subtasks' metric values (``"0.busyTimeMsPerSecond"``: value)."""

FRESH_PAUSE_S = 0.15
"""The pause before a reading that may have started a refresh is read again."""
FRESH_TRIES = 2
"""How many times such a reading is read again before its values are taken as they are."""
MAX_FETCH_WAIT_S = 2.0
"""The longest a window's second reading waits for the metric store's next refresh (a cluster
whose store refreshes less often gives Flink's own one-minute gauges for a shorter window)."""
QUIET_MIN_S = 3.0
"""The least unsampled time whose counters give rates undisturbed by thread dumps. Not less:
Flink adds an idle stretch to its running total when the stretch ends (``TimerGauge.markEnd``,
or its update every 5 s), so one under way at a reading is busy time until then. Subtasks fed
by one producer that stalls idle in step, and over one second their busy shares read high
together: a slow-instance job's fast subtasks, 0.33 busy, read 0.18-0.62 over 1 s spans,
0.21-0.46 over 2 s, 0.24-0.39 over 3 s (0.62 for all three at once made a CI run call a slow
instance a slow operator)."""
QUIET_FROM_S = 1.0
"""Thread-dump bursts planned this long or longer get an unsampled span for their rates; a
shorter one spans less than Flink's running totals can tell apart (its rates are Flink's
one-minute gauges)."""


@dataclass(frozen=True, slots=True)
class Reading:
    """Every running vertex's values at one moment.

    Attributes:
        values: per vertex id, its subtasks' values.
        at: when read (monotonic seconds).
        reread: whether the first answer was stale and a refreshed one was read instead.
    """

    values: VertexValues
    at: float
    reread: bool = False


class Readings:
    """Fresh readings of one job's metrics (see the module).

    Args:
        read: reads every running vertex's values now (one request per vertex).
        fetch_interval_s: the cluster's ``metrics.fetcher.update-interval``.
        clock, sleep: monotonic seconds and a wait.
    """

    def __init__(
        self,
        read: Callable[[], VertexValues],
        fetch_interval_s: float,
        clock: Callable[[], float] = time.monotonic,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        self._read, self.fetch_interval_s = read, fetch_interval_s
        self._clock, self._sleep = clock, sleep
        self._refreshed: float | None = None
        self.last: Reading | None = None

    def read(self) -> Reading:
        """A reading as fresh as the store can give (see the module)."""
        at = self._clock()
        values = self._read()
        reread = False
        if self._refreshed is None or at - self._refreshed > self.fetch_interval_s:
            self._refreshed = at  # this request started a refresh (or someone's just did)
            for _ in range(FRESH_TRIES):
                self._sleep(FRESH_PAUSE_S)
                again = self._read()
                if again != values:
                    values, reread, at = again, True, self._clock()
                    break
        self.last = Reading(values, at, reread)
        return self.last

    def after(self, stop: StopSignal | None = None) -> Reading:
        """A window's second reading, once the store may refresh again (waiting for it up to
        :data:`MAX_FETCH_WAIT_S`, or until ``stop``)."""
        if self._refreshed is not None:
            until = self._refreshed + self.fetch_interval_s + 0.05
            self._wait(min(until, self._clock() + MAX_FETCH_WAIT_S), stop)
        return self.read()

    def quiet_span(
        self, previous: Reading | None, stop: StopSignal | None = None
    ) -> tuple[Reading, Reading]:
        """Two readings at least :data:`QUIET_MIN_S` apart with no sampling between them: the
        end of the previous window and now when that is long enough, else now and a second
        reading after a quiet wait (at least :data:`QUIET_MIN_S`, and one store refresh)."""
        now = self.read()
        if previous is not None and now.at - previous.at >= QUIET_MIN_S:
            return previous, now
        self._wait(now.at + QUIET_MIN_S, stop)
        return now, self.after(stop)

    def _wait(self, until: float, stop: StopSignal | None) -> None:
        """Sleep until ``until`` (monotonic), or ``stop``."""
        while (left := until - self._clock()) > 0 and not (stop is not None and stop.is_set()):
            self._sleep(min(left, 0.25))
