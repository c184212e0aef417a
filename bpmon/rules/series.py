"""What limits next: the vertices in series with a bottleneck that cannot take what they would be
offered once it keeps up: after it, or held back before it.

Raising a bottleneck's parallelism lets the rate the sources would send flow on. A vertex after
it whose measured capacity (records in / busy, per subtask, times its parallelism) is below the
rate it would then be offered becomes the next bottleneck in series: the advice for the first
one then moves the backpressure instead of removing it, so the report says so and sizes the
next one too.
"""

from __future__ import annotations

import math
from collections.abc import Mapping

from bpmon.model.evidence import EvidenceLine, count, line, rounded_percent, whole
from bpmon.model.values import NextInSeries, Observation
from bpmon.rules.advice import capacity_of_windows, whole_rate
from bpmon.rules.config import RulesConfig
from bpmon.rules.graph import JobGraph


def evidence_line(found: NextInSeries) -> EvidenceLine:
    """The evidence line that quotes ``found``'s figures."""
    name, cap, demand, need = (
        found.vertex,
        found.capacity_per_subtask,
        found.offered_rate,
        found.recommended_parallelism,
    )
    return line(
        f"next in series: {name} handles ~",
        whole("capacity", cap, vertex=name),
        " records/s per subtask x ",
        count("parallelism", found.parallelism, name),
        " and would then be offered ~",
        whole("offered", demand, vertex=name),
        ": it would limit next; ",
        count("needed", need, name),
        " subtasks would take it at ",
        rounded_percent("utilisation", demand / (need * cap), name),
    )


def recommendation_tail(found: NextInSeries) -> str:
    """The sentence the recommendation ends with for ``found``."""
    return (
        f" Then {found.vertex} would limit next: give it {found.recommended_parallelism} "
        f"subtasks instead of {found.parallelism} as well."
    )


def next_in_series(
    name: str,
    graph: JobGraph,
    obs: Observation,
    offered: Mapping[str, float | None],
    named: frozenset[str],
    rules: RulesConfig,
) -> list[NextInSeries]:
    """The vertices in series after ``name`` that would limit next, in topological order.

    In series: a vertex whose only input comes from ``name`` or from a vertex in series after
    it (not through a broadcast), so everything it is offered passes ``name`` first. Once
    ``name`` keeps up, each of them is offered its full share of what the sources would send
    (``offered``: the offered rate of ``name`` times the records out / records in of every
    vertex on the way). One whose measured capacity (all its subtasks at 100% busy) is
    below that becomes the next bottleneck in series: raising ``name`` alone then moves the
    backpressure, it does not remove it. Vertices already named as a root cause (``named``)
    have their own advice and are left out.

    The vertices before ``name`` (:func:`held_back`) count too: held back by it now, each is
    offered what the sources would send once it keeps up, and one whose capacity is below that
    limits next the same way (a busy-but-sufficient operator before a slower one).
    """
    after: set[str] = set()
    todo = [name]
    while todo:
        for consumer, edge in graph.consumers.get(todo.pop(), ()):
            only_input = len(graph.producers.get(consumer, ())) == 1
            if only_input and edge.partitioner != "broadcast" and consumer not in after:
                after.add(consumer)
                todo.append(consumer)
    held = held_back(name, graph)
    found = []
    for vertex_name in graph.order:
        if vertex_name not in after | held or vertex_name in named:
            continue
        vertex = obs.vertex(vertex_name)
        cap = whole_rate(capacity_of_windows(vertex.subtasks, rules.capacity.min_busy))
        demand = whole_rate(offered.get(vertex_name))
        if cap is None or demand is None or cap * vertex.parallelism >= demand:
            continue
        need = math.ceil(demand / (cap * rules.capacity.utilisation_target))
        found.append(NextInSeries(vertex_name, vertex.parallelism, cap, demand, need))
    return found


def held_back(name: str, graph: JobGraph) -> set[str]:
    """The vertices ``name`` holds back: every vertex upstream of it (its producers, theirs,
    and so on), sources included (they have no offered rate and are never sized here)."""
    before: set[str] = set()
    todo = [name]
    while todo:
        for edge in graph.producers.get(todo.pop(), ()):
            if edge.source not in before:
                before.add(edge.source)
                todo.append(edge.source)
    return before
