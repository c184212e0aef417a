"""One Flink window apart from the REST calls: each subtask's metrics over it, a chained
vertex's operators, where Flink's own levels differ from bpmon's, and threads that cannot be
told apart.

Functions of what :class:`~bpmon.collectors.flink.target.FlinkTarget` measured, so they are
tested without a cluster.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, replace

from bpmon.collectors.flink.metrics import (
    BlindShare,
    FlinkLevel,
    MetricNames,
    pool_means,
    window_accounting,
    young_rate,
)
from bpmon.collectors.flink.plan import SubtaskPlacement
from bpmon.collectors.sampler import ThreadCounts
from bpmon.model.values import (
    Finding,
    Metrics,
    SubtaskWindow,
    VertexObservation,
    level_by_flink,
)


def young(m: Metrics, place: SubtaskPlacement | None) -> Metrics:
    """Record rates corrected for a task younger than Flink's 60 s meters."""
    running = place.running_s if place is not None else None
    return replace(
        m,
        records_in_per_s=young_rate(m.records_in_per_s, running),
        records_out_per_s=young_rate(m.records_out_per_s, running),
    )


def over_window(
    m: Metrics,
    before: Mapping[str, float],
    after: Mapping[str, float],
    names: MetricNames,
    index: int,
) -> Metrics:
    """Flink's gauges, replaced by the accounting between two readings where there is one;
    pool usages as the mean of the two readings."""
    out_pool, in_pool = pool_means(before, after, names, index)
    m = replace(m, out_pool_usage=out_pool, in_pool_usage=in_pool)
    exact = window_accounting(before, after, names, index)
    if exact is None:
        return m
    return replace(
        m,
        busy_ratio=exact.busy_ratio,
        idle_ratio=exact.idle_ratio,
        backpressured_time_ratio=exact.backpressured_time_ratio,
        records_in_per_s=exact.records_in_per_s,
        records_out_per_s=exact.records_out_per_s,
        accounting_span_ms=exact.accounting_span_ms,
        backlog=exact.backlog if exact.backlog is not None else m.backlog,
    )


def subtask_window(
    index: int,
    counts: ThreadCounts | None,
    thread: str,
    task_manager: int | None,
    metrics: Metrics,
) -> SubtaskWindow:
    """One subtask of a window: its samples (none without ``counts``: a live snapshot, or a
    thread that could not be told apart), its thread's name as a dump showed it (else
    ``thread``), its task manager's number and its metrics."""
    return SubtaskWindow(
        index=index,
        thread=(counts.name if counts else "") or thread,
        samples=counts.total if counts else 0,
        backpressured=counts.backpressured if counts else 0,
        idle=counts.idle if counts else 0,
        busy=counts.busy if counts else 0,
        task_manager=task_manager,
        metrics=metrics,
        chain_samples=counts.chain if counts else (),
    )


def chain_operators(task_name: str) -> tuple[str, ...]:
    """The operators of a chained vertex in chain order, from Flink's name of it: Flink joins
    a chain's operator names with ``" -> "`` (``"Source: numbers -> parse"``). A split inside
    parentheses (an operator chained to several, ``"a -> (b, c)"``) is not a hop: it stays
    one name. One operator (no chain): empty."""
    names, depth, start = [], 0, 0
    for i, char in enumerate(task_name):
        depth += {"(": 1, ")": -1}.get(char, 0)
        if depth == 0 and task_name.startswith(" -> ", i):
            names.append(task_name[start:i])
            start = i + 4
    names.append(task_name[start:])
    return tuple(names) if len(names) > 1 else ()


def disagreements(
    vertices: tuple[VertexObservation, ...], levels: Mapping[str, FlinkLevel]
) -> list[Finding]:
    """A ``flink-disagrees`` finding per vertex whose sampled level differs from Flink's.

    The samples' worst ratio is classified by Flink's own thresholds, not by ``[levels]``: the
    finding is about what was measured, not about a threshold the user moved.
    """
    found = []
    for v in vertices:
        level = levels.get(v.name)
        flink = level.level if level is not None else None
        flink_ratio = max(level.ratios.values()) if level is not None and level.ratios else None
        ratios = [s.backpressured / s.samples for s in v.subtasks if s.samples > 0]
        if flink is None or flink_ratio is None or not ratios:
            continue
        mine = max(ratios)
        sampled = level_by_flink(mine)
        if sampled != flink:
            found.append(
                Finding(
                    "flink-disagrees",
                    v.name,
                    f"Flink's backpressure endpoint says {flink} ({flink_ratio:.2f}, its 60 s "
                    f"average); bpmon's samples of this window say {sampled} ({mine:.2f})",
                )
            )
    return found


@dataclass(frozen=True, slots=True)
class Blind:
    """A subtask whose suspended samples :func:`blind_share` decided, and what decided them."""

    vertex: str
    index: int
    decided: BlindShare


BLIND_BY = {
    "accounting": "its own backpressured time decides",
    "pool": "its output pool is full, so its thread waits for buffers",
    "flink": "Flink's own backpressure ratio decides",
}
"""How a ``flink-level`` finding says what decided a subtask (:class:`BlindShare`'s ``by``)."""


def blind_notes(blind: list[Blind]) -> list[Finding]:
    """A ``flink-level`` finding per vertex with subtasks :func:`blind_share` decided."""
    by_vertex: dict[str, list[Blind]] = {}
    for b in blind:
        by_vertex.setdefault(b.vertex, []).append(b)
    found = []
    for vertex, subtasks in by_vertex.items():
        said = []
        for by, words in BLIND_BY.items():
            values = ", ".join(
                f"[{b.index}] {b.decided.value:.2f}" for b in subtasks if b.decided.by == by
            )
            if values:
                said.append(f"{words} ({values})")
        found.append(
            Finding(
                "flink-level",
                vertex,
                "Flink gives it no busy time (a legacy source, on a thread of its own) and its "
                "samples find its task thread waiting for mail, which cannot tell backpressure "
                f"from idle: {'; '.join(said)}",
            )
        )
    return found


def ambiguous_note(job: str, vertices: list[str]) -> Finding:
    """The ``ambiguous-threads`` finding: vertices of one name whose threads look the same."""
    shown = ", ".join(vertices)
    return Finding(
        "ambiguous-threads",
        job,
        f"{shown}: Flink names their task threads alike (same name, subtask, parallelism, "
        "attempt and task manager), so a stack sample cannot tell them apart; their samples are "
        "left out and their levels come from Flink's time accounting (give the operators "
        "distinct names with .name(...) to sample them)",
    )
