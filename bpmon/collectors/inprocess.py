"""bpmon's own runtime as a :class:`~bpmon.collectors.target.Target`.

:class:`RuntimeTarget` runs a scenario's job and watches it. One :meth:`~RuntimeTarget.observe`
is one monitoring window: a burst of stack samples of every task thread of its job at once
(in-process, ``sys._current_frames``; other jobs' threads in the same process left out),
classified by the ``bpmon-runtime`` profile, and the job's metrics over exactly that window
(counters read when it begins and when it ends), with the runtime's own load over it too, so a
scenario the Python process cannot keep up with is reported as such.
:meth:`~RuntimeTarget.snapshot` gives the metrics of the last few seconds without samples, for
live views. After some of its samples (20 a burst, each right after its sample so no sample waits
for it: ``channels.py``) the burst also reads each channel between two subtasks (backlog, credit,
queued buffers, alignment), so the rules can follow waits from subtask to subtask. The result is
an Observation the rules engine reads like any other.
"""

from __future__ import annotations

import math
from dataclasses import replace

from bpmon.collectors.channels import READINGS_PER_BURST, ChannelTally
from bpmon.collectors.checkpoints import runtime_checkpoints
from bpmon.collectors.observe import (
    MetricsByVertex,
    PlacementByVertex,
    edges_of,
    observation_from_burst,
)
from bpmon.collectors.profile import Profile, load_profile
from bpmon.collectors.sampler import Progress, StackBurst, StackSampler, StopSignal, ThreadCounts
from bpmon.collectors.target import Ending, Sampler
from bpmon.collectors.views import observed_as
from bpmon.model.clock import utc_now
from bpmon.model.errors import JobError, JobOverError
from bpmon.model.signals import RUNTIME, Signal, SlotWait, SourceBacklog, Spill, TaskScheduling
from bpmon.model.values import (
    Metrics,
    Observation,
    Source,
    SubtaskWindow,
    TargetSettings,
    VertexObservation,
    Window,
)
from bpmon.model.values import RuntimeLoad as ModelLoad
from bpmon.runtime.job import Job
from bpmon.runtime.load import WindowLoad
from bpmon.runtime.metrics import TaskMetrics, counters, job_metrics, window_metrics
from bpmon.runtime.scheduler import TaskState
from bpmon.scenario import Scenario

DITHER = 0.5
"""Each sample after the first is taken up to half an interval late, at random: the runtime's
paced work repeats exactly (a chain's members in turn, a few ms a cycle), and samples on a fixed
grid would see it at one phase (``sampler.record_burst``)."""


def model_load(load: WindowLoad) -> ModelLoad:
    """The runtime's own load over a window, as the model carries it to the rules."""
    return ModelLoad(
        cpu_cores_used=load.cpu_cores_used,
        lag_ms_p99=load.lag_ms_p99,
        saturated=load.saturated,
        capacity_records_per_s=load.capacity_records_per_s,
        reason=load.reason,
        host_busy=load.host_busy,
    )


def metrics_of(m: TaskMetrics) -> Metrics:
    """A runtime metrics snapshot as the model's value (ratios are ms/s ÷ 1000)."""
    return Metrics(
        busy_ratio=None if math.isnan(m.busy_ms_per_s) else m.busy_ms_per_s / 1000,
        idle_ratio=m.idle_ms_per_s / 1000,
        backpressured_time_ratio=m.backpressured_ms_per_s / 1000,
        out_pool_usage=m.out_pool_usage,
        in_pool_usage=m.in_pool_usage,
        records_in_per_s=m.records_in_per_s,
        records_out_per_s=m.records_out_per_s,
        soft_backpressured_ratio=m.soft_backpressured_ms_per_s / 1000,
        hard_backpressured_ratio=m.hard_backpressured_ms_per_s / 1000,
        backlog=_backlog(m),
        buffer_size=None if m.debloated_buffer_size is None else float(m.debloated_buffer_size),
        spill=_spill(m),
        scheduling=_scheduling(m),
    )


def _backlog(m: TaskMetrics) -> SourceBacklog | None:
    if m.pending_records is None and m.pending_records_growth_per_s is None:
        return None
    pending = None if m.pending_records is None else float(m.pending_records)
    return SourceBacklog(pending_records=pending, growth_per_s=m.pending_records_growth_per_s)


def _spill(m: TaskMetrics) -> Spill | None:
    if m.spilled_bytes_per_s is None:
        return None
    return Spill(
        written_bytes_per_s=m.spilled_bytes_per_s,
        read_bytes_per_s=m.spill_read_bytes_per_s or 0.0,
        disk_ms_per_s=m.spill_disk_ms_per_s or 0.0,
    )


def _scheduling(m: TaskMetrics) -> TaskScheduling:
    wait = m.slot_wait
    return TaskScheduling(
        state=TaskState(m.state).name,
        waited_s=m.wait_s,
        slots_total=None if wait is None else wait.total,
        slots_free=None if wait is None else wait.free,
        slot_wait=None
        if wait is None
        else SlotWait(region=wait.region, missing=wait.missing, needed=wait.slots),
    )


class RuntimeTarget:
    """A scenario's job on bpmon's runtime, under watch.

    Args:
        scenario: the job to run.
        profile: how to read its stacks (default: the shipped ``bpmon-runtime`` profile).
        job: an already built job of ``scenario`` (tests); built here when None.
        readings_per_burst: channel readings a burst takes at most (see ``channels.py``); as
            many as the burst's samples reads the channels after every sample.
        view: diagnose from only these signals (``--observe flink``: what a Flink cluster
            would show of the same job, :func:`~bpmon.collectors.views.observed_as`).
    """

    def __init__(
        self,
        scenario: Scenario,
        profile: Profile | None = None,
        job: Job | None = None,
        *,
        readings_per_burst: int = READINGS_PER_BURST,
        view: frozenset[Signal] = RUNTIME,
    ) -> None:
        self.runtime = job if job is not None else Job(scenario)
        self.view = view
        self._readings_per_burst = readings_per_burst
        self.scenario = self.runtime.scenario  # with chaining, the tasks' scenario
        self.profile = profile or load_profile("bpmon-runtime")
        self._sampler: Sampler = StackSampler(
            self.profile, thread_names=self._task_threads, named_only=True, dither=DITHER
        )
        network = scenario.network
        self._settings = TargetSettings(
            flow_control=network.flow_control,
            task_managers=network.task_managers,
            segment_size=network.segment_size,
            debloat=network.debloat,
            debloat_target_ms=float(network.debloat_target_ms) if network.debloat else None,
        )

    @property
    def job(self) -> str:
        """The scenario's name."""
        return self.scenario.name

    @property
    def source(self) -> Source:
        """Always ``runtime``."""
        return "runtime"

    @property
    def elapsed_s(self) -> float:
        """Seconds since the job started."""
        return self.runtime.elapsed_s

    def start(self) -> None:
        """Start the job's threads."""
        self.runtime.start()

    def observe(
        self,
        samples: int = 100,
        interval_ms: float = 50.0,
        progress: Progress | None = None,
        stop: StopSignal | None = None,
    ) -> Observation:
        """One window: a burst of ``samples`` stack samples ``interval_ms`` apart, and metrics."""
        start, since = counters(self.runtime.tasks), self.runtime.load_snapshot()
        channels = ChannelTally(self.runtime.tasks, self._readings_per_burst)

        def each_sample(done: int, planned: int) -> None:
            channels.after_sample(done, planned)  # where the data waits, channel by channel
            if progress is not None:
                progress(done, planned)

        burst = self._sampler.burst(samples, interval_ms, progress=each_sample, stop=stop)
        self._raise_if_failed()
        burst = self._with_idle_tasks(burst)
        load = self.runtime.load(since)
        readings = window_metrics(start, counters(self.runtime.tasks))
        observation = self._observation(burst, readings)
        observation = replace(
            observation,
            load=model_load(load),
            channels=channels.windows(),
            checkpoints=runtime_checkpoints(self.runtime),
        )
        return observed_as(observation, self.view)

    def _task_threads(self) -> dict[int, str]:
        """``{thread id: name}`` of this job's started task threads: the only threads its bursts
        sample. ``bpmon serve`` runs every watched job in one process, and two jobs often have
        vertices of the same name (``sink``): each burst must see its own job's alone."""
        return {
            t.thread.ident: t.name for t in self.runtime.all_tasks() if t.thread.ident is not None
        }

    def _with_idle_tasks(self, burst: StackBurst) -> StackBurst:
        """The burst with every task of the job: one without a thread (waiting for a slot or for
        its inputs to finish, or finished) is a subtask with no samples and its state in its
        metrics (``bpmon_taskState``), so the diagnosis sees what does not run."""
        seen = {t.name for t in burst.threads}
        absent = [
            ThreadCounts(name=t.name, ident=0)
            for t in self.runtime.all_tasks()
            if t.name not in seen
        ]
        if not absent:
            return burst
        threads = tuple(sorted((*burst.threads, *absent), key=lambda t: t.name))
        return replace(burst, threads=threads)

    def snapshot(self) -> Observation:
        """Every subtask's metrics now (the runtime's sliding window), without samples."""
        readings = job_metrics(self.runtime.tasks)
        vertices = tuple(
            VertexObservation(
                name=op.name,
                parallelism=op.parallelism,
                inputs=edges_of(op),
                kind=op.kind,
                subtasks=tuple(
                    SubtaskWindow(
                        index=m.index,
                        thread=m.thread,
                        task_manager=m.task_manager,
                        metrics=metrics_of(m),
                    )
                    for m in readings.get(op.name, ())
                ),
            )
            for op in self.scenario.operators
        )
        now = utc_now()
        return Observation(
            job=self.job,
            source="runtime",
            window=Window(start=now, end=now, samples=0, interval_ms=0.0),
            vertices=vertices,
            settings=self._settings,
            signals=self.view,
        )

    def wait(self, seconds: float) -> None:
        """Let the job run ``seconds`` more; returns early, raising JobError if it failed, or
        JobOverError once it finished (every source bounded and every task done)."""
        self.runtime.wait(seconds)
        self._raise_if_failed()
        if self.runtime.finished:
            raise JobOverError(f"job {self.job!r} finished: its sources are bounded, all read")

    def stop(self) -> Ending:
        """Stop the job (idempotent): every thread stops and every buffer returns."""
        result = self.runtime.stop()
        return Ending(leaks=result.leaks, error=result.error)

    def _raise_if_failed(self) -> None:
        if self.runtime.failed:
            ending = self.stop()
            raise JobError(f"job {self.job!r} failed: {ending.error}")

    def _readings(
        self, snapshot: dict[str, list[TaskMetrics]]
    ) -> tuple[MetricsByVertex, PlacementByVertex]:
        metrics = {v: {m.index: metrics_of(m) for m in group} for v, group in snapshot.items()}
        placement = {v: {m.index: m.task_manager for m in group} for v, group in snapshot.items()}
        return metrics, placement

    def _observation(
        self, burst: StackBurst, snapshot: dict[str, list[TaskMetrics]]
    ) -> Observation:
        metrics, placement = self._readings(snapshot)
        observation = observation_from_burst(
            burst,
            self.scenario,
            self.profile,
            self.job,
            "runtime",
            metrics=metrics,
            placement=placement,
        )
        return replace(observation, settings=self._settings)
