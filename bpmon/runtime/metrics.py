"""Task metrics with Flink's names: a snapshot of every subtask, readable while the job runs.

Nothing is stopped to read them: the time accounting and rate meters are published by their task
thread for readers, and the network metrics read counters (``netmetrics.py``).
"""

from __future__ import annotations

from dataclasses import dataclass

from bpmon.runtime.netmetrics import input_metrics, output_metrics
from bpmon.runtime.task import Task


@dataclass(frozen=True, slots=True)
class TaskMetrics:
    """One subtask's metrics over the last few seconds (Flink's names in the docstrings)."""

    vertex: str
    index: int
    thread: str
    task_manager: int
    busy_ms_per_s: float  # busyTimeMsPerSecond
    idle_ms_per_s: float  # idleTimeMsPerSecond
    soft_backpressured_ms_per_s: float  # softBackPressuredTimeMsPerSecond
    hard_backpressured_ms_per_s: float  # hardBackPressuredTimeMsPerSecond
    backpressured_ms_per_s: float  # backPressuredTimeMsPerSecond
    records_in_per_s: float  # numRecordsInPerSecond
    records_out_per_s: float  # numRecordsOutPerSecond
    buffers_out: int  # numBuffersOut
    buffers_out_per_s: float  # numBuffersOutPerSecond
    out_pool_usage: float | None  # outPoolUsage (None for a sink: no result partition)
    in_pool_usage: float | None  # inPoolUsage (None for a source: no input gate)
    input_floating_usage: float | None  # inputFloatingBuffersUsage
    input_exclusive_usage: float | None  # inputExclusiveBuffersUsage
    output_queue_length: int  # outputQueueLength
    input_queue_length: int  # inputQueueLength
    overdraft_buffers: int  # bpmon: overdraft segments in use

    def as_flink(self) -> dict[str, float]:
        """The values under Flink's metric names (bpmon's own are prefixed ``bpmon_``)."""
        values: dict[str, float | None] = {
            "busyTimeMsPerSecond": self.busy_ms_per_s,
            "idleTimeMsPerSecond": self.idle_ms_per_s,
            "softBackPressuredTimeMsPerSecond": self.soft_backpressured_ms_per_s,
            "hardBackPressuredTimeMsPerSecond": self.hard_backpressured_ms_per_s,
            "backPressuredTimeMsPerSecond": self.backpressured_ms_per_s,
            "numRecordsInPerSecond": self.records_in_per_s,
            "numRecordsOutPerSecond": self.records_out_per_s,
            "numBuffersOut": float(self.buffers_out),
            "numBuffersOutPerSecond": self.buffers_out_per_s,
            "outPoolUsage": self.out_pool_usage,
            "inPoolUsage": self.in_pool_usage,
            "inputFloatingBuffersUsage": self.input_floating_usage,
            "inputExclusiveBuffersUsage": self.input_exclusive_usage,
            "outputQueueLength": float(self.output_queue_length),
            "inputQueueLength": float(self.input_queue_length),
            "bpmon_overdraftBuffers": float(self.overdraft_buffers),
        }
        return {name: value for name, value in values.items() if value is not None}


def task_metrics(task: Task) -> TaskMetrics:
    """A snapshot of ``task``'s metrics."""
    shares = task.account.shares()
    partitions = [output.partition for output in task.outputs]
    out = output_metrics(partitions)
    inputs = input_metrics(task.gates)
    has_out, has_in = bool(partitions), bool(task.gates)
    return TaskMetrics(
        vertex=task.spec.name,
        index=task.index,
        thread=task.name,
        task_manager=task.task_manager,
        busy_ms_per_s=shares.busy_ms_per_s,
        idle_ms_per_s=shares.idle_ms_per_s,
        soft_backpressured_ms_per_s=shares.soft_backpressured_ms_per_s,
        hard_backpressured_ms_per_s=shares.hard_backpressured_ms_per_s,
        backpressured_ms_per_s=shares.backpressured_ms_per_s,
        records_in_per_s=task.records_in.per_second(),
        records_out_per_s=task.records_out.per_second(),
        buffers_out=out.buffers_out,
        buffers_out_per_s=task.buffers_out.per_second(),
        out_pool_usage=out.out_pool_usage if has_out else None,
        in_pool_usage=inputs.in_pool_usage if has_in else None,
        input_floating_usage=inputs.floating_usage if has_in else None,
        input_exclusive_usage=inputs.exclusive_usage if has_in else None,
        output_queue_length=out.output_queue_length,
        input_queue_length=inputs.input_queue_length,
        overdraft_buffers=out.overdraft_buffers,
    )


def job_metrics(tasks: dict[str, list[Task]]) -> dict[str, list[TaskMetrics]]:
    """Every subtask's snapshot, by vertex name, in subtask order."""
    return {vertex: [task_metrics(t) for t in group] for vertex, group in tasks.items()}
