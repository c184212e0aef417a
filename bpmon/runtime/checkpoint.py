"""The checkpoint coordinator: barriers injected at the sources, snapshots acknowledged, timeouts.

As Flink's ``CheckpointCoordinator`` with one checkpoint at a time:

1. every ``interval_ms`` after the last one ended (and only while every task runs, as Flink
   declines a trigger otherwise) a checkpoint is triggered at every source task;
2. each task handles its barriers (``alignment.py``): its **start delay** runs from the trigger
   to the first barrier it receives (a source: to the barrier it injects, later when it is
   hard-blocked in a buffer request: FLIP-227's point), its **alignment** from the first barrier
   to the last;
3. then it takes its snapshot on its own thread, the **sync phase**
   (:data:`~bpmon.runtime.task.SYNC_S_PER_MB` per MB of its ``state_mb``), and reports it here;
   the **async phase**, the upload of its state and, unaligned, of its in-flight data at
   ``upload_mb_per_s``, runs off the task's thread (here), and the task's acknowledgement
   arrives when it is done;
4. the checkpoint completes when every task acknowledged; its duration runs from the trigger to
   the last acknowledgement. One that is not complete ``timeout_ms`` after its trigger fails: it
   is counted, its tasks abort what they were doing for it, and the next one is triggered an
   interval later (no restart, as with ``tolerable-failed-checkpoints`` unlimited).

With an aligned timeout (``aligned_timeout_ms``), the coordinator moves the barriers still queued
behind data to the head of their queues once that long has passed since the trigger, and tells
every task, so aligning tasks go on unaligned (``alignment.py``).

What it keeps is bounded: the last :data:`KEPT` checkpoints (completed or failed) and two counts.
"""

from __future__ import annotations

import heapq
import itertools
import threading
import time
from collections import deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace

from bpmon.runtime.alignment import SnapshotTaken
from bpmon.runtime.scheduler import TaskState
from bpmon.runtime.task import MIB, Task
from bpmon.scenario import CheckpointConfig

KEPT = 64
"""The most recent checkpoints kept (a watch lasts weeks)."""


@dataclass(frozen=True, slots=True)
class AckedSubtask:
    """One subtask's part in one checkpoint, as Flink's checkpoint details show it.

    Attributes:
        vertex, index: the subtask.
        start_delay_s: trigger to first barrier.
        alignment_s: first barrier to last.
        sync_s, async_s: the snapshot's phases.
        state_bytes: its state's size.
        processed_bytes: input processed during the alignment.
        persisted_bytes: in-flight data stored (unaligned).
        unaligned: its barriers went on unaligned.
    """

    vertex: str
    index: int
    start_delay_s: float
    alignment_s: float
    sync_s: float
    async_s: float
    state_bytes: int
    processed_bytes: int
    persisted_bytes: int
    unaligned: bool


@dataclass(frozen=True, slots=True)
class CheckpointOutcome:
    """One checkpoint that ended: completed, or failed (``failure`` says why).

    Attributes:
        checkpoint_id: from 1.
        triggered_at: monotonic seconds.
        duration_s: trigger to the last acknowledgement (failed: to the failure).
        acked: the subtasks that acknowledged it.
        pending: the subtasks that had not when it failed (empty when it completed).
        failure: why it failed; None when it completed.
        promoted_bytes: output data the barriers overtook in their queues when the aligned
            timeout moved them to the heads, stored as in-flight data too.
        uploading: the subtasks of a failed checkpoint whose upload was under way when it
            failed, their ``async_s`` the upload's time so far.
    """

    checkpoint_id: int
    triggered_at: float
    duration_s: float
    acked: tuple[AckedSubtask, ...]
    pending: tuple[tuple[str, int], ...] = ()
    failure: str | None = None
    promoted_bytes: int = 0
    uploading: tuple[AckedSubtask, ...] = ()

    @property
    def alignment_s(self) -> float:
        """The longest alignment of any subtask."""
        return max((a.alignment_s for a in self.acked), default=0.0)

    @property
    def in_flight_bytes(self) -> int:
        """The in-flight data stored (unaligned): every subtask's, and what promoted barriers
        overtook."""
        return sum(a.persisted_bytes for a in self.acked) + self.promoted_bytes


class CheckpointCoordinator:
    """Triggers checkpoints on a thread of its own and collects the tasks' acknowledgements.

    Args:
        tasks: every task of the job (the sources are triggered, all acknowledge).
        config: the ``[checkpoints]`` table.
        lock: the network lock (task mailboxes are conditions on it).
        promote: moves every queued aligned barrier of a checkpoint to the head of its queue
            (network lock held); returns the bytes they overtook.
        clock: monotonic seconds.
    """

    def __init__(
        self,
        tasks: Sequence[Task],
        config: CheckpointConfig,
        lock: threading.Lock,
        promote: Callable[[int], int] = lambda checkpoint_id: 0,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._tasks = list(tasks)
        self._sources = [t for t in tasks if t.spec.kind == "source"]
        self._interval = config.interval_ms / 1000
        self._timeout = config.timeout_ms / 1000
        self._switch = (
            config.aligned_timeout_ms / 1000
            if config.mode == "unaligned" and config.aligned_timeout_ms > 0
            else None
        )
        self._upload = config.upload_mb_per_s * MIB
        self._lock, self._promote, self._clock = lock, promote, clock
        self._state = threading.Condition()
        self._stop = False
        self._pending: int | None = None
        self._triggered_at = 0.0
        self._promoted = False
        self._extra_persisted = 0
        self._acks: dict[tuple[str, int], AckedSubtask] = {}
        self._uploads: list[tuple[float, int, int, AckedSubtask]] = []  # (due, seq, id, ack)
        self._seq = itertools.count()
        self._next_trigger = clock() + self._interval
        self._next_id = 1
        self.outcomes: deque[CheckpointOutcome] = deque(maxlen=KEPT)
        """The last :data:`KEPT` checkpoints that ended, oldest first."""
        self.completed_count = 0
        self.failed_count = 0
        self._thread = threading.Thread(
            target=self._run, name="checkpoint-coordinator", daemon=True
        )

    def start(self) -> None:
        """Start triggering checkpoints."""
        self._thread.start()

    def stop(self) -> None:
        """Stop triggering; a pending checkpoint is abandoned."""
        with self._state:
            self._stop = True
            self._state.notify_all()
        if self._thread.is_alive():
            self._thread.join(timeout=2.0)

    @property
    def pending(self) -> int | None:
        """The checkpoint in progress, if any."""
        return self._pending

    @property
    def completed(self) -> list[CheckpointOutcome]:
        """The completed checkpoints among those kept, oldest first."""
        return [c for c in self.outcomes if c.failure is None]

    # -- the coordinator's thread ------------------------------------------------------------

    def _run(self) -> None:
        with self._state:
            while not self._stop:
                now = self._clock()
                self._uploaded(now)
                if self._pending is not None and now - self._triggered_at >= self._timeout:
                    self._fail(now)
                elif self._due_promotion(now):
                    self._promoted = True
                    self._state.release()
                    try:
                        self._promote_barriers()
                    finally:
                        self._state.acquire()
                    continue
                if self._pending is None and now >= self._next_trigger:
                    self._state.release()
                    try:
                        self._trigger()
                    finally:
                        self._state.acquire()
                    continue
                self._state.wait(max(0.001, self._next_wake() - now))

    def _next_wake(self) -> float:
        """The earliest moment something is due: a trigger, an upload, the switch, a timeout."""
        if self._pending is None:
            wake = self._next_trigger
        else:
            wake = self._triggered_at + self._timeout
            if self._switch is not None and not self._promoted:
                wake = min(wake, self._triggered_at + self._switch)
        if self._uploads:
            wake = min(wake, self._uploads[0][0])
        return wake

    def _due_promotion(self, now: float) -> bool:
        return (
            self._pending is not None
            and self._switch is not None
            and not self._promoted
            and now >= self._triggered_at + self._switch
        )

    def _trigger(self) -> None:
        """Trigger the next checkpoint at every source (not while a task is not running)."""
        now = self._clock()
        running = [t for t in self._tasks if t.state == TaskState.RUNNING]
        finished = [t for t in self._tasks if t.state == TaskState.FINISHED]
        with self._state:
            self._next_trigger = now + self._interval
            if len(running) + len(finished) < len(self._tasks) or not running:
                return  # Flink declines a trigger while a task is not running
            checkpoint_id = self._next_id
            self._next_id += 1
            self._pending, self._triggered_at = checkpoint_id, now
            self._promoted, self._extra_persisted = False, 0
            self._acks = {(t.spec.name, t.index): _finished(t) for t in finished}  # FLIP-147
        with self._lock:
            for task in self._sources:
                if task.state == TaskState.RUNNING:
                    task.trigger_checkpoint(checkpoint_id, now)

    def _promote_barriers(self) -> None:
        """The aligned timeout passed: queued barriers to the heads, every task told."""
        checkpoint_id = self._pending
        if checkpoint_id is None:
            return
        with self._lock:
            overtaken = self._promote(checkpoint_id)
            for task in self._tasks:
                task.check_aligned_timeout()
        with self._state:
            if self._pending == checkpoint_id:
                self._extra_persisted += overtaken

    def _fail(self, now: float) -> None:
        """The pending checkpoint timed out (state lock held): count it, abort it everywhere."""
        checkpoint_id = self._pending
        assert checkpoint_id is not None
        acked = tuple(self._acks.values())
        done = {(a.vertex, a.index) for a in acked}
        uploading = tuple(
            replace(ack, async_s=max(0.0, ack.async_s - (due - now)))
            for due, _, cid, ack in sorted(self._uploads)
            if cid == checkpoint_id
        )
        pending = tuple(
            (t.spec.name, t.index) for t in self._tasks if (t.spec.name, t.index) not in done
        )
        self.outcomes.append(
            CheckpointOutcome(
                checkpoint_id,
                self._triggered_at,
                now - self._triggered_at,
                acked,
                pending,
                f"expired before completing, timeout_ms = {self._timeout * 1000:.0f}",
                self._extra_persisted,
                uploading,
            )
        )
        self.failed_count += 1
        self._pending, self._acks = None, {}
        self._uploads = [u for u in self._uploads if u[2] != checkpoint_id]
        heapq.heapify(self._uploads)
        self._next_trigger = now + self._interval
        self._state.release()
        try:
            with self._lock:
                for task in self._tasks:
                    task.abort_checkpoint(checkpoint_id)
        finally:
            self._state.acquire()

    def _uploaded(self, now: float) -> None:
        """Acknowledge every task whose upload is done by ``now`` (state lock held)."""
        while self._uploads and self._uploads[0][0] <= now:
            _, _, checkpoint_id, ack = heapq.heappop(self._uploads)
            self._record(checkpoint_id, ack, now)

    # -- the tasks' side ---------------------------------------------------------------------

    def acknowledge(self, task: Task, checkpoint_id: int, snapshot: SnapshotTaken) -> None:
        """``task`` took the sync part of its snapshot (called from the task's thread); its
        acknowledgement follows its upload."""
        now = self._clock()
        timing = snapshot.timing
        upload_bytes = snapshot.state_bytes + timing.persisted_bytes
        async_s = upload_bytes / self._upload if upload_bytes else 0.0
        ack = AckedSubtask(
            vertex=task.spec.name,
            index=task.index,
            start_delay_s=max(0.0, timing.first_barrier_at - timing.triggered_at),
            alignment_s=timing.alignment_s,
            sync_s=snapshot.sync_s,
            async_s=async_s,
            state_bytes=snapshot.state_bytes,
            processed_bytes=timing.processed_bytes,
            persisted_bytes=timing.persisted_bytes,
            unaligned=timing.unaligned,
        )
        with self._state:
            if checkpoint_id != self._pending:
                return
            if async_s > 0:
                heapq.heappush(self._uploads, (now + async_s, next(self._seq), checkpoint_id, ack))
                self._state.notify_all()
                return
            self._record(checkpoint_id, ack, now)

    def _record(self, checkpoint_id: int, ack: AckedSubtask, now: float) -> None:
        """One acknowledgement (state lock held); the checkpoint completes with the last."""
        if checkpoint_id != self._pending:
            return
        self._acks[(ack.vertex, ack.index)] = ack
        if len(self._acks) < len(self._tasks):
            return
        self.outcomes.append(
            CheckpointOutcome(
                checkpoint_id,
                self._triggered_at,
                now - self._triggered_at,
                tuple(self._acks.values()),
                promoted_bytes=self._extra_persisted,
            )
        )
        self.completed_count += 1
        self._pending, self._acks = None, {}
        self._next_trigger = now + self._interval
        self._state.notify_all()


def _finished(task: Task) -> AckedSubtask:
    """A finished task's part: nothing to align or snapshot (FLIP-147)."""
    return AckedSubtask(task.spec.name, task.index, 0.0, 0.0, 0.0, 0.0, 0, 0, 0, False)
