"""The model in the middle: what crosses a layer, as frozen dataclasses.

Every target (bpmon's runtime, an external Python process, a Flink cluster) is turned by its
collectors into one :class:`Observation` per monitoring window; the rules engine turns any
Observation into a :class:`Report` (``spec/report.md``). Nothing downstream of the rules engine
knows which target a report came from. Values a source cannot give are ``None``, never invented.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import Literal

Level = Literal["OK", "LOW", "HIGH"]
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
]

REPORT_SCHEMA = "bpmon.report/1"


@dataclass(frozen=True, slots=True)
class Edge:
    """One input of a vertex: records flow ``source`` -> the vertex that lists this edge."""

    source: str
    partitioner: str = "forward"
    exchange: str = "pipelined"


@dataclass(frozen=True, slots=True)
class Window:
    """The monitoring window: one burst of ``samples`` stack samples, ``interval_ms`` apart.

    ``samples`` is the number actually taken; ``jitter_ms_p99`` how late the samples were against
    their absolute deadlines (None when the collector cannot tell).
    """

    start: datetime
    end: datetime
    samples: int
    interval_ms: float
    jitter_ms_p99: float | None = None


@dataclass(frozen=True, slots=True)
class SubtaskWindow:
    """What was observed of one subtask (one thread) over a window.

    Sample counts come from the stack collector, classified by a collector profile; the metric
    fields come from the target's own accounting (None when the target cannot give them).

    Attributes:
        index: subtask index, 0-based.
        thread: the thread name the samples were taken from.
        samples: stack samples taken of this thread.
        backpressured: samples blocked requesting an output buffer (or putting into a full queue).
        idle: samples waiting for input.
        busy: the remaining samples.
        task_manager: the (simulated) task manager hosting the subtask, when known.
        busy_time_ratio: ``busyTimeMsPerSecond / 1000``.
        idle_time_ratio: ``idleTimeMsPerSecond / 1000``.
        backpressured_time_ratio: ``backPressuredTimeMsPerSecond / 1000``.
        out_pool_usage: Flink's ``outPoolUsage`` (above 1 while overdraft buffers are out).
        in_pool_usage: Flink's ``inPoolUsage`` (remote channels only).
        records_in_per_s: ``numRecordsInPerSecond``.
        records_out_per_s: ``numRecordsOutPerSecond``.
        metrics: any further metric by its Flink (or bpmon) name.
    """

    index: int
    thread: str
    samples: int = 0
    backpressured: int = 0
    idle: int = 0
    busy: int = 0
    task_manager: int | None = None
    busy_time_ratio: float | None = None
    idle_time_ratio: float | None = None
    backpressured_time_ratio: float | None = None
    out_pool_usage: float | None = None
    in_pool_usage: float | None = None
    records_in_per_s: float | None = None
    records_out_per_s: float | None = None
    metrics: Mapping[str, float] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class VertexObservation:
    """One job vertex (operator) and its subtasks over a window.

    ``kind`` is the operator kind when the target knows it (``source``, ``map``, ``sink``, ...).
    """

    name: str
    parallelism: int
    inputs: tuple[Edge, ...] = ()
    subtasks: tuple[SubtaskWindow, ...] = ()
    kind: str | None = None


@dataclass(frozen=True, slots=True)
class Observation:
    """Everything one window of monitoring saw: the input of the rules engine."""

    job: str
    source: Source
    window: Window
    vertices: tuple[VertexObservation, ...]
    run_id: str = ""
    settings: Mapping[str, object] = field(default_factory=dict)

    def vertex(self, name: str) -> VertexObservation:
        """The vertex called ``name``; KeyError if there is none."""
        for v in self.vertices:
            if v.name == name:
                return v
        raise KeyError(name)


@dataclass(frozen=True, slots=True)
class SubtaskStatus:
    """One subtask in a report: its level (from the sampled ratio) and its metrics."""

    index: int
    level: Level | None = None
    ratio: float | None = None
    busy_ratio: float | None = None
    idle_ratio: float | None = None
    out_pool_usage: float | None = None
    in_pool_usage: float | None = None
    records_in_per_s: float | None = None
    records_out_per_s: float | None = None
    backpressured_time_ratio: float | None = None
    disagreement: bool = False


@dataclass(frozen=True, slots=True)
class VertexStatus:
    """One vertex in a report; its ``ratio`` and ``level`` are those of its worst subtask."""

    name: str
    parallelism: int
    level: Level | None = None
    ratio: float | None = None
    busy_ratio: float | None = None
    idle_ratio: float | None = None
    out_pool_usage: float | None = None
    in_pool_usage: float | None = None
    records_in_per_s: float | None = None
    records_out_per_s: float | None = None
    inputs: tuple[Edge, ...] = ()
    subtasks: tuple[SubtaskStatus, ...] = ()


@dataclass(frozen=True, slots=True)
class RootCause:
    """A bottleneck: the vertex, the kind of cause, how sure, why, and what to do."""

    vertex: str
    kind: CauseKind
    subtasks: tuple[int, ...] = ()
    confidence: float = 0.0
    evidence: tuple[str, ...] = ()
    recommendation: str = ""


@dataclass(frozen=True, slots=True)
class Finding:
    """A secondary observation that is not a root cause (for example ``head-of-line``)."""

    kind: str
    vertex: str
    detail: str


@dataclass(frozen=True, slots=True)
class Report:
    """The backpressure report of one window (``spec/report.md``)."""

    run_id: str
    job: str
    source: Source
    window: Window
    vertices: tuple[VertexStatus, ...]
    root_causes: tuple[RootCause, ...] | None = None
    findings: tuple[Finding, ...] = ()
    schema: str = REPORT_SCHEMA
