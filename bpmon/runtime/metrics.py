"""Task metrics with Flink's names: a snapshot of every subtask, readable while the job runs.

Nothing is stopped to read them: the time accounting and rate meters are published by their task
thread for readers, and the network metrics read counters (``netmetrics.py``).

Two views. :func:`job_metrics` is the live one: time shares and rates over the last few seconds
(a sliding window, as Flink's gauges), for a dashboard. :func:`window_metrics` reports exactly an
interval the caller chose: take ``start = counters(job.tasks)`` when a monitoring window begins
and ``end = counters(job.tasks)`` when it ends, and every subtask's busy, idle and backpressured
ms per second and its record and buffer rates cover ``[start, end]`` and nothing else (from the
cumulative totals the accounting keeps). Pool usages and queue lengths are gauges: they are the
values at ``end``, not averages.

A rate-limited source also reports FLIP-33's ``pendingRecords``: the records its schedule called
for and it did not emit (``pacing.Schedule.pending``), as a Kafka source reports its lag, and how
fast that grew (``bpmon_pendingRecordsGrowthPerSecond``): its schedule's rate minus what it
emitted, so output rate plus growth is the rate offered to the job. A source without a rate limit
owes nothing and reports neither (None), nor does any other task.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace

from bpmon.runtime.accounting import AccountTotals, TimeShares, shares_between
from bpmon.runtime.netmetrics import InputMetrics, OutputMetrics, input_metrics, output_metrics
from bpmon.runtime.pacing import Schedule
from bpmon.runtime.scheduler import WaitingForSlots
from bpmon.runtime.spill import SpillCounters
from bpmon.runtime.task import Task


@dataclass(frozen=True, slots=True)
class OperatorRates:
    """One member of a chained task over a window: its records in and out (Flink's operator
    scope counts these too; which member takes the time is for the stack samples to show)."""

    name: str
    records_in_per_s: float
    records_out_per_s: float


@dataclass(frozen=True, slots=True)
class TaskMetrics:
    """One subtask's metrics over the last few seconds (Flink's names in the docstrings)."""

    vertex: str
    index: int
    thread: str
    task_manager: int
    busy_ms_per_s: float  # busyTimeMsPerSecond (NaN for a legacy source, as in Flink)
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
    pending_records: int | None = None  # pendingRecords (rate-limited sources only)
    pending_records_growth_per_s: float | None = None  # bpmon_pendingRecordsGrowthPerSecond
    state: int = 4  # bpmon_taskState: Flink's ExecutionState ordinal (4 = RUNNING)
    spilled_bytes_per_s: float | None = None  # bpmon_spilledBytesPerSecond (blocking, hybrid)
    spill_read_bytes_per_s: float | None = None  # bpmon_spillReadBytesPerSecond
    spill_disk_ms_per_s: float | None = None  # bpmon_spillDiskTimeMsPerSecond
    slot_wait: WaitingForSlots | None = None  # bpmon_slotsMissing etc.: a SCHEDULED task's region
    wait_s: float | None = None  # bpmon_slotWaitSeconds: how long its bulk has waited
    operators: tuple[OperatorRates, ...] = ()  # a chain's members: bpmon_operator.NAME.*
    debloated_buffer_size: int | None = None  # debloatedBufferSize (the least over its gates)

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
            "pendingRecords": None if self.pending_records is None else float(self.pending_records),
            "bpmon_pendingRecordsGrowthPerSecond": self.pending_records_growth_per_s,
            "bpmon_taskState": float(self.state),
            "bpmon_spilledBytesPerSecond": self.spilled_bytes_per_s,
            "bpmon_spillReadBytesPerSecond": self.spill_read_bytes_per_s,
            "bpmon_spillDiskTimeMsPerSecond": self.spill_disk_ms_per_s,
            "debloatedBufferSize": None
            if self.debloated_buffer_size is None
            else float(self.debloated_buffer_size),
        }
        for op in self.operators:
            values |= {
                f"bpmon_operator.{op.name}.numRecordsInPerSecond": op.records_in_per_s,
                f"bpmon_operator.{op.name}.numRecordsOutPerSecond": op.records_out_per_s,
            }
        wait = self.slot_wait
        if wait is not None:
            values |= {
                "bpmon_region": float(wait.region),
                "bpmon_slotsMissing": float(wait.missing),
                "bpmon_regionSlots": float(wait.slots),
                "bpmon_clusterSlots": float(wait.total),
                "bpmon_slotWaitSeconds": self.wait_s,
            }
        return {
            name: value
            for name, value in values.items()
            if value is not None and not math.isnan(value)
        }


@dataclass(frozen=True, slots=True)
class TaskCounters:
    """One subtask at one instant: its cumulative counters and its gauges.

    Two of these (from :func:`counters`) make the metrics of the interval between them.
    """

    vertex: str
    index: int
    thread: str
    task_manager: int
    time: AccountTotals
    """Cumulative idle, soft and hard backpressured seconds, and the instant of the reading."""
    records_in: float
    records_out: float
    out: OutputMetrics | None
    """The output gauges (None for a sink: no result partition); ``buffers_out`` is cumulative."""
    inputs: InputMetrics | None
    """The input gauges (None for a source: no input gate)."""
    schedule: Schedule | None = None
    """Where a rate-limited source stands against its schedule (None for any other task)."""
    state: int = 4
    """Its execution state (Flink's ordinal) at the reading."""
    spill: SpillCounters | None = None
    """What its blocking or hybrid outputs wrote to and read from disk (None: none spill)."""
    slot_wait: WaitingForSlots | None = None
    """While it waits for slots: its region's bulk."""
    members: tuple[tuple[str, int, int], ...] = ()
    """A chained task's members: name, records in and out, cumulative."""
    busy_measured: bool = True
    """False for a legacy source: Flink reports its busy time as NaN."""
    buffer_size: int | None = None
    """With buffer debloating: the size its input gates' buffers are debloated to now (the
    least over its gates; None: off, or a source)."""


def task_counters(task: Task) -> TaskCounters:
    """``task``'s counters and gauges now (any thread)."""
    time = task.account.totals()
    return TaskCounters(
        vertex=task.spec.name,
        index=task.index,
        thread=task.name,
        task_manager=task.task_manager,
        time=time,
        records_in=task.records_in.total,
        records_out=task.records_out.total,
        out=output_metrics([o.partition for o in task.outputs]) if task.outputs else None,
        inputs=input_metrics(task.gates) if task.gates else None,
        schedule=task.limiter.schedule() if task.limiter is not None else None,
        state=int(task.state),
        spill=_spill_of(task),
        slot_wait=task.slot_wait,
        members=task.chain.totals() if task.chain is not None else (),
        busy_measured=not task.legacy_source,
        buffer_size=min((d.size for d in task.debloaters), default=None),
    )


def _spill_of(task: Task) -> SpillCounters | None:
    """The spill counters of ``task``'s non-pipelined outputs, or None when it has none."""
    spilling = [o.partition for o in task.outputs if o.partition.spills]
    if not spilling:
        return None
    total = SpillCounters()
    for partition in spilling:
        total += partition.spill_counters()
    return total


def task_metrics(task: Task) -> TaskMetrics:
    """A snapshot of ``task``'s metrics: time shares and rates over the sliding window.

    ``pendingRecords`` is the lag now; its growth is the schedule's rate minus the records the
    source emitted per second over the sliding window (the lag's derivative).
    """
    c = task_counters(task)
    out = task.records_out.per_second()
    growth = None if c.schedule is None else c.schedule.rate - out
    return _assemble(
        c,
        task.account.shares(),
        task.records_in.per_second(),
        out,
        task.buffers_out.per_second(),
        growth,
    )


def job_metrics(tasks: Mapping[str, Sequence[Task]]) -> dict[str, list[TaskMetrics]]:
    """Every subtask's snapshot, by vertex name, in subtask order (the live, sliding view)."""
    return {vertex: [task_metrics(t) for t in group] for vertex, group in tasks.items()}


# -- metrics over an exact interval -----------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Counters:
    """Every subtask's counters at one instant, by vertex in subtask order."""

    tasks: Mapping[str, Sequence[TaskCounters]]

    @property
    def at(self) -> float:
        """When the reading began: the earliest subtask reading (0 for a job without tasks)."""
        return min((c.time.at for group in self.tasks.values() for c in group), default=0.0)


def counters(tasks: Mapping[str, Sequence[Task]]) -> Counters:
    """Every subtask's counters now: take one when a window begins and one when it ends."""
    return Counters({vertex: [task_counters(t) for t in group] for vertex, group in tasks.items()})


def window_metrics(start: Counters, end: Counters) -> dict[str, list[TaskMetrics]]:
    """Every subtask's metrics over exactly ``[start, end]``, by vertex in subtask order.

    Time shares (busy, idle, soft and hard backpressured ms per second) and rates (records in
    and out, buffers out per second, the growth of ``pendingRecords``) cover the interval between
    the two readings of each subtask; gauges (pool usages, queue lengths, overdraft buffers,
    ``numBuffersOut``, ``pendingRecords``) are the values at ``end``.

    Raises:
        ValueError: the readings are not of the same subtasks, or ``end`` is not later.
    """
    shape = {vertex: [c.thread for c in group] for vertex, group in start.tasks.items()}
    if shape != {vertex: [c.thread for c in group] for vertex, group in end.tasks.items()}:
        raise ValueError("window_metrics: start and end are readings of different jobs")
    return {
        vertex: [_between(a, b) for a, b in zip(start.tasks[vertex], group, strict=True)]
        for vertex, group in end.tasks.items()
    }


def _between(start: TaskCounters, end: TaskCounters) -> TaskMetrics:
    shares = shares_between(start.time, end.time)
    span = shares.window_s
    buffers = (end.out.buffers_out if end.out else 0) - (start.out.buffers_out if start.out else 0)
    metrics = _assemble(
        end,
        shares,
        max(0.0, end.records_in - start.records_in) / span,
        max(0.0, end.records_out - start.records_out) / span,
        max(0, buffers) / span,
        _pending_growth(start.schedule, end.schedule),
    )
    if end.members and span > 0:
        metrics = replace(metrics, operators=_operator_rates(start.members, end.members, span))
    if end.spill is None or span <= 0:
        return metrics
    before = start.spill or SpillCounters()
    return replace(
        metrics,
        spilled_bytes_per_s=(end.spill.written_bytes - before.written_bytes) / span,
        spill_read_bytes_per_s=(end.spill.read_bytes - before.read_bytes) / span,
        spill_disk_ms_per_s=(end.spill.disk_s - before.disk_s) * 1000 / span,
    )


def _operator_rates(
    start: tuple[tuple[str, int, int], ...],
    end: tuple[tuple[str, int, int], ...],
    span: float,
) -> tuple[OperatorRates, ...]:
    """Each chain member's record rates between two readings."""
    before = {name: (a, b) for name, a, b in start}
    rates = []
    for name, records_in, records_out in end:
        in0, out0 = before.get(name, (0, 0))
        rates.append(OperatorRates(name, (records_in - in0) / span, (records_out - out0) / span))
    return tuple(rates)


def _pending_growth(start: Schedule | None, end: Schedule | None) -> float | None:
    """How fast a source's ``pendingRecords`` grew between two readings of its schedule."""
    if start is None or end is None or end.at <= start.at:
        return None
    return (end.pending - start.pending) / (end.at - start.at)


def _assemble(
    c: TaskCounters,
    shares: TimeShares,
    records_in: float,
    records_out: float,
    buffers: float,
    pending_growth: float | None,
) -> TaskMetrics:
    """A subtask's metrics: its gauges from ``c``, shares and rates as given."""
    out, inputs = c.out, c.inputs
    return TaskMetrics(
        vertex=c.vertex,
        index=c.index,
        thread=c.thread,
        task_manager=c.task_manager,
        busy_ms_per_s=shares.busy_ms_per_s if c.busy_measured else math.nan,
        idle_ms_per_s=shares.idle_ms_per_s,
        soft_backpressured_ms_per_s=shares.soft_backpressured_ms_per_s,
        hard_backpressured_ms_per_s=shares.hard_backpressured_ms_per_s,
        backpressured_ms_per_s=shares.backpressured_ms_per_s,
        records_in_per_s=records_in,
        records_out_per_s=records_out,
        buffers_out=out.buffers_out if out else 0,
        buffers_out_per_s=buffers,
        out_pool_usage=out.out_pool_usage if out else None,
        in_pool_usage=inputs.in_pool_usage if inputs else None,
        input_floating_usage=inputs.floating_usage if inputs else None,
        input_exclusive_usage=inputs.exclusive_usage if inputs else None,
        output_queue_length=out.output_queue_length if out else 0,
        input_queue_length=inputs.input_queue_length if inputs else 0,
        overdraft_buffers=out.overdraft_buffers if out else 0,
        pending_records=c.schedule.pending if c.schedule is not None else None,
        pending_records_growth_per_s=pending_growth,
        state=c.state,
        slot_wait=c.slot_wait,
        wait_s=None if c.slot_wait is None else max(0.0, c.time.at - c.slot_wait.since),
        debloated_buffer_size=c.buffer_size,
    )
