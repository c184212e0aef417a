"""Checkpoints as a target observed them, and as a report shows them.

Under backpressure a checkpoint's barriers travel with the data, so its time goes to **start
delay** (a barrier waiting behind full buffers to reach a task) and **alignment** (a task waiting
for the barrier on its other inputs); a checkpoint slow for its own reasons spends it in the
snapshot's **sync** and **async** phases (a large state, a slow upload). The observation carries
every subtask's phases of the last completed and the last failed checkpoint
(:class:`CheckpointWindow`, filled by bpmon's runtime and by Flink's
``/jobs/:id/checkpoints`` endpoints); the report keeps one row per vertex, its slowest subtask
(:class:`CheckpointReport`, ``docs/report.md``).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

CheckpointMode = Literal["aligned", "unaligned"]
"""How barriers travel: in order with the data (aligned) or overtaking it (unaligned)."""
CheckpointStatus = Literal["completed", "failed"]


@dataclass(frozen=True, slots=True)
class SubtaskCheckpoint:
    """One subtask's part in one checkpoint (Flink's checkpoint details per subtask).

    A figure is None when it is not known: a subtask that had not acknowledged a failed
    checkpoint shows only what was under way (its barriers arrived, its upload had taken
    ``async_ms`` so far), or nothing when its first barrier had not reached it.

    Attributes:
        index: the subtask.
        acknowledged: it acknowledged the checkpoint.
        start_delay_ms: trigger to its first barrier.
        alignment_ms: first barrier to last.
        sync_ms, async_ms: its snapshot's phases.
        state_bytes: its state's size.
        processed_bytes: input it processed during the alignment.
        persisted_bytes: in-flight data stored with its snapshot (unaligned).
        unaligned: its barriers went on unaligned.
    """

    index: int
    acknowledged: bool
    start_delay_ms: float | None = None
    alignment_ms: float | None = None
    sync_ms: float | None = None
    async_ms: float | None = None
    state_bytes: int | None = None
    processed_bytes: int | None = None
    persisted_bytes: int | None = None
    unaligned: bool = False

    @property
    def reached(self) -> bool:
        """Whether its first barrier reached it (its start delay is known)."""
        return self.start_delay_ms is not None

    @property
    def barrier_wait_ms(self) -> float | None:
        """Its time waiting for barriers: start delay plus alignment."""
        if self.start_delay_ms is None:
            return None
        return self.start_delay_ms + (self.alignment_ms or 0.0)

    @property
    def end_to_end_ms(self) -> float | None:
        """Trigger to acknowledgement (None unless it acknowledged)."""
        if not self.acknowledged or self.start_delay_ms is None:
            return None
        return self.start_delay_ms + sum(
            x or 0.0 for x in (self.alignment_ms, self.sync_ms, self.async_ms)
        )


@dataclass(frozen=True, slots=True)
class VertexCheckpoint:
    """One vertex's subtasks in one checkpoint."""

    name: str
    subtasks: tuple[SubtaskCheckpoint, ...]

    @property
    def acknowledged(self) -> int:
        """How many of its subtasks acknowledged."""
        return sum(s.acknowledged for s in self.subtasks)


@dataclass(frozen=True, slots=True)
class Checkpoint:
    """One checkpoint that ended: completed, or failed (``failure`` says why).

    Attributes:
        id: the checkpoint's number.
        status: ``completed`` or ``failed``.
        duration_ms: trigger to the last acknowledgement (failed: to the failure).
        vertices: every vertex's subtasks, in the job's order.
        failure: why it failed (Flink's failure message); None when it completed.
        persisted_bytes: the in-flight data it stored in all (unaligned).
        state_bytes: the state it stored in all.
    """

    id: int
    status: CheckpointStatus
    duration_ms: float
    vertices: tuple[VertexCheckpoint, ...]
    failure: str | None = None
    persisted_bytes: int = 0
    state_bytes: int = 0


@dataclass(frozen=True, slots=True)
class CheckpointWindow:
    """The checkpoints signal of one window: the job's settings, its counts, and the last
    completed and last failed checkpoint in full.

    Attributes:
        mode: ``aligned`` or ``unaligned``.
        interval_ms: the checkpoint interval (None: not known).
        timeout_ms: when a checkpoint expires (None: not known).
        aligned_timeout_ms: unaligned checkpoints start aligned for this long (0: never).
        completed, failed: checkpoints completed and failed since the job started.
        last_completed, last_failed: the newest of each (None: none yet).
    """

    mode: CheckpointMode
    interval_ms: float | None
    completed: int
    failed: int
    last_completed: Checkpoint | None = None
    last_failed: Checkpoint | None = None
    timeout_ms: float | None = None
    aligned_timeout_ms: float = 0.0

    @property
    def last(self) -> Checkpoint | None:
        """The newest checkpoint that ended, completed or failed."""
        done, failed = self.last_completed, self.last_failed
        if done is None or (failed is not None and failed.id > done.id):
            return failed
        return done


@dataclass(frozen=True, slots=True)
class CheckpointPhases:
    """One vertex of a report's checkpoint: the phases of its slowest subtask.

    The slowest subtask is the one that acknowledged last (of a failed checkpoint, one its
    barrier had not reached, whose start delay then counts the whole duration).
    """

    name: str
    start_delay_ms: float | None
    alignment_ms: float | None
    sync_ms: float | None
    async_ms: float | None
    acknowledged: int
    parallelism: int


@dataclass(frozen=True, slots=True)
class LastCheckpoint:
    """The newest checkpoint of a report, its phases the largest of any vertex.

    ``barrier_wait_ms`` is the longest any one subtask waited for barriers (its start delay
    plus its alignment): the part of ``duration_ms`` backpressure is to blame for.
    """

    id: int
    status: CheckpointStatus
    duration_ms: float
    start_delay_ms: float | None
    alignment_ms: float | None
    sync_ms: float | None
    async_ms: float | None
    state_bytes: int
    persisted_bytes: int
    barrier_wait_ms: float | None
    failure: str | None = None

    @property
    def waiting_share(self) -> float | None:
        """``barrier_wait_ms`` over ``duration_ms``, at most 1."""
        if self.barrier_wait_ms is None or not self.duration_ms > 0:
            return None
        return min(1.0, self.barrier_wait_ms / self.duration_ms)


@dataclass(frozen=True, slots=True)
class CheckpointReport:
    """A report's ``checkpoints``: the job's settings, counts, the newest checkpoint and its
    vertices (``docs/report.md``)."""

    mode: CheckpointMode
    interval_ms: float | None
    completed: int
    failed: int
    last: LastCheckpoint | None
    vertices: tuple[CheckpointPhases, ...]


@dataclass(frozen=True, slots=True)
class CheckpointChange:
    """The newest checkpoint of two runs of one job (``bpmon whatif``, ``run --verify``): each
    figure as ``(before, after)``, None where a run had no checkpoint to show."""

    duration_ms: tuple[float | None, float | None]
    start_delay_ms: tuple[float | None, float | None]
    barrier_wait_ms: tuple[float | None, float | None]
    status: tuple[CheckpointStatus | None, CheckpointStatus | None]
    completed: tuple[int | None, int | None]
    failed: tuple[int | None, int | None]


def checkpoint_change(
    before: CheckpointReport | None, after: CheckpointReport | None
) -> CheckpointChange | None:
    """How the checkpoints of two runs compare; None when neither took any."""
    if before is None and after is None:
        return None
    runs = (before, after)
    lasts = tuple(None if r is None else r.last for r in runs)

    def pair(name: str) -> tuple[float | None, float | None]:
        b, a = (None if last is None else getattr(last, name) for last in lasts)
        return b, a

    return CheckpointChange(
        duration_ms=pair("duration_ms"),
        start_delay_ms=pair("start_delay_ms"),
        barrier_wait_ms=pair("barrier_wait_ms"),
        status=(
            None if lasts[0] is None else lasts[0].status,
            None if lasts[1] is None else lasts[1].status,
        ),
        completed=(
            None if before is None else before.completed,
            None if after is None else after.completed,
        ),
        failed=(None if before is None else before.failed, None if after is None else after.failed),
    )
