"""The model in the middle: what crosses a layer, as frozen dataclasses.

Every target (bpmon's runtime, an external Python process, a Flink cluster) is turned by its
collectors into one :class:`Observation` per monitoring window; the rules engine turns any
Observation into a :class:`Report` (``docs/report.md``). Nothing downstream of the rules engine
knows which target a report came from. Values a source cannot give are ``None``, never invented.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Literal, get_args

from bpmon.model.autoscaler import AutoscalerReport
from bpmon.model.checkpoints import CheckpointReport, CheckpointWindow
from bpmon.model.evidence import EvidenceLine
from bpmon.model.signals import RUNTIME, Signal, SourceBacklog, Spill, TaskScheduling

Level = Literal["OK", "LOW", "HIGH"]
FLINK_OK_MAX, FLINK_LOW_MAX = 0.10, 0.50
"""Flink's own levels (``JobVertexBackPressureHandler``): OK <= 0.10 < LOW <= 0.50 < HIGH."""
Source = Literal["runtime", "pyspy", "flink"]
SampleState = Literal["backpressured", "idle", "busy"]
CauseKind = Literal[
    "slow-operator",
    "data-skew",
    "slow-subtask",
    "slow-sink",
    "network",
    "resource-starved",
    "spilling",
    "stalled",
    "source-limited",
]
CAUSE_KINDS: tuple[CauseKind, ...] = get_args(CauseKind)
"""Every kind of root cause a report may name (docs/report.md says what each means)."""

FindingKind = Literal[
    "head-of-line",
    "unexplained",
    "runtime-saturated",
    "host-busy",
    "sampling",
    "debloating",
    "flink-disagrees",
    "flink-level",
    "rescaled",
    "finished",
    "unobserved",
    "ambiguous-threads",
    "gap",
    "overrun",
    "checkpoint-backpressure",
    "checkpoint-slow",
    "checkpoint-failed",
    "checkpoint-skew",
    "checkpoints-unread",
]
FINDING_KINDS: tuple[FindingKind, ...] = get_args(FindingKind)
"""Every kind of finding a report may carry (the findings table of docs/report.md, in order)."""

REPORT_SCHEMA = "bpmon.report/1"


def level_by_flink(ratio: float) -> Level:
    """The level Flink's backpressure endpoint gives a ratio: fixed in Flink, whatever
    ``[levels]`` bpmon's diagnosis is configured with (their defaults are the same)."""
    return "OK" if ratio <= FLINK_OK_MAX else "LOW" if ratio <= FLINK_LOW_MAX else "HIGH"


@dataclass(frozen=True, slots=True)
class Edge:
    """One input of a vertex: records flow ``source`` -> the vertex that lists this edge."""

    source: str
    partitioner: str = "forward"
    exchange: str = "pipelined"


@dataclass(frozen=True, slots=True)
class Window:
    """The monitoring window as it was taken: ``samples`` stack samples, ``interval_ms`` apart.

    ``samples`` and ``interval_ms`` are what was achieved (the mean gap between the first and the
    last sample); ``planned_samples`` and ``planned_interval_ms`` what was asked for, so a slow
    collector (py-spy on a loaded machine) shows as such. ``jitter_ms_p99`` is how late the
    samples were against their absolute deadlines (None when the collector cannot tell).
    """

    start: datetime
    end: datetime
    samples: int
    interval_ms: float
    jitter_ms_p99: float | None = None
    planned_samples: int | None = None
    planned_interval_ms: float | None = None

    @property
    def seconds(self) -> float:
        """The window's length in seconds."""
        return (self.end - self.start).total_seconds()


@dataclass(frozen=True, slots=True)
class Metrics:
    """The metric values of a subtask (or, totalled, a vertex) over one window.

    In an :class:`Observation` they are the target's own accounting (Flink's names in brackets);
    in a :class:`Report` ``busy_ratio`` and ``idle_ratio`` fall back to the sampled shares when the
    target has no time accounting. ``None`` means the target cannot tell; nothing is invented.

    Attributes:
        busy_ratio: ``busyTimeMsPerSecond / 1000``.
        idle_ratio: ``idleTimeMsPerSecond / 1000``.
        backpressured_time_ratio: ``backPressuredTimeMsPerSecond / 1000``.
        out_pool_usage: ``outPoolUsage`` (above 1 while overdraft buffers are out).
        in_pool_usage: ``inPoolUsage`` (remote channels only).
        records_in_per_s: ``numRecordsInPerSecond``.
        records_out_per_s: ``numRecordsOutPerSecond``.
        soft_backpressured_ratio: ``softBackPressuredTimeMsPerSecond / 1000``.
        hard_backpressured_ratio: ``hardBackPressuredTimeMsPerSecond / 1000``.
        accounting_span_ms: task time the busy / idle / backpressured shares were taken over,
            when they come from the window's own running totals (None: Flink's gauges).
        backlog: a source's ``pendingRecords`` and its growth (FLIP-33; sources that report it).
        spill: what the subtask's partitions spilled to disk (where the target measures it).
        scheduling: the subtask's deployment state and the cluster's slots (where known).
        buffer_size: with buffer debloating (FLIP-183), the bytes its input buffers are
            debloated to now (Flink's ``debloatedBufferSize``, its first input gate's; None:
            debloating off, a source, or not shown).
    """

    busy_ratio: float | None = None
    idle_ratio: float | None = None
    backpressured_time_ratio: float | None = None
    out_pool_usage: float | None = None
    in_pool_usage: float | None = None
    records_in_per_s: float | None = None
    records_out_per_s: float | None = None
    soft_backpressured_ratio: float | None = None
    hard_backpressured_ratio: float | None = None
    accounting_span_ms: float | None = None
    backlog: SourceBacklog | None = None
    spill: Spill | None = None
    scheduling: TaskScheduling | None = None
    buffer_size: float | None = None


def _max_known(values: Iterable[float | None]) -> float | None:
    known = [v for v in values if v is not None]
    return max(known) if known else None


def _sum_all(values: Iterable[float | None]) -> float | None:
    items = list(values)
    if not items or any(v is None for v in items):
        return None
    return sum(v for v in items if v is not None)


def total_metrics(parts: Iterable[Metrics]) -> Metrics:
    """A vertex's metrics from its subtasks': the MAX of ratios and pool usages, as Flink's UI
    shows them, and the SUM of record rates (unknown as soon as one subtask's rate is unknown:
    a partial sum would understate). The one place a vertex is totalled."""
    items = tuple(parts)
    return Metrics(
        busy_ratio=_max_known(m.busy_ratio for m in items),
        idle_ratio=_max_known(m.idle_ratio for m in items),
        backpressured_time_ratio=_max_known(m.backpressured_time_ratio for m in items),
        out_pool_usage=_max_known(m.out_pool_usage for m in items),
        in_pool_usage=_max_known(m.in_pool_usage for m in items),
        records_in_per_s=_sum_all(m.records_in_per_s for m in items),
        records_out_per_s=_sum_all(m.records_out_per_s for m in items),
    )


NO_METRICS = Metrics()
"""A subtask whose target gives no metrics at all (py-spy)."""


@dataclass(frozen=True, slots=True)
class SubtaskWindow:
    """What was observed of one subtask (one thread) over a window.

    Sample counts come from the stack collector, classified by a collector profile; ``metrics``
    from the target's own accounting over the same window.

    Attributes:
        index: subtask index, 0-based.
        thread: the thread name the samples were taken from.
        samples: stack samples taken of this thread.
        backpressured: samples blocked requesting an output buffer (or putting into a full queue).
        idle: samples waiting for input.
        busy: the remaining samples.
        task_manager: the (simulated) task manager hosting the subtask, when known.
        metrics: the target's metric values (all None when it gives none).
        data_path: whether the thread was ever seen on the data path (exchanging records with
            another stage); False for a thread that only sleeps or waits to keep a program alive.
        chain_samples: a chained task's busy samples by chain position (index 0: the chain's
            head): how many hand-over frames (the profile's ``chain_hop``) each busy stack
            showed. Empty when the profile has no ``chain_hop`` or nothing was sampled.
    """

    index: int
    thread: str
    samples: int = 0
    backpressured: int = 0
    idle: int = 0
    busy: int = 0
    task_manager: int | None = None
    metrics: Metrics = NO_METRICS
    data_path: bool = True
    chain_samples: tuple[int, ...] = ()


@dataclass(frozen=True, slots=True)
class ChannelWindow:
    """One channel over a window: producing subtask -> consuming subtask, read during the burst.

    Vertex and subtask metrics say *that* a subtask waits; the channels say *on whom*. Only
    bpmon's runtime reads them (Flink publishes no per-channel metric); each figure is the mean
    (or share) over the readings taken with the burst's samples.

    Attributes:
        producer, producer_index: the producing subtask.
        consumer, consumer_index: the consuming subtask.
        remote: the two run on different task managers.
        backlog: finished buffers queued at the producer for this consumer (mean).
        queued: buffers received by the consumer and not read yet (mean; 0 when local).
        no_credit: credit-based remote channels: the share of readings with a backlog and no
            credit (the consumer had no buffer for it); None otherwise.
        stalled: ``tcp`` remote channels: the share of readings with the connection stopped for
            want of a receive buffer; None otherwise.
        blocked: the share of readings the consumer held the channel blocked for a checkpoint
            alignment.
    """

    producer: str
    producer_index: int
    consumer: str
    consumer_index: int
    remote: bool
    backlog: float
    queued: float
    no_credit: float | None = None
    stalled: float | None = None
    blocked: float = 0.0


@dataclass(frozen=True, slots=True)
class VertexObservation:
    """One job vertex (operator) and its subtasks over a window.

    ``kind`` is the operator kind when the target knows it (``source``, ``map``, ``sink``, ...).
    ``operators`` are a chained vertex's operators in chain order, from the job's plan (empty:
    one operator, or the target cannot tell). ``max_parallelism`` is its number of key groups
    (Flink's ``maxParallelism``; None where the target does not say).
    """

    name: str
    parallelism: int
    inputs: tuple[Edge, ...] = ()
    subtasks: tuple[SubtaskWindow, ...] = ()
    kind: str | None = None
    operators: tuple[str, ...] = ()
    max_parallelism: int | None = None


FlowControl = Literal["credit", "tcp"]


@dataclass(frozen=True, slots=True)
class TargetSettings:
    """What the target says of its own set-up (None where it cannot tell)."""

    flow_control: FlowControl | None = None
    task_managers: int | None = None
    segment_size: int | None = None
    debloat: bool | None = None
    """Buffer debloating (FLIP-183) is on."""
    debloat_target_ms: float | None = None
    """With debloating: the time's worth of throughput each input gate's buffers are sized to
    hold (``taskmanager.network.memory.buffer-debloat.target``, 1 s by default)."""


@dataclass(frozen=True, slots=True)
class RuntimeLoad:
    """How hard bpmon's own runtime worked over a window, to tell a slow job from a slow model.

    Attributes:
        cpu_cores_used: CPU time of the process over the window / the window's length.
        lag_ms_p99: how far behind their pacing deadlines rate-limited sources ran (p99).
        saturated: the runtime could not keep up with the scenario: its figures describe the
            Python process, not the job.
        capacity_records_per_s: records/s the runtime was moving when saturated (None otherwise).
        reason: one line saying why it is (or is not) saturated, with its figures.
        host_busy: other processes held the cores the job's threads wanted (they ran less
            than the interpreter's limit but ran and waited for a core about as long as it);
            with ``saturated`` they waited longer than they ran and the figures describe the
            machine; without it the job is diagnosed and the report says the host was busy.
    """

    cpu_cores_used: float
    lag_ms_p99: float | None
    saturated: bool
    capacity_records_per_s: float | None = None
    reason: str = ""
    host_busy: bool = False


LevelsFrom = Literal["samples", "time"]
"""Where levels came from: stack samples, or the time accounting when no sample was taken."""


@dataclass(frozen=True, slots=True)
class Observation:
    """Everything one window of monitoring saw: the input of the rules engine."""

    job: str
    source: Source
    window: Window
    vertices: tuple[VertexObservation, ...]
    run_id: str = ""
    settings: TargetSettings = TargetSettings()
    load: RuntimeLoad | None = None
    channels: tuple[ChannelWindow, ...] = ()
    """Per-channel readings over the window (bpmon's runtime only; empty elsewhere)."""
    signals: frozenset[Signal] = RUNTIME
    """What the target observes (:mod:`bpmon.model.signals`): a rule needing anything else stays
    silent and the report says so."""
    notes: tuple[Finding, ...] = ()
    """What the collector itself has to say (how many samples a Flink burst took, where Flink's
    own levels differ): added to the report's findings as they are."""
    checkpoints: CheckpointWindow | None = None
    """The job's checkpoints as of the window's end (None: checkpointing is off, or the target
    does not observe them: :data:`~bpmon.model.signals.Signal.CHECKPOINTS`)."""

    def vertex(self, name: str) -> VertexObservation:
        """The vertex called ``name``; KeyError if there is none."""
        for v in self.vertices:
            if v.name == name:
                return v
        raise KeyError(name)

    @property
    def levels_from(self) -> LevelsFrom:
        """``samples`` when any subtask was sampled, else ``time`` (the time accounting)."""
        sampled = any(s.samples > 0 for v in self.vertices for s in v.subtasks)
        return "samples" if sampled else "time"


@dataclass(frozen=True, slots=True)
class SubtaskStatus:
    """One subtask in a report: its level (from its backpressure ratio) and its metrics."""

    index: int
    level: Level | None = None
    ratio: float | None = None
    metrics: Metrics = NO_METRICS
    disagreement: bool = False


@dataclass(frozen=True, slots=True)
class VertexStatus:
    """One vertex in a report: the level and ratio of its worst subtask, its totalled metrics."""

    name: str
    parallelism: int
    level: Level | None = None
    ratio: float | None = None
    metrics: Metrics = NO_METRICS
    inputs: tuple[Edge, ...] = ()
    subtasks: tuple[SubtaskStatus, ...] = ()


@dataclass(frozen=True, slots=True)
class NextInSeries:
    """A vertex in series after a bottleneck that would limit once the bottleneck keeps up.

    Attributes:
        vertex: its name.
        parallelism: its subtasks now.
        capacity_per_subtask: records/s one of its subtasks handles at 100% busy.
        offered_rate: records/s it would be offered with nothing upstream blocked.
        recommended_parallelism: the least that takes that at the utilisation target.
    """

    vertex: str
    parallelism: int
    capacity_per_subtask: float
    offered_rate: float
    recommended_parallelism: int


@dataclass(frozen=True, slots=True)
class ChainShare:
    """Which operator of a chained root cause is on the stack, from its busy stack samples.

    Attributes:
        operator: the operator on the stack in the most busy samples.
        position: its place in the chain (0: the head).
        samples: the busy samples that found it working.
        busy_samples: the busy samples of the cause's subtasks, all positions.
        shares: every operator's share of ``busy_samples``, in chain order.
    """

    operator: str
    position: int
    samples: int
    busy_samples: int
    shares: tuple[tuple[str, float], ...]


@dataclass(frozen=True, slots=True)
class RootCause:
    """A bottleneck: the vertex, the kind of cause, how sure, why, and what to do.

    ``next_in_series`` names the vertices after it that would limit once it keeps up (sized
    like it), so that raising it alone is known to move the backpressure, not remove it.
    ``in_chain``: on a chained vertex, which of its operators the stack samples found working.
    ``evidence``: lines with the figures they state (:mod:`bpmon.model.evidence`); read back
    from JSON they carry their text alone.
    """

    vertex: str
    kind: CauseKind
    subtasks: tuple[int, ...] = ()
    confidence: float = 0.0
    evidence: tuple[EvidenceLine, ...] = ()
    recommendation: str = ""
    capacity_per_subtask: float | None = None
    offered_rate: float | None = None
    recommended_parallelism: int | None = None
    next_in_series: tuple[NextInSeries, ...] = ()
    in_chain: ChainShare | None = None
    backlog_records: float | None = None
    """The records its sources owe (pendingRecords), carried to it (None: not reported)."""
    catch_up_rate: float | None = None
    """The records/s more its recommended parallelism takes to drain them within
    ``[sizing] catch_up_s`` (None: no backlog, or an unknown one)."""


@dataclass(frozen=True, slots=True)
class Finding:
    """A secondary observation that is not a root cause (for example ``head-of-line``).

    A report read back keeps a kind it does not know (one a newer bpmon wrote) as it is.
    """

    kind: FindingKind
    vertex: str
    detail: str


@dataclass(frozen=True, slots=True)
class Report:
    """The backpressure report of one window (``docs/report.md``)."""

    run_id: str
    job: str
    source: Source
    window: Window
    vertices: tuple[VertexStatus, ...]
    root_causes: tuple[RootCause, ...] | None = None
    findings: tuple[Finding, ...] = ()
    schema: str = REPORT_SCHEMA
    levels_from: LevelsFrom = "samples"
    channels: tuple[ChannelWindow, ...] = ()
    checkpoints: CheckpointReport | None = None
    """The job's checkpoints (None: none were observed)."""
    autoscaler: AutoscalerReport | None = None
    """What Flink's autoscaler would decide from the same window, and the verdicts on it (None:
    the target gave no record rates or busy time to decide from)."""


_LEVEL_ORDER: tuple[Level, ...] = ("OK", "LOW", "HIGH")


def worst_level(report: Report) -> Level | None:
    """The highest level among the report's vertices; None when none has one."""
    return worst_of(v.level for v in report.vertices)


def worst_of(levels: Iterable[Level | None]) -> Level | None:
    """The highest of ``levels`` (None ignored); None when there is none."""
    known = [level for level in levels if level is not None]
    return max(known, key=_LEVEL_ORDER.index) if known else None


@dataclass(frozen=True, slots=True)
class RunInfo:
    """One stored run, as listed: what ran, when, and its first burst's diagnosis.

    Attributes:
        run_id: the run's id (its folder name).
        path: the run's folder.
        job: the job name.
        source: what was watched (``runtime``, ``pyspy``, ``flink``).
        start: the start of the first burst's window (UTC).
        end: the end of the first burst's window (UTC).
        bursts: how many burst reports the folder holds.
        worst_level: the highest vertex level of the first burst (None: not diagnosed).
        root_causes: the first burst's root causes (None: not diagnosed).
        last_burst: the number of the newest burst (``bursts - 1`` unless old ones were
            pruned).
    """

    run_id: str
    path: Path
    job: str
    source: Source
    start: datetime
    end: datetime
    bursts: int
    worst_level: Level | None
    root_causes: tuple[RootCause, ...] | None
    last_burst: int = 0
