"""One Flink window's samples and the metric readings around them: which sampler takes it, and
over which span its rates and busy time are read.

:class:`Bursts` keeps what lasts from window to window of a watch: the cluster's settings, Flink's
sampler (or why it is not used), the fresh readings of the job's metrics and the last one taken.
Each :meth:`Bursts.take` tries Flink's own sampler first (its rates over the sampled span, which it
barely slows), and takes thread dumps when it cannot (their rates over an unsampled span before
them: :mod:`~bpmon.collectors.flink_readings`).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Literal

from bpmon.collectors.flink_config import FlinkClusterConfig
from bpmon.collectors.flink_placement import JobPlacement
from bpmon.collectors.flink_readings import QUIET_FROM_S, Reading, Readings, VertexValues
from bpmon.collectors.flink_rest import FlinkRest
from bpmon.collectors.flink_sampling import (
    MIN_VERSION,
    FlameSampler,
    FlameUnavailableError,
    FlinkSampling,
    dump_sample,
    flame_window,
    version_tuple,
)
from bpmon.collectors.flink_threads import Tally
from bpmon.collectors.flink_window import SampleGrid, dump_cost
from bpmon.collectors.sampler import Progress, StopSignal
from bpmon.model.clock import utc_now
from bpmon.model.values import Window

Sampler = Literal["auto", "thread-dumps"]
"""``auto``: Flink's own sampler where the cluster enables it, else thread dumps; the benchmark
compares the two on one cluster with ``thread-dumps``."""

Span = tuple[Reading, Reading]
"""The two readings a window's rates and busy time are taken between."""


@dataclass(frozen=True, slots=True)
class FlinkBurst:
    """One window as taken: its samples (in ``tally``), the window, the span of its rates, and
    how it was sampled."""

    tally: Tally
    window: Window
    span: Span
    sampling: FlinkSampling


def flame_reason(config: FlinkClusterConfig, version: str, sampler: Sampler) -> str | None:
    """Why Flink's own sampler is not used for a watch (None: it is)."""
    if sampler == "thread-dumps":
        return "thread dumps asked for"
    if not config.read:
        return "the JobManager does not show its configuration (GET /jobmanager/config)"
    if not config.flamegraph:
        return "Flink's sampler is off: set rest.flamegraph.enabled: true"
    if version_tuple(version) < MIN_VERSION:
        return f"Flink {version} has no flame graph per subtask (1.17+)"
    return None


class Bursts:
    """The windows of one watch (see the module).

    Args:
        rest: the cluster's client.
        config: the cluster's settings.
        job_id: the watched job.
        read_all: reads every running vertex's metric values now.
        flame_off: why Flink's sampler is not used (:func:`flame_reason`), None when it is.
        clock, sleep: monotonic seconds and a wait.
    """

    def __init__(
        self,
        rest: FlinkRest,
        config: FlinkClusterConfig,
        job_id: str,
        read_all: Callable[[], VertexValues],
        flame_off: str | None,
        clock: Callable[[], float],
        sleep: Callable[[float], None],
    ) -> None:
        self.rest, self.config = rest, config
        self.flame = FlameSampler(rest, config, job_id, clock, sleep)
        self.flame_off = flame_off
        self.readings = Readings(read_all, config.fetch_interval_s, clock, sleep)
        self._clock, self._sleep = clock, sleep
        self._previous: Reading | None = None

    def take(
        self,
        placement: JobPlacement,
        new_tally: Callable[[], Tally],
        samples: int,
        interval_ms: float,
        progress: Progress | None = None,
        stop: StopSignal | None = None,
    ) -> FlinkBurst:
        """One window: by Flink's sampler where it can, else by thread dumps (``samples`` at
        ``interval_ms``) with the reason it could not; no samples when no task runs (the job
        waits for slots)."""
        if not placement.where:
            return self._nothing(new_tally())
        flamed = self._flame(placement, new_tally(), stop)
        if isinstance(flamed, FlinkBurst):
            return flamed
        return self._dumps(placement, new_tally(), samples, interval_ms, flamed, progress, stop)

    def _flame(
        self, placement: JobPlacement, tally: Tally, stop: StopSignal | None
    ) -> FlinkBurst | str:
        """The window by Flink's own sampler, or why it cannot be taken so."""
        if self.flame_off is not None:
            return self.flame_off
        began, began_wall = self._clock(), utc_now()
        running = [v for v in placement.graph.vertices if placement.running(v.id)]
        try:
            pending = self.flame.start(
                [(v.id, v.name, tuple(placement.running(v.id))) for v in running]
            )
            first = self.readings.read()
            taken = self.flame.collect(pending, tally, stop)
        except FlameUnavailableError as err:
            if err.lasting:
                self.flame_off = err.reason
            return err.reason
        span = (first, self.readings.after(stop))
        self._previous = span[1]
        window = flame_window(began_wall, self._clock() - began, taken, self.config)
        planned = self.config.flame_samples * sum(len(p.subtasks) for p in pending)
        seconds = span[1].at - span[0].at
        where = f"over the {seconds:.1f} s sampled, which Flink's sampler barely slows"
        sampling = FlinkSampling(
            "flame-graph", sum(taken.values()), planned, len(taken), span=where
        )
        return FlinkBurst(tally, window, span, sampling)

    def _dumps(
        self,
        placement: JobPlacement,
        tally: Tally,
        samples: int,
        interval_ms: float,
        reason: str,
        progress: Progress | None,
        stop: StopSignal | None,
    ) -> FlinkBurst:
        """The window by thread dumps. A burst of :data:`QUIET_FROM_S` or longer has its rates
        over an unsampled span before it (dumps slow the job: rates read while they run
        understate its capacity)."""
        quiet = samples * interval_ms / 1000 >= QUIET_FROM_S
        before = self.readings.quiet_span(self._previous, stop) if quiet else self.readings.read()
        grid = SampleGrid(self._clock, self._sleep, samples, interval_ms)
        window, costs = grid.run(lambda: dump_sample(self.rest, placement, tally), progress, stop)
        self._previous = self.readings.read()  # the next window's unsampled span starts here
        if isinstance(before, tuple):
            span = before
            where = f"over {span[1].at - span[0].at:.1f} s unsampled before the dumps"
        else:
            span = (before, self._previous)
            where = f"over the {window.seconds:.1f} s of dumps"
        sampling = FlinkSampling(
            "thread-dumps",
            window.samples,
            window.planned_samples or samples,
            sum(len(s) for s in placement.expected().values()),
            reason,
            dump_cost(costs),
            where,
        )
        return FlinkBurst(tally, window, span, sampling)

    def _nothing(self, tally: Tally) -> FlinkBurst:
        """A window of a job none of whose tasks runs: its state now, nothing to sample."""
        reading = self.readings.read()
        now = utc_now()
        window = Window(start=now, end=now, samples=0, interval_ms=0.0)
        sampling = FlinkSampling("none", 0, 0, 0, "no task of the job runs", span="not read")
        return FlinkBurst(tally, window, (reading, reading), sampling)

    def fresh_note(self, span: Span) -> str:
        """How fresh a window's two metric readings were."""
        if span[0].reread or span[1].reread:
            return "a stale answer of Flink's metric store was read again"
        interval = self.config.fetch_interval_s
        return f"each at most {interval:g} s old (metrics.fetcher.update-interval)"
