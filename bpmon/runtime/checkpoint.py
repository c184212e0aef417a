"""The checkpoint coordinator: barriers injected at the sources every ``interval_ms``.

As Flink's ``CheckpointCoordinator`` with one checkpoint at a time: a checkpoint is triggered at
every source task; each task acknowledges once it has taken its snapshot (after aligning its inputs,
or at the first barrier when unaligned); the checkpoint completes when every task acknowledged. Its
duration runs from the trigger to the last acknowledgement; its alignment time is the longest
alignment of any task; its in-flight bytes (unaligned) are the buffered data the barriers overtook,
which an unaligned checkpoint stores as channel state. A task hard-blocked in a buffer request
cannot take or forward the barrier until it gets a buffer: that delay is what overdraft buffers
shorten.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from bpmon.runtime.task import Task


@dataclass(frozen=True, slots=True)
class CheckpointStats:
    """One completed checkpoint."""

    checkpoint_id: int
    triggered_at: float
    duration_s: float
    alignment_s: float
    in_flight_bytes: int


class CheckpointCoordinator:
    """Triggers checkpoints on a timer thread and collects the tasks' acknowledgements.

    Args:
        tasks: every task of the job (the sources are triggered, all acknowledge).
        interval_s: time between a checkpoint's completion-or-trigger and the next trigger.
        lock: the network lock (task mailboxes are conditions on it).
        clock: monotonic seconds.
    """

    def __init__(
        self,
        tasks: Sequence[Task],
        interval_s: float,
        lock: threading.Lock,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._tasks = list(tasks)
        self._sources = [t for t in tasks if t.spec.kind == "source"]
        self._interval = interval_s
        self._lock = lock
        self._clock = clock
        self._stop = threading.Event()
        self._state = threading.Lock()
        self._pending: int | None = None
        self._acks: dict[int, tuple[float, int]] = {}
        self._triggered_at = 0.0
        self._next_id = 1
        self.completed: list[CheckpointStats] = []
        self._thread = threading.Thread(
            target=self._run, name="checkpoint-coordinator", daemon=True
        )

    def start(self) -> None:
        """Start triggering checkpoints."""
        self._thread.start()

    def stop(self) -> None:
        """Stop triggering; a pending checkpoint is abandoned."""
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join(timeout=2.0)

    @property
    def pending(self) -> int | None:
        """The checkpoint in progress, if any."""
        return self._pending

    def _run(self) -> None:
        while not self._stop.wait(self._interval):
            with self._state:
                if self._pending is not None:
                    continue  # one checkpoint at a time: the next waits for this one
                self._pending = checkpoint_id = self._next_id
                self._next_id += 1
                self._acks = {}
                self._triggered_at = self._clock()
            with self._lock:
                for task in self._sources:
                    task.trigger_checkpoint(checkpoint_id)

    def acknowledge(
        self, task: Task, checkpoint_id: int, alignment_s: float, in_flight_bytes: int
    ) -> None:
        """``task`` took its snapshot of ``checkpoint_id`` (called from the task's thread)."""
        with self._state:
            if checkpoint_id != self._pending:
                return
            self._acks[id(task)] = (alignment_s, in_flight_bytes)
            if len(self._acks) < len(self._tasks):
                return
            now = self._clock()
            self.completed.append(
                CheckpointStats(
                    checkpoint_id=checkpoint_id,
                    triggered_at=self._triggered_at,
                    duration_s=now - self._triggered_at,
                    alignment_s=max(a for a, _ in self._acks.values()),
                    in_flight_bytes=sum(b for _, b in self._acks.values()),
                )
            )
            self._pending = None
