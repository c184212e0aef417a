"""NetworkBufferPool and LocalBufferPool: Flink's sizes, availability, overdraft, redistribution."""

from __future__ import annotations

import pytest

from bpmon.errors import CancelledError, InsufficientBuffersError
from bpmon.runtime.buffers import NetworkBufferPool


def test_pool_gets_its_minimum_and_shares_the_rest_by_headroom() -> None:
    # 20 segments; pools (min 2, max 12) and (min 3, max 8): 15 spare, headroom 10 and 5.
    network = NetworkBufferPool(20, 1024)
    with network.lock:
        a = network.create_pool(2, 12)
        b = network.create_pool(3, 8)
        # 15 spare shared 10:5 -> a gets 2 + 10, b gets 3 + 5: both at their maximum.
        assert (a.pool_size, b.pool_size) == (12, 8)
        c = network.create_pool(4, 14)
        # spare = 20 - 9 = 11, headroom 10, 5, 10 -> cumulative floors 4, 6, 11 -> 4, 2, 5.
        assert (a.pool_size, b.pool_size, c.pool_size) == (6, 5, 9)
        c.destroy()
        assert (a.pool_size, b.pool_size) == (12, 8)


def test_insufficient_buffers_names_the_numbers_and_the_setting() -> None:
    network = NetworkBufferPool(10, 1024, name="tm-1")
    with network.lock:
        network.create_pool(6, 6)
        with pytest.raises(InsufficientBuffersError) as info:
            network.create_pool(5, 9, owner="map (1/2) -> sink")
    message = str(info.value)
    assert "11 needed" in message and "10 exist" in message
    assert "network.total_buffers" in message and "map (1/2) -> sink" in message


def test_exclusive_buffers_beyond_the_pool_fail_clearly() -> None:
    network = NetworkBufferPool(3, 1024)
    with network.lock, pytest.raises(InsufficientBuffersError, match="total_buffers"):
        network.request_unpooled(4, "gate[0]")


def test_empty_pool_is_unavailable_and_refills_from_global() -> None:
    network = NetworkBufferPool(4, 1024)
    with network.lock:
        pool = network.create_pool(1, 2, num_subpartitions=1, max_buffers_per_channel=10)
        assert pool.is_available
        first = pool.request_memory_segment(0)
        second = pool.request_memory_segment(0)
        assert first is not None and second is not None and first != second
        assert not pool.is_available  # pool size 2 reached, nothing left
        assert pool.request_memory_segment(0) is None  # no overdraft configured
        pool.recycle(first, 0)
        assert pool.is_available
        assert pool.used == 1


def test_subpartition_quota_makes_pool_unavailable_but_does_not_stop_requests() -> None:
    network = NetworkBufferPool(20, 1024)
    with network.lock:
        pool = network.create_pool(3, 10, num_subpartitions=2, max_buffers_per_channel=2)
        segments = [pool.request_memory_segment(0), pool.request_memory_segment(0)]
        assert not pool.is_available  # subpartition 0 holds its 2 buffers
        assert pool.num_available > 0
        extra = pool.request_memory_segment(1)  # segments remain: the request still succeeds
        assert extra is not None
        pool.recycle(segments[0], 0)
        assert pool.is_available


def test_overdraft_is_taken_beyond_pool_size_and_returned_first() -> None:
    network = NetworkBufferPool(10, 1024)
    with network.lock:
        pool = network.create_pool(2, 2, num_subpartitions=1, max_overdraft=3)
        held = [pool.request_memory_segment(0) for _ in range(2)]
        overdraft = [pool.request_memory_segment(0) for _ in range(3)]
        assert None not in held and None not in overdraft
        assert pool.overdraft_in_use == 3
        assert pool.request_memory_segment(0) is None  # limit of 3 reached
        assert network.available_segments == 10 - 5
        pool.recycle(held[0], 0)  # returned to the global pool: overdraft goes back first
        assert pool.overdraft_in_use == 2 and network.available_segments == 6
        assert not pool.is_available
        for segment in [held[1], overdraft[0]]:
            pool.recycle(segment, 0)
        assert pool.overdraft_in_use == 0
        assert not pool.is_available  # both pool_size segments still out, none in the pool
        pool.recycle(overdraft[1], 0)
        assert pool.is_available and pool.num_available == 1


def test_overdraft_only_when_global_pool_has_spare_segments() -> None:
    network = NetworkBufferPool(3, 1024)
    with network.lock:
        pool = network.create_pool(3, 3, num_subpartitions=1, max_overdraft=5)
        for _ in range(3):
            assert pool.request_memory_segment(0) is not None
        assert pool.request_memory_segment(0) is None  # best effort: nothing spare


def test_destroyed_pool_wakes_waiters_with_cancellation_and_returns_segments() -> None:
    network = NetworkBufferPool(4, 1024)
    with network.lock:
        pool = network.create_pool(1, 1, num_subpartitions=1)
        segment = pool.request_memory_segment(0)
        assert segment is not None
        pool.destroy()
        with pytest.raises(CancelledError):
            pool.request_buffer_builder_blocking(0)
        pool.recycle(segment, 0)
        assert network.available_segments == 4
        assert network.pools == ()


def test_listener_gets_recycled_segment() -> None:
    class Taker:
        def __init__(self) -> None:
            self.got: list[int] = []

        def notify_buffer_available(self, segment: int) -> bool:
            self.got.append(segment)
            return True

    network = NetworkBufferPool(2, 1024)
    with network.lock:
        pool = network.create_pool(2, 2)
        a, b = pool.request_memory_segment(), pool.request_memory_segment()
        assert a is not None and b is not None
        taker = Taker()
        assert pool.add_listener(taker)
        pool.recycle(a)
        assert taker.got == [a]
        assert pool.num_available == 0
