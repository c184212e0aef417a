"""Whether a source keeps up: FLIP-33 ``pendingRecords`` (a Kafka source's lag) against what it
emits.

A source held back by anything downstream (a busy operator, a capped link, a round trip) emits
less than it is offered, so what it owes grows; one whose lag grows by less than
``MIN_GROWTH_SHARE`` of what it emits reads all it is offered (the rest is noise).
"""

from __future__ import annotations

from bpmon.model.values import VertexObservation

MIN_GROWTH_SHARE = 0.02
"""The lag must grow by at least this share of the records emitted (noise below)."""


def keeps_up(vertex: VertexObservation) -> bool:
    """A source whose every subtask reports its records out and the growth of its lag, and
    whose lag grows by less than ``MIN_GROWTH_SHARE`` of what it emits in all."""
    if vertex.inputs or not vertex.subtasks:
        return False
    emitted = growth = 0.0
    for s in vertex.subtasks:
        out, backlog = s.metrics.records_out_per_s, s.metrics.backlog
        if out is None or backlog is None or backlog.growth_per_s is None:
            return False
        emitted += out
        growth += backlog.growth_per_s
    return emitted > 0 and growth < MIN_GROWTH_SHARE * emitted
