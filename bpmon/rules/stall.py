"""Stalls: a job, or a region of it, that moves no records at all while something waits.

A stalled job has no bottleneck to scale: every rate is zero, the busiest vertex is not busy, and
a rule that looks for "the busy vertex downstream of the backpressured ones" either finds nothing
or, worse, blames an idle consumer as a network problem. So a stall is found first, on its own
evidence, and reported as kind ``stalled`` with the cycle of waits named — never with full
confidence, since what is waiting on what is inferred from where threads sit, not observed.

A region is a connected part of the job graph. It is stalled when every record rate of its
vertices is known and their sum is at most ``[stall] max_records_per_s`` (0: not one record
moved) while some vertex in it is above OK. The waits are followed on subtasks (the execution
graph): a backpressured subtask waits on the consumer subtasks its channels reach (for output
buffers), an idle one that is not backpressured waits on the producer subtasks that feed it (for
input). The cycle is the first one found by a depth-first walk of those waits from the most
upstream blocked subtask; the vertex named is that of the first subtask in it that waits for
input (it holds the others: an aligning checkpoint, a receiver that cannot take a buffer), else
of the first in it, with its subtasks in the cycle.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace

from bpmon.model.evidence import (
    EvidenceLine,
    EvidencePart,
    decimal,
    line,
    percent,
    ratio,
    subtasks,
)
from bpmon.model.values import Observation, RootCause
from bpmon.rules.channels import pointed
from bpmon.rules.config import RulesConfig
from bpmon.rules.execution import execution_observation, vertex_of
from bpmon.rules.graph import JobGraph, VertexSummary, build_graph, summarize
from bpmon.rules.levels import level_of


def find_stalls(
    obs: Observation,
    graph: JobGraph,
    summaries: Mapping[str, VertexSummary],
    rules: RulesConfig,
) -> tuple[tuple[RootCause, frozenset[str]], ...]:
    """One ``stalled`` root cause per region of the job that moves no records, with the region."""
    out = []
    for region in _regions(graph):
        rates = _region_rate(obs, region)
        if rates is None or rates > rules.stall.max_records_per_s:
            continue
        blocked = [n for n in region if summaries[n].above(rules.levels.ok_max)]
        if blocked:
            cause = _stalled(obs, graph, summaries, rules, region, blocked)
            out.append((cause, frozenset(region)))
    return tuple(out)


def _regions(graph: JobGraph) -> list[list[str]]:
    """The connected parts of the graph, each in topological order."""
    neighbours: dict[str, set[str]] = {n: set() for n in graph.order}
    for name, edges in graph.producers.items():
        for e in edges:
            neighbours[name].add(e.source)
            neighbours[e.source].add(name)
    seen: set[str] = set()
    regions = []
    for start in graph.order:
        if start in seen:
            continue
        part, todo = set(), [start]
        while todo:
            n = todo.pop()
            if n not in part:
                part.add(n)
                todo.extend(neighbours[n] - part)
        seen |= part
        regions.append([n for n in graph.order if n in part])
    return regions


def _region_rate(obs: Observation, region: Sequence[str]) -> float | None:
    """Records in and out per second of every subtask of the region, summed.

    None when a subtask reports neither rate (a source has no records in, a sink no records
    out: one of the two is enough).
    """
    total = 0.0
    for name in region:
        for s in obs.vertex(name).subtasks:
            known = [
                r
                for r in (s.metrics.records_in_per_s, s.metrics.records_out_per_s)
                if r is not None
            ]
            if not known:
                return None
            total += sum(known)
    return total


@dataclass(frozen=True, slots=True)
class Waits:
    """Who waits on whom, on vertices or on subtasks, and the cycles those waits close.

    A backpressured node waits on its consumers (for output buffers), an idle one on its
    producers (for input). Where the runtime read the channels (``narrow``), a node waits only on
    those the channels point at: a producer on the consumers whose channels hold its backlog (or
    have no credit, or a stopped connection), a consumer on the producers whose channels have
    nothing for it to read and are not held by an alignment. Both can hold for one channel: data
    stuck between the two (a stopped TCP connection) closes a cycle of two.
    """

    graph: JobGraph
    summaries: Mapping[str, VertexSummary]
    rules: RulesConfig
    narrow: Mapping[str, frozenset[str]] = field(default_factory=dict)

    def on(self, name: str) -> list[str]:
        """What ``name`` waits on, in the graph's order."""
        mine = self.summaries[name]
        if mine.above(self.rules.levels.ok_max):
            wide = [c for c, _ in self.graph.consumers[name]]
        elif (mine.idle or 0.0) >= self.rules.network.idle_min:
            wide = [e.source for e in self.graph.producers[name]]
        else:
            return []
        pointed = self.narrow.get(name, frozenset())
        return [n for n in wide if n in pointed] or wide

    def cycle(self, start: str) -> list[str]:
        """A cycle of waits reachable from ``start`` (empty when the waits end somewhere)."""
        path: list[str] = []
        done: set[str] = set()

        def walk(n: str) -> list[str]:
            if n in path:
                return path[path.index(n) :]
            if n in done:
                return []
            path.append(n)
            for m in self.on(n):
                found = walk(m)
                if found:
                    return found
            path.pop()
            done.add(n)
            return []

        return walk(start)

    def line(self, name: str) -> EvidenceLine:
        """``map[0] is HIGH (0.99) and waits for output buffers of sink[1]``."""
        mine, on = self.summaries[name], self.on(name)
        vertex, index = vertex_of(name)
        of = () if index is None else (index,)
        if mine.above(self.rules.levels.ok_max):
            bp = mine.backpressure or 0.0
            return line(
                _node(name),
                f" is {level_of(bp, self.rules.levels)} (",
                ratio("backpressure", bp, vertex, of),
                ") and waits for output buffers of ",
                _nodes(on, ", ") or ("no consumer",),
            )
        idle = percent("idle", mine.shown_idle or 0.0, vertex, of)
        return line(
            _node(name),
            " idles ",
            idle,
            " and waits for input from ",
            _nodes(on, ", ") or ("nothing",),
        )


def _node(name: str) -> tuple[EvidencePart, ...]:
    """A vertex, or a subtask of the execution graph (``map[0]``, its index a figure)."""
    vertex, index = vertex_of(name)
    return (name,) if index is None else subtasks(vertex, [index])


def _nodes(names: Sequence[str], between: str) -> tuple[EvidencePart, ...]:
    """``names`` as :func:`_node` writes each, ``between`` them."""
    parts: list[EvidencePart] = []
    for n, name in enumerate(names):
        parts += [between] if n else []
        parts += _node(name)
    return tuple(parts)


def _stalled(
    obs: Observation,
    graph: JobGraph,
    summaries: Mapping[str, VertexSummary],
    rules: RulesConfig,
    region: Sequence[str],
    blocked: Sequence[str],
) -> RootCause:
    cycle, waits = _subtask_cycle(obs, region, rules)
    seconds = obs.window.seconds
    lines = [
        line(
            f"no records moved in {', '.join(region)} over the ",
            decimal("window", seconds, "s", 1),
            " s window (every records in/out rate is 0)",
        )
    ]
    if cycle:
        lines += [waits.line(n) for n in cycle]
        lines.append(line("a cycle of waits: ", _nodes([*cycle, cycle[0]], " -> ")))
    else:
        lines += [Waits(graph, summaries, rules).line(n) for n in blocked]
        lines.append(line("the waits end nowhere in the graph: what holds them is outside it"))
    tcp = obs.settings.flow_control == "tcp"
    advice = (
        "The job has stopped, not slowed: restart it. Under TCP flow control a receiver that "
        "cannot take a buffer stops its whole connection, so the channels on it (and a "
        "checkpoint alignment holding buffers for one of them) can wait on each other; "
        "credit-based flow control (Flink 1.5 and later) cannot."
        if tcp
        else "The job has stopped, not slowed: take a thread dump of the vertices in the cycle "
        "to see what holds them, then restart it."
    )
    named, indices = _holder(cycle, waits.summaries, rules) if cycle else (blocked[0], ())
    return RootCause(
        vertex=named,
        kind="stalled",
        subtasks=indices,
        confidence=rules.stall.confidence,
        evidence=tuple(lines),
        recommendation=advice,
    )


def _subtask_cycle(
    obs: Observation, region: Sequence[str], rules: RulesConfig
) -> tuple[list[str], Waits]:
    """The cycle of waits among the region's subtasks, and the waits it was found in.

    Waits are subtask to subtask, along the channels (and, where the runtime read them, only the
    channels that hold the data or wait for it). On vertices, one backpressured subtask makes its
    whole vertex look blocked, and the cycle can run through a vertex whose other subtask is the
    one that holds everything (an aligning checkpoint).
    """
    part = execution_observation(replace(obs, vertices=tuple(obs.vertex(n) for n in region)))
    summaries = {v.name: summarize(v) for v in part.vertices}
    waits = Waits(build_graph(part), summaries, rules, pointed(obs.channels))
    starts = [v.name for v in part.vertices if summaries[v.name].above(rules.levels.ok_max)]
    for start in starts:
        cycle = waits.cycle(start)
        if cycle:
            return cycle, waits
    return [], waits


def _holder(
    cycle: Sequence[str], summaries: Mapping[str, VertexSummary], rules: RulesConfig
) -> tuple[str, tuple[int, ...]]:
    """The vertex named for a cycle, and its subtasks in it: the first that waits for input."""
    waiting = [n for n in cycle if not summaries[n].above(rules.levels.ok_max)]
    vertex, _ = vertex_of((waiting or list(cycle))[0])
    indices = {vertex_of(n)[1] for n in (waiting or cycle) if vertex_of(n)[0] == vertex}
    return vertex, tuple(sorted(i for i in indices if i is not None))
