"""LocalBufferPool: availability, subpartition quotas, overdraft, destruction and listeners."""

from __future__ import annotations

import pytest

from bpmon.model.errors import WaitCancelledError
from bpmon.runtime.network_pool import NetworkBufferPool


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
        with pytest.raises(WaitCancelledError):
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
