"""What the bottleneck search reads: the job graph, and each vertex summarised over its subtasks.

:class:`JobGraph` is the graph of an observation (each vertex's inputs and consumers, in
topological order); :class:`VertexSummary` sums a vertex up by its WORST subtask, so that one hot
or slow subtask is not averaged away. Both are computed once per window by
:func:`bpmon.rules.localize.localize` and shared with the classification and the advice.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Literal

from bpmon.model.values import Edge, Observation, VertexObservation
from bpmon.rules.levels import (
    backpressure_ratio,
    blended_busy,
    blended_idle,
    max_known,
    shown_idle,
)


@dataclass(frozen=True, slots=True)
class VertexSummary:
    """One vertex summarised for the search: MAX over its subtasks (skew must not average out).

    Attributes:
        backpressure: worst subtask's backpressure (samples, else time accounting).
        busy: busiest subtask's busy share (mean of samples and time accounting).
        idle: most idle subtask's idle share.
        running: whether any subtask was seen at all (samples or time metrics).
        data_path: whether any subtask was seen on the data path (a keeper thread is not).
        shown_idle: most idle subtask's idle ratio as the report shows it (for the text).
    """

    name: str
    kind: str | None
    backpressure: float | None
    busy: float | None
    idle: float | None
    in_pool: float | None
    out_pool: float | None
    running: bool
    data_path: bool = True
    shown_idle: float | None = None

    def above(self, threshold: float) -> bool:
        """Whether its backpressure is strictly above ``threshold``."""
        return self.backpressure is not None and self.backpressure > threshold


def summarize(vertex: VertexObservation) -> VertexSummary:
    """Summarise one vertex's subtasks."""
    subs = vertex.subtasks
    running = any(
        s.samples > 0 or s.metrics.busy_ratio is not None or s.metrics.idle_ratio is not None
        for s in subs
    )
    return VertexSummary(
        name=vertex.name,
        kind=vertex.kind,
        backpressure=max_known(backpressure_ratio(s) for s in subs),
        busy=max_known(blended_busy(s) for s in subs),
        idle=max_known(blended_idle(s) for s in subs),
        in_pool=max_known(s.metrics.in_pool_usage for s in subs),
        out_pool=max_known(s.metrics.out_pool_usage for s in subs),
        running=running,
        data_path=any(s.data_path for s in subs) or not subs,
        shown_idle=shown_idle(vertex),
    )


@dataclass(frozen=True, slots=True)
class JobGraph:
    """The job graph: each vertex's input edges and its consumers, in topological order."""

    producers: Mapping[str, tuple[Edge, ...]]
    consumers: Mapping[str, tuple[tuple[str, Edge], ...]]
    order: tuple[str, ...]

    @property
    def has_edges(self) -> bool:
        """Whether the observation came with a topology at all."""
        return any(self.producers.values())


def build_graph(obs: Observation) -> JobGraph:
    """The graph of ``obs``; edges naming unknown vertices are ignored."""
    names = [v.name for v in obs.vertices]
    known = set(names)
    producers = {v.name: tuple(e for e in v.inputs if e.source in known) for v in obs.vertices}
    consumers: dict[str, list[tuple[str, Edge]]] = {n: [] for n in names}
    for name, edges in producers.items():
        for edge in edges:
            consumers[edge.source].append((name, edge))
    order: list[str] = []
    pending = list(names)
    while pending:  # Kahn's algorithm; a cycle keeps the observation's order for the rest
        ready = [n for n in pending if all(e.source in order for e in producers[n])]
        for name in ready or pending[:1]:
            order.append(name)
            pending.remove(name)
    return JobGraph(producers, {k: tuple(v) for k, v in consumers.items()}, tuple(order))


Mechanism = Literal["busy", "network", "starved"]


@dataclass(frozen=True, slots=True)
class Suspect:
    """A vertex the search blames, before its kind is classified.

    Attributes:
        pressing: the producers that wait on it (for a secondary suspect, the suspect feeding it;
            without a topology, every backpressured vertex).
        secondary: a bottleneck in series behind another suspect (its confidence is lowered).
    """

    vertex: str
    mechanism: Mechanism
    pressing: tuple[str, ...]
    secondary: bool = False
