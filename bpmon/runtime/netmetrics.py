"""Network metrics with Flink's names, readable at any time from any thread.

The values are computed from counters the network objects keep anyway; reading them takes no lock
and stops nothing (CPython reads of ints and lengths are atomic; a value may be one buffer stale).
Definitions follow Flink 1.20's network metrics (``docs/report.md`` shows them per vertex):

- ``outPoolUsage``: Σ used buffers of the task's result partition pools ÷ Σ their sizes; above 1
  while overdraft buffers are out.
- ``inputFloatingBuffersUsage``: per gate, floating buffers holding data
  (``max(0, pool used − floating buffers channels hold empty)``) ÷ the gate pool's size.
- ``inputExclusiveBuffersUsage``: exclusive buffers holding data ÷ all exclusive buffers.
- ``inPoolUsage``: (floating used + exclusive used) ÷ (floating total + exclusive total); local
  channels take no input buffers and are not counted, as in Flink.
- ``outputQueueLength`` / ``inputQueueLength``: buffers queued in subpartitions / channels.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from bpmon.runtime.credit import RemoteInputChannel
from bpmon.runtime.gate import InputGate
from bpmon.runtime.partition import ResultPartition


@dataclass(frozen=True, slots=True)
class OutputMetrics:
    """The output side of one task: all its result partitions."""

    out_pool_usage: float
    output_queue_length: int
    overdraft_buffers: int
    buffers_out: int


@dataclass(frozen=True, slots=True)
class InputMetrics:
    """The input side of one task: all its input gates."""

    in_pool_usage: float
    floating_usage: float
    exclusive_usage: float
    input_queue_length: int


def output_metrics(partitions: Iterable[ResultPartition]) -> OutputMetrics:
    """``outPoolUsage`` and friends over a task's result partitions (0 if it has none)."""
    used = size = queued = overdraft = buffers = 0
    for partition in partitions:
        pool = partition.pool
        used += pool.used
        size += pool.pool_size
        queued += partition.queue_length()
        overdraft += pool.overdraft_in_use
        buffers += partition.buffers_out
    return OutputMetrics(
        out_pool_usage=used / size if size else 0.0,
        output_queue_length=queued,
        overdraft_buffers=overdraft,
        buffers_out=buffers,
    )


def input_metrics(gates: Iterable[InputGate]) -> InputMetrics:
    """``inPoolUsage`` and friends over a task's input gates (0 if it has none)."""
    floating_used = floating_total = exclusive_used = exclusive_total = queued = 0
    for gate in gates:
        remote = [c for c in gate.channels if isinstance(c, RemoteInputChannel)]
        held_empty = sum(c.available_floating for c in remote)
        floating_used += max(0, gate.pool.used - held_empty)
        floating_total += gate.pool.pool_size
        exclusive_used += sum(c.exclusive_used for c in remote)
        exclusive_total += sum(c.initial_credit for c in remote)
        queued += gate.queue_length()
    total = floating_total + exclusive_total
    return InputMetrics(
        in_pool_usage=(floating_used + exclusive_used) / total if total else 0.0,
        floating_usage=floating_used / floating_total if floating_total else 0.0,
        exclusive_usage=exclusive_used / exclusive_total if exclusive_total else 0.0,
        input_queue_length=queued,
    )
