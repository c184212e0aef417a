"""Two reports of one job side by side, and what changed between them, as values.

The dashboard's Compare page reads two reports this way (``bpmon whatif`` prints its own
before → after table, and its verdict, :mod:`bpmon.service.whatif`): per vertex its level, ratio and
capacity per subtask before and after, and the changes a user acts on: a bottleneck that
moved, one that appeared or went away, a capacity that dropped, a level that worsened. Surfaces
render a :class:`Comparison`; none of them decides what counts as a change.

A vertex's **capacity per subtask** is the one definition of :mod:`bpmon.model.capacity` (the mean
over its subtasks at least ``min_busy`` busy of records handled over busy), the figure the
report sizes with and ``bpmon analyze`` tracks run by run, so a page comparing two runs shows
the numbers the report and the analysis show. A parallelism change is named in the words the
analysis uses for a regression it explains (:func:`bpmon.model.capacity.explained`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from bpmon.model import capacity
from bpmon.model.values import Level, Report, RootCause, VertexStatus

MIN_BUSY = capacity.MIN_BUSY
"""The default ``[capacity] min_busy`` (:mod:`bpmon.model.capacity`), for pages that quote it."""

CAPACITY_DROP = 0.2
"""A capacity per subtask lower by more than this share counts as a drop."""

ChangeKind = Literal[
    "moved-bottleneck",
    "new-cause",
    "resolved",
    "kind-changed",
    "capacity-drop",
    "level-worsened",
    "level-improved",
    "parallelism",
    "vertex-added",
    "vertex-removed",
]
_ORDER: tuple[Level, ...] = ("OK", "LOW", "HIGH")


@dataclass(frozen=True, slots=True)
class VertexChange:
    """One vertex in both reports (``None`` on the side that lacks it)."""

    name: str
    before: VertexStatus | None
    after: VertexStatus | None
    capacity_before: float | None
    capacity_after: float | None

    @property
    def capacity_change(self) -> float | None:
        """The relative change of the capacity per subtask (-0.46: 46% lower), when both known."""
        old, new = self.capacity_before, self.capacity_after
        if old is None or new is None or old <= 0:
            return None
        return new / old - 1


@dataclass(frozen=True, slots=True)
class ReportChange:
    """One thing that changed, in a line a user reads (``vertex`` empty for the whole job)."""

    kind: ChangeKind
    vertex: str
    detail: str


@dataclass(frozen=True, slots=True)
class Comparison:
    """``before`` and ``after`` of one job, vertex by vertex, and what changed (most telling
    first: the root cause, then capacities, then levels and parallelism)."""

    before: Report
    after: Report
    vertices: tuple[VertexChange, ...]
    changes: tuple[ReportChange, ...]

    @property
    def moved(self) -> ReportChange | None:
        """The change saying the bottleneck moved, if it did."""
        return next((c for c in self.changes if c.kind == "moved-bottleneck"), None)


def capacity_of_vertex(vertex: VertexStatus, min_busy: float = MIN_BUSY) -> float | None:
    """Records/s one subtask of ``vertex`` handles at 100% busy (:mod:`bpmon.model.capacity`)."""
    figures = (
        (s.metrics.records_in_per_s, s.metrics.records_out_per_s, s.metrics.busy_ratio)
        for s in vertex.subtasks
    )
    return capacity.capacity_per_subtask(figures, min_busy)


def compare(
    before: Report,
    after: Report,
    capacity_drop: float = CAPACITY_DROP,
    min_busy: float = MIN_BUSY,
) -> Comparison:
    """What changed from ``before`` to ``after`` (two reports of the same job), capacities by
    ``[capacity] min_busy`` and drops by ``[history] capacity_drop`` of the rules."""
    old = {v.name: v for v in before.vertices}
    new = {v.name: v for v in after.vertices}
    names = [v.name for v in before.vertices] + [n for n in new if n not in old]
    rows = tuple(
        VertexChange(
            name,
            old.get(name),
            new.get(name),
            _capacity(old.get(name), min_busy),
            _capacity(new.get(name), min_busy),
        )
        for name in names
    )
    rescaled = [line for row in rows if (line := _rescaled(row)) is not None]
    changes = _cause_changes(before, after)
    changes += [c for row in rows if (c := _capacity_drop(row, capacity_drop, rescaled))]
    for row in rows:
        changes += _vertex_changes(row)
    return Comparison(before, after, rows, tuple(changes))


def _capacity(vertex: VertexStatus | None, min_busy: float) -> float | None:
    return None if vertex is None else capacity_of_vertex(vertex, min_busy)


def describe(cause: RootCause) -> str:
    """``geo-lookup (slow-operator)``, with the subtasks when the cause names some."""
    where = f"{cause.vertex} ({cause.kind}"
    if cause.subtasks:
        where += ", subtask" + ("s " if len(cause.subtasks) > 1 else " ")
        where += ", ".join(str(i) for i in cause.subtasks)
    return where + ")"


def _cause_changes(before: Report, after: Report) -> list[ReportChange]:
    was = before.root_causes[0] if before.root_causes else None
    now = after.root_causes[0] if after.root_causes else None
    if was is not None and now is not None:
        if was.vertex != now.vertex:
            line = f"the bottleneck moved from {describe(was)} to {describe(now)}"
            return [ReportChange("moved-bottleneck", now.vertex, line)]
        if was.kind != now.kind:
            line = f"the root cause at {now.vertex} changed kind: {was.kind} → {now.kind}"
            return [ReportChange("kind-changed", now.vertex, line)]
        return []
    if now is not None and before.root_causes is not None:
        return [ReportChange("new-cause", now.vertex, f"a bottleneck appeared: {describe(now)}")]
    if was is not None and after.root_causes is not None:
        return [ReportChange("resolved", was.vertex, f"the bottleneck {describe(was)} is gone")]
    return []


def _capacity_drop(row: VertexChange, threshold: float, rescaled: list[str]) -> ReportChange | None:
    change = row.capacity_change
    if change is None or change >= -threshold:
        return None
    assert row.capacity_before is not None and row.capacity_after is not None
    line = (
        f"the capacity of {row.name} dropped from {row.capacity_before:,.0f} to "
        f"{row.capacity_after:,.0f} records/s per subtask ({change:+.0%})"
    )
    return ReportChange("capacity-drop", row.name, capacity.explained(line, rescaled))


def _rescaled(row: VertexChange) -> str | None:
    """``enrich runs 6 subtasks instead of 2``, when the vertex's parallelism changed."""
    if row.before is None or row.after is None:
        return None
    return capacity.parallelism_change(row.name, row.before.parallelism, row.after.parallelism)


def _vertex_changes(row: VertexChange) -> list[ReportChange]:
    old, new = row.before, row.after
    if old is None:
        return [ReportChange("vertex-added", row.name, f"{row.name} is new")]
    if new is None:
        return [ReportChange("vertex-removed", row.name, f"{row.name} is gone")]
    changes = []
    rescaled = _rescaled(row)
    if rescaled is not None:
        changes.append(ReportChange("parallelism", row.name, rescaled))
    if old.level is not None and new.level is not None and old.level != new.level:
        worse = _ORDER.index(new.level) > _ORDER.index(old.level)
        kind: ChangeKind = "level-worsened" if worse else "level-improved"
        changes.append(
            ReportChange(kind, row.name, f"{row.name} went from {old.level} to {new.level}")
        )
    return changes
