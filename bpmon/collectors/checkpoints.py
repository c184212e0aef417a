"""bpmon's runtime's checkpoints as the model's :class:`~bpmon.model.checkpoints.CheckpointWindow`.

The coordinator (``runtime/checkpoint.py``) keeps the last checkpoints that ended and two counts;
a window carries the newest completed and the newest failed one in full, each subtask's phases in
milliseconds, as Flink's checkpoint details give them. A failed checkpoint's subtasks that had not
acknowledged it show what was under way: an upload's time so far, or nothing.
"""

from __future__ import annotations

from bpmon.model.checkpoints import (
    Checkpoint,
    CheckpointWindow,
    SubtaskCheckpoint,
    VertexCheckpoint,
)
from bpmon.runtime.checkpoint import AckedSubtask, CheckpointOutcome
from bpmon.runtime.job import Job


def runtime_checkpoints(job: Job) -> CheckpointWindow | None:
    """The job's checkpoints now; None when it takes none (``interval_ms = 0``)."""
    coordinator, config = job.coordinator, job.scenario.checkpoints
    if coordinator is None:
        return None
    outcomes = list(coordinator.outcomes)
    completed = next((o for o in reversed(outcomes) if o.failure is None), None)
    failed = next((o for o in reversed(outcomes) if o.failure is not None), None)
    vertices = [(name, len(tasks)) for name, tasks in job.tasks.items()]
    return CheckpointWindow(
        mode=config.mode,
        interval_ms=float(config.interval_ms),
        completed=coordinator.completed_count,
        failed=coordinator.failed_count,
        last_completed=None if completed is None else checkpoint_of(completed, vertices),
        last_failed=None if failed is None else checkpoint_of(failed, vertices),
        timeout_ms=float(config.timeout_ms),
        aligned_timeout_ms=float(config.aligned_timeout_ms) if config.mode == "unaligned" else 0.0,
    )


def checkpoint_of(outcome: CheckpointOutcome, vertices: list[tuple[str, int]]) -> Checkpoint:
    """One ended checkpoint, every subtask of ``vertices`` (name, parallelism) in it."""
    acked = {(a.vertex, a.index): _subtask(a, True) for a in outcome.acked}
    acked |= {(a.vertex, a.index): _subtask(a, False) for a in outcome.uploading}
    return Checkpoint(
        id=outcome.checkpoint_id,
        status="completed" if outcome.failure is None else "failed",
        duration_ms=outcome.duration_s * 1000,
        vertices=tuple(
            VertexCheckpoint(
                name,
                tuple(
                    acked.get((name, i), SubtaskCheckpoint(index=i, acknowledged=False))
                    for i in range(parallelism)
                ),
            )
            for name, parallelism in vertices
        ),
        failure=outcome.failure,
        persisted_bytes=outcome.in_flight_bytes,
        state_bytes=sum(a.state_bytes for a in outcome.acked),
    )


def _subtask(a: AckedSubtask, acknowledged: bool) -> SubtaskCheckpoint:
    return SubtaskCheckpoint(
        index=a.index,
        acknowledged=acknowledged,
        start_delay_ms=a.start_delay_s * 1000,
        alignment_ms=a.alignment_s * 1000,
        sync_ms=a.sync_s * 1000,
        async_ms=a.async_s * 1000,
        state_bytes=a.state_bytes,
        processed_bytes=a.processed_bytes,
        persisted_bytes=a.persisted_bytes,
        unaligned=a.unaligned,
    )
