"""A running Flink job as a :class:`~bpmon.collectors.target.Target`, read over Flink's REST API.

Constructing a :class:`FlinkTarget` is the first contact: it checks the address is Flink's REST
endpoint, finds the job (by id, by name, or the only one running) and reads its graph, each
request tried once, so a wrong address or job is one line at once (exit 5). From
:meth:`FlinkTarget.start` on, the watch rides out what a long-running job goes through:

- a request that times out or meets an HTTP 5xx is tried again with backoff
  (:mod:`~bpmon.collectors.flink.rest`), then the window is a gap
  (:class:`~bpmon.model.errors.UnavailableError`: the service waits and tries again, and its next
  report says how long and why);
- a job restarting, failing over or waiting for a TaskManager is a gap too, a cancelled or
  finished one ends the watch ``ended`` (:class:`~bpmon.model.errors.JobOverError`), a failed one
  ``failed`` (:mod:`~bpmon.collectors.flink.status`);
- the graph, the placement of every subtask and, where the parallelism changed, the metric names
  are read again at the start of every window (:mod:`~bpmon.collectors.flink.job`), so a rescaled
  job shows its new subtasks and a ``rescaled`` finding; ``FINISHED`` subtasks are left out;
- vertices are Flink's vertex ids inside, and named uniquely in the report (``work``,
  ``work#2``: :mod:`~bpmon.collectors.flink.plan`).

One :meth:`~FlinkTarget.observe` is one window:

1. stack samples, by Flink's own sampler where the cluster enables it
   (``rest.flamegraph.enabled: true``, Flink 1.17+: a flame graph per subtask, sampled inside the
   TaskManagers at a fraction of a dump's cost), else by the thread dumps of every task manager
   running the job, fetched together at the planned interval (a sample whose deadline passed
   while the previous dump was still being fetched is skipped, not taken late). Each task
   thread's stack is classified by the ``flink-jvm`` profile
   (:mod:`~bpmon.collectors.flink.burst`, :mod:`~bpmon.collectors.flink.dumps`); the
   cluster's settings are read once (:mod:`~bpmon.collectors.flink.config`);
2. the time and buffer metrics of every subtask, one request per vertex, read fresh (a stale
   answer of Flink's metric store is read again) at both ends of a span the sampling did not
   slow: the sampled window with Flink's sampler, an unsampled span before the dumps with thread
   dumps (:mod:`~bpmon.collectors.flink.readings`, :mod:`~bpmon.collectors.flink.metrics`);
3. Flink's own backpressure endpoint per vertex, as a cross-check: where Flink's level differs
   from the one bpmon's samples give, the report says so (a ``flink-disagrees`` finding);
4. the job's checkpoints as of the window's end: its settings (once), its counts and the newest
   completed and failed checkpoint, each subtask's phases read once per checkpoint
   (:mod:`~bpmon.collectors.flink.checkpoints`); what cannot be read is a
   ``checkpoints-unread`` finding, never a gap.

A window whose job restarted while it was read (the job no longer RUNNING at its end, or a
subtask whose thread is missing from a dump of its task manager: a running task's thread is in
every dump) is a gap, never half a report. Between windows,
:meth:`~FlinkTarget.wait` reads the job's state at most once per :data:`STATUS_EVERY_S`.
Nothing is started or stopped on the cluster.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable, Mapping
from dataclasses import replace

from bpmon.collectors.flink.burst import (
    Bursts,
    FlinkSampling,
    Sampler,
    Span,
    flame_reason,
    sampling_note,
    unsupported,
)
from bpmon.collectors.flink.checkpoints import FlinkCheckpoints
from bpmon.collectors.flink.config import FlinkClusterConfig, read_config
from bpmon.collectors.flink.dumps import DumpCost, Tally
from bpmon.collectors.flink.job import WatchedJob
from bpmon.collectors.flink.metrics import (
    FlinkLevel,
    blind_share,
    query_chunks,
    soft_share,
    subtask_metrics,
    values_of,
)
from bpmon.collectors.flink.placement import (
    JobPlacement,
    Slots,
    flink_levels,
    read_slots,
    scheduling_of,
)
from bpmon.collectors.flink.plan import (
    FlinkGraph,
    FlinkVertex,
    graph_of,
    jobs_of,
    pick_job,
    plan_of,
)
from bpmon.collectors.flink.readings import VertexValues
from bpmon.collectors.flink.rest import Cost, FlinkRest, NotFoundError
from bpmon.collectors.flink.status import WAITING
from bpmon.collectors.flink.window import (
    Blind,
    ambiguous_note,
    blind_notes,
    chain_operators,
    disagreements,
    over_window,
    subtask_window,
    young,
)
from bpmon.collectors.profile import Profile, StackClassifier, load_profile
from bpmon.collectors.sampler import Progress, StopSignal
from bpmon.collectors.target import Ending
from bpmon.model.clock import utc_now
from bpmon.model.errors import CollectorError, UnavailableError
from bpmon.model.signals import FLINK
from bpmon.model.values import (
    NO_METRICS,
    Finding,
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

STATUS_EVERY_S = 1.0
"""The service asks :meth:`FlinkTarget.wait` how the job is every quarter second or so between
bursts; the job's state is read at most this often and the last answer reused."""

METRICS_WAIT_S = 30.0
"""How long :meth:`FlinkTarget.start` waits for a new job's first metrics (Flink's metric
fetcher refreshes every ``metrics.fetcher.update-interval``, 10 s by default)."""


class FlinkTarget:
    """A running job of the Flink cluster at ``url``.

    Args:
        url: the JobManager's REST address (``http://localhost:8081``).
        job: the job's id or name; None picks the only running job.
        collector_profile: the profile reading the stacks (``flink-jvm``).
        rest: a client to use (tests); made from ``url`` when None.
        sampler: ``auto`` or ``thread-dumps`` (see :data:`Sampler`).
        label: added to the job's name (``NAME @ LABEL``): its cluster, when several are.
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
        sampler: Sampler = "auto",
        label: str | None = None,
    ) -> None:
        self.rest = rest or FlinkRest(url)
        self._label = label
        self.profile: Profile = load_profile(collector_profile)
        self._classifier = StackClassifier(self.profile)
        self._clock, self._sleep = clock, sleep
        self.version = self._version()
        jobs = jobs_of(self.rest.get("/jobs/overview", retry=False))
        ref = pick_job(jobs, job, self.rest.url, transient=WAITING)
        details = self.rest.get(f"/jobs/{ref.id}", retry=False)
        plan = None if plan_of(details) else self.rest.get(f"/jobs/{ref.id}/plan", retry=False)
        graph = graph_of(ref, details, plan)
        self.watched = WatchedJob(self.rest, graph, clock, sleep, self.version)
        self.config: FlinkClusterConfig = read_config(self.rest)
        off = flame_reason(self.config, sampler)
        self.bursts = Bursts(self.rest, self.config, ref.id, self._read_all, off, clock, sleep)
        self.last_sampling: FlinkSampling | None = None
        self._slots: Slots = (None, None)
        self._snapshot: tuple[float, Observation | None] | None = None
        self._rescales: list[Finding] = []
        self._checkpoints = FlinkCheckpoints(self.rest, ref.id, ref.name, self.version)

    @property
    def job(self) -> str:
        """The job's name on the cluster, ``NAME @ LABEL`` given a label (its cluster, when
        several are watched)."""
        name = self.watched.ref.name
        return f"{name} @ {self._label}" if self._label else name

    @property
    def source(self) -> Source:
        """Always ``flink``."""
        return "flink"

    @property
    def graph(self) -> FlinkGraph:
        """The job's graph as last read."""
        return self.watched.graph

    @property
    def placement(self) -> JobPlacement:
        """Where the job's subtasks ran at the start of the last window."""
        return self.watched.placement

    def start(self) -> None:
        """Find where every subtask runs and which metric names this Flink uses, waiting up to
        :data:`METRICS_WAIT_S` for a new job's first metrics. A job not running yet (restarting,
        waiting for resources) is left to the first window, which is then a gap."""
        with contextlib.suppress(UnavailableError):
            changes = self.watched.refresh(METRICS_WAIT_S)
            self._rescales.extend(n for n in changes if n.kind == "rescaled")

    @property
    def last_checkpoint_cost(self) -> Cost:
        """What reading the last window's checkpoints cost (a part of the window's cost)."""
        return self._checkpoints.last_cost

    @property
    def last_dump_cost(self) -> DumpCost | None:
        """What the last window's thread dumps cost (None: Flink's sampler took it)."""
        return self.last_sampling.dumps if self.last_sampling is not None else None

    def _version(self) -> str:
        """The cluster's Flink version (``GET /config``); an address that is not Flink's REST
        endpoint fails here, with one line naming the fix."""
        try:
            config = self.rest.get("/config", retry=False)
        except NotFoundError:
            config = None
        if not isinstance(config, dict) or "flink-version" not in config:
            raise CollectorError(
                f"{self.rest.url} answers HTTP but is not a Flink REST endpoint (GET /config has "
                "no flink-version); point --flink at the JobManager's REST address (rest.port, "
                "default 8081)"
            )
        version = str(config["flink-version"])
        too_old = unsupported(version, self.rest.url)
        if too_old is not None:
            raise CollectorError(too_old)
        return version

    def observe(
        self,
        samples: int = 100,
        interval_ms: float = 50.0,
        progress: Progress | None = None,
        stop: StopSignal | None = None,
    ) -> Observation:
        """One window: the job read again, thread-dump samples at the planned interval, then
        metrics and Flink's own backpressure levels.

        Raises:
            UnavailableError: the job cannot be read now, or restarted while it was.
            JobOverError, JobError: the job ended (see :mod:`~bpmon.collectors.flink.status`).
        """
        try:
            return self._observe(samples, interval_ms, progress, stop)
        except NotFoundError as err:  # a vertex or task manager gone: the job changed
            raise UnavailableError(f"job {self.watched.label} changed while read: {err}") from None

    def _observe(
        self, samples: int, interval_ms: float, progress: Progress | None, stop: StopSignal | None
    ) -> Observation:
        before = self.rest.cost
        changes = self.watched.refresh()
        self._rescales.extend(n for n in changes if n.kind == "rescaled")
        placement = self.placement
        burst = self.bursts.take(
            placement,
            lambda: Tally(self._classifier, placement.expected()),
            samples,
            interval_ms,
            progress,
            stop,
        )
        tally, window, span, sampling = burst.tally, burst.window, burst.span, burst.sampling
        missed = tally.missed()
        if missed:
            (vid, index), seen, dumps = missed[0]
            raise UnavailableError(
                f"job {self.watched.label} restarted while its window was read: "
                f"{self.graph.by_id(vid).name}[{index}] was in {seen} of the {dumps} thread "
                "dumps of the task manager Flink placed it on"
            )
        checkpoints, unread = self._checkpoints.read(self.graph)  # never raises
        self.watched.check()  # still running at the end of the window
        self.last_sampling = sampling
        self._slots = read_slots(self.rest, placement)
        levels = flink_levels(self.rest, placement)
        blind: list[Blind] = []
        vertices = self._vertices(tally, span, levels=levels, blind=blind)
        managers = len(placement.task_managers)
        spent = self.rest.cost - before
        fresh = self.bursts.fresh_note(span)
        notes = [
            sampling_note(
                self.job, window, sampling, spent, managers, fresh, self.last_checkpoint_cost
            ),
            *([unread] if unread is not None else []),
            *self._rescales,  # every rescale since the last window given, however many failed
            *(n for n in changes if n.kind != "rescaled"),
            *self._ambiguous(tally),
            *blind_notes(blind),
            *disagreements(
                vertices, {self.graph.by_id(vid).name: lv for vid, lv in levels.items()}
            ),
        ]
        self._rescales = []
        return Observation(
            job=self.job,
            source="flink",
            window=window,
            vertices=vertices,
            settings=TargetSettings(
                task_managers=managers,
                debloat=self.config.debloat if self.config.read else None,
                debloat_target_ms=self.config.debloat_target_ms if self.config.debloat else None,
            ),
            notes=tuple(notes),
            signals=FLINK,
            checkpoints=checkpoints,
        )

    def snapshot(self) -> Observation | None:
        """Every running subtask's metrics now (Flink's own windows), without samples; read at
        most once per :data:`SNAPSHOT_EVERY_S`, each request tried once. None while the job
        cannot be read (the watch's own windows say why)."""
        if self._snapshot is not None and self._clock() - self._snapshot[0] < SNAPSHOT_EVERY_S:
            return self._snapshot[1]
        now = utc_now()
        try:
            vertices = self._vertices(None, retry=False)
        except CollectorError:
            vertices = ()
        observation = (
            Observation(
                job=self.job,
                source="flink",
                window=Window(start=now, end=now, samples=0, interval_ms=0.0),
                vertices=vertices,
                signals=FLINK,
            )
            if vertices
            else None
        )
        self._snapshot = (self._clock(), observation)
        return observation

    def wait(self, seconds: float) -> None:
        """Sleep ``seconds``, then raise what the job's state says (nothing while it runs); the
        state is read at most once per :data:`STATUS_EVERY_S`."""
        if seconds > 0:
            self._sleep(seconds)
        self.watched.check(max_age_s=STATUS_EVERY_S)

    def stop(self) -> Ending:
        """Nothing to stop: bpmon only reads the cluster."""
        return Ending()

    # -- one window ---------------------------------------------------------------------------

    def _metrics(self, vertex_id: str, running: list[int], retry: bool = True) -> dict[str, float]:
        names = self.watched.names.get(vertex_id)
        if names is None or not running:
            return {}
        values: dict[str, float] = {}
        path = f"/jobs/{self.watched.ref.id}/vertices/{vertex_id}/metrics"
        for chunk in query_chunks(names.ids(running)):
            values.update(values_of(self.rest.get(path, {"get": chunk}, retry=retry)))
        return values

    def _read_all(self) -> VertexValues:
        """Every running vertex's metric values now (one request per vertex)."""
        placement = self.placement
        return {
            v.id: self._metrics(v.id, placement.running(v.id)) for v in placement.graph.vertices
        }

    def _vertices(
        self,
        tally: Tally | None,
        span: Span | None = None,
        retry: bool = True,
        levels: Mapping[str, FlinkLevel] | None = None,
        blind: list[Blind] | None = None,
    ) -> tuple[VertexObservation, ...]:
        """The running vertices with every running subtask's metrics: given the two readings of
        a ``span``, the second's gauges and the time accounting and record rates between the
        two; else the gauges read now (a live snapshot). Subtasks waiting for slots are shown
        with their state only. A vertex whose every subtask finished is left out, and so are
        the edges from it.

        The placement is taken once, with the graph it was read for: a live snapshot taken while
        a window re-reads the job sees one or the other, never half of each. ``levels``: Flink's
        own per vertex id, for the subtasks nothing else can see (:func:`blind_share`); each
        one so decided is added to ``blind``."""
        placement = self.placement
        running = [
            v
            for v in placement.graph.vertices
            if placement.running(v.id) or placement.waiting_of(v.id)
        ]
        shown = {v.name for v in running}
        return tuple(
            VertexObservation(
                name=v.name,
                parallelism=v.parallelism,
                inputs=tuple(e for e in v.inputs if e.source in shown),
                subtasks=self._subtasks(
                    placement, v, tally, span, retry, (levels or {}).get(v.id), blind
                ),
                kind=v.kind,
                operators=chain_operators(v.task_name or v.name),
                max_parallelism=v.max_parallelism,
            )
            for v in running
        )

    def _subtasks(
        self,
        placement: JobPlacement,
        vertex: FlinkVertex,
        tally: Tally | None,
        span: Span | None,
        retry: bool,
        level: FlinkLevel | None = None,
        blind: list[Blind] | None = None,
    ) -> tuple[SubtaskWindow, ...]:
        """The running subtasks of ``vertex``: their samples in ``tally`` and their metrics."""
        running = placement.running(vertex.id)
        if span is None:
            values, before = self._metrics(vertex.id, running, retry), None
        else:
            values = dict(span[1].values.get(vertex.id, {}))
            before = span[0].values.get(vertex.id, {})
        names = self.watched.names.get(vertex.id)
        subtasks = []
        for index in running:
            place = placement.of(vertex.id, index)
            m = young(subtask_metrics(values, names, index), place) if names else NO_METRICS
            if before is not None and names is not None:
                m = over_window(m, before, values, names, index)
                m = replace(m, scheduling=scheduling_of(place, self._slots))
            share = soft_share(m)
            if tally is not None and share is None and tally.suspended((vertex.id, index)):
                decided = blind_share(m, level.ratios.get(index) if level else None)
                if decided is not None:
                    share = decided.share
                    if blind is not None:
                        blind.append(Blind(vertex.name, index, decided))
            counts = tally.counts((vertex.id, index), share) if tally else None
            thread = f"{vertex.task_name or vertex.name} ({index + 1}/{vertex.parallelism})"
            subtasks.append(subtask_window(index, counts, thread, placement.index_of(place), m))
        for index in placement.waiting_of(vertex.id):  # no thread, no metrics: its state
            place = placement.waiting[(vertex.id, index)]
            scheduling = scheduling_of(place, self._slots, placement.slot_failures)
            m = replace(NO_METRICS, scheduling=scheduling)
            thread = f"{vertex.task_name or vertex.name} ({index + 1}/{vertex.parallelism})"
            subtasks.append(subtask_window(index, None, thread, None, m))
        return tuple(sorted(subtasks, key=lambda s: s.index))

    def _ambiguous(self, tally: Tally) -> list[Finding]:
        """The ``ambiguous-threads`` finding, when some subtasks' threads were alike."""
        ids = {vid for vid, _ in tally.ambiguous()}
        names = [v.name for v in self.graph.vertices if v.id in ids]
        return [ambiguous_note(self.job, names)] if names else []


def running_jobs(url: str) -> list[tuple[str, str]]:
    """Every job running on the cluster at ``url`` now, newest first: (id, name) each, from
    ``GET /jobs/overview``. A cluster that does not answer raises ``CollectorError``."""
    client = FlinkRest(url)
    overview = client.get("/jobs/overview", retry=False)
    if not isinstance(overview, dict):
        raise CollectorError(f"{client.url}: GET /jobs/overview answered no job list")
    return [(j.id, j.name) for j in jobs_of(overview) if j.state == "RUNNING"]
