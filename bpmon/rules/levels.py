"""Levels and ratios: what one window says about each subtask and vertex, before any diagnosis.

A subtask's ``ratio`` is the share of its stack samples that were blocked requesting an output
buffer (Flink's sampled backpressure); its level is OK / LOW / HIGH against ``[levels]`` in the
rules file. The time accounting (``backPressuredTimeMsPerSecond``) is reported beside it, and a
subtask is flagged ``disagreement`` when the two views differ by more than the configured margin.
A vertex takes its worst subtask's ratio and level, and the MAX of busy/idle/pool usage (what
Flink's UI shows), the SUM of record rates (:func:`bpmon.model.values.total_metrics`). A subtask
without samples takes its ratio from the time accounting (``backPressuredTimeMsPerSecond``), and one
without either has no ratio and no level: nothing is invented.

The ``blended_*`` functions are the measures the bottleneck search uses: they combine both views
when both exist, so one noisy view does not decide alone. The figures the evidence QUOTES are the
report's own (:func:`busy_ratio`, :func:`idle_ratio`, :func:`shown_busy`), written with
:func:`bpmon.model.evidence.percent`, so that a line of text never disagrees with the table beside
it.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import replace

from bpmon.model.values import (
    Level,
    SubtaskStatus,
    SubtaskWindow,
    VertexObservation,
    VertexStatus,
    total_metrics,
)
from bpmon.rules.config import LevelRules


def level_of(ratio: float | None, levels: LevelRules) -> Level | None:
    """The level of a backpressure ratio: OK <= ok_max < LOW <= low_max < HIGH; None stays None."""
    if ratio is None:
        return None
    if ratio <= levels.ok_max:
        return "OK"
    if ratio <= levels.low_max:
        return "LOW"
    return "HIGH"


def sample_share(sw: SubtaskWindow, count: int) -> float | None:
    """``count`` as a share of the subtask's samples; None when no sample was taken."""
    if sw.samples <= 0:
        return None
    return count / sw.samples


def sampled_ratio(sw: SubtaskWindow) -> float | None:
    """The sampled backpressure ratio: backpressured samples / samples (None without samples)."""
    return sample_share(sw, sw.backpressured)


def busy_ratio(sw: SubtaskWindow) -> float | None:
    """The reported busy ratio: the time accounting if the target gives it, else busy samples."""
    if sw.metrics.busy_ratio is not None:
        return sw.metrics.busy_ratio
    return sample_share(sw, sw.busy)


def idle_ratio(sw: SubtaskWindow) -> float | None:
    """The reported idle ratio: the time accounting if the target gives it, else idle samples."""
    if sw.metrics.idle_ratio is not None:
        return sw.metrics.idle_ratio
    return sample_share(sw, sw.idle)


def shown_busy(vertex: VertexObservation) -> float | None:
    """The vertex's busy ratio as its report shows it: its busiest subtask's :func:`busy_ratio`."""
    return max_known(busy_ratio(s) for s in vertex.subtasks)


def shown_idle(vertex: VertexObservation) -> float | None:
    """The vertex's idle ratio as its report shows it: its idlest subtask's :func:`idle_ratio`."""
    return max_known(idle_ratio(s) for s in vertex.subtasks)


def _mean(values: Iterable[float | None]) -> float | None:
    known = [v for v in values if v is not None]
    return sum(known) / len(known) if known else None


def blended_busy(sw: SubtaskWindow) -> float | None:
    """Busy as the diagnosis sees it: the mean of the sampled share and the time accounting."""
    return _mean((sample_share(sw, sw.busy), sw.metrics.busy_ratio))


def blended_idle(sw: SubtaskWindow) -> float | None:
    """Idle as the diagnosis sees it: the mean of the sampled share and the time accounting."""
    return _mean((sample_share(sw, sw.idle), sw.metrics.idle_ratio))


def disagrees(sw: SubtaskWindow, levels: LevelRules) -> bool:
    """Whether the sampled ratio and the time accounting differ by more than the margin."""
    ratio = sampled_ratio(sw)
    timed = sw.metrics.backpressured_time_ratio
    if ratio is None or timed is None:
        return False
    return abs(ratio - timed) > levels.disagreement


def backpressure_ratio(sw: SubtaskWindow) -> float | None:
    """The ratio a level is read from: the sampled one, else the time accounting's.

    A target that gives only time metrics (a Flink cluster without thread dumps, a live view
    between bursts) still gets levels; the report says where they came from.
    """
    ratio = sampled_ratio(sw)
    return ratio if ratio is not None else sw.metrics.backpressured_time_ratio


def subtask_status(sw: SubtaskWindow, levels: LevelRules) -> SubtaskStatus:
    """The report line of one subtask."""
    ratio = backpressure_ratio(sw)
    return SubtaskStatus(
        index=sw.index,
        level=level_of(ratio, levels),
        ratio=ratio,
        metrics=replace(sw.metrics, busy_ratio=busy_ratio(sw), idle_ratio=idle_ratio(sw)),
        disagreement=disagrees(sw, levels),
    )


def max_known(values: Iterable[float | None]) -> float | None:
    """The largest known value, None when none is known."""
    known = [v for v in values if v is not None]
    return max(known) if known else None


def vertex_status(vertex: VertexObservation, levels: LevelRules) -> VertexStatus:
    """The report line of one vertex: its worst subtask's level and ratio, totalled metrics."""
    subs = tuple(subtask_status(sw, levels) for sw in vertex.subtasks)
    ratio = max_known(s.ratio for s in subs)
    return VertexStatus(
        name=vertex.name,
        parallelism=vertex.parallelism,
        level=level_of(ratio, levels),
        ratio=ratio,
        metrics=total_metrics(s.metrics for s in subs),
        inputs=vertex.inputs,
        subtasks=subs,
    )
