"""A job: the scenario's graph deployed on the network stack, its threads, and its lifecycle.

Deployment, as Flink's default scheduler places a streaming job: every subtask, in topological
order of the vertices, goes round robin to the next task manager (so with two task managers a
``source -> map -> sink`` chain of parallelism 1 exchanges data remotely). Each outgoing edge of a
subtask is one result partition (one subpartition per consuming subtask; one in all for
``forward``), each incoming edge one input gate with a channel per producing subtask, local or
remote by placement.

Lifecycle: :meth:`Job.start`, then :meth:`Job.stop` (cancel) or a failure; however it ends, every
thread stops and every segment returns to its pool, and :attr:`JobResult.leaks` says otherwise.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field

from bpmon.errors import JobError
from bpmon.runtime.checkpoint import CheckpointCoordinator, CheckpointStats
from bpmon.runtime.network import NetworkEnvironment
from bpmon.runtime.partition import ResultPartition
from bpmon.runtime.routing import Output
from bpmon.runtime.task import Task, subtask_rng
from bpmon.scenario import OperatorSpec, Scenario

STOP_TIMEOUT_S = 2.0
"""Every thread of a job stops within this time of the job's end."""


@dataclass(frozen=True, slots=True)
class JobResult:
    """How a job ended."""

    state: str  # "cancelled" (ran its course or was stopped) or "failed"
    error: str | None = None
    checkpoints: tuple[CheckpointStats, ...] = ()
    leaks: tuple[str, ...] = field(default_factory=tuple)


class Job:
    """The runtime job of one scenario.

    Args:
        scenario: the loaded scenario.
        clock: monotonic seconds, for every task, meter and the link timer.
    """

    def __init__(self, scenario: Scenario, clock: Callable[[], float] = time.monotonic) -> None:
        self.scenario = scenario
        self.name = scenario.name
        self._clock = clock
        self.env = NetworkEnvironment(scenario.network, clock=clock)
        self._cancel = threading.Event()
        self._failure: tuple[Task, BaseException] | None = None
        self._failed = threading.Event()
        self.tasks: dict[str, list[Task]] = {}
        self._coordinator: CheckpointCoordinator | None = None
        self._started_at: float | None = None
        self._result: JobResult | None = None
        self._build()

    # -- deployment -------------------------------------------------------------------------

    def _build(self) -> None:
        scenario, env = self.scenario, self.env
        tms = scenario.network.task_managers
        placement: dict[str, list[int]] = {}
        slot = 0
        for op in scenario.topological_order():
            placement[op.name] = [(slot + i) % tms for i in range(op.parallelism)]
            slot += op.parallelism
        conditions = {
            op.name: [env.new_condition() for _ in range(op.parallelism)]
            for op in scenario.operators
        }
        partitions: dict[tuple[str, int], list[ResultPartition]] = {}  # (consumer, input index)
        outputs: dict[str, list[list[Output]]] = {
            op.name: [[] for _ in range(op.parallelism)] for op in scenario.operators
        }
        for op in scenario.topological_order():
            for edge_index, edge in enumerate(op.inputs):
                up = scenario.operator(edge.source)
                forward = edge.partitioner == "forward"
                subpartitions = 1 if forward else op.parallelism
                made = []
                for i in range(up.parallelism):
                    part = env.create_partition(
                        placement[up.name][i],
                        subpartitions,
                        f"{up.name} ({i + 1}/{up.parallelism}) -> {op.name}",
                        conditions[up.name][i],
                    )
                    made.append(part)
                    rng = subtask_rng(scenario.seed, f"{up.name}->{op.name}", i)
                    partitioner = "forward" if forward else edge.partitioner
                    outputs[up.name][i].append(
                        Output(
                            part, partitioner, up.record_bytes, 0 if forward else i, rng, edge.skew
                        )
                    )
                partitions[(op.name, edge_index)] = made
        for op in scenario.topological_order():
            self.tasks[op.name] = [
                self._task(
                    op,
                    j,
                    placement[op.name][j],
                    conditions[op.name][j],
                    partitions,
                    outputs[op.name][j],
                )
                for j in range(op.parallelism)
            ]

    def _task(
        self,
        op: OperatorSpec,
        index: int,
        tm: int,
        condition: threading.Condition,
        partitions: dict[tuple[str, int], list[ResultPartition]],
        outputs: list[Output],
    ) -> Task:
        gates = []
        for edge_index, edge in enumerate(op.inputs):
            producers = partitions[(op.name, edge_index)]
            inputs = (
                [(producers[index], 0)]
                if edge.partitioner == "forward"
                else [(p, index) for p in producers]
            )
            name = f"{edge.source} -> {op.name} ({index + 1}/{op.parallelism})"
            gates.append(self.env.create_gate(tm, inputs, name, condition))
        network = self.scenario.network
        task = Task(
            op,
            index,
            tm,
            gates,
            outputs,
            condition,
            self._cancel,
            flush_interval_s=network.buffer_timeout_ms / 1000,
            aligned=self.scenario.checkpoints.mode == "aligned",
            clock=self._clock,
        )
        task.on_failure = self._on_failure
        return task

    # -- lifecycle --------------------------------------------------------------------------

    def all_tasks(self) -> list[Task]:
        """Every task, vertex by vertex in topological order."""
        return [task for tasks in self.tasks.values() for task in tasks]

    def start(self) -> None:
        """Start every task thread and the checkpoint coordinator."""
        if self._started_at is not None:
            raise JobError(f"job {self.name!r} was already started")
        self._started_at = self._clock()
        checkpoints = self.scenario.checkpoints
        if checkpoints.interval_ms > 0:
            self._coordinator = CheckpointCoordinator(
                self.all_tasks(), checkpoints.interval_ms / 1000, self.env.lock, self._clock
            )
        for task in reversed(self.all_tasks()):  # consumers first, as Flink deploys
            task.start(self._coordinator)
        if self._coordinator is not None:
            self._coordinator.start()

    @property
    def elapsed_s(self) -> float:
        """Seconds since the job started (0 before)."""
        return 0.0 if self._started_at is None else self._clock() - self._started_at

    @property
    def failed(self) -> bool:
        """True once a task failed."""
        return self._failed.is_set()

    def wait(self, seconds: float) -> bool:
        """Wait up to ``seconds`` or until a task fails; True if one failed."""
        return self._failed.wait(seconds)

    def run(self, duration_s: float | None = None) -> JobResult:
        """Start, run for ``duration_s`` (default: the scenario's), stop; the result."""
        try:
            self.start()
            self.wait(self.scenario.duration_s if duration_s is None else duration_s)
        finally:
            result = self.stop()
        return result

    def _on_failure(self, task: Task, exc: BaseException) -> None:
        if self._failure is None:
            self._failure = (task, exc)
        self._failed.set()

    def stop(self) -> JobResult:
        """Cancel the job, stop every thread, return every buffer; idempotent.

        Raises nothing: a failure is in the result (``state == "failed"``, ``error`` names the
        subtask and the cause).
        """
        if self._result is not None:
            return self._result
        self._cancel.set()
        if self._coordinator is not None:
            self._coordinator.stop()
        # Releasing the network wakes every wait at once: a task blocked in a buffer pool gets
        # CancelledError, one waiting for input or output sees the cancel flag.
        self.env.shutdown()
        with self.env.lock:
            for task in self.all_tasks():
                task.condition.notify_all()
        self._join(time.monotonic() + STOP_TIMEOUT_S)
        leaks = list(self.env.leaks())
        leaks += [
            f"thread {t.name!r} still running" for t in self.all_tasks() if t.thread.is_alive()
        ]
        error = None
        if self._failure is not None:
            task, exc = self._failure
            error = f"subtask {task.name!r} failed: {type(exc).__name__}: {exc}"
        self._result = JobResult(
            state="failed" if error else "cancelled",
            error=error,
            checkpoints=tuple(self._coordinator.completed) if self._coordinator else (),
            leaks=tuple(leaks),
        )
        return self._result

    def _join(self, deadline: float) -> None:
        for task in self.all_tasks():
            if task.thread.ident is not None:
                task.thread.join(timeout=max(0.0, deadline - time.monotonic()))

    def checkpoints(self) -> tuple[CheckpointStats, ...]:
        """Checkpoints completed so far."""
        return tuple(self._coordinator.completed) if self._coordinator else ()
