"""Which sampler takes a Flink window's stack samples, and over which span its rates and busy
time are read: the one place that decides.

Two ways to sample a task thread's stack over REST:

- **Flink's own sampler** (:class:`~bpmon.collectors.flink.flame.FlameSampler`), when the cluster
  sets ``rest.flamegraph.enabled: true`` and is Flink 1.17 or newer (a flame graph per subtask):
  the JobManager asks each TaskManager for ``rest.flamegraph.num-samples`` samples of the vertex's
  task threads, ``delay-between-samples`` apart, taken inside the TaskManager's JVM. It barely
  slows the job, so the window's rates are read over the sampled span itself. Measured on a 1
  ms-a-record job: 1.4-1.5% of its throughput per 100 x 50 ms burst (``docs/flink.md``).
- **Thread dumps** of every TaskManager (:func:`~bpmon.collectors.flink.dumps.dump_sample`)
  otherwise: a full ``jstack`` of the JVM per sample, which stops it at a safepoint, costs a
  CPU-bound job a fifth of its throughput or more while it runs, and is often slower than the
  50 ms grid (samples are skipped). Their rates come from an unsampled span before them
  (:mod:`~bpmon.collectors.flink.readings`).

:class:`Bursts` keeps what lasts from window to window of a watch: the cluster's settings, Flink's
sampler (or why it is not used: :func:`flame_reason`), the fresh readings of the job's metrics and
the last one taken. Each :meth:`Bursts.take` tries Flink's own sampler first and takes thread
dumps when it cannot give a fresh graph in time (a cached graph younger than its refresh interval
allows, a sampler that answers disabled); the ``sampling`` finding (:func:`sampling_note`) says
which sampler ran, why, and what the window cost.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Literal

from bpmon.collectors.flink.config import FlinkClusterConfig
from bpmon.collectors.flink.dumps import DumpCost, SampleGrid, Tally, dump_cost, dump_sample
from bpmon.collectors.flink.flame import FlameSampler, FlameUnavailableError, flame_window
from bpmon.collectors.flink.placement import JobPlacement
from bpmon.collectors.flink.readings import QUIET_FROM_S, Reading, Readings, VertexValues
from bpmon.collectors.flink.rest import Cost, FlinkRest
from bpmon.collectors.sampler import Progress, StopSignal
from bpmon.model.clock import utc_now
from bpmon.model.values import Finding, Window

Method = Literal["flame-graph", "thread-dumps", "none"]

OLDEST = (1, 18)
"""The oldest Flink bpmon supports: the first with the adaptive scheduler's rescale endpoint
(``PUT /jobs/{id}/resource-requirements``), after the first with a flame graph per subtask
(1.17, ``subtaskindex``)."""

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


@dataclass(frozen=True, slots=True)
class FlinkSampling:
    """How a window's samples were taken.

    Attributes:
        method: ``flame-graph`` (Flink's sampler), ``thread-dumps``, or ``none`` (no task
            runs).
        taken: samples taken, over every subtask sampled.
        planned: samples planned, over every subtask.
        subtasks: subtasks sampled.
        reason: why thread dumps were used (None: the flame graph ran, or was never enabled).
        dumps: the thread dumps' median cost (thread dumps only).
        span: what the window's rates and busy time were read over.
    """

    method: Method
    taken: int
    planned: int
    subtasks: int
    reason: str | None = None
    dumps: DumpCost | None = None
    span: str = ""


def version_tuple(version: str) -> tuple[int, ...]:
    """``"1.17.2"`` as ``(1, 17, 2)``; the leading numeric parts only."""
    parts = []
    for part in version.split("."):
        digits = "".join(c for c in part if c.isdigit())
        if not digits or digits != part[: len(digits)]:
            break
        parts.append(int(digits))
    return tuple(parts)


def flame_reason(config: FlinkClusterConfig, sampler: Sampler) -> str | None:
    """Why Flink's own sampler is not used for a watch (None: it is)."""
    if sampler == "thread-dumps":
        return "thread dumps asked for"
    if not config.read:
        return "the JobManager does not show its configuration (GET /jobmanager/config)"
    if not config.flamegraph:
        return "Flink's sampler is off: set rest.flamegraph.enabled: true"
    return None


def unsupported(version: str, url: str) -> str | None:
    """One line on a cluster older than :data:`OLDEST` (None: supported): what would not work."""
    parsed = version_tuple(version)
    if not parsed or parsed >= OLDEST:
        return None
    missing = ["rescaling a running job (--follow, whatif --apply: 1.18+)"]
    if parsed < (1, 17):
        missing.append("Flink's sampler per subtask (1.17+)")
    if parsed < (1, 13):
        missing.append("busy and backpressured time (1.13+)")
    return (
        f"Flink {version} at {url} is older than bpmon supports (1.18 and newer): no "
        f"{', no '.join(missing)}; upgrade the cluster to 1.18 or later (1.20 is the LTS)"
    )


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
        window, costs = grid.run(
            lambda: dump_sample(self.rest, placement.task_managers, tally), progress, stop
        )
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


def sampling_note(
    job: str,
    window: Window,
    sampling: FlinkSampling,
    cost: Cost,
    managers: int,
    fresh: str,
    checkpoints: Cost | None = None,
) -> Finding:
    """The ``sampling`` finding: the sampler used (and why), samples taken of those planned,
    what the window cost (``checkpoints``: the part of it reading the checkpoints), what its
    rates span and how ``fresh`` they are."""
    if sampling.method == "none":
        how = "nothing sampled: no task of the job runs (every subtask waits to be deployed)"
    elif sampling.method == "flame-graph":
        how = (
            f"{sampling.taken} of {sampling.planned} samples taken by Flink's flame-graph "
            f"sampler ({sampling.subtasks} subtask(s) x {window.planned_samples} x "
            f"{window.planned_interval_ms:g} ms: rest.flamegraph.num-samples, "
            "delay-between-samples)"
        )
    else:
        dump = (
            f"one thread dump took {sampling.dumps.median_ms:.0f} ms and "
            f"{sampling.dumps.median_bytes / 1024:.0f} KB (median)"
            if sampling.dumps is not None
            else "no thread dump was taken"
        )
        why = f"{sampling.reason}; " if sampling.reason else ""
        planned = window.planned_samples or window.samples
        how = (
            f"{window.samples} of {planned} samples taken by thread dumps ({why}"
            f"{managers} task manager(s)); {dump}"
        )
    read = (
        f" ({checkpoints.requests} of them for the checkpoints, "
        f"{checkpoints.seconds * 1000:.0f} ms)"
        if checkpoints is not None and checkpoints.requests
        else ""
    )
    return Finding(
        "sampling",
        job,
        f"{how}; {window.seconds:.1f} s, {cost.requests} requests{read}, "
        f"{cost.bytes / 1024:.0f} KB; rates and busy time {sampling.span}; {fresh}",
    )
