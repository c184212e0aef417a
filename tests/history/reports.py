"""Reports as the history tests save, append, compact and read them back: a burst of a watch, a
small diagnosed run, and the checkpoints and the autoscaler's decision a report may carry."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime, timedelta

from bpmon.model.autoscaler import (
    AutoscalerReport,
    AutoscalerVerdict,
    AutoscalerVertex,
    VerdictKind,
)
from bpmon.model.checkpoints import (
    CheckpointPhases,
    CheckpointReport,
    CheckpointStatus,
    LastCheckpoint,
)
from bpmon.model.evidence import EvidenceLine
from bpmon.model.values import Metrics, Report, RootCause, SubtaskStatus, VertexStatus, Window

T0 = datetime(2026, 11, 22, 10, 15, tzinfo=UTC)
RUN = "20261122T101500Z-enrich-0001"


def window_report(
    burst: int,
    *,
    run_id: str = RUN,
    job: str = "enrich/eu",
    start: datetime = T0,
    every: timedelta = timedelta(seconds=1),
) -> Report:
    """Burst ``burst`` of a watch: three subtask rows (a source of two subtasks, a sink as a
    whole), and one root cause in odd bursts only (even ones are healthy: no cause row)."""
    begin = start + burst * every
    causes = (
        RootCause("sink", "slow-sink", (0,), 0.9, (EvidenceLine.of_text("busy"),), "Scale.", 990.0),
    )
    return Report(
        run_id=run_id,
        job=job,
        source="runtime",
        window=Window(begin, begin + timedelta(seconds=1), samples=10, interval_ms=50.0),
        vertices=(
            VertexStatus(
                "source",
                2,
                "HIGH",
                0.9,
                subtasks=(SubtaskStatus(0, "HIGH", 0.9), SubtaskStatus(1, "LOW", 0.3)),
            ),
            VertexStatus("sink", 1, "OK", 0.0, Metrics(busy_ratio=1.0, records_in_per_s=990.0)),
        ),
        root_causes=causes if burst % 2 else (),
    )


ROWS_PER_WINDOW = 3
"""Subtask rows of a :func:`window_report` (two source subtasks and the sink)."""


def run_report(run_id: str, start: datetime = T0, job: str = "slow-enrich") -> Report:
    """A small diagnosed report of ``run_id`` whose 5 s window starts at ``start``: a source of
    one subtask, HIGH, feeding a busy sink, the one cause."""
    evidence = (EvidenceLine.of_text("sink busy 100%"),)
    return Report(
        run_id=run_id,
        job=job,
        source="runtime",
        window=Window(start, start + timedelta(seconds=5), samples=100, interval_ms=50.0),
        vertices=(
            VertexStatus("source", 1, "HIGH", 0.9, subtasks=(SubtaskStatus(0, "HIGH", 0.9),)),
            VertexStatus("sink", 1, "OK", 0.0, Metrics(busy_ratio=1.0, records_in_per_s=None)),
        ),
        root_causes=(RootCause("sink", "slow-sink", (0,), 0.9, evidence, "Scale."),),
    )


def checkpoints(
    newest: tuple[int, CheckpointStatus, float, float] | None,
    *,
    completed: int,
    failed: int,
) -> CheckpointReport:
    """A report's checkpoints: the job's counts, and its newest checkpoint ``(id, status,
    duration_ms, barrier_wait_ms)`` (None: none ended yet) with the phases of the two vertices of
    :func:`window_report` (the sink, whose barrier came last, waited longest) and of a vertex the
    report does not list."""
    if newest is None:
        return CheckpointReport("aligned", 1000.0, completed, failed, None, ())
    number, status, duration, wait = newest
    done = status == "completed"
    sync = 1.5 if done else None
    upload = max(0.0, duration - wait - 1.5) if done else None
    last = LastCheckpoint(
        id=number,
        status=status,
        duration_ms=duration,
        start_delay_ms=wait * 0.75,
        alignment_ms=wait * 0.25,
        sync_ms=sync,
        async_ms=upload,
        state_bytes=4096 * number,
        persisted_bytes=0 if done else 512,
        barrier_wait_ms=wait,
        failure=None if done else "expired before completing",
    )
    vertices = (
        CheckpointPhases("source", 0.2, 0.0, 0.5, 1.0, 2, 2),
        CheckpointPhases("sink", wait * 0.75, wait * 0.25, sync, upload, int(done), 1),
        CheckpointPhases("side-output", 0.3, None, None, None, 0, 3),  # not in the report
    )
    return CheckpointReport("aligned", 1000.0, completed, failed, last, vertices)


def with_checkpoints(report: Report, checkpoints: CheckpointReport | None) -> Report:
    """``report`` carrying ``checkpoints``."""
    return replace(report, checkpoints=checkpoints)


def autoscaler(
    parallelism: dict[str, tuple[int, int]],
    verdicts: tuple[tuple[str, VerdictKind], ...] = (),
    *,
    acts: bool = True,
) -> AutoscalerReport:
    """A report's autoscaler decision: each evaluated vertex's ``(parallelism, recommended)``,
    and the verdicts ``(vertex, verdict)`` in their order."""
    vertices = tuple(
        AutoscalerVertex(name, 0.5, 1000.0, 500.0, 0.0, now, asked)
        for name, (now, asked) in parallelism.items()
    )
    judged = tuple(AutoscalerVerdict(v, kind, f"{kind} at {v}") for v, kind in verdicts)
    return AutoscalerReport({"utilization.target": 0.7}, vertices, judged, acts)


def with_autoscaler(report: Report, decision: AutoscalerReport | None) -> Report:
    """``report`` carrying the autoscaler's ``decision``."""
    return replace(report, autoscaler=decision)
