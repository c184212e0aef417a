"""A running Flink job as a :class:`~bpmon.collectors.target.Target`, read over Flink's REST API.

Constructing a :class:`FlinkTarget` finds the job (by id, by name, or the only one running) and
reads its graph (:mod:`~bpmon.collectors.flink_plan`); :meth:`FlinkTarget.start` finds where its
subtasks run and which metric names this Flink version uses. One :meth:`~FlinkTarget.observe` is
one window:

1. stack samples: the thread dumps of every task manager running the job, fetched together, at
   the planned interval. A dump takes longer than 50 ms on a busy task manager, so a sample whose
   deadline passed while the previous one was still being fetched is skipped, not taken late: the
   window keeps its planned length, and the report says how many samples were taken. Each task
   thread's stack is classified by the ``flink-jvm`` profile
   (:mod:`~bpmon.collectors.flink_threads`);
2. the time and buffer metrics of every subtask, one request per vertex, read when the samples
   end (:mod:`~bpmon.collectors.flink_metrics`);
3. Flink's own backpressure endpoint per vertex, as a cross-check: where Flink's level differs
   from the one bpmon's samples give, the report says so (a ``flink-disagrees`` finding).

Nothing is started or stopped on the cluster; :meth:`~FlinkTarget.wait` raises
:class:`~bpmon.errors.JobError` once the job leaves RUNNING.
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, replace
from datetime import timedelta

from bpmon.clock import utc_now
from bpmon.collectors.flink_metrics import (
    MetricNames,
    flink_level,
    pool_means,
    query_chunks,
    resolve_names,
    soft_share,
    subtask_metrics,
    values_of,
    window_accounting,
    young_rate,
)
from bpmon.collectors.flink_placement import JobPlacement
from bpmon.collectors.flink_plan import FlinkGraph, Placement, graph_of, jobs_of, pick_job
from bpmon.collectors.flink_rest import Cost, FlinkRest, NotFoundError
from bpmon.collectors.flink_threads import Tally, parse_dump
from bpmon.collectors.profile import Profile, StackClassifier, load_profile
from bpmon.collectors.sampler import Progress, StopSignal
from bpmon.collectors.target import Ending
from bpmon.errors import CollectorError, JobError
from bpmon.model import (
    Finding,
    Metrics,
    Observation,
    Source,
    SubtaskWindow,
    TargetSettings,
    VertexObservation,
    Window,
)

SNAPSHOT_EVERY_S = 1.0
"""A live view asks for a snapshot four times a second; Flink's metric store refreshes at most
every second (``metrics.fetcher.update-interval``), so one is read per second and reused."""

METRICS_WAIT_S = 30.0
"""How long :meth:`FlinkTarget.start` waits for a new job's first metrics (Flink's metric
fetcher refreshes every ``metrics.fetcher.update-interval``, 10 s by default)."""


@dataclass(frozen=True, slots=True)
class DumpCost:
    """What the thread dumps of one burst cost: how many, their median time and size."""

    dumps: int
    median_ms: float
    median_bytes: int


class FlinkTarget:
    """A running job of the Flink cluster at ``url``.

    Args:
        url: the JobManager's REST address (``http://localhost:8081``).
        job: the job's id or name; None picks the only running job.
        collector_profile: the profile reading the thread dumps (``flink-jvm``).
        rest: a client to use (tests); made from ``url`` when None.
    """

    def __init__(
        self,
        url: str,
        job: str | None = None,
        *,
        collector_profile: str = "flink-jvm",
        rest: FlinkRest | None = None,
        clock: Callable[[], float] = time.monotonic,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        self.rest = rest or FlinkRest(url)
        self.profile: Profile = load_profile(collector_profile)
        self._classifier = StackClassifier(self.profile)
        self._clock, self._sleep = clock, sleep
        self.version = self._version()
        ref = pick_job(jobs_of(self.rest.get("/jobs/overview")), job, self.rest.url)
        self.graph: FlinkGraph = graph_of(
            ref, self.rest.get(f"/jobs/{ref.id}"), self.rest.get(f"/jobs/{ref.id}/plan")
        )
        self.placement = JobPlacement(self.rest, self.graph)
        self._names: dict[str, MetricNames] = {}
        self.last_dump_cost: DumpCost | None = None
        self._snapshot: tuple[float, Observation] | None = None

    @property
    def job(self) -> str:
        """The job's name on the cluster."""
        return self.graph.job.name

    @property
    def source(self) -> Source:
        """Always ``flink``."""
        return "flink"

    def start(self) -> None:
        """Find where every subtask runs, and the metric names this Flink version uses."""
        self.placement.refresh()
        deadline = self._clock() + METRICS_WAIT_S
        for vertex in self.graph.vertices:
            while True:
                listed = self.rest.get(f"/jobs/{self.graph.job.id}/vertices/{vertex.id}/metrics")
                ids = [str(m["id"]) for m in listed if isinstance(m, dict) and "id" in m]
                if ids or self._clock() > deadline:
                    break
                self._sleep(0.5)
            if not ids:
                raise CollectorError(
                    f"Flink at {self.rest.url} shows no metrics for vertex {vertex.name!r} after "
                    f"{METRICS_WAIT_S:g} s; check metrics.fetcher.update-interval and the task "
                    "managers' logs, then run this again"
                )
            where = f"Flink {self.version} at {self.rest.url}"
            self._names[vertex.id] = resolve_names(ids, vertex.name, where)

    def _version(self) -> str:
        """The cluster's Flink version (``GET /config``); an address that is not Flink's REST
        endpoint fails here, with one line naming the fix."""
        try:
            config = self.rest.get("/config")
        except NotFoundError:
            config = None
        if not isinstance(config, dict) or "flink-version" not in config:
            raise CollectorError(
                f"{self.rest.url} answers HTTP but is not a Flink REST endpoint (GET /config has "
                "no flink-version); point --flink at the JobManager's REST address (rest.port, "
                "default 8081)"
            )
        return str(config["flink-version"])

    def observe(
        self,
        samples: int = 100,
        interval_ms: float = 50.0,
        progress: Progress | None = None,
        stop: StopSignal | None = None,
    ) -> Observation:
        """One window: thread-dump samples at the planned interval, then metrics and Flink's
        own backpressure levels."""
        before = self.rest.cost
        self.placement.refresh()
        totals = {v.id: self._metrics(v.id, v.parallelism) for v in self.graph.vertices}
        tally = Tally(self._classifier, self.placement.expected())
        began_wall, taken, lateness, dump_costs = utc_now(), [], [], []
        t0 = self._clock()
        interval_s = interval_ms / 1000
        for k in range(samples):
            if stop is not None and stop.is_set():
                break
            deadline = t0 + k * interval_s
            if self._clock() > deadline + interval_s:
                continue  # the previous dump overran this sample's slot: skipped, not late
            while (left := deadline - self._clock()) > 0:
                self._sleep(left)
            at = self._clock()
            dump_costs.extend(self._sample(tally))
            taken.append(at)
            lateness.append(at - deadline)
            if progress is not None:
                progress(k + 1, samples)
        while (
            not (stop is not None and stop.is_set())
            and (left := t0 + samples * interval_s - self._clock()) > 0
        ):
            self._sleep(left)
        window = Window(
            start=began_wall,
            end=began_wall + timedelta(seconds=self._clock() - t0),
            samples=len(taken),
            interval_ms=_achieved_ms(taken, interval_ms),
            jitter_ms_p99=_p99_ms(lateness),
            planned_samples=samples,
            planned_interval_ms=float(interval_ms),
        )
        self.last_dump_cost = _dump_cost(dump_costs)
        vertices, levels = self._vertices(tally, totals), self._flink_levels()
        cost = self.rest.cost - before
        notes = (
            _sampling_note(
                self.job, window, self.last_dump_cost, cost, len(self.placement.task_managers)
            ),
            *_disagreements(vertices, levels),
        )
        return Observation(
            job=self.job,
            source="flink",
            window=window,
            vertices=vertices,
            settings=TargetSettings(task_managers=len(self.placement.task_managers)),
            notes=notes,
        )

    def snapshot(self) -> Observation:
        """Every subtask's metrics now (Flink's own windows), without samples; read at most once
        per :data:`SNAPSHOT_EVERY_S`."""
        if self._snapshot is not None and self._clock() - self._snapshot[0] < SNAPSHOT_EVERY_S:
            return self._snapshot[1]
        now = utc_now()
        observation = Observation(
            job=self.job,
            source="flink",
            window=Window(start=now, end=now, samples=0, interval_ms=0.0),
            vertices=self._vertices(None),
        )
        self._snapshot = (self._clock(), observation)
        return observation

    def wait(self, seconds: float) -> None:
        """Sleep ``seconds``; raises JobError once the job is no longer running."""
        if seconds > 0:
            self._sleep(seconds)
        state = str(self.rest.get(f"/jobs/{self.graph.job.id}/status").get("status", ""))
        if state != "RUNNING":
            raise JobError(f"job {self.job!r} ({self.graph.job.id}) is {state}, no longer RUNNING")

    def stop(self) -> Ending:
        """Nothing to stop: bpmon only reads the cluster."""
        return Ending()

    # -- one window ---------------------------------------------------------------------------

    def _sample(self, tally: Tally) -> list[tuple[float, int]]:
        """One sample: every task manager's dump at once; returns (seconds, bytes) per dump."""
        managers = self.placement.task_managers

        def dump(tm: str) -> tuple[str, object, float, int]:
            before = self.rest.cost
            answer = self.rest.get(f"/taskmanagers/{tm}/thread-dump")
            spent = self.rest.cost - before
            return tm, answer, spent.seconds, spent.bytes

        if len(managers) == 1:
            results = [dump(managers[0])]
        else:
            with ThreadPoolExecutor(len(managers)) as pool:
                results = list(pool.map(dump, managers))
        for tm, answer, _, _ in results:
            tally.add(tm, parse_dump(answer if isinstance(answer, dict) else {}))
        return [(seconds, size) for _, _, seconds, size in results]

    def _metrics(self, vertex_id: str, parallelism: int) -> dict[str, float]:
        names = self._names.get(vertex_id)
        if names is None:
            return {}
        values: dict[str, float] = {}
        for chunk in query_chunks(names.ids(parallelism)):
            path = f"/jobs/{self.graph.job.id}/vertices/{vertex_id}/metrics"
            values.update(values_of(self.rest.get(path, {"get": chunk})))
        return values

    def _vertices(
        self, tally: Tally | None, before: dict[str, dict[str, float]] | None = None
    ) -> tuple[VertexObservation, ...]:
        """The vertices with every subtask's metrics now (and, given the readings ``before``
        the window, its time accounting and record rates between the two)."""
        vertices = []
        for v in self.graph.vertices:
            values = self._metrics(v.id, v.parallelism)
            subtasks = []
            for index in range(v.parallelism):
                place: Placement | None = self.placement.of(v.name, index)
                m: Metrics = _young(subtask_metrics(values, self._names[v.id], index), place)
                if before is not None:
                    m = _over_window(m, before.get(v.id, {}), values, self._names[v.id], index)
                counts = tally.counts((v.name, index), soft_share(m)) if tally else None
                subtasks.append(
                    SubtaskWindow(
                        index=index,
                        thread=counts.name if counts else f"{v.name} ({index + 1}/{v.parallelism})",
                        samples=counts.total if counts else 0,
                        backpressured=counts.backpressured if counts else 0,
                        idle=counts.idle if counts else 0,
                        busy=counts.busy if counts else 0,
                        task_manager=self.placement.index_of(place),
                        metrics=m,
                    )
                )
            vertices.append(
                VertexObservation(
                    name=v.name,
                    parallelism=v.parallelism,
                    inputs=v.inputs,
                    subtasks=tuple(subtasks),
                    kind=v.kind,
                )
            )
        return tuple(vertices)

    def _flink_levels(self) -> dict[str, tuple[str | None, float | None]]:
        """Per vertex name, Flink's own level and worst ratio (``GET .../backpressure``)."""
        levels: dict[str, tuple[str | None, float | None]] = {}
        for v in self.graph.vertices:
            path = f"/jobs/{self.graph.job.id}/vertices/{v.id}/backpressure"
            level = flink_level(self.rest.get(path))
            worst = max(level.ratios.values()) if level.ratios else None
            levels[v.name] = (level.level, worst)
        return levels


def _young(m: Metrics, place: Placement | None) -> Metrics:
    """Record rates corrected for a task younger than Flink's 60 s meters."""
    running = place.running_s if place is not None else None
    return replace(
        m,
        records_in_per_s=young_rate(m.records_in_per_s, running),
        records_out_per_s=young_rate(m.records_out_per_s, running),
    )


def _over_window(
    m: Metrics, before: dict[str, float], after: dict[str, float], names: MetricNames, index: int
) -> Metrics:
    """Flink's gauges, replaced by the accounting between two readings where there is one;
    pool usages as the mean of the two readings."""
    out_pool, in_pool = pool_means(before, after, names, index)
    m = replace(m, out_pool_usage=out_pool, in_pool_usage=in_pool)
    exact = window_accounting(before, after, names, index)
    if exact is None:
        return m
    return replace(
        m,
        busy_ratio=exact.busy_ratio,
        idle_ratio=exact.idle_ratio,
        backpressured_time_ratio=exact.backpressured_time_ratio,
        records_in_per_s=exact.records_in_per_s,
        records_out_per_s=exact.records_out_per_s,
        extra={**m.extra, **exact.extra},
    )


def _level(ratio: float) -> str:
    """Flink's thresholds (the same as the report's defaults)."""
    return "OK" if ratio <= 0.10 else "LOW" if ratio <= 0.5 else "HIGH"


def _disagreements(
    vertices: tuple[VertexObservation, ...], levels: dict[str, tuple[str | None, float | None]]
) -> list[Finding]:
    """A ``flink-disagrees`` finding per vertex whose sampled level differs from Flink's."""
    found = []
    for v in vertices:
        flink, flink_ratio = levels.get(v.name, (None, None))
        ratios = [s.backpressured / s.samples for s in v.subtasks if s.samples > 0]
        if flink is None or flink_ratio is None or not ratios:
            continue
        mine = max(ratios)
        if _level(mine) != flink:
            found.append(
                Finding(
                    "flink-disagrees",
                    v.name,
                    f"Flink's backpressure endpoint says {flink} ({flink_ratio:.2f}, its 60 s "
                    f"average); bpmon's samples of this window say {_level(mine)} ({mine:.2f})",
                )
            )
    return found


def _sampling_note(
    job: str, window: Window, dumps: DumpCost | None, cost: Cost, managers: int
) -> Finding:
    """The ``sampling`` finding: samples taken of those planned, and what they cost."""
    planned = window.planned_samples or window.samples
    dump = (
        f"one thread dump took {dumps.median_ms:.0f} ms and {dumps.median_bytes / 1024:.0f} KB "
        "(median)"
        if dumps is not None
        else "no thread dump was taken"
    )
    return Finding(
        "sampling",
        job,
        f"{window.samples} of {planned} samples taken in {window.seconds:.1f} s "
        f"({managers} task manager(s)); {dump}; the window cost {cost.requests} requests, "
        f"{cost.bytes / 1024:.0f} KB",
    )


def _dump_cost(costs: list[tuple[float, int]]) -> DumpCost | None:
    if not costs:
        return None
    return DumpCost(
        dumps=len(costs),
        median_ms=statistics.median(c[0] for c in costs) * 1000,
        median_bytes=int(statistics.median(c[1] for c in costs)),
    )


def _achieved_ms(taken: list[float], planned_ms: float) -> float:
    if len(taken) < 2:
        return float(planned_ms)
    return round((taken[-1] - taken[0]) / (len(taken) - 1) * 1000, 3)


def _p99_ms(lateness: list[float]) -> float | None:
    if not lateness:
        return None
    base = min(lateness)
    ordered = sorted(x - base for x in lateness)
    return round(ordered[max(0, -(-99 * len(ordered) // 100) - 1)] * 1000, 3)
