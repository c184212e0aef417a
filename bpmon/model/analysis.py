"""The analysis of a history (``bpmon analyze``) as values, and its JSON (``docs/history.md``).

The Spark jobs in :mod:`bpmon.history.analytics` compute it; the surfaces render it (terminal
table, Markdown, HTML) without knowing Spark. Like the report, it crosses layers as frozen
dataclasses, and its JSON is written here, next to the values, with stable key names.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field
from datetime import datetime
from typing import Any, Literal

from bpmon.model.autoscaler import VerdictKind
from bpmon.model.capacity import MIN_BUSY
from bpmon.model.clock import format_timestamp
from bpmon.model.report_json import json_text

ANALYSIS_SCHEMA = "bpmon.analysis/1"

RegressionKind = Literal[
    "capacity-drop", "moved-bottleneck", "new-cause", "level-worsened", "checkpoint-slower"
]
LEVEL_NAMES = ("OK", "LOW", "HIGH")
"""Levels by their order: a level worsens when its index grows."""


@dataclass(frozen=True, slots=True)
class Thresholds:
    """The limits of the analysis: ``[history]`` of the rules, and three of the diagnosis's.

    Attributes:
        capacity_drop: a capacity per subtask lower by more than this share than in the
            previous run of the job is a regression; so is a median checkpoint duration higher
            by more than this share (and at least ``checkpoint_slow_ms``).
        cause_share: a vertex named root cause in at least this share of a run's windows is one
            of that run's causes (a new one if the previous run never named it).
        hot_ratio: a subtask is hot in a window when it gets this many times the records of its
            siblings' mean, or is this many times as busy as them.
        hot_share: a subtask hot in at least this share of its vertex's windows (two at least)
            is reported as skew.
        min_busy: ``[capacity] min_busy``: the least busy ratio a subtask's capacity is taken
            from (:mod:`bpmon.model.capacity`, the one definition the report and the comparison
            use). busy_min: the least busy ratio at which a subtask much busier than its siblings is
            hot.
        checkpoint_slow_ms: ``[checkpoints] slow_ms``: a run's median checkpoint duration
            under this is no regression, however it rose (the diagnosis does not call such a
            checkpoint slow either: a few milliseconds more of a quick checkpoint is noise).
    """

    capacity_drop: float = 0.2
    cause_share: float = 0.5
    hot_ratio: float = 1.5
    hot_share: float = 0.5
    min_busy: float = MIN_BUSY
    busy_min: float = 0.7
    checkpoint_slow_ms: float = 1000.0


@dataclass(frozen=True, slots=True)
class JobHistory:
    """One job in the analysed history."""

    job: str
    runs: int
    windows: int
    first_run: str
    last_run: str
    first: datetime
    last: datetime
    synthetic: bool


@dataclass(frozen=True, slots=True)
class RunCapacity:
    """A vertex's median capacity per subtask over one run (a point of its trend)."""

    run_id: str
    start: datetime
    capacity: float | None


@dataclass(frozen=True, slots=True)
class VertexHistory:
    """One vertex of one job over every analysed window.

    Attributes:
        windows: windows that saw the vertex; runs: runs that did.
        share_ok, share_low, share_high: the share of its diagnosed windows at each level (the
            vertex's level in a window is its worst subtask's).
        ratio_p50, ratio_p95: its backpressure ratio (worst subtask) over the windows.
        busy_p50: its busiest subtask's busy ratio, median over the windows.
        capacity_p50: the capacity per subtask (:mod:`bpmon.model.capacity`: records/s one subtask
            handles at 100% busy, the mean over the subtasks at least ``min_busy`` busy), median
            over the windows; None: never busy enough to measure.
        capacity_trend: the capacity's least-squares slope over the runs in time order, as a
            share of its mean per run (-0.05: 5% less each run); None with fewer than two runs.
        by_run: the median capacity of each run, oldest first (the trend's points).
    """

    job: str
    vertex: str
    windows: int
    runs: int
    share_ok: float
    share_low: float
    share_high: float
    ratio_p50: float | None
    ratio_p95: float | None
    busy_p50: float | None
    capacity_p50: float | None
    capacity_trend: float | None
    by_run: tuple[RunCapacity, ...] = ()


@dataclass(frozen=True, slots=True)
class ChronicBottleneck:
    """A vertex often named root cause: ranked by ``score`` within its job (1 is the worst).

    ``score`` is the sum over its windows of confidence x window seconds, divided by the job's
    total monitored seconds: 1.0 means named with full confidence in every window.
    """

    job: str
    vertex: str
    rank: int
    score: float
    windows: int
    window_share: float
    runs: int
    kind: str
    confidence_mean: float


@dataclass(frozen=True, slots=True)
class Regression:
    """Something that got worse from one run of a job to the next, with both runs' figures.

    ``before`` and ``after`` are capacities (records/s per subtask) for ``capacity-drop``, level
    names for ``level-worsened``, vertex names for ``moved-bottleneck`` (the old and the new
    bottleneck), the share of windows naming the vertex for ``new-cause``, and median checkpoint
    durations (ms) for ``checkpoint-slower``, whose ``vertex`` is empty: a checkpoint is the
    whole job's.
    ``parallelism_before`` and ``parallelism_after`` are the vertex's parallelism in each run
    (None where a run did not see it); when they differ, ``detail`` says so: the change of
    parallelism, not necessarily the operator, explains the regression.
    """

    job: str
    vertex: str
    kind: RegressionKind
    before_run: str
    after_run: str
    before: float | str | None
    after: float | str | None
    change: float | None
    detail: str
    parallelism_before: int | None = None
    parallelism_after: int | None = None


@dataclass(frozen=True, slots=True)
class SkewedSubtask:
    """A subtask repeatedly hot for its vertex: more records, or far busier, than its siblings."""

    job: str
    vertex: str
    subtask: int
    hot_windows: int
    windows: int
    share: float
    runs: int


@dataclass(frozen=True, slots=True)
class RunCheckpoints:
    """A job's checkpoints over one run: the checkpoints its windows saw as their newest.

    A checkpoint counts once however many windows saw it as their newest (by its id); one that
    ended between two windows and was never the newest at a window's end is not seen. The job's
    counts are cumulative (since the job started, not the run), so what failed *during* the run
    is their growth from its first window to its last: exact, seen or not.

    Attributes:
        windows: the run's windows that observed checkpoints.
        checkpoints: the distinct checkpoints they saw (completed or failed).
        duration_p50, duration_p95: those checkpoints' duration (ms; a failed one's until it
            failed), Spark's ``percentile_approx`` (exact at these sizes: the value at rank
            ceil(p x n), so the median of two is the shorter); None: none ended.
        failed: how many of those checkpoints failed.
        failed_during, completed_during: the growth of the job's failed and completed counts
            from the run's first window to its last; None with a single window, or when a count
            fell (the job restarted: its counts began again).
        barrier_wait_share: the share of those checkpoints' time spent waiting for barriers
            (the sum of their barrier waits, each at most its duration, over the sum of their
            durations); None when no wait is known.
    """

    run_id: str
    start: datetime
    windows: int
    checkpoints: int
    duration_p50: float | None
    duration_p95: float | None
    failed: int
    failed_during: int | None
    completed_during: int | None
    barrier_wait_share: float | None


@dataclass(frozen=True, slots=True)
class CheckpointHistory:
    """One job's checkpoints run by run (only runs whose windows observed checkpoints).

    Attributes:
        runs: the runs with checkpoints.
        duration_trend: the least-squares slope of the runs' median durations over the runs in
            time order, as a share of their mean (+0.1: 10% longer each run); None with fewer
            than two runs whose checkpoints ended.
        by_run: each run's figures, oldest first.
    """

    job: str
    runs: int
    duration_trend: float | None
    by_run: tuple[RunCheckpoints, ...] = ()


@dataclass(frozen=True, slots=True)
class VerdictTally:
    """One of the autoscaler's verdicts over a job's windows.

    Attributes:
        windows: the windows it was given in, at any vertex (a window counts once).
        vertex: the vertex it was given in most windows (the first by name among equals), and
            ``vertex_windows`` how many.
    """

    verdict: VerdictKind
    windows: int
    vertex: str
    vertex_windows: int


@dataclass(frozen=True, slots=True)
class AutoscalerHistory:
    """One job's windows as the autoscaler would have decided them, judged against bpmon's causes
    (``docs/autoscaler.md``: a verdict per root cause, and per vertex it would scale up that is
    none).

    Attributes:
        windows: the windows whose report carries the autoscaler's decision.
        judged: of them, those with a verdict (a window with no cause and nothing scaled up has
            none: there is nothing to judge).
        wrong: of those, the windows where it would have been wrong: a verdict other than
            ``agrees`` at any vertex.
        verdicts: each verdict given, the most windows first (then in the verdicts' order);
            ``agrees`` among them. A window with two verdicts counts in both.
    """

    job: str
    windows: int
    judged: int
    wrong: int
    verdicts: tuple[VerdictTally, ...] = ()


@dataclass(frozen=True, slots=True)
class Analysis:
    """Everything ``bpmon analyze`` found, with how and on what it was computed.

    Attributes:
        master: the Spark master the analysis ran on (None: nothing to analyse, no Spark).
        seconds: how long the analysis took, Spark's start included.
        thresholds: the limits applied (the ``[history]`` rules and three of the diagnosis').
        checkpoints: per job whose reports observed checkpoints, their trend run by run.
        autoscaler: per job whose reports carry the autoscaler's decision, how often it would
            have been wrong, and how.
        notes: plain answers where there is little to analyse (empty history, a single run).
        skipped: the dataset's files skipped, each with its path and why (left as they are).
    """

    generated_at: datetime
    history: str
    job: str | None
    since: datetime | None
    master: str | None
    spark_version: str | None
    seconds: float
    subtask_rows: int
    cause_rows: int
    thresholds: Thresholds = field(default_factory=Thresholds)
    jobs: tuple[JobHistory, ...] = ()
    vertices: tuple[VertexHistory, ...] = ()
    chronic: tuple[ChronicBottleneck, ...] = ()
    regressions: tuple[Regression, ...] = ()
    skew: tuple[SkewedSubtask, ...] = ()
    checkpoints: tuple[CheckpointHistory, ...] = ()
    autoscaler: tuple[AutoscalerHistory, ...] = ()
    notes: tuple[str, ...] = ()
    skipped: tuple[str, ...] = ()
    schema: str = ANALYSIS_SCHEMA


def analysis_to_dict(analysis: Analysis) -> dict[str, Any]:
    """The analysis as a JSON-ready dict (``docs/history.md`` lists its keys)."""
    doc: dict[str, Any] = _plain(asdict(analysis))
    return doc


def analysis_to_json(analysis: Analysis, indent: int | None = 2) -> str:
    """The analysis as JSON text."""
    return json_text(analysis_to_dict(analysis), indent)


def _plain(value: Any) -> Any:
    """Datetimes as bpmon's timestamps, tuples as lists, floats rounded (never NaN)."""
    if isinstance(value, datetime):
        return format_timestamp(value)
    if isinstance(value, dict):
        return {k: _plain(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_plain(v) for v in value]
    if isinstance(value, float):
        if not math.isfinite(value):
            return None
        return round(value, 4) if abs(value) < 1000 else round(value, 1)
    return value
