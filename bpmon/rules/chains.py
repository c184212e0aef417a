"""When the bottleneck is an operator chain, name the operator the stack samples found working.

A chained task (Flink's ``OperatorChain``, the runtime's ``chaining = true``) is one vertex,
``"parse -> enrich -> check"``, and the localisation and classification see it as one. Its
operators run nested on one thread: the head calls the next operator through one hand-over
frame per hop (Flink's ``ChainingOutput.pushToOperator``), so a busy stack sample taken while
operator ``k`` works shows ``k`` hand-over frames. The collectors count each subtask's busy
samples per chain position (``SubtaskWindow.chain_samples``); here they are summed over the
cause's subtasks, and a cause on a chain of two or more operators with at least
:data:`MIN_BUSY_SAMPLES` busy samples gets ``in_chain`` (each operator's share, the top one
named) and an evidence line. Nothing configured is read: only what the samples show.

The line names the top operator as the one to make cheaper, or to split off, only when it
dominates (:func:`dominates`); a chain whose time is spread says so instead, since splitting off
any one operator would gain little.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import replace

from bpmon.model.evidence import EvidenceLine, EvidencePart, count, line, rounded_percent
from bpmon.model.values import ChainShare, Observation, RootCause, SubtaskWindow, VertexObservation

MIN_BUSY_SAMPLES = 10
"""Busy samples below which a chain's shares are not told (one sample is 10% of ten)."""

DOMINANT_SHARE = 0.5
"""The top operator is named the one to fix when it has at least this share of the busy samples
and :data:`DOMINANT_LEAD` times the next one's."""

DOMINANT_LEAD = 1.5


def with_chain_evidence(causes: list[RootCause], observation: Observation) -> list[RootCause]:
    """``causes``, each on a sampled chain with its ``in_chain`` share and a line naming it."""
    return [_named(cause, observation) for cause in causes]


def chain_share(vertex: VertexObservation, subtasks: Iterable[int] = ()) -> ChainShare | None:
    """The busy samples of ``vertex`` per chain operator, over ``subtasks`` (all when empty).

    None when the vertex is not a chain of two or more operators, when fewer than
    :data:`MIN_BUSY_SAMPLES` busy samples were counted by position, or when a sample shows more
    hand-over frames than the chain has hops (the plan's names do not match the stacks).
    """
    names = vertex.operators
    if len(names) < 2:
        return None
    counts = _per_position(_chosen(vertex, subtasks), len(names))
    total = sum(counts) if counts is not None else 0
    if counts is None or total < MIN_BUSY_SAMPLES:
        return None
    top = max(range(len(names)), key=lambda i: (counts[i], -i))
    return ChainShare(
        operator=names[top],
        position=top,
        samples=counts[top],
        busy_samples=total,
        shares=tuple((name, n / total) for name, n in zip(names, counts, strict=True)),
    )


def dominates(share: ChainShare) -> bool:
    """Whether the top operator clearly takes the chain's time (see :data:`DOMINANT_SHARE`)."""
    top = share.samples / share.busy_samples
    others = [s for i, (_, s) in enumerate(share.shares) if i != share.position]
    return top >= DOMINANT_SHARE and top >= DOMINANT_LEAD * max(others, default=0.0)


def evidence_line(vertex: str, share: ChainShare) -> EvidenceLine:
    """The evidence line of ``share``: its numbers are the share's, as the report carries it."""
    counted: list[EvidencePart] = ["("]
    for n, (name, s) in enumerate(share.shares):
        counted += [", " if n else "", f"{name} ", rounded_percent("chain-share", s, vertex)]
    counted += ["; ", count("chain-samples", share.busy_samples, vertex), " busy samples)"]
    top = share.operator
    on_top = rounded_percent("chain-share", share.samples / share.busy_samples, vertex)
    if not dominates(share):
        return line(
            f"inside the chain {vertex}, no operator dominates the busy samples ",
            counted,
            f": splitting off one operator (chain = false) would gain little; {top} is on the "
            "stack most (",
            on_top,
            ")",
        )
    return line(
        f"inside the chain {vertex}, {top} is on the stack in ",
        on_top,
        " of the busy samples ",
        counted,
        f": {top} is the operator to make cheaper, or to split off (chain = false)",
    )


def _named(cause: RootCause, observation: Observation) -> RootCause:
    try:
        vertex = observation.vertex(cause.vertex)
    except KeyError:
        return cause
    share = chain_share(vertex, cause.subtasks)
    if share is None:
        return cause
    line = evidence_line(vertex.name, share)
    evidence = (*cause.evidence[:1], line, *cause.evidence[1:])
    return replace(cause, evidence=evidence, in_chain=share)


def _chosen(vertex: VertexObservation, subtasks: Iterable[int]) -> list[SubtaskWindow]:
    wanted = set(subtasks) or {s.index for s in vertex.subtasks}
    return [s for s in vertex.subtasks if s.index in wanted]


def _per_position(subtasks: list[SubtaskWindow], positions: int) -> list[int] | None:
    """Busy samples per chain position summed over ``subtasks``; None past the chain's end."""
    counts = [0] * positions
    for sub in subtasks:
        for position, n in enumerate(sub.chain_samples):
            if n and position >= positions:
                return None
            if n:
                counts[position] += n
    return counts
