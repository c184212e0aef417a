"""Two reports of one job side by side, and what changed between them, as values.

``bpmon whatif`` and the dashboard's Compare page both need the same reading of two reports: per
vertex its level, ratio and capacity per subtask before and after, and the changes a user acts
on: a bottleneck that moved, one that appeared or went away, a capacity that dropped, a level
that worsened. Surfaces render a :class:`Comparison`; none of them decides what counts as a
change.

A vertex's **capacity per subtask** is the records per second one subtask handles at 100% busy:
the root cause's own figure when the rules sized it, otherwise the median over the vertex's busy
subtasks of records in (records out for a source) divided by the busy ratio. A subtask busy less
than :data:`MIN_BUSY` of the window gives no figure: dividing by a small busy share multiplies
its noise.

May import: the model layer only (stdlib).
"""

from __future__ import annotations

import math
import statistics
from dataclasses import dataclass
from typing import Literal

from bpmon.model import Level, Report, RootCause, VertexStatus

MIN_BUSY = 0.5
"""The least busy share a subtask needs for its records/s to say what it can handle."""
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
class Change:
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
    changes: tuple[Change, ...]

    @property
    def moved(self) -> Change | None:
        """The change saying the bottleneck moved, if it did."""
        return next((c for c in self.changes if c.kind == "moved-bottleneck"), None)


def capacity_per_subtask(vertex: VertexStatus, report: Report | None = None) -> float | None:
    """Records/s one subtask of ``vertex`` handles at 100% busy (see the module's docstring).

    With ``report`` given, a root cause's own ``capacity_per_subtask`` for the vertex wins.
    """
    for cause in (report.root_causes or ()) if report is not None else ():
        if cause.vertex == vertex.name and cause.capacity_per_subtask is not None:
            return cause.capacity_per_subtask
    figures = []
    for subtask in vertex.subtasks:
        m = subtask.metrics
        rate = m.records_in_per_s if vertex.inputs else m.records_out_per_s
        if m.busy_ratio is None or rate is None or not math.isfinite(rate):
            continue
        if m.busy_ratio >= MIN_BUSY:
            figures.append(rate / m.busy_ratio)
    return statistics.median(figures) if figures else None


def compare(before: Report, after: Report, capacity_drop: float = CAPACITY_DROP) -> Comparison:
    """What changed from ``before`` to ``after`` (two reports of the same job)."""
    old = {v.name: v for v in before.vertices}
    new = {v.name: v for v in after.vertices}
    names = [v.name for v in before.vertices] + [n for n in new if n not in old]
    rows = tuple(
        VertexChange(
            name,
            old.get(name),
            new.get(name),
            _capacity(old.get(name), before),
            _capacity(new.get(name), after),
        )
        for name in names
    )
    changes = _cause_changes(before, after)
    changes += [c for row in rows if (c := _capacity_drop(row, capacity_drop)) is not None]
    for row in rows:
        changes += _vertex_changes(row)
    return Comparison(before, after, rows, tuple(changes))


def _capacity(vertex: VertexStatus | None, report: Report) -> float | None:
    return None if vertex is None else capacity_per_subtask(vertex, report)


def describe(cause: RootCause) -> str:
    """``geo-lookup (slow-operator)``, with the subtasks when the cause names some."""
    where = f"{cause.vertex} ({cause.kind}"
    if cause.subtasks:
        where += ", subtask" + ("s " if len(cause.subtasks) > 1 else " ")
        where += ", ".join(str(i) for i in cause.subtasks)
    return where + ")"


def _cause_changes(before: Report, after: Report) -> list[Change]:
    was = before.root_causes[0] if before.root_causes else None
    now = after.root_causes[0] if after.root_causes else None
    if was is not None and now is not None:
        if was.vertex != now.vertex:
            line = f"the bottleneck moved from {describe(was)} to {describe(now)}"
            return [Change("moved-bottleneck", now.vertex, line)]
        if was.kind != now.kind:
            line = f"the root cause at {now.vertex} changed kind: {was.kind} → {now.kind}"
            return [Change("kind-changed", now.vertex, line)]
        return []
    if now is not None and before.root_causes is not None:
        return [Change("new-cause", now.vertex, f"a bottleneck appeared: {describe(now)}")]
    if was is not None and after.root_causes is not None:
        return [Change("resolved", was.vertex, f"the bottleneck {describe(was)} is gone")]
    return []


def _capacity_drop(row: VertexChange, threshold: float) -> Change | None:
    change = row.capacity_change
    if change is None or change >= -threshold:
        return None
    assert row.capacity_before is not None and row.capacity_after is not None
    line = (
        f"the capacity of {row.name} dropped from {row.capacity_before:,.0f} to "
        f"{row.capacity_after:,.0f} records/s per subtask ({change:+.0%})"
    )
    return Change("capacity-drop", row.name, line)


def _vertex_changes(row: VertexChange) -> list[Change]:
    old, new = row.before, row.after
    if old is None:
        return [Change("vertex-added", row.name, f"{row.name} is new")]
    if new is None:
        return [Change("vertex-removed", row.name, f"{row.name} is gone")]
    changes = []
    if old.parallelism != new.parallelism:
        line = f"{row.name} runs {new.parallelism} subtasks instead of {old.parallelism}"
        changes.append(Change("parallelism", row.name, line))
    if old.level is not None and new.level is not None and old.level != new.level:
        worse = _ORDER.index(new.level) > _ORDER.index(old.level)
        kind: ChangeKind = "level-worsened" if worse else "level-improved"
        changes.append(Change(kind, row.name, f"{row.name} went from {old.level} to {new.level}"))
    return changes
