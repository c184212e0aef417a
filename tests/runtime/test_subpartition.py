"""Subpartitions: the interface readers use, proven by plugging in a second implementation.

Gates, local channels and connections reach a subpartition only through ``ResultSubpartition``.
To show that a blocking or hybrid subpartition can plug in without touching them, these tests
swap the pipelined subpartition of a real partition for one that keeps its data until the producer
finishes (a blocking exchange's reading rule, kept in memory) and read it through the real gate,
locally and over real credit-based and tcp connections. The environment's teardown then proves
every segment came back.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable

import pytest

from bpmon.runtime.buffers import Buffer
from bpmon.runtime.gate import InputGate
from bpmon.runtime.network import NetworkEnvironment
from bpmon.runtime.partition import ResultPartition
from bpmon.runtime.subpartition import (
    END_OF_PARTITION,
    ChannelEvent,
    PipelinedSubpartition,
    ResultSubpartition,
    SubpartitionReader,
)

Env = Callable[..., NetworkEnvironment]
Drain = Callable[[NetworkEnvironment, InputGate], tuple[list[object], list[int]]]


class ReadableWhenFinished(ResultSubpartition):
    """Holds every buffer until end-of-partition, then offers them all in order."""

    __slots__ = ("_held", "_readable", "backlog", "index", "partition", "queued_bytes", "reader")

    def __init__(self, partition: ResultPartition, index: int) -> None:
        self.partition = partition
        self.index = index
        self.reader: SubpartitionReader | None = None
        self._held: list[Buffer | ChannelEvent] = []
        self._readable: deque[Buffer | ChannelEvent] = deque()
        self.backlog = 0
        self.queued_bytes = 0

    def __len__(self) -> int:
        return len(self._readable)

    def connect(self, reader: SubpartitionReader) -> None:
        self.reader = reader

    def add(self, item: Buffer | ChannelEvent) -> None:
        self._held.append(item)
        if item is not END_OF_PARTITION:
            return
        for held in self._held:
            if isinstance(held, Buffer):
                self.backlog += 1
                self.queued_bytes += held.size
        self._readable.extend(self._held)
        self._held = []
        if self.reader is not None:
            self.reader.notify_data_available()

    def peek(self) -> Buffer | ChannelEvent | None:
        return self._readable[0] if self._readable else None

    def poll(self) -> Buffer | ChannelEvent | None:
        if not self._readable:
            return None
        item = self._readable.popleft()
        if isinstance(item, Buffer):
            self.backlog -= 1
            self.queued_bytes -= item.size
        return item

    def release(self) -> None:
        for item in [*self._held, *self._readable]:
            if isinstance(item, Buffer):
                item.recycle()
        self._held, self._readable = [], deque()


def test_a_partition_reaches_its_pipelined_subpartitions_through_the_interface(
    make_env: Env,
) -> None:
    env = make_env(task_managers=1)
    partition = env.create_partition(0, 3, "p")
    assert all(isinstance(sub, PipelinedSubpartition) for sub in partition.subpartitions)
    assert all(isinstance(sub, ResultSubpartition) for sub in partition.subpartitions)
    assert [sub.index for sub in partition.subpartitions] == [0, 1, 2]


@pytest.mark.parametrize(
    ("task_managers", "flow_control"), [(1, "credit"), (2, "credit"), (2, "tcp")]
)
def test_a_gate_reads_another_subpartition_kind_locally_and_remotely(
    make_env: Env, drain: Drain, task_managers: int, flow_control: str
) -> None:
    env = make_env(task_managers=task_managers, flow_control=flow_control, segment_size=256)
    partition = env.create_partition(0, 1, "p")
    partition.subpartitions[0] = ReadableWhenFinished(partition, 0)
    gate = env.create_gate(task_managers - 1, [(partition, 0)], "g")
    emit = partition.writer(100)
    for record in range(12):  # 1200 bytes: five buffers of 256 or less
        emit(record, 0)
    partition.flush_all()
    assert drain(env, gate) == ([], [])  # nothing readable before the producer finished
    assert not gate.is_available

    partition.finish()
    records: list[object] = []
    for _ in range(20):  # each drain recycles, which returns credit and lets more arrive
        got, _ = drain(env, gate)
        records += got
        if gate.is_finished:
            break
    assert records == list(range(12))
    assert gate.is_finished
