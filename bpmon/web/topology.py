"""Where each vertex of a job graph goes on the page, and which are the root cause's victims.

The graph reads left to right in topological order: a vertex sits one column right of its
furthest input (sources in the first column). Within a column, vertices are ordered by the mean
row of their inputs, which keeps most edges short and uncrossed. A cycle (an iteration) does not
stop the layout: the vertices on it are placed after everything that can be ordered.

A job without a single edge (a process watched without a topology file) has no order to read;
its vertices are put one per column in the order data most likely flows: the most backpressured
first (a stage blocked on its output is upstream of the one that blocks it), the most idle last
(a stage waiting for input is downstream). Nothing is drawn between them.

A **victim** is a vertex that is backpressured (LOW or HIGH) because a root cause downstream of it
cannot keep up: the vertices Flink's web UI colours red while the culprit looks healthy.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from bpmon.model.values import Report, VertexStatus


@dataclass(frozen=True, slots=True)
class GraphPosition:
    """A vertex's column (0: sources) and its height in the column (0 at the middle, up > 0)."""

    column: int
    y: float


def unconnected(vertices: Sequence[VertexStatus]) -> bool:
    """True when two vertices or more have no edge between any of them."""
    known = {v.name for v in vertices}
    return len(vertices) > 1 and not any(e.source in known for v in vertices for e in v.inputs)


def flow_order(vertices: Sequence[VertexStatus]) -> list[VertexStatus]:
    """Unconnected vertices in the order data most likely flows (the module's docstring):
    backpressured minus idle share, highest first; ties keep the report's order."""

    def upstream_first(v: VertexStatus) -> float:
        pressed = v.ratio or 0.0
        idle = v.metrics.idle_ratio or 0.0
        return idle - pressed

    return sorted(vertices, key=upstream_first)


def columns(vertices: Sequence[VertexStatus]) -> dict[str, int]:
    """Each vertex's column: one more than its furthest input's (inputs outside the job ignored);
    unconnected vertices one per column in :func:`flow_order`."""
    if unconnected(vertices):
        return {v.name: i for i, v in enumerate(flow_order(vertices))}
    known = {v.name for v in vertices}
    inputs = {v.name: [e.source for e in v.inputs if e.source in known] for v in vertices}
    column: dict[str, int] = {}
    pending = [v.name for v in vertices]
    while pending:
        placed = False
        for name in list(pending):
            if all(src in column for src in inputs[name]):
                column[name] = 1 + max((column[s] for s in inputs[name]), default=-1)
                pending.remove(name)
                placed = True
        if not placed:  # a cycle: place its first vertex after its placed inputs
            name = pending.pop(0)
            column[name] = 1 + max((column[s] for s in inputs[name] if s in column), default=-1)
    return column


def layout(vertices: Sequence[VertexStatus]) -> dict[str, GraphPosition]:
    """Every vertex's placement; rows ordered by the mean row of their inputs."""
    column = columns(vertices)
    by_column: dict[int, list[VertexStatus]] = {}
    for v in vertices:
        by_column.setdefault(column[v.name], []).append(v)
    row: dict[str, float] = {}
    placed: dict[str, GraphPosition] = {}
    for c in sorted(by_column):
        members = by_column[c]
        order = {v.name: i for i, v in enumerate(members)}

        def key(v: VertexStatus, order: dict[str, int] = order) -> tuple[float, int]:
            rows = [row[e.source] for e in v.inputs if e.source in row]
            return (sum(rows) / len(rows) if rows else float(order[v.name]), order[v.name])

        members.sort(key=key)
        middle = (len(members) - 1) / 2
        for i, v in enumerate(members):
            row[v.name] = float(i)
            placed[v.name] = GraphPosition(c, middle - i)
    return placed


def upstream(report: Report, of: set[str]) -> set[str]:
    """Every vertex whose records reach one of ``of`` (not counting ``of`` themselves)."""
    inputs = {v.name: [e.source for e in v.inputs] for v in report.vertices}
    seen: set[str] = set()
    todo = [src for name in of for src in inputs.get(name, ())]
    while todo:
        name = todo.pop()
        if name not in seen:
            seen.add(name)
            todo.extend(inputs.get(name, ()))
    return seen - of


def culprits(report: Report) -> list[str]:
    """The root causes' vertices, most likely first, each once."""
    names: list[str] = []
    for cause in report.root_causes or ():
        if cause.vertex not in names:
            names.append(cause.vertex)
    return names


def victims(report: Report) -> set[str]:
    """The backpressured vertices upstream of a root cause (none without a root cause)."""
    blamed = set(culprits(report))
    above = upstream(report, blamed)
    return {v.name for v in report.vertices if v.name in above and v.level in ("LOW", "HIGH")}
