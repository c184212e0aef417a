"""Spill files, their reader and blocking subpartitions: real files, read back exactly, nothing
left behind."""

from __future__ import annotations

from pathlib import Path

from bpmon.runtime.blocking import BlockingSubpartition
from bpmon.runtime.buffers import Buffer
from bpmon.runtime.network import NetworkEnvironment
from bpmon.runtime.spill import READ_SEGMENT, SpillFile, SpillReader
from bpmon.runtime.subpartition import END_OF_PARTITION
from bpmon.scenario import NetworkConfig


def test_a_spill_file_reads_back_each_buffer_by_number_and_counts_its_bytes(
    tmp_path: Path,
) -> None:
    spill = SpillFile(tmp_path / "s.spill")
    spill.write(0, [1, 2, 3], 300)
    spill.write(1, ["a" * 50], 40_000)  # more than the frame's own bytes: padded to the size
    assert spill.path.stat().st_size >= 40_300
    assert spill.read(1) == (["a" * 50], 40_000)
    assert spill.read(0) == ([1, 2, 3], 300)
    counters = spill.counters()
    assert (counters.written_bytes, counters.read_bytes) == (40_300, 40_300)
    assert counters.disk_s >= 0
    spill.close()
    spill.close()
    assert not spill.path.exists()


def test_a_buffer_read_back_is_counted_until_recycled_and_the_file_until_removed(
    tmp_path: Path,
) -> None:
    """Blocking and hybrid subpartitions read their spill files through one SpillReader."""
    spill = SpillFile(tmp_path / "s.spill")
    spill.write(0, ["x"], 64)
    reader = SpillReader(spill, channel=2)
    first, again = reader.read(0), reader.read(0)
    assert (first.segment, first.records, first.size, first.channel) == (READ_SEGMENT, ["x"], 64, 2)
    first.recycle()
    assert reader.leaks() == [
        "1 read buffers of subpartition 2 out",
        f"spill file {spill.path} not removed",
    ]
    again.recycle()
    spill.close()
    assert reader.leaks() == []


def test_a_blocking_subpartition_is_readable_only_once_its_producer_finished(
    tmp_path: Path,
) -> None:
    env = NetworkEnvironment(NetworkConfig(task_managers=1), spill_dir=tmp_path)
    partition = env.create_partition(0, 1, "p", exchange="blocking")
    sub = partition.subpartitions[0]
    assert isinstance(sub, BlockingSubpartition)
    notified: list[bool] = []

    class Reader:
        def notify_data_available(self, priority: bool = False) -> None:
            notified.append(priority)

    sub.connect(Reader())
    with env.lock:
        for i in range(3):
            segment = partition.pool.request_memory_segment(0)
            assert segment is not None
            sub.add(Buffer(segment, [i], 100 + i, partition.pool, 0))
        assert partition.pool.used == 0, "a written buffer's segment goes back at once"
        assert (len(sub), sub.peek(), notified) == (0, None, [])
        sub.add(END_OF_PARTITION)
        assert (len(sub), sub.backlog, notified) == (4, 3, [False])
        read = []
        while (item := sub.poll()) is not None:
            if isinstance(item, Buffer):
                read.append((item.records, item.size))
                item.recycle()
            else:
                read.append(item)
    assert read == [([0], 100), ([1], 101), ([2], 102), END_OF_PARTITION]
    assert partition.spill_counters().read_bytes == 303
    env.shutdown()
    assert env.leaks() == []
    assert list(tmp_path.iterdir()) == []


def test_a_read_buffer_never_recycled_is_a_leak(tmp_path: Path) -> None:
    env = NetworkEnvironment(NetworkConfig(task_managers=1), spill_dir=tmp_path)
    partition = env.create_partition(0, 1, "p", exchange="blocking")
    sub = partition.subpartitions[0]
    with env.lock:
        segment = partition.pool.request_memory_segment(0)
        assert segment is not None
        sub.add(Buffer(segment, [1], 10, partition.pool, 0))
        sub.add(END_OF_PARTITION)
        assert isinstance(sub.poll(), Buffer)  # taken and dropped
    env.shutdown()
    assert env.leaks() == ["p: 1 read buffers of subpartition 0 out"]
