"""The rate each vertex would be offered if nothing upstream held it back (DS2, as Flink's
autoscaler estimates it).

Each source offers what it emits plus the growth of what it owes, FLIP-33's ``pendingRecords``
(a Kafka source's lag; the runtime's rate-limited sources owe the records their schedule is behind).
That rate is carried along the edges, multiplied by each vertex's measured records out / records in
(and by the parallelism across a broadcast edge).

A source that does not report ``pendingRecords`` (Flink's DataGen source, many others) leaves the
offered rate unmeasured: a held-back source only says it would send *more* than it emits. For
sizing only, it is then *estimated* as Flink's autoscaler estimates a source's observed rate,
records out / (1 - backpressured share), but at most ``MAX_ESTIMATE_FACTOR`` times what it emits:
that formula is the source's own speed, not the demand behind it, and a rate-limited source held
back 95% of the time reads 20 times its real offer (seen on a real Flink job: 42 subtasks asked
where 5 removed the backpressure). So the recommendation is a step of at most double, the
evidence says the rate is estimated, and ``--verify`` checks whether the step was enough. The
estimate never decides whether a busy vertex has room (:func:`offered_rates` with
``estimate=False``): only measured lags do that.
"""

from __future__ import annotations

from bpmon.model.values import Observation, VertexObservation
from bpmon.rules.config import RulesConfig
from bpmon.rules.graph import JobGraph
from bpmon.rules.levels import backpressure_ratio

MAX_ESTIMATE_FACTOR = 2.0
"""The most an estimated offered rate exceeds what a source emits: one step at a time."""


def _source_offer(vertex: VertexObservation, estimate: bool) -> float | None:
    """What a source would emit if nothing held it back: records out + lag growth, or, with
    ``estimate`` and no lag reported, records out / (1 - backpressured share)."""
    total = 0.0
    for s in vertex.subtasks:
        out = s.metrics.records_out_per_s
        growth = None if s.metrics.backlog is None else s.metrics.backlog.growth_per_s
        if out is not None and growth is not None:
            total += max(0.0, out + growth)
            continue
        held = backpressure_ratio(s) if estimate else None
        if out is None or held is None:
            return None
        total += out * min(MAX_ESTIMATE_FACTOR, 1.0 / max(1e-9, 1.0 - held))
    return total if vertex.subtasks else None


def estimated(obs: Observation) -> bool:
    """Whether a source's offered rate had to be estimated (it reports no pendingRecords)."""
    return any(
        s.metrics.backlog is None or s.metrics.backlog.growth_per_s is None
        for v in obs.vertices
        if not v.inputs
        for s in v.subtasks
    )


def _amplification(vertex: VertexObservation) -> float | None:
    ins = [s.metrics.records_in_per_s for s in vertex.subtasks]
    outs = [s.metrics.records_out_per_s for s in vertex.subtasks]
    if not ins or None in ins or None in outs:
        return None
    total_in = sum(v for v in ins if v is not None)
    total_out = sum(v for v in outs if v is not None)
    return total_out / total_in if total_in > 0 else None


def offered_rates(
    obs: Observation, graph: JobGraph, rules: RulesConfig, *, estimate: bool = False
) -> dict[str, float | None]:
    """The records/s each vertex would be offered if nothing upstream were blocked.

    None where a rate is missing, or a source upstream reports no ``pendingRecords`` (unless
    ``estimate``: then from its records out and backpressured share).
    """
    offered_out: dict[str, float | None] = {}
    offered_in: dict[str, float | None] = {}
    for name in graph.order:
        vertex = obs.vertex(name)
        edges = graph.producers[name]
        if not edges:
            offered_in[name] = None
            offered_out[name] = _source_offer(vertex, estimate)
            continue
        parts = [offered_out.get(e.source) for e in edges]
        total: float | None = None
        if None not in parts:
            total = sum(
                (p or 0.0) * (vertex.parallelism if e.partitioner == "broadcast" else 1)
                for p, e in zip(parts, edges, strict=True)
            )
        offered_in[name] = total
        amp = _amplification(vertex)
        offered_out[name] = None if total is None or amp is None else total * amp
    return offered_in


def pending_backlogs(obs: Observation, graph: JobGraph) -> dict[str, float | None]:
    """The records each vertex has still to process of what its sources owe (their
    ``pendingRecords``), carried along the edges as the offered rate is; None where a source
    upstream reports none."""
    backlog_out: dict[str, float | None] = {}
    backlog_in: dict[str, float | None] = {}
    for name in graph.order:
        vertex = obs.vertex(name)
        edges = graph.producers[name]
        if not edges:
            owed = [
                None if s.metrics.backlog is None else s.metrics.backlog.pending_records
                for s in vertex.subtasks
            ]
            backlog_in[name] = None
            backlog_out[name] = None if None in owed or not owed else sum(o or 0.0 for o in owed)
            continue
        parts = [backlog_out.get(e.source) for e in edges]
        total = None
        if None not in parts:
            total = sum(
                (p or 0.0) * (vertex.parallelism if e.partitioner == "broadcast" else 1)
                for p, e in zip(parts, edges, strict=True)
            )
        backlog_in[name] = total
        amp = _amplification(vertex)
        backlog_out[name] = None if total is None or amp is None else total * amp
    return backlog_in
