"""What the Flink Kubernetes operator's autoscaler would decide from the same window, and where
it would go wrong beside bpmon's diagnosis.

The autoscaler's published algorithm (flink-autoscaler, ``docs/autoscaler.md`` gives it in full),
computed from one :class:`~bpmon.model.values.Observation` with its default configuration or a
user's overrides (:class:`AutoscalerConfig`):

1. Per vertex, LOAD = its subtasks' busy share aggregated by ``metrics.busy-time.aggregator``
   (MAX), and the true processing rate TPR = records in / LOAD (infinite with no input). A
   source catching up (lag at least ``observed-true-processing-rate.lag-threshold`` of input)
   may use its observed rate, records in / (1 - backpressured share), when the busy-time TPR is
   more than ``switch-threshold`` above it.
2. Each source's target rate is what it reads plus the growth of its ``pendingRecords``, its
   catch-up rate the lag over ``catch-up.duration``; both are carried downstream by each edge's
   measured ratio of records (``bpmon.rules.autoscaler`` computes the ratio as the autoscaler
   does: from records in, or out of the producer where a vertex has several inputs).
3. Target capacity = catch-up + target x restart.time / catch-up.duration + target /
   utilization.target; a vertex is outside its bounds when its TPR is below the capacity at the
   upper utilisation or above the one at the lower (while any source holds more than
   ``backlog-processing.lag-threshold`` of input, the bounds are 1 and 0).
4. New parallelism = ceil(capacity / TPR x P), the factor clamped by the scale-down and scale-up
   limits, bounded by the vertex's min and max and its key groups, and aligned (a keyed vertex:
   BALANCED, the first parallelism upward that divides the key groups or gives each subtask
   fewer of them). The autoscaler scales only when a vertex that would change is outside its
   bounds; a scale-down waits ``scale-down.interval``.

One window is taken as the autoscaler's whole metric window (its rates and means over 15
minutes): the figures are the window's, which is what bpmon measured. The verdicts then compare
the autoscaler's decision with bpmon's root causes and their sized parallelism
(:func:`verdicts`): ``agrees``, ``scales-ineffectively`` (a scale-up of a cause scaling cannot
fix), ``scales-wrong-vertex``, ``scales-down-bottleneck``, ``misses`` and ``over-provisions``.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, fields, replace
from typing import Literal, cast

from bpmon.model.autoscaler import (
    AutoscalerReport,
    AutoscalerVerdict,
    AutoscalerVertex,
    VerdictKind,
)
from bpmon.model.values import Observation, RootCause, VertexObservation

Aggregator = Literal["MAX", "AVG", "MIN"]
AlignmentMode = Literal["BALANCED", "EVENLY_SPREAD", "OFF"]


@dataclass(frozen=True, slots=True)
class AutoscalerConfig:
    """The ``job.autoscaler.*`` options the decision depends on, at the autoscaler's defaults
    (durations in seconds). :data:`KEYS` maps each to its option key."""

    busy_time_aggregator: Aggregator = "MAX"
    utilization_target: float = 0.7
    utilization_boundary: float = 0.3
    utilization_max: float | None = None
    utilization_min: float | None = None
    catch_up_s: float = 1800.0
    restart_s: float = 300.0
    backlog_lag_threshold_s: float = 300.0
    observed_lag_threshold_s: float = 30.0
    observed_switch_threshold: float = 0.15
    scale_down_max_factor: float = 0.6
    scale_up_max_factor: float = 100000.0
    vertex_min_parallelism: int = 1
    vertex_max_parallelism: int = 200
    scale_down_interval_s: float = 3600.0
    alignment_mode: AlignmentMode = "BALANCED"
    exclude: tuple[str, ...] = ()

    def as_keys(self) -> dict[str, object]:
        """The values used, by option key, as the report shows them."""
        return {KEYS[f.name]: _shown(getattr(self, f.name)) for f in fields(self)}


KEYS: Mapping[str, str] = {
    "busy_time_aggregator": "job.autoscaler.metrics.busy-time.aggregator",
    "utilization_target": "job.autoscaler.utilization.target",
    "utilization_boundary": "job.autoscaler.target.utilization.boundary",
    "utilization_max": "job.autoscaler.utilization.max",
    "utilization_min": "job.autoscaler.utilization.min",
    "catch_up_s": "job.autoscaler.catch-up.duration",
    "restart_s": "job.autoscaler.restart.time",
    "backlog_lag_threshold_s": "job.autoscaler.backlog-processing.lag-threshold",
    "observed_lag_threshold_s": "job.autoscaler.observed-true-processing-rate.lag-threshold",
    "observed_switch_threshold": "job.autoscaler.observed-true-processing-rate.switch-threshold",
    "scale_down_max_factor": "job.autoscaler.scale-down.max-factor",
    "scale_up_max_factor": "job.autoscaler.scale-up.max-factor",
    "vertex_min_parallelism": "job.autoscaler.vertex.min-parallelism",
    "vertex_max_parallelism": "job.autoscaler.vertex.max-parallelism",
    "scale_down_interval_s": "job.autoscaler.scale-down.interval",
    "alignment_mode": "job.autoscaler.scaling.parallelism-alignment.mode",
    "exclude": "job.autoscaler.vertex.exclude.ids",
}
"""Each option's key, as a Flink configuration file names it."""


def _shown(value: object) -> object:
    return list(value) if isinstance(value, tuple) else value


@dataclass(frozen=True, slots=True)
class _Rates:
    """One vertex's figures as the autoscaler reads them."""

    parallelism: int
    load: float | None
    records_in: float
    records_out: float
    lag: float
    lag_growth: float
    backpressured: float | None


def _rates(vertex: VertexObservation, aggregator: Aggregator) -> _Rates:
    subs = vertex.subtasks
    busy = [
        s.metrics.busy_ratio
        for s in subs
        if s.metrics.busy_ratio is not None and math.isfinite(s.metrics.busy_ratio)
    ]
    load = None
    if busy:
        load = (
            max(busy)
            if aggregator == "MAX"
            else min(busy)
            if aggregator == "MIN"
            else (sum(busy) / len(subs))
        )
    source = not vertex.inputs
    ins = [s.metrics.records_out_per_s if source else s.metrics.records_in_per_s for s in subs]
    outs = [s.metrics.records_out_per_s for s in subs]
    pending = [s.metrics.backlog for s in subs if s.metrics.backlog is not None]
    held = [s.metrics.backpressured_time_ratio for s in subs]
    known_held = [h for h in held if h is not None]
    return _Rates(
        parallelism=vertex.parallelism,
        load=max(0.0, load) if load is not None else None,
        records_in=sum(r or 0.0 for r in ins),
        records_out=sum(r or 0.0 for r in outs),
        lag=sum(b.pending_records or 0.0 for b in pending),
        lag_growth=sum(b.growth_per_s or 0.0 for b in pending),
        backpressured=sum(known_held) / len(known_held) if known_held else None,
    )


@dataclass(frozen=True, slots=True)
class _Evaluated:
    tpr: float
    target: float
    catch_up: float


def decide(observation: Observation, config: AutoscalerConfig | None = None) -> AutoscalerReport:
    """What the autoscaler would decide from ``observation`` (see the module); no verdicts."""
    config = config or AutoscalerConfig()
    order = [v.name for v in observation.vertices]
    by_name = {v.name: v for v in observation.vertices}
    rates = {v.name: _rates(v, config.busy_time_aggregator) for v in observation.vertices}
    outputs = {
        name: [v.name for v in observation.vertices if any(e.source == name for e in v.inputs)]
        for name in order
    }
    backlog = any(
        r.lag > 0 and (r.records_in <= 0 or r.lag / r.records_in > config.backlog_lag_threshold_s)
        for name, r in rates.items()
        if not by_name[name].inputs
    )
    evaluated: dict[str, _Evaluated] = {}
    for name in _topological(observation):
        vertex, r = by_name[name], rates[name]
        if not vertex.inputs:
            target = max(0.0, r.records_in + r.lag_growth)
            catch_up = r.lag / config.catch_up_s if config.catch_up_s > 0 else 0.0
        else:
            target = catch_up = 0.0
            for edge in vertex.inputs:
                upstream = evaluated.get(edge.source)
                if upstream is None:
                    continue
                ratio = _edge_ratio(edge.source, name, by_name, rates, outputs)
                target += upstream.target * ratio
                catch_up += upstream.catch_up * ratio
        evaluated[name] = _Evaluated(_tpr(vertex, r, config), target, catch_up)
    rows = [_row(by_name[name], rates[name], evaluated[name], backlog, config) for name in order]
    # a scale-down waits its interval, so only a scale-up outside its bounds scales now (and
    # takes every other change with it); a delayed scale-down applies later on its own flag
    now = any(r.outside and r.recommended_parallelism > r.parallelism for r in rows)
    later = any(r.outside and r.delayed for r in rows)
    rows = [_settled(row, now, later) for row in rows]
    return AutoscalerReport(
        config=config.as_keys(), vertices=tuple(rows), verdicts=(), acts=now or later
    )


def _topological(observation: Observation) -> list[str]:
    names = [v.name for v in observation.vertices]
    inputs = {
        v.name: [e.source for e in v.inputs if e.source in names] for v in observation.vertices
    }
    done: list[str] = []
    while len(done) < len(names):
        ready = [n for n in names if n not in done and all(i in done for i in inputs[n])]
        if not ready:  # a cycle (never in a job graph): keep the observation's order
            return names
        done += ready
    return done


def _edge_ratio(
    source: str,
    target: str,
    by_name: Mapping[str, VertexObservation],
    rates: Mapping[str, _Rates],
    outputs: Mapping[str, Sequence[str]],
) -> float:
    """The records ``target`` receives from ``source`` per record ``source`` reads, as the
    autoscaler measures it: 0 when ``source`` reads nothing or the edge carries nothing."""
    upstream = rates[source].records_in
    if upstream <= 0:
        return 0.0
    inputs = [e.source for e in by_name[target].inputs]
    if len(inputs) == 1:
        edge = rates[target].records_in
    elif all(len(outputs[w]) == 1 for w in inputs if w != source):
        edge = rates[target].records_in - sum(rates[w].records_out for w in inputs if w != source)
    else:
        edge = rates[source].records_out
    return edge / upstream if edge > 0 else 0.0


def _tpr(vertex: VertexObservation, r: _Rates, config: AutoscalerConfig) -> float:
    """The true processing rate (inf with no input; nan when the busy time is unknown)."""
    if r.records_in <= 0:
        return math.inf
    busy = math.nan if r.load is None else math.inf if r.load == 0 else r.records_in / r.load
    if vertex.inputs:
        return busy
    observed = math.nan
    catching_up = r.lag >= config.observed_lag_threshold_s * r.records_in
    if catching_up and r.backpressured is not None and r.backpressured < 1.0:
        observed = r.records_in / (1.0 - r.backpressured)
    if math.isnan(observed):
        return busy
    if not math.isfinite(busy) or busy > observed * (1.0 + config.observed_switch_threshold):
        return observed
    return busy


def _capacity(e: _Evaluated, utilization: float, restart: bool, config: AutoscalerConfig) -> float:
    """``round(catch-up + target x restart / catch-up duration + target / utilization)``."""
    u = min(1.0, max(0.0, utilization))
    if u == 0:
        return math.inf
    restart_term = (
        e.target * config.restart_s / config.catch_up_s if restart and config.catch_up_s > 0 else 0
    )
    return float(math.floor(e.catch_up + restart_term + e.target / u + 0.5))  # Java Math.round


def _row(
    vertex: VertexObservation,
    r: _Rates,
    e: _Evaluated,
    backlog: bool,
    config: AutoscalerConfig,
) -> AutoscalerVertex:
    target_u = config.utilization_target
    upper = (
        config.utilization_max
        if config.utilization_max is not None
        else min(1.0, target_u + config.utilization_boundary)
    )
    lower = (
        config.utilization_min
        if config.utilization_min is not None
        else max(0.0, target_u - config.utilization_boundary)
    )
    if backlog:
        upper, lower = 1.0, 0.0
    scale_up_below = _capacity(e, upper, False, config)
    scale_down_above = _capacity(e, lower, True, config) if lower > 0 else math.inf
    outside = e.tpr < scale_up_below or e.tpr > scale_down_above
    capacity = _capacity(e, target_u, True, config)
    new = _parallelism(vertex, r.parallelism, e.tpr, capacity, config)
    return AutoscalerVertex(
        name=vertex.name,
        load=r.load,
        true_processing_rate=e.tpr if math.isfinite(e.tpr) else None,
        target_rate=e.target,
        catch_up_rate=e.catch_up,
        parallelism=r.parallelism,
        recommended_parallelism=new,
        outside=outside,
        delayed=new < r.parallelism and config.scale_down_interval_s > 0,
    )


def _settled(row: AutoscalerVertex, now: bool, later: bool) -> AutoscalerVertex:
    """What comes of a vertex's proposal. The autoscaler scales ``now`` when a scale-up is
    outside its bounds, ``later`` (after its scale-down interval) when only a delayed
    scale-down is; either way it takes every vertex's change with it. Otherwise nothing
    changes."""
    if row.recommended_parallelism == row.parallelism or not (now or later):
        return replace(row, recommended_parallelism=row.parallelism, delayed=False)
    waits = row.recommended_parallelism < row.parallelism or not now
    return replace(row, delayed=waits)


def _parallelism(
    vertex: VertexObservation, p: int, tpr: float, capacity: float, config: AutoscalerConfig
) -> int:
    """``ceil(capacity / TPR x P)`` clamped, bounded and aligned; ``p`` where it cannot tell."""
    if vertex.name in config.exclude or math.isnan(tpr) or math.isnan(capacity):
        return p
    factor = 0.0 if math.isinf(tpr) else capacity / tpr
    factor = min(1.0 + config.scale_up_max_factor, max(1.0 - config.scale_down_max_factor, factor))
    raw = math.ceil(factor * p)
    low, high = min(p, config.vertex_min_parallelism), max(p, config.vertex_max_parallelism)
    key_groups = vertex.max_parallelism
    new = min(max(low, raw), min(key_groups, high) if key_groups else high)
    if new == p:
        return p
    keyed = any(e.partitioner == "hash" for e in vertex.inputs)
    if not keyed or key_groups is None or config.alignment_mode == "OFF":
        return new
    return _aligned(p, new, key_groups, min(key_groups, high), config.alignment_mode)


def _aligned(p: int, new: int, groups: int, cap: int, mode: AlignmentMode) -> int:
    """The first parallelism from ``new`` on (up to ``p`` when scaling down) that divides the
    key groups, or (BALANCED) gives each subtask fewer of them than ``new`` does; ``new`` when
    none does."""
    top = cap if new > p else min(p, cap)
    for candidate in range(new, top + 1):
        if groups % candidate == 0:
            return candidate
        if mode == "BALANCED" and groups // candidate < groups // new:
            return candidate
    return new


# --------------------------------------------------------------------------------- verdicts

UNFIXED: Mapping[str, str] = {
    "data-skew": "a hot key stays on one subtask whatever the parallelism (FLINK-35814): the "
    "hot subtask keeps its share; spread the key (salt it, aggregate in two phases)",
    "slow-sink": "the external system the sink writes to is the limit: more subtasks help only "
    "if it scales with them; scale it, or write in larger batches",
    "network": "the link between task managers is the limit: more subtasks share the same link",
    "resource-starved": "the job already lacks slots: a higher parallelism asks for more",
    "stalled": "no record moves: a cycle of waits, not a lack of capacity",
}
"""Why scaling cannot fix a cause of each kind, and what would."""
ALWAYS_UNFIXED = frozenset({"resource-starved", "stalled"})
"""Kinds no parallelism fixes, whatever bpmon sized (a starved job's is a lower one)."""
SINK_CAVEAT = "if the system the sink writes to scales with its subtasks"
BROADCAST = (
    "it reads a broadcast input: every subtask receives every record, so more subtasks take no "
    "more of them; make each record cheaper"
)


def verdicts(
    decision: AutoscalerReport, causes: Sequence[RootCause], observation: Observation
) -> tuple[AutoscalerVerdict, ...]:
    """How the autoscaler's decision compares with bpmon's root causes (see the module)."""
    rows = {row.name: row for row in decision.vertices}
    named = {c.vertex for c in causes} | {n.vertex for c in causes for n in c.next_in_series}
    found: list[AutoscalerVerdict] = []
    for cause in causes:
        row = rows.get(cause.vertex)
        if row is not None:
            found.append(_verdict(cause, row, observation, decision))
    for row in decision.vertices:
        if row.recommended_parallelism > row.parallelism and row.name not in named:
            found.append(_wrong(row, causes))
    return tuple(found)


def _verdict(
    cause: RootCause, row: AutoscalerVertex, observation: Observation, decision: AutoscalerReport
) -> AutoscalerVerdict:
    name, p, asked = cause.vertex, row.parallelism, row.recommended_parallelism
    sized = cause.recommended_parallelism
    scales = f"it would scale {name} {p} -> {asked}"
    if asked > p:
        if cause.kind == "slow-subtask" and sized is None:
            return _v(name, "over-provisions", f"{scales}, {_carried(cause)}")
        why = _unfixable(cause, observation)
        if why is not None:
            return _v(name, "scales-ineffectively", f"{scales}, but {why}")
        if sized is not None and asked > sized + 1:
            more = asked - sized
            return _v(
                name, "over-provisions", f"{scales}, {more} more than the {sized} bpmon sized"
            )
        if sized is not None and asked < sized - 1:
            short = f"short of the {sized} bpmon sized: the bottleneck would remain"
            return _v(name, "misses", f"{scales}, {short}")
        sink = f", {SINK_CAVEAT}" if cause.kind == "slow-sink" else ""
        return _v(
            name, "agrees", scales + (f" (bpmon: {sized}{sink})" if sized is not None else "")
        )
    if asked < p:
        later = " after its scale-down interval" if row.delayed else ""
        return _v(name, "scales-down-bottleneck", f"{scales}: down, the bottleneck{later}")
    elsewhere = [r.name for r in decision.vertices if r.recommended_parallelism > r.parallelism]
    if elsewhere:
        instead = f"it would leave {name} at {p} and scale {', '.join(elsewhere)} instead"
        return _v(name, "scales-wrong-vertex", instead)
    if row.outside:
        return _v(name, "misses", f"it would leave {name} at {p}: no change follows from its rates")
    within = "its processing rate is within the target utilisation's bounds"
    return _v(name, "misses", f"it would leave {name} at {p}: {within}")


def _unfixable(cause: RootCause, observation: Observation) -> str | None:
    """Why scaling ``cause``'s vertex cannot fix it; None when it can. A job short of slots or
    stalled never can; the other kinds of :data:`UNFIXED` and a broadcast input only when bpmon
    sized no parallelism for the cause (a Zipf key whose hottest subtask a wider vertex relieves,
    a sink that scales with its subtasks, are sized like a slow operator)."""
    if cause.kind in ALWAYS_UNFIXED:
        return UNFIXED[cause.kind]
    if cause.recommended_parallelism is not None:
        return None
    if cause.kind in UNFIXED:
        return UNFIXED[cause.kind]
    try:
        vertex = observation.vertex(cause.vertex)
    except KeyError:
        return None
    if any(e.partitioner == "broadcast" for e in vertex.inputs):
        return BROADCAST
    return None


def _carried(cause: RootCause) -> str:
    """Why scaling up a slow instance's vertex over-provisions it: it works, at a price."""
    which = ", ".join(map(str, cause.subtasks)) or "the slow one"
    return (
        f"which carries a slow instance (subtask {which}) with more subtasks than the load "
        "needs: it keeps up only once every subtask's share fits the slow one's speed; move or "
        "restart that instance instead"
    )


def _wrong(row: AutoscalerVertex, causes: Sequence[RootCause]) -> AutoscalerVerdict:
    scaled = f"{row.parallelism} -> {row.recommended_parallelism}"
    if causes:
        detail = f"it would scale {row.name} {scaled}, which is not what limits the job " + (
            f"({causes[0].kind} at {causes[0].vertex})"
        )
    else:
        detail = f"it would scale {row.name} {scaled} though nothing limits the job"
    return _v(row.name, "scales-wrong-vertex" if causes else "over-provisions", detail)


def _v(vertex: str, kind: str, detail: str) -> AutoscalerVerdict:
    return AutoscalerVerdict(vertex, cast(VerdictKind, kind), detail)
