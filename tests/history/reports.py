"""Reports as the history tests save, append, compact and read them back: a burst of a watch, a
small diagnosed run."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

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
