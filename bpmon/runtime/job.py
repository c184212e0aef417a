"""A job: an execution plan instantiated on the network stack, its threads, and its lifecycle.

Where each subtask runs and how partitions, gates and channels connect them is decided before the
job exists, by ``deployment.plan_deployment`` (a frozen :class:`ExecutionPlan`); the job only
builds what the plan says, in the plan's order, and runs it.

Lifecycle: :meth:`Job.start` hands the regions to the scheduler (``scheduler.py``), which
deploys them as bulks of slots; a job whose sources are bounded finishes once every task has
finished, any job can be stopped (:meth:`Job.stop`, cancel) or fail. However it ends, every
thread stops, every segment returns to its pool, and the temporary directory the job's blocking
and hybrid partitions spill into is removed; :attr:`JobResult.leaks` says otherwise.
"""

from __future__ import annotations

import random
import shutil
import tempfile
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from bpmon.model.errors import JobError
from bpmon.runtime.checkpoint import CheckpointCoordinator, CheckpointOutcome
from bpmon.runtime.debloat import BufferDebloater
from bpmon.runtime.deployment import ExecutionPlan, PartitionPlan, SubtaskPlan, plan_deployment
from bpmon.runtime.gate import InputGate
from bpmon.runtime.keygroups import key_table
from bpmon.runtime.load import LoadSnapshot, WindowLoad, load_snapshot, runtime_load
from bpmon.runtime.network import NetworkEnvironment
from bpmon.runtime.partition import ResultPartition
from bpmon.runtime.routing import Output
from bpmon.runtime.scheduler import RegionScheduler
from bpmon.runtime.task import Task
from bpmon.scenario import Scenario
from bpmon.scenario.chained import chain_writers, chained_scenario

STOP_TIMEOUT_S = 2.0
"""Every thread of a job stops within this time of the job's end."""


@dataclass(frozen=True, slots=True)
class JobResult:
    """How a job ended."""

    state: str  # "finished" (every task), "cancelled" (ran its course or was stopped), "failed"
    error: str | None = None
    checkpoints: tuple[CheckpointOutcome, ...] = ()
    """The completed checkpoints among the last kept (``checkpoint.KEPT``)."""
    leaks: tuple[str, ...] = field(default_factory=tuple)


class Job:
    """The runtime job of one scenario.

    Args:
        scenario: the loaded scenario.
        clock: monotonic seconds, for every task, meter and the link timer.
        plan: where and how to deploy it (default: ``plan_deployment(scenario)``).

    Raises:
        JobError: ``plan`` was made for another scenario.
    """

    def __init__(
        self,
        scenario: Scenario,
        clock: Callable[[], float] = time.monotonic,
        *,
        plan: ExecutionPlan | None = None,
    ) -> None:
        self._writers = chain_writers(scenario)  # with chaining: the member writing each edge
        scenario = chained_scenario(scenario)  # with chaining: one operator per task
        self.scenario = scenario
        self.name = scenario.name
        self.plan = plan_deployment(scenario) if plan is None else plan
        if (self.plan.job, self.plan.task_managers) != (
            scenario.name,
            scenario.network.task_managers,
        ):
            raise JobError(
                f"the execution plan of job {self.plan.job!r} on {self.plan.task_managers} task "
                f"managers does not fit scenario {scenario.name!r} on "
                f"{scenario.network.task_managers}: plan it with plan_deployment(scenario)"
            )
        self._clock = clock
        spills = any(p.exchange != "pipelined" for p in self.plan.partitions)
        self.spill_dir = Path(tempfile.mkdtemp(prefix="bpmon-spill-")) if spills else None
        """The temporary directory the job owns for its spill files; removed when it ends."""
        self.env = NetworkEnvironment(scenario.network, clock=clock, spill_dir=self.spill_dir)
        self._cancel = threading.Event()
        self._failure: tuple[Task, BaseException] | None = None
        self._job_error: str | None = None
        self._failed = threading.Event()
        self._ended = threading.Event()
        self.scheduler: RegionScheduler[Task] | None = None
        self.tasks: dict[str, list[Task]] = {}
        self._coordinator: CheckpointCoordinator | None = None
        self._started_at: float | None = None
        self._result: JobResult | None = None
        self._build()

    # -- instantiating the plan -----------------------------------------------------------

    def _build(self) -> None:
        """Create every partition, connection, gate and task of the plan, in the plan's order."""
        plan, env = self.plan, self.env
        conditions = {(s.vertex, s.index): env.new_condition() for s in plan.subtasks}
        # Flink's SourceStreamTask lends no overdraft buffers (FLINK-27789)
        legacy = {
            op.name
            for op in self.scenario.operators
            if op.kind == "source" and op.source_api == "legacy"
        }
        partitions = [
            env.create_partition(
                p.task_manager,
                p.num_subpartitions,
                p.name,
                conditions[(p.producer, p.producer_index)],
                p.exchange,
                overdraft=p.producer not in legacy,
            )
            for p in plan.partitions
        ]
        outputs: dict[tuple[str, int], list[Output]] = {}
        writers: dict[tuple[str, int], list[str]] = {}
        for p, partition in zip(plan.partitions, partitions, strict=True):
            key = (p.producer, p.producer_index)
            writer = self._writers.get((p.consumer, p.edge), p.producer)
            outputs.setdefault(key, []).append(self._output(p, partition, writer))
            writers.setdefault(key, []).append(writer)
        for connection in plan.connections:
            env.connection(*connection)
        gates: dict[tuple[str, int], list[InputGate]] = {}
        for g in plan.gates:
            key = (g.consumer, g.consumer_index)
            inputs = [(partitions[c.partition], c.subpartition) for c in g.channels]
            gate = env.create_gate(
                g.task_manager, inputs, g.name, conditions[key], g.connection_index, False
            )
            gates.setdefault(key, []).append(gate)
        for sub in plan.subtasks:
            key = (sub.vertex, sub.index)
            task = self._task(
                sub, conditions[key], gates.get(key, []), outputs.get(key, []), writers.get(key, [])
            )
            self.tasks.setdefault(sub.vertex, []).append(task)

    def _output(self, plan: PartitionPlan, partition: ResultPartition, writer: str) -> Output:
        """The producer's side of one partition: its partitioner over the subpartitions, records
        of the size ``writer`` (the producer, or the chain member the edge leaves) emits."""
        producer = self.scenario.operator(plan.producer)
        producer = next((m for m in producer.members if m.name == writer), producer)
        rng = subtask_rng(
            self.scenario.seed, f"{plan.producer}->{plan.consumer}", plan.producer_index
        )
        forward = plan.partitioner == "forward"
        index = 0 if forward else plan.producer_index
        keys = plan.keys
        table = None if keys is None else key_table(keys, plan.max_parallelism, len(plan.consumers))
        return Output(
            partition, plan.partitioner, producer.record_bytes, index, rng, plan.skew, table
        )

    def _task(
        self,
        plan: SubtaskPlan,
        condition: threading.Condition,
        gates: list[InputGate],
        outputs: list[Output],
        writers: list[str],
    ) -> Task:
        network = self.scenario.network
        checkpoints = self.scenario.checkpoints
        switch = (
            checkpoints.aligned_timeout_ms / 1000
            if checkpoints.mode == "unaligned" and checkpoints.aligned_timeout_ms > 0
            else None
        )
        task = Task(
            self.scenario.operator(plan.vertex),
            plan.index,
            plan.task_manager,
            gates,
            outputs,
            condition,
            self._cancel,
            flush_interval_s=network.buffer_timeout_ms / 1000,
            aligned=checkpoints.mode == "aligned" or switch is not None,
            switch_after_s=switch,
            debloaters=[
                BufferDebloater(
                    gate, network.segment_size, network.debloat_target_ms / 1000, self._clock
                )
                for gate in gates
            ]
            if network.debloat
            else (),
            clock=self._clock,
            seed=self.scenario.seed,
            writers=writers if self.scenario.operator(plan.vertex).members else (),
        )
        task.on_failure = self._on_failure
        task.on_finished = self._on_finished
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
                self.all_tasks(), checkpoints, self.env.lock, self._promote_barriers, self._clock
            )
        if self._coordinator is not None:
            self._coordinator.start()
        compiled = self.plan.compiled
        if compiled is None:  # a plan built by hand: every task at once, consumers first
            for task in reversed(self.all_tasks()):
                task.start(self._coordinator)
            return
        self.scheduler = RegionScheduler(
            compiled,
            self.tasks,
            {v: [s.slot for s in self.plan.subtasks if s.vertex == v] for v in self.tasks},
            bounded_vertices(self.scenario),
            timeout_s=self.scenario.cluster.slot_request_timeout_s,
            deploy=self._deploy,
            fail=self._fail_job,
            clock=self._clock,
        )
        self.scheduler.start()

    def _promote_barriers(self, checkpoint_id: int) -> int:
        """Every queued aligned barrier of ``checkpoint_id`` to its queue's head (the aligned
        timeout, network lock held): in the producers' subpartitions and in the receivers'
        remote channels; the bytes of output data they overtook."""
        overtaken = 0
        for task in self.all_tasks():
            for output in task.outputs:
                overtaken += output.partition.promote_barrier(checkpoint_id)
            for gate in task.gates:
                gate.promote_barrier(checkpoint_id)
        return overtaken

    def _deploy(self, task: Task) -> None:
        if not self._cancel.is_set():
            task.start(self._coordinator)

    @property
    def elapsed_s(self) -> float:
        """Seconds since the job started (0 before)."""
        return 0.0 if self._started_at is None else self._clock() - self._started_at

    @property
    def failed(self) -> bool:
        """True once a task (or the scheduler) failed."""
        return self._failed.is_set()

    @property
    def finished(self) -> bool:
        """True once every task has finished (bounded sources only)."""
        return self.scheduler is not None and self.scheduler.finished.is_set()

    def wait(self, seconds: float) -> bool:
        """Wait up to ``seconds``, or until the job fails or finishes; True if it failed."""
        self._ended.wait(seconds)
        return self.failed

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
        self._ended.set()

    def _fail_job(self, message: str) -> None:
        """A failure of the job rather than of a task (a slot request bulk that timed out)."""
        if self._job_error is None:
            self._job_error = message
        self._failed.set()
        self._ended.set()

    def _on_finished(self, task: Task) -> None:
        if self.scheduler is not None:
            self.scheduler.task_finished(task)
            if self.scheduler.finished.is_set():
                self._ended.set()

    def stop(self) -> JobResult:
        """Cancel the job, stop every thread, return every buffer; idempotent.

        Raises nothing: a failure is in the result (``state == "failed"``, ``error`` names the
        subtask and the cause).
        """
        if self._result is not None:
            return self._result
        self._cancel.set()
        if self.scheduler is not None:
            self.scheduler.stop()
        if self._coordinator is not None:
            self._coordinator.stop()
        # Releasing the network wakes every wait at once: a task blocked in a buffer pool gets
        # WaitCancelledError, one waiting for input or output sees the cancel flag.
        self.env.shutdown()
        with self.env.lock:
            for task in self.all_tasks():
                task.condition.notify_all()
        self._join(time.monotonic() + STOP_TIMEOUT_S)
        leaks = list(self.env.leaks())
        leaks += [
            f"thread {t.name!r} still running" for t in self.all_tasks() if t.thread.is_alive()
        ]
        if self.scheduler is not None and self.scheduler.alive:
            leaks.append("the slot checker thread is still running")
        leaks += self._remove_spill_dir()
        error = self._job_error
        if self._failure is not None:
            task, exc = self._failure
            error = f"subtask {task.name!r} failed: {type(exc).__name__}: {exc}"
        finished = self.finished and error is None
        self._result = JobResult(
            state="failed" if error else "finished" if finished else "cancelled",
            error=error,
            checkpoints=tuple(self._coordinator.completed) if self._coordinator else (),
            leaks=tuple(leaks),
        )
        return self._result

    def _remove_spill_dir(self) -> list[str]:
        """Delete the job's spill directory (the files are closed by now); what could not be."""
        if self.spill_dir is None:
            return []
        shutil.rmtree(self.spill_dir, ignore_errors=True)
        if self.spill_dir.exists():
            return [f"spill directory {self.spill_dir} not removed"]
        return []

    def _join(self, deadline: float) -> None:
        for task in self.all_tasks():
            if task.thread.ident is not None:
                task.thread.join(timeout=max(0.0, deadline - time.monotonic()))

    def checkpoints(self) -> tuple[CheckpointOutcome, ...]:
        """The checkpoints completed so far (the last ``checkpoint.KEPT`` kept)."""
        return tuple(self._coordinator.completed) if self._coordinator else ()

    @property
    def coordinator(self) -> CheckpointCoordinator | None:
        """The checkpoint coordinator once the job started with checkpoints (None: none)."""
        return self._coordinator

    def load_snapshot(self) -> LoadSnapshot:
        """The runtime's own load counters now; pass it to :meth:`load` when a window ends."""
        return load_snapshot(self.tasks)

    def load(self, since: LoadSnapshot) -> WindowLoad:
        """How loaded the runtime was since ``since`` and whether it kept up (``load.py``)."""
        return runtime_load(since, load_snapshot(self.tasks))


def bounded_vertices(scenario: Scenario) -> set[str]:
    """The vertices every source upstream of which is bounded: their tasks will finish."""
    bounded: set[str] = set()
    for op in scenario.topological_order():
        if op.kind == "source":
            if op.records is not None:
                bounded.add(op.name)
        elif all(edge.source in bounded for edge in op.inputs):
            bounded.add(op.name)
    return bounded


def subtask_rng(seed: int, vertex: str, index: int) -> random.Random:
    """The seeded random generator of one subtask: repeatable per scenario seed."""
    return random.Random(f"{seed}/{vertex}/{index}")
