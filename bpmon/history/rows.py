"""A report as history rows: one per subtask per window, one per root cause (``schema.py``).

The rows are columns of plain Python values keyed by column name, in the order of
:data:`~bpmon.history.schema.TABLES`, so the store hands them to pyarrow in one call. Nothing is
invented: a metric the report does not know is null, and a vertex reported without subtasks is
one row with a null ``subtask`` carrying the vertex's own figures. The report's ``checkpoints``
(its counts and newest checkpoint) go on every row of the window, its phases of a vertex on that
vertex's rows; all null when the report has none. So does its ``autoscaler``: whether it would act
on every row, what it would give a vertex and its verdicts at that vertex on the vertex's rows
(the autoscaler judges the report's own vertices: a verdict on a vertex the report does not list
would have no row to go on).
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import date, datetime

from bpmon.history.schema import AUTOSCALER_COLUMNS, CHECKPOINT_COLUMNS, TABLES, TableName
from bpmon.model.autoscaler import AutoscalerReport
from bpmon.model.checkpoints import CheckpointPhases, CheckpointReport
from bpmon.model.clock import as_utc
from bpmon.model.values import Metrics, Report

Columns = dict[str, list[object]]
"""A table's rows as columns: column name -> one value per row."""


@dataclass(frozen=True, slots=True)
class WindowKey:
    """What every row of one window shares, and where its part files go."""

    job: str
    day: date
    run_id: str
    burst: int
    start: datetime
    end: datetime
    source: str

    @classmethod
    def of(cls, report: Report, burst: int) -> WindowKey:
        """The key of ``report``, stored as burst ``burst`` of its run."""
        start, end = as_utc(report.window.start), as_utc(report.window.end)
        return cls(report.job, start.date(), report.run_id, burst, start, end, report.source)

    def values(self) -> dict[str, object]:
        """The shared columns' values."""
        return {
            "job": self.job,
            "date": self.day,
            "run_id": self.run_id,
            "burst": self.burst,
            "window_start": self.start,
            "window_end": self.end,
            "source": self.source,
        }


def empty_columns(table: TableName) -> Columns:
    """Columns of ``table`` with no rows yet."""
    return {c.name: [] for c in TABLES[table]}


def report_rows(
    report: Report, burst: int, version: str, *, synthetic: bool = False
) -> dict[TableName, Columns]:
    """The rows of ``report`` (burst ``burst``) for both tables, written by bpmon ``version``."""
    key = WindowKey.of(report, burst)
    writer = {"bpmon_version": version, "synthetic": synthetic}
    checkpoints = checkpoint_values(report.checkpoints)
    autoscaler = autoscaler_values(report.autoscaler)
    subtasks = empty_columns("subtasks")
    for row in _subtask_rows(report):
        vertex = autoscaler.get(str(row["vertex"]), autoscaler[None])
        _add(subtasks, {**key.values(), **row, **checkpoints, **vertex, **writer})
    causes = empty_columns("causes")
    for rank, cause in enumerate(report.root_causes or ()):
        row = {
            "rank": rank,
            "vertex": cause.vertex,
            "kind": cause.kind,
            "subtasks": list(cause.subtasks),
            "confidence": cause.confidence,
            "capacity_per_subtask": _finite(cause.capacity_per_subtask),
            "offered_rate": _finite(cause.offered_rate),
            "recommended_parallelism": cause.recommended_parallelism,
        }
        _add(causes, {**key.values(), **row, **writer})
    return {"subtasks": subtasks, "causes": causes}


def checkpoint_values(checkpoints: CheckpointReport | None) -> dict[str, object]:
    """The window's checkpoint columns but the vertex's: the job's counts and its newest
    checkpoint (None, or no checkpoint ended yet: null)."""
    values: dict[str, object] = dict.fromkeys(_WINDOW_CHECKPOINT)
    if checkpoints is None:
        return values
    values["checkpoints_completed"] = checkpoints.completed
    values["checkpoints_failed"] = checkpoints.failed
    last = checkpoints.last
    if last is None:
        return values
    return {
        **values,
        "checkpoint_id": last.id,
        "checkpoint_status": last.status,
        "checkpoint_duration_ms": _finite(last.duration_ms),
        "checkpoint_start_delay_ms": _finite(last.start_delay_ms),
        "checkpoint_alignment_ms": _finite(last.alignment_ms),
        "checkpoint_sync_ms": _finite(last.sync_ms),
        "checkpoint_async_ms": _finite(last.async_ms),
        "checkpoint_barrier_wait_ms": _finite(last.barrier_wait_ms),
        "checkpoint_state_bytes": last.state_bytes,
        "checkpoint_persisted_bytes": last.persisted_bytes,
    }


_WINDOW_CHECKPOINT = tuple(c for c in CHECKPOINT_COLUMNS if not c.startswith("checkpoint_vertex_"))


def vertex_checkpoint_values(phases: CheckpointPhases | None) -> dict[str, object]:
    """A vertex's ``checkpoint_vertex_*`` columns: its phases in the newest checkpoint (None:
    the checkpoint does not list it, or there is none: null)."""
    if phases is None:
        return dict.fromkeys(_VERTEX_CHECKPOINT)
    return {
        "checkpoint_vertex_start_delay_ms": _finite(phases.start_delay_ms),
        "checkpoint_vertex_alignment_ms": _finite(phases.alignment_ms),
        "checkpoint_vertex_sync_ms": _finite(phases.sync_ms),
        "checkpoint_vertex_async_ms": _finite(phases.async_ms),
        "checkpoint_vertex_acknowledged": phases.acknowledged,
    }


_VERTEX_CHECKPOINT = tuple(c for c in CHECKPOINT_COLUMNS if c.startswith("checkpoint_vertex_"))


def autoscaler_values(decision: AutoscalerReport | None) -> dict[str | None, dict[str, object]]:
    """The ``autoscaler_*`` columns of each vertex the decision evaluates or judges, by name, and
    under None those of the report's other vertices (``decision`` None: every column null)."""
    if decision is None:
        return {None: dict.fromkeys(AUTOSCALER_COLUMNS)}
    recommended = {v.name: v.recommended_parallelism for v in decision.vertices}
    verdicts: dict[str, list[str]] = {}
    for verdict in decision.verdicts:
        verdicts.setdefault(verdict.vertex, []).append(verdict.verdict)
    return {
        name: {
            "autoscaler_acts": decision.acts,
            "autoscaler_recommended_parallelism": None if name is None else recommended.get(name),
            "autoscaler_verdicts": [] if name is None else verdicts.get(name, []),
        }
        for name in (None, *recommended, *verdicts)
    }


def _subtask_rows(report: Report) -> Iterator[dict[str, object]]:
    checkpoints = report.checkpoints
    newest = () if checkpoints is None or checkpoints.last is None else checkpoints.vertices
    phases = {v.name: v for v in newest}  # the newest checkpoint's vertices, by name
    for index, vertex in enumerate(report.vertices):
        head = {
            "levels_from": report.levels_from,
            "vertex": vertex.name,
            "vertex_index": index,
            "parallelism": vertex.parallelism,
            **vertex_checkpoint_values(phases.get(vertex.name)),
        }
        if not vertex.subtasks:
            yield {**head, **_status(None, vertex.level, vertex.ratio, vertex.metrics)}
            continue
        for sub in vertex.subtasks:
            yield {**head, **_status(sub.index, sub.level, sub.ratio, sub.metrics)}


def _status(
    index: int | None, level: str | None, ratio: float | None, metrics: Metrics
) -> dict[str, object]:
    return {
        "subtask": index,
        "level": level,
        "ratio": _finite(ratio),
        "busy_ratio": _finite(metrics.busy_ratio),
        "idle_ratio": _finite(metrics.idle_ratio),
        "backpressured_time_ratio": _finite(metrics.backpressured_time_ratio),
        "out_pool_usage": _finite(metrics.out_pool_usage),
        "in_pool_usage": _finite(metrics.in_pool_usage),
        "records_in_per_s": _finite(metrics.records_in_per_s),
        "records_out_per_s": _finite(metrics.records_out_per_s),
    }


def _finite(value: float | None) -> float | None:
    """A float as stored: NaN and infinities (a report's "unknown") become null."""
    if value is None or not math.isfinite(value):
        return None
    return float(value)


def _add(columns: Columns, row: dict[str, object]) -> None:
    for name, values in columns.items():
        values.append(row[name])
