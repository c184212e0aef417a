"""Checkpoints: the report's ``checkpoints``, and why a checkpoint is slow or fails.

Under backpressure a checkpoint's barriers travel with the data, so its time goes to start delay
(a barrier waiting behind full buffers to reach a task) and alignment (a task waiting for the
barrier on its other inputs). Flink's docs (checkpointing under backpressure) give the remedies in
order: remove the backpressure, then keep less data in flight (buffer debloating), or let the
barriers overtake it (unaligned checkpoints). A checkpoint can also be slow for its own reasons:
a large state, a slow upload (its snapshot's sync and async phases).

For the newest checkpoint that ended (``[checkpoints]`` in the rules file says when it is slow):

- ``checkpoint-backpressure``: the barriers' wait is most of its duration while a root cause is
  named. The finding is the root cause's: it says how long, how much of it was waiting, where
  the barriers waited longest, and the remedies in order (the cause's own recommendation first;
  overdraft buffers only where a producer is hard backpressured, blocked mid-record where not
  even an unaligned barrier passes: FLIP-227).
- ``checkpoint-slow``: its snapshot's phases are most of it instead: it names the vertex with
  the largest async phase and does not blame backpressure.
- ``checkpoint-failed``: it failed and neither explains why.
- ``checkpoint-skew``: one subtask's start delay far above its vertex's others (most likely data
  skew, Flink's docs say), tied to a ``data-skew`` or ``slow-subtask`` cause at that subtask when
  there is one.
"""

from __future__ import annotations

import statistics
from collections.abc import Sequence

from bpmon.model.checkpoints import (
    Checkpoint,
    CheckpointPhases,
    CheckpointReport,
    CheckpointWindow,
    LastCheckpoint,
    SubtaskCheckpoint,
    VertexCheckpoint,
)
from bpmon.model.numbers import milliseconds, percent
from bpmon.model.values import Finding, RootCause, TargetSettings, VertexStatus
from bpmon.rules.config import CheckpointRules

HARD_SHARE = 0.5
"""A producer is hard backpressured when at least this share of its backpressured time is spent
blocked in a buffer request (and that is at least :data:`HARD_MIN` of its time)."""
HARD_MIN = 0.1


def checkpoint_report(window: CheckpointWindow) -> CheckpointReport:
    """The report's ``checkpoints``: counts, the newest checkpoint that ended and its vertices."""
    last = window.last
    rows = () if last is None else tuple(_phases(v, last.duration_ms) for v in last.vertices)
    return CheckpointReport(
        mode=window.mode,
        interval_ms=window.interval_ms,
        completed=window.completed,
        failed=window.failed,
        last=None if last is None else _last(last, rows),
        vertices=rows,
    )


def _slowest(vertex: VertexCheckpoint) -> SubtaskCheckpoint | None:
    """The subtask that held the vertex up: one its barrier never reached, else the one that
    acknowledged last (or whose phases under way add up to most)."""
    unreached = [s for s in vertex.subtasks if not s.reached]
    if unreached:
        return unreached[0]
    return max(vertex.subtasks, key=_known_total, default=None)


def _known_total(sub: SubtaskCheckpoint) -> float:
    return sum(x or 0.0 for x in (sub.start_delay_ms, sub.alignment_ms, sub.sync_ms, sub.async_ms))


def _phases(vertex: VertexCheckpoint, duration: float) -> CheckpointPhases:
    slowest = _slowest(vertex)
    reached = slowest is not None and slowest.reached
    return CheckpointPhases(
        name=vertex.name,
        start_delay_ms=duration if slowest is not None and not reached else _get(slowest, "start"),
        alignment_ms=_get(slowest, "alignment"),
        sync_ms=_get(slowest, "sync"),
        async_ms=_get(slowest, "async"),
        acknowledged=vertex.acknowledged,
        parallelism=len(vertex.subtasks),
    )


def _get(sub: SubtaskCheckpoint | None, phase: str) -> float | None:
    if sub is None:
        return None
    return {
        "start": sub.start_delay_ms,
        "alignment": sub.alignment_ms,
        "sync": sub.sync_ms,
        "async": sub.async_ms,
    }[phase]


def _last(checkpoint: Checkpoint, rows: Sequence[CheckpointPhases]) -> LastCheckpoint:
    def largest(values: Sequence[float | None]) -> float | None:
        known = [v for v in values if v is not None]
        return max(known) if known else None

    waits = [
        checkpoint.duration_ms if not s.reached else s.barrier_wait_ms
        for v in checkpoint.vertices
        for s in v.subtasks
    ]
    return LastCheckpoint(
        id=checkpoint.id,
        status=checkpoint.status,
        duration_ms=checkpoint.duration_ms,
        start_delay_ms=largest([r.start_delay_ms for r in rows]),
        alignment_ms=largest([r.alignment_ms for r in rows]),
        sync_ms=largest([r.sync_ms for r in rows]),
        async_ms=largest([r.async_ms for r in rows]),
        state_bytes=checkpoint.state_bytes,
        persisted_bytes=checkpoint.persisted_bytes,
        barrier_wait_ms=largest(waits),
        failure=checkpoint.failure,
    )


def checkpoint_findings(
    window: CheckpointWindow,
    report: CheckpointReport,
    causes: Sequence[RootCause],
    vertices: Sequence[VertexStatus],
    settings: TargetSettings,
    rules: CheckpointRules,
) -> list[Finding]:
    """What the newest checkpoint says of the job (see the module)."""
    checkpoint, last = window.last, report.last
    if checkpoint is None or last is None:
        return []
    found: list[Finding] = []
    if last.status == "failed" or last.duration_ms >= rules.slow_ms:
        found += _slow_finding(window, report, last, causes, vertices, settings, rules)
    found += _skew_findings(checkpoint, causes, rules)
    return found


def _slow_finding(
    window: CheckpointWindow,
    report: CheckpointReport,
    last: LastCheckpoint,
    causes: Sequence[RootCause],
    vertices: Sequence[VertexStatus],
    settings: TargetSettings,
    rules: CheckpointRules,
) -> list[Finding]:
    waiting = last.waiting_share or 0.0
    own = _own_share(report, last)
    if causes and waiting >= rules.waiting_share:
        return [_held_by_backpressure(window, report, last, causes[0], vertices, settings)]
    if own >= rules.own_share:
        return [_slow_of_its_own(report, last, waiting, own)]
    if last.status == "failed":
        return [
            Finding(
                "checkpoint-failed",
                _waiting_for(report) or (report.vertices[0].name if report.vertices else ""),
                f"checkpoint {last.id} {_failed(last)}; {_counts(report)}",
            )
        ]
    return []


def _own_share(report: CheckpointReport, last: LastCheckpoint) -> float:
    """The largest share of the duration one vertex's slowest subtask spent on its snapshot."""
    if not last.duration_ms > 0:
        return 0.0
    own = max(((r.sync_ms or 0.0) + (r.async_ms or 0.0) for r in report.vertices), default=0.0)
    return min(1.0, own / last.duration_ms)


def _took(last: LastCheckpoint) -> str:
    if last.status == "failed":
        return f"checkpoint {last.id} {_failed(last)}"
    return f"checkpoint {last.id} took {milliseconds(last.duration_ms)}"


def _failed(last: LastCheckpoint) -> str:
    reason = last.failure or "failed"
    return f"failed after {milliseconds(last.duration_ms)} ({reason})"


def _counts(report: CheckpointReport) -> str:
    return f"{report.completed:,} completed and {report.failed:,} failed so far"


def _waiting_for(report: CheckpointReport) -> str | None:
    """A vertex not every subtask of which acknowledged (the first such)."""
    return next((r.name for r in report.vertices if r.acknowledged < r.parallelism), None)


def _held_by_backpressure(
    window: CheckpointWindow,
    report: CheckpointReport,
    last: LastCheckpoint,
    cause: RootCause,
    vertices: Sequence[VertexStatus],
    settings: TargetSettings,
) -> Finding:
    delays = sorted(
        (r for r in report.vertices if r.start_delay_ms is not None),
        key=lambda r: -(r.start_delay_ms or 0.0),
    )[:3]
    where = ", ".join(f"{r.name} {milliseconds(r.start_delay_ms or 0.0)}" for r in delays)
    remedies = [f"fix the bottleneck first: {cause.recommendation.rstrip('.')}"]
    if window.mode == "aligned":
        remedies.append(
            "then unaligned checkpoints with an aligned timeout "
            "(execution.checkpointing.unaligned: true, aligned-checkpoint-timeout): barriers "
            "overtake the buffered data"
        )
    elif window.aligned_timeout_ms:
        remedies.append(
            f"then a shorter aligned-checkpoint-timeout (now "
            f"{milliseconds(window.aligned_timeout_ms)}): the barriers go on unaligned sooner"
        )
    if not settings.debloat and (window.mode == "aligned" or window.aligned_timeout_ms):
        remedies.append(
            "buffer debloating (taskmanager.network.memory.buffer-debloat.enabled: true): "
            "less data in flight for the barriers to wait behind"
        )
    hard = _hard_backpressured(vertices)
    if hard is not None:
        name, share = hard
        remedies.append(
            f"overdraft buffers: {name} is blocked mid-record in a buffer request "
            f"{percent(share)} of its time, where not even an unaligned barrier passes; "
            "taskmanager.network.memory.max-overdraft-buffers-per-gate (5 by default) lets it "
            "finish a record that needs a few buffers more, and one whose output needs many more "
            "must be split"
        )
    return Finding(
        "checkpoint-backpressure",
        cause.vertex,
        f"{_took(last)}, {percent(last.waiting_share or 0.0)} of it waiting for barriers "
        f"(start delay + alignment {milliseconds(last.barrier_wait_ms or 0.0)}) behind the "
        f"data that {cause.vertex}, the bottleneck, holds up; longest start delay: {where}; "
        f"{_counts(report)}; remedies, in order: {'; '.join(remedies)}",
    )


def _hard_backpressured(vertices: Sequence[VertexStatus]) -> tuple[str, float] | None:
    """The vertex whose subtasks spend most time hard backpressured, if it counts as such."""
    best: tuple[str, float] | None = None
    for v in vertices:
        for s in v.subtasks:
            hard, total = s.metrics.hard_backpressured_ratio, s.metrics.backpressured_time_ratio
            if hard is None or total is None or hard < HARD_MIN or hard < HARD_SHARE * total:
                continue
            if best is None or hard > best[1]:
                best = (v.name, hard)
    return best


def _slow_of_its_own(
    report: CheckpointReport, last: LastCheckpoint, waiting: float, own: float
) -> Finding:
    heaviest = max(report.vertices, key=lambda r: r.async_ms or 0.0)
    return Finding(
        "checkpoint-slow",
        heaviest.name,
        f"{_took(last)}, {percent(own)} of it in one snapshot's sync and async phases and "
        f"{percent(waiting)} waiting for barriers: slow for its own reasons, not backpressure; "
        f"the largest async phase is {heaviest.name}'s, {milliseconds(heaviest.async_ms or 0.0)} "
        f"(state {_megabytes(last.state_bytes)} in all); {_counts(report)}; remedies: "
        "incremental checkpoints (state.backend.incremental: true with RocksDB), faster "
        "checkpoint storage, a smaller state (state TTL), or more parallelism to split it",
    )


def _megabytes(nbytes: int) -> str:
    return f"{nbytes / (1 << 20):,.0f} MB"


def _skew_findings(
    checkpoint: Checkpoint, causes: Sequence[RootCause], rules: CheckpointRules
) -> list[Finding]:
    found = []
    for vertex in checkpoint.vertices:
        delays = [(s.index, s.start_delay_ms) for s in vertex.subtasks if s.reached]
        if len(delays) < 2 or len(delays) < len(vertex.subtasks):
            continue
        index, worst = max(delays, key=lambda d: d[1] or 0.0)
        others = statistics.median(d or 0.0 for i, d in delays if i != index)
        worst = worst or 0.0
        if worst < rules.skew_ratio * others or worst - others < rules.skew_min_ms:
            continue
        found.append(
            Finding(
                "checkpoint-skew",
                vertex.name,
                f"subtask {index} of {vertex.name} got checkpoint {checkpoint.id}'s first barrier "
                f"{milliseconds(worst)} after the trigger, its other subtasks "
                f"{milliseconds(others)} (median): {_skew_cause(vertex.name, index, causes)}",
            )
        )
    return found


def _skew_cause(vertex: str, index: int, causes: Sequence[RootCause]) -> str:
    for cause in causes:
        if cause.vertex == vertex and index in cause.subtasks:
            if cause.kind == "data-skew":
                return f"the data-skew at subtask {index} holds its barrier back (the root cause)"
            if cause.kind == "slow-subtask":
                return f"the slow subtask {index} holds its barrier back (the root cause)"
    return "most likely data skew: more records wait before the barrier on its inputs"
