"""The execution graph: subtasks and the channels between them, and the lift back to vertices.

The bottleneck search runs on the execution graph, not on vertices: a vertex whose subtask 0 is
a bottleneck while its subtask 1 waits on another bottleneck downstream (two sub-pipelines
joined by forward edges) looks like a victim when summarised by its worst subtask, but its
subtask 0 is plainly a suspect. So every subtask becomes a node of its own (named
``vertex[i]``), and the partitioner of each edge says which producer subtask feeds which
consumer subtask: ``forward`` joins subtask i to subtask i; ``rebalance``, ``hash`` and
``broadcast`` join every producer subtask to every consumer subtask. Skew, slow instances and
bottlenecks in parallel sub-pipelines then fall out of the same search as a slow operator.

:func:`lift` turns the busy bottlenecks found on subtasks back into vertices: a vertex is blamed
when any of its subtasks is, naming those subtasks; the producers waiting on it are their
vertices. What needs a whole vertex (an idle consumer behind a link, a head-of-line victim,
backpressure nothing explains) is then judged on vertices (:mod:`bpmon.rules.localize`).
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass, replace

from bpmon.model.values import Edge, Finding, FindingKind, Observation, VertexObservation
from bpmon.rules.graph import Suspect

_NODE = re.compile(r"(?P<vertex>.*)\[(?P<index>\d+)\]")


def node(vertex: str, index: int) -> str:
    """The execution-graph name of subtask ``index`` of ``vertex``: ``enrich[1]``."""
    return f"{vertex}[{index}]"


def vertex_of(name: str) -> tuple[str, int | None]:
    """The vertex and subtask index of an execution-graph node (the name itself otherwise)."""
    found = _NODE.fullmatch(name)
    if found is None:
        return name, None
    return found.group("vertex"), int(found.group("index"))


def connected(edge: Edge, producer: int, consumer: int) -> bool:
    """Whether producer subtask ``producer`` writes to consumer subtask ``consumer``."""
    return edge.partitioner != "forward" or producer == consumer


def execution_observation(obs: Observation) -> Observation:
    """``obs`` with each subtask as a vertex of parallelism 1 and each channel as an edge."""
    parallelism = {v.name: [s.index for s in v.subtasks] for v in obs.vertices}
    nodes = []
    for v in obs.vertices:
        for s in v.subtasks:
            inputs = tuple(
                Edge(node(e.source, p), e.partitioner, e.exchange)
                for e in v.inputs
                for p in parallelism.get(e.source, ())
                if connected(e, p, s.index)
            )
            nodes.append(
                VertexObservation(
                    name=node(v.name, s.index),
                    parallelism=1,
                    inputs=inputs,
                    subtasks=(s,),
                    kind=v.kind,
                )
            )
    return replace(obs, vertices=tuple(nodes))


@dataclass(frozen=True, slots=True)
class Lifted:
    """The search's result on vertices, with the subtasks it blamed in each."""

    suspects: tuple[Suspect, ...]
    subtasks: dict[str, tuple[int, ...]]


def lift(found: Iterable[Suspect]) -> Lifted:
    """Vertices from the subtasks the search blamed, in the order it found them."""
    order: list[str] = []
    groups: dict[str, list[Suspect]] = {}
    blamed: dict[str, list[int]] = {}
    for s in found:
        vertex, index = vertex_of(s.vertex)
        if vertex not in groups:
            order.append(vertex)
            groups[vertex], blamed[vertex] = [], []
        groups[vertex].append(s)
        if index is not None:
            blamed[vertex].append(index)
    suspects = tuple(_merge(vertex, groups[vertex]) for vertex in order)
    return Lifted(suspects, {v: tuple(sorted(set(i))) for v, i in blamed.items()})


def _merge(vertex: str, parts: list[Suspect]) -> Suspect:
    """One suspect for a vertex whose subtasks were blamed, by the strongest mechanism."""
    rank = {"busy": 0, "network": 1, "starved": 2}
    mechanism = min((p.mechanism for p in parts), key=rank.__getitem__)
    chosen = [p for p in parts if p.mechanism == mechanism]
    pressing = _vertices(n for p in chosen for n in p.pressing)
    return Suspect(vertex, mechanism, pressing, secondary=all(p.secondary for p in chosen))


def _vertices(names: Iterable[str]) -> tuple[str, ...]:
    out: list[str] = []
    for name in names:
        vertex, _ = vertex_of(name)
        if vertex not in out:
            out.append(vertex)
    return tuple(out)


def merge_findings(findings: Iterable[Finding]) -> tuple[Finding, ...]:
    """One finding per kind and vertex: the details of its subtasks joined."""
    merged: dict[tuple[FindingKind, str], list[str]] = {}
    for f in findings:
        details = merged.setdefault((f.kind, f.vertex), [])
        if f.detail not in details:
            details.append(f.detail)
    return tuple(Finding(kind, vertex, "; ".join(d)) for (kind, vertex), d in merged.items())
