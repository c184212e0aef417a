"""Result partitions: exact byte accounting, spanning records, flushing, events, FLIP-227."""

from __future__ import annotations

import sys
import threading
from collections.abc import Callable

import pytest

from bpmon.model.errors import ConfigError
from bpmon.runtime.buffers import Buffer
from bpmon.runtime.gate import InputGate
from bpmon.runtime.network import NetworkEnvironment
from bpmon.runtime.subpartition import ChannelEvent
from tests.waiting import wait_until

Env = Callable[..., NetworkEnvironment]
Drain = Callable[[NetworkEnvironment, InputGate], tuple[list[object], list[int]]]


def test_records_fill_buffers_exactly_and_span_into_the_next(make_env: Env, drain: Drain) -> None:
    env = make_env(task_managers=1, segment_size=1000)
    partition = env.create_partition(0, 1, "p")
    gate = env.create_gate(0, [(partition, 0)], "g")
    emit = partition.writer(300)
    for i in range(7):  # 2100 bytes: buffers of 1000, 1000, then 100 flushed
        emit(i, 0)
    partition.flush_all()
    records, sizes = drain(env, gate)
    assert sizes == [1000, 1000, 100]
    assert records == list(range(7))


def test_a_record_travels_with_the_buffer_its_last_byte_lands_in(
    make_env: Env, drain: Drain
) -> None:
    env = make_env(task_managers=1, segment_size=256)
    partition = env.create_partition(0, 1, "p")
    gate = env.create_gate(0, [(partition, 0)], "g")
    partition.emit("big", 600, 0)  # 256 + 256 + 88
    partition.emit("small", 10, 0)
    with env.lock:
        polled = [gate.poll_next() for _ in range(2)]
    buffers = [p[0] for p in polled if p is not None]
    assert [b.size for b in buffers if isinstance(b, Buffer)] == [256, 256]
    assert [b.records for b in buffers if isinstance(b, Buffer)] == [[], []]
    with env.lock:
        for b in buffers:
            assert isinstance(b, Buffer)
            b.recycle()
    partition.flush_all()
    records, sizes = drain(env, gate)
    assert records == ["big", "small"] and sizes == [98]


def test_unflushed_records_are_not_visible_until_the_flusher_runs(
    make_env: Env, drain: Drain
) -> None:
    env = make_env(task_managers=1)
    partition = env.create_partition(0, 1, "p")
    gate = env.create_gate(0, [(partition, 0)], "g")
    partition.writer(100)("r", 0)
    assert drain(env, gate) == ([], [])
    partition.flush_all()
    assert drain(env, gate) == (["r"], [100])


def test_events_travel_in_order_after_flushing_data(make_env: Env) -> None:
    env = make_env(task_managers=1)
    partition = env.create_partition(0, 1, "p")
    gate = env.create_gate(0, [(partition, 0)], "g")
    partition.writer(100)("before", 0)
    partition.add_event(ChannelEvent("barrier", 1))
    partition.writer(100)("after", 0)
    partition.finish()
    seen: list[object] = []
    with env.lock:
        while (polled := gate.poll_next()) is not None:
            item = polled[0]
            if isinstance(item, Buffer):
                seen.extend(item.records)
                item.recycle()
            else:
                seen.append(item.kind)
    assert seen == ["before", "barrier", "after", "end-of-partition"]
    assert gate.is_finished


def test_priority_barrier_overtakes_queued_buffers_and_counts_their_bytes(
    make_env: Env, drain: Drain
) -> None:
    env = make_env(task_managers=1, segment_size=1000)
    partition = env.create_partition(0, 1, "p")
    gate = env.create_gate(0, [(partition, 0)], "g")
    emit = partition.writer(500)
    for i in range(5):  # two full buffers and 500 bytes being built
        emit(i, 0)
    overtaken = partition.add_event(ChannelEvent("barrier", 7, priority=True))
    assert overtaken == 2500  # 2 full buffers and the flushed 500 bytes, all behind it now
    with env.lock:
        first = gate.poll_next()
    assert first is not None and first[0] == ChannelEvent("barrier", 7, priority=True)
    records, _ = drain(env, gate)
    assert records == [0, 1, 2, 3, 4]


def test_broadcast_writes_every_subpartition(make_env: Env, drain: Drain) -> None:
    env = make_env(task_managers=1)
    partition = env.create_partition(0, 3, "p")
    gates = [env.create_gate(0, [(partition, i)], f"g{i}") for i in range(3)]
    partition.broadcast("w", 40)
    partition.flush_all()
    assert [drain(env, g) for g in gates] == [(["w"], [40])] * 3


def test_zero_byte_records_are_rejected(make_env: Env) -> None:
    env = make_env(task_managers=1)
    partition = env.create_partition(0, 1, "p")
    with pytest.raises(ConfigError, match="0 bytes"):
        partition.emit("r", 0, 0)
    with pytest.raises(ConfigError, match="0 bytes"):
        partition.writer(0)


def _blocked_in(thread: threading.Thread, function: str) -> bool:
    def inside() -> bool:
        frame = sys._current_frames().get(thread.ident or -1)
        while frame is not None:
            if frame.f_code.co_name == function:
                return True
            frame = frame.f_back
        return False

    return wait_until(inside, f"{thread.name} to block in {function}", poll_s=0.01)


@pytest.mark.parametrize("overdraft", [5, 0])
def test_flip_227_overdraft_lets_a_record_finish(
    make_env: Env, drain: Drain, overdraft: int
) -> None:
    """FLIP-227: a pool is exhausted; the next record needs three buffers.

    With overdraft, the record completes on three overdraft buffers and the pool stays
    unavailable until they are recycled. Without, the writer blocks in the named function.
    """
    env = make_env(
        task_managers=1,
        segment_size=1000,
        max_overdraft_buffers_per_gate=overdraft,
        total_buffers=40,
    )
    partition = env.create_partition(0, 1, "p")  # pool: min 2, max 1*2+8 = 10
    gate = env.create_gate(0, [(partition, 0)], "g")
    pool = partition.pool
    emit = partition.writer(1000)
    for i in range(pool.pool_size):  # every buffer of the pool filled and queued
        emit(i, 0)
    assert pool.used == pool.pool_size and not pool.is_available
    writer = threading.Thread(target=partition.emit, args=("big", 2500, 0), daemon=True)
    writer.start()
    if overdraft:
        writer.join(timeout=2.0)
        assert not writer.is_alive()  # finished on overdraft buffers
        assert pool.overdraft_in_use == 3
        assert not pool.is_available
        records, _ = drain(env, gate)
        partition.flush_all()
        records += drain(env, gate)[0]
        assert records[-1] == "big"
        assert pool.overdraft_in_use == 0 and pool.is_available
    else:
        assert _blocked_in(writer, "request_buffer_builder_blocking")
        drain(env, gate)  # the consumer reads: buffers come back, the writer goes on
        writer.join(timeout=2.0)
        assert not writer.is_alive()
        partition.flush_all()
        assert drain(env, gate)[0][-1] == "big"
