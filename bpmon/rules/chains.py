"""When the bottleneck is an operator chain, name the member that takes its time.

A chained task (``chaining = true``) is one vertex, ``"enrich -> check"``, and the localisation
and classification see it as one. bpmon's runtime also reports each member's records and service
time (``bpmon_operator.NAME.busyTimeMsPerSecond``); from those, every root cause on a chain gets
an evidence line saying which member takes how much of the chain's time, so the user knows which
operator to make cheaper or to split off (``chain = false``).
"""

from __future__ import annotations

from dataclasses import replace

from bpmon.model import Observation, RootCause

PREFIX = "bpmon_operator."
SUFFIX = ".busyTimeMsPerSecond"


def with_chain_evidence(causes: list[RootCause], observation: Observation) -> list[RootCause]:
    """``causes``, each on a chain with a line naming the member that takes the chain's time."""
    return [_named(cause, observation) for cause in causes]


def _named(cause: RootCause, observation: Observation) -> RootCause:
    try:
        vertex = observation.vertex(cause.vertex)
    except KeyError:
        return cause
    wanted = set(cause.subtasks) or {s.index for s in vertex.subtasks}
    busy: dict[str, float] = {}
    for sub in vertex.subtasks:
        if sub.index not in wanted:
            continue
        for key, value in sub.metrics.extra.items():
            if key.startswith(PREFIX) and key.endswith(SUFFIX):
                name = key[len(PREFIX) : -len(SUFFIX)]
                busy[name] = busy.get(name, 0.0) + value
    total = sum(busy.values())
    if len(busy) < 2 or total <= 0:
        return cause
    ranked = sorted(busy.items(), key=lambda item: item[1], reverse=True)
    top, top_ms = ranked[0]
    shares = ", ".join(f"{name} {ms / total:.0%}" for name, ms in ranked)
    line = (
        f"inside the chain {cause.vertex}, {top} takes {top_ms / total:.0%} of its service time "
        f"({shares}): {top} is the operator to make cheaper, or to split off (chain = false)"
    )
    return replace(cause, evidence=(*cause.evidence[:1], line, *cause.evidence[1:]))
