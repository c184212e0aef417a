"""A job limited by its source: busy all the time, never backpressured, its lag growing.

Backpressure points downstream of the blocked tasks; when the slow task *is* the source (a
source chained with a costly operator, a source that parses or decompresses, a split reader at
its limit), nothing is backpressured at all and every other task idles. Flink's UI shows a
healthy job while the lag (FLIP-33 ``pendingRecords``, a Kafka consumer's lag) grows.

``source-limited`` is named for a source vertex (no inputs) when:

- its busiest subtask is busy at least ``[bottleneck] saturated_busy`` (blended samples and time),
- none of its subtasks is above OK (it does not wait for buffers: nothing downstream holds it),
- its ``pendingRecords`` grow (summed over its subtasks) by at least ``MIN_GROWTH_SHARE`` of what
  it emits: it reads less than it is offered.

A source that gives no ``pendingRecords`` (a generator, a file source, many custom ones) cannot
say whether it is offered more than it reads. One whose every subtask is busy at least
:data:`SATURATED_ALL` and none backpressured is still the job's limit: nothing downstream holds
it, and it has no time to read more. It is named with :data:`UNKNOWN_LAG_CONFIDENCE`, its lag
unknown and said so, and no parallelism sized (the offered rate is unknown); a source short of
that (one subtask idling now and then, as a source that keeps up does) is not named.

The recommendation sizes the source from its measured capacity (records out
÷ busy, per subtask) and the offered rate (records out plus the lag's growth), and names the
partition or split count as the limit of a source's parallelism. With a chain, records out are
the chain's: the sizing takes each record read to leave the chain as one record (a filter or a
flatMap in the chain scales both sides alike and leaves the parallelism unchanged).
"""

from __future__ import annotations

import math

from bpmon.model.evidence import EvidenceLine, EvidencePart, count, line, percent, whole
from bpmon.model.values import Observation, RootCause, SubtaskWindow, VertexObservation
from bpmon.rules.advice import capacity_of_windows
from bpmon.rules.classify import busy_span
from bpmon.rules.config import RulesConfig
from bpmon.rules.lag import MIN_GROWTH_SHARE
from bpmon.rules.levels import backpressure_ratio, blended_busy

CONFIDENCE = 0.8
"""Busy time, no backpressure and a growing lag say it together; a short window can still catch a
burst of input that the source will read away."""

SATURATED_ALL = 0.95
"""Without ``pendingRecords``: the least busy share every subtask of a source must reach for it to
be named (a source that keeps up idles between records; one busy 95% of the time has no room)."""

UNKNOWN_LAG_CONFIDENCE = 0.6
"""Busy and never blocked say the source is the limit; without its lag, not by how much it is
short of its input, nor that it is short at all (it may read all there is, flat out)."""


def source_causes(observation: Observation, rules: RulesConfig) -> list[RootCause]:
    """The ``source-limited`` causes of one window (an empty list for most jobs)."""
    return [
        cause
        for vertex in observation.vertices
        if not vertex.inputs
        for cause in [_limited(vertex, rules)]
        if cause is not None
    ]


def _growth(subs: tuple[SubtaskWindow, ...]) -> float | None:
    growths = [s.metrics.backlog.growth_per_s if s.metrics.backlog else None for s in subs]
    known = [g for g in growths if g is not None]
    return sum(known) if known else None


def _limited(vertex: VertexObservation, rules: RulesConfig) -> RootCause | None:
    subs = vertex.subtasks
    busiest = max((blended_busy(s) or 0.0 for s in subs), default=0.0)
    pressed = max((backpressure_ratio(s) or 0.0 for s in subs), default=0.0)
    growth = _growth(subs)
    emitted = [s.metrics.records_out_per_s for s in subs]
    if busiest < rules.bottleneck.saturated_busy or pressed > rules.levels.ok_max:
        return None
    if None in emitted:
        return None
    if growth is None:
        return _unknown_lag(vertex, pressed, sum(e for e in emitted if e is not None), rules)
    out = sum(e for e in emitted if e is not None)
    if out <= 0 or growth < MIN_GROWTH_SHARE * out:
        return None
    offered = round(out + growth)
    measured = capacity_of_windows(subs, rules.capacity.min_busy)
    cap = round(measured) if measured is not None else None
    target = rules.capacity.utilisation_target
    wanted = math.ceil(offered / (cap * target)) if cap else None
    return RootCause(
        vertex=vertex.name,
        kind="source-limited",
        subtasks=tuple(s.index for s in subs),
        confidence=CONFIDENCE,
        evidence=_evidence(vertex, pressed, out, growth, cap),
        recommendation=_advice(vertex, offered, wanted, target),
        capacity_per_subtask=float(cap) if cap else None,
        offered_rate=float(offered),
        recommended_parallelism=wanted,
    )


def _unknown_lag(
    vertex: VertexObservation, pressed: float, out: float, rules: RulesConfig
) -> RootCause | None:
    """A source busy at least :data:`SATURATED_ALL` on every subtask, reporting no lag."""
    subs = vertex.subtasks
    if out <= 0 or min((blended_busy(s) or 0.0 for s in subs), default=0.0) < SATURATED_ALL:
        return None
    name = vertex.name
    measured = capacity_of_windows(subs, rules.capacity.min_busy)
    cap = round(measured) if measured is not None else None
    lines = list(_evidence(vertex, pressed, out, None, cap))
    fix = _fix(name)
    return RootCause(
        vertex=name,
        kind="source-limited",
        subtasks=tuple(s.index for s in subs),
        confidence=UNKNOWN_LAG_CONFIDENCE,
        evidence=tuple(lines),
        recommendation=(
            f"The source {name} reads as fast as it can and is the job's limit: if its input "
            f"holds more than the ~{out:,.0f} records/s it reads (check the lag where the "
            f"records wait: a Kafka consumer group's lag, the files not yet read), {fix}. It "
            "reports no pendingRecords, so bpmon cannot size it: raise it a step and look "
            "again. A source reads at most one partition or split per subtask."
        ),
        capacity_per_subtask=float(cap) if cap else None,
    )


def _evidence(
    vertex: VertexObservation, pressed: float, out: float, growth: float | None, cap: int | None
) -> tuple[EvidenceLine, ...]:
    """Busy and not backpressured; the lag's growth (or that it is unknown); the capacity."""
    name, n = vertex.name, len(vertex.subtasks)
    who: tuple[EvidencePart, ...] = (f"the only subtask of {name} is",)
    if n > 1:
        who = ("the ", count("parallelism", n, name), f" subtasks of {name} are")
    lines = [
        line(
            who,
            " busy ",
            busy_span(name, list(vertex.subtasks)),
            " and not backpressured (",
            percent("backpressure", pressed, name),
            f"): nothing downstream holds {name} back",
        ),
        line(
            "its pendingRecords grow by ~",
            whole("lag-growth", growth, vertex=name),
            " records/s: it emits ~",
            whole("emitted", out, vertex=name),
            " records/s of the ~",
            whole("offered", out + growth, vertex=name),
            " offered, and the lag grows",
        )
        if growth is not None
        else line(
            "it emits ~",
            whole("emitted", out, vertex=name),
            " records/s and reports no pendingRecords: its lag, and so what it is offered, "
            "are unknown",
        ),
    ]
    if cap:
        lines.append(
            line(
                f"{name} handles ~",
                whole("capacity", cap, vertex=name),
                " records/s per subtask at 100% busy (records out / busy)",
            )
        )
    return tuple(lines)


def _advice(vertex: VertexObservation, offered: int, wanted: int | None, target: float) -> str:
    name = vertex.name
    lead = f"The source {name} cannot read what it is offered: " + _fix(name)
    sizing = (
        f"; {wanted} subtasks instead of {vertex.parallelism} would read the ~{offered:,} "
        f"records/s offered at {target:.0%} utilisation"
        if wanted
        else ""
    )
    return (
        f"{lead}{sizing}. A source reads at most one partition or split per subtask: "
        "beyond the topic's partition count (the split count) more subtasks idle."
    )


def _fix(name: str) -> str:
    """What makes a source read more: split its chain, or raise its parallelism."""
    if " -> " in name:
        return (
            "split the costly operator off the source's chain (chain = false, or "
            "disableChaining()) and give it its own parallelism, or raise the chain's parallelism"
        )
    return (
        "raise its parallelism, or make each record cheaper to read (deserialisation, "
        "decompression)"
    )
