"""Hybrid partitions (FLIP-235): the spilling strategies as the notes give them; a state machine.

The state machine drives one real hybrid partition (real pool, real spill files) with any mix of a
producer writing whole buffers, readers taking them, and the producer finishing, and checks after
every step: every buffer is consumed exactly once, in order, from memory or from disk (never both,
never neither); the bytes spilled are the bytes of the buffers on disk; the partition never holds
more than its pool; and at the end nothing is left on disk and every segment is back.
"""

from __future__ import annotations

import shutil
import tempfile
from pathlib import Path

import pytest
from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, precondition, rule

from bpmon.runtime.buffers import Buffer
from bpmon.runtime.hybrid import HybridSubpartition
from bpmon.runtime.network import NetworkEnvironment
from bpmon.runtime.partition import ResultPartition
from bpmon.scenario import NetworkConfig

SEGMENT = 256
SUBPARTITIONS = 3


def hybrid_partition(
    folder: Path, exchange: str, subpartitions: int = SUBPARTITIONS
) -> tuple[NetworkEnvironment, ResultPartition]:
    env = NetworkEnvironment(
        NetworkConfig(task_managers=1, segment_size=SEGMENT, total_buffers=64), spill_dir=folder
    )
    return env, env.create_partition(0, subpartitions, "p", exchange=exchange)  # type: ignore[arg-type]


def views(partition: ResultPartition) -> list[HybridSubpartition]:
    subs = [s for s in partition.subpartitions if isinstance(s, HybridSubpartition)]
    assert len(subs) == partition.num_subpartitions
    return subs


def write(partition: ResultPartition, target: int, record: object) -> None:
    """One record that fills one whole buffer, which is finished at once."""
    partition.emit(record, SEGMENT, target)


def read(env: NetworkEnvironment, sub: HybridSubpartition) -> object | None:
    """Take one buffer from ``sub`` and recycle it; its one record, or None."""
    with env.lock:
        item = sub.poll()
        if isinstance(item, Buffer):
            item.recycle()
            return item.records[0]
    return None


# --- the strategies, step by step ------------------------------------------------------------


def test_selective_spills_and_releases_the_buffers_furthest_from_consumption(
    tmp_path: Path,
) -> None:
    env, partition = hybrid_partition(tmp_path, "hybrid-selective", subpartitions=1)
    size = partition.pool.pool_size
    threshold = int(0.7 * size + 0.999)  # requested >= 0.7 x pool size triggers the decision
    for i in range(threshold - 1):
        write(partition, 0, i)
    sub = views(partition)[0]
    assert not any(e.spilled for e in sub.entries)  # below the threshold: nothing
    write(partition, 0, threshold - 1)
    spilled = [e.number for e in sub.entries if e.spilled]
    # decided when the buffer reaching the threshold was requested, among the finished ones:
    # 0.4 x pool size buffers, the newest first (furthest from the next to consume, buffer 0)
    assert len(spilled) == int(0.4 * size)
    assert spilled == list(range(threshold - 1 - len(spilled), threshold - 1))
    assert all(not e.in_memory for e in sub.entries if e.spilled)  # spilled and released
    assert read(env, sub) == 0  # from memory, then released at once (selective)
    assert sub.entries[0].released and sub.from_memory == 1
    env.shutdown()
    assert env.leaks() == []


def test_full_spills_everything_at_half_the_pool_and_keeps_it_in_memory(tmp_path: Path) -> None:
    env, partition = hybrid_partition(tmp_path, "hybrid-full", subpartitions=1)
    size = partition.pool.pool_size
    trigger = int(0.5 * size + 0.999)
    for i in range(trigger - 1):
        write(partition, 0, i)
    sub = views(partition)[0]
    assert not any(e.spilled for e in sub.entries)
    write(partition, 0, trigger - 1)
    assert all(e.spilled and e.in_memory for e in sub.entries)
    assert read(env, sub) == 0
    assert sub.entries[0].in_memory  # consumed: no action under full spilling
    env.shutdown()
    assert env.leaks() == []


@pytest.mark.parametrize("exchange", ["hybrid-selective", "hybrid-full"])
def test_closing_spills_what_is_left_and_releases_all(tmp_path: Path, exchange: str) -> None:
    env, partition = hybrid_partition(tmp_path, exchange, subpartitions=2)
    write(partition, 0, "a")
    write(partition, 1, "b")
    partition.finish()
    subs = views(partition)
    assert all(e.spilled and e.released for s in subs for e in s.entries)
    assert partition.pool.used == 0
    assert [read(env, s) for s in subs] == ["a", "b"]
    assert [(s.from_memory, s.from_disk) for s in subs] == [(0, 1), (0, 1)]
    env.shutdown()
    assert env.leaks() == [] and list(tmp_path.iterdir()) == []


# --- the state machine -----------------------------------------------------------------------


class HybridPartitionMachine(RuleBasedStateMachine):
    """One hybrid partition under any interleaving of writes, reads and the producer finishing."""

    EXCHANGE = "hybrid-selective"

    def __init__(self) -> None:
        super().__init__()
        self.folder = Path(tempfile.mkdtemp(prefix="bpmon-hybrid-test-"))
        self.env, self.partition = hybrid_partition(self.folder, self.EXCHANGE)
        self.subs = views(self.partition)
        self.written: list[list[int]] = [[] for _ in range(SUBPARTITIONS)]
        self.consumed: list[list[int]] = [[] for _ in range(SUBPARTITIONS)]
        self.finished = False
        self.seq = 0

    @precondition(lambda self: not self.finished)
    @rule(sub=st.integers(0, SUBPARTITIONS - 1))
    def produce(self, sub: int) -> None:
        with self.env.lock:
            room = self.partition.pool.is_available
        if room:  # a full pool would block the producer (hard backpressure): not here
            write(self.partition, sub, self.seq)
            self.written[sub].append(self.seq)
            self.seq += 1

    @rule(sub=st.integers(0, SUBPARTITIONS - 1))
    def consume(self, sub: int) -> None:
        record = read(self.env, self.subs[sub])
        if isinstance(record, int):
            self.consumed[sub].append(record)

    @precondition(lambda self: not self.finished)
    @rule()
    def finish(self) -> None:
        self.partition.finish()
        self.finished = True

    @invariant()
    def every_buffer_is_consumed_once_in_order_from_memory_or_disk(self) -> None:
        for written, consumed, sub in zip(self.written, self.consumed, self.subs, strict=True):
            assert consumed == written[: len(consumed)]
            assert sub.from_memory + sub.from_disk == len(consumed)
            for entry in sub.entries[len(consumed) :]:
                assert entry.in_memory or entry.spilled, f"buffer {entry.number} lost"

    @invariant()
    def spilled_bytes_are_the_bytes_on_disk(self) -> None:
        for sub in self.subs:
            on_disk = sum(e.size for e in sub.entries if e.spilled)
            assert sub.spill_counters().written_bytes == on_disk

    @invariant()
    def memory_never_exceeds_the_pool(self) -> None:
        pool = self.partition.pool
        assert pool.used <= pool.pool_size
        assert pool.overdraft_in_use == 0

    def teardown(self) -> None:
        try:
            if not self.finished:
                self.partition.finish()
            for target, sub in enumerate(self.subs):
                while (record := read(self.env, sub)) is not None:
                    if isinstance(record, int):
                        self.consumed[target].append(record)
            assert self.consumed == self.written
            self.env.shutdown()
            assert self.env.leaks() == []
            assert list(self.folder.iterdir()) == [], "nothing is left on disk"
        finally:
            shutil.rmtree(self.folder, ignore_errors=True)


class FullSpillingMachine(HybridPartitionMachine):
    EXCHANGE = "hybrid-full"


TestSelectiveSpilling = HybridPartitionMachine.TestCase
TestSelectiveSpilling.settings = settings(max_examples=60, stateful_step_count=60, deadline=None)
TestFullSpilling = FullSpillingMachine.TestCase
TestFullSpilling.settings = settings(max_examples=60, stateful_step_count=60, deadline=None)
