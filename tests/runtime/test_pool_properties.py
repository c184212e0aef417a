"""Property-based proof that buffer pools conserve their segments (DESIGN.md, STYLE.md §9).

A Hypothesis state machine creates and destroys local pools on one NetworkBufferPool, requests
and recycles segments and unpooled (exclusive) segments, and checks after every step that no
segment is lost or duplicated, that sizes, availability and overdraft follow Flink's rules
(``reference/flink-network.md`` §1), and that everything is free again at the end.
"""

from __future__ import annotations

from collections import Counter

from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.stateful import (
    RuleBasedStateMachine,
    initialize,
    invariant,
    precondition,
    rule,
    run_state_machine_as_test,
)

from bpmon.model.errors import InsufficientBuffersError
from bpmon.runtime.local_pool import LocalBufferPool
from bpmon.runtime.network_pool import NetworkBufferPool

SETTINGS = settings(max_examples=100, stateful_step_count=50, deadline=None)


# -- 1. pools -----------------------------------------------------------------------------------


class PoolMachine(RuleBasedStateMachine):
    """One NetworkBufferPool; local pools come and go; segments are requested and recycled."""

    def __init__(self) -> None:
        super().__init__()
        self.network = NetworkBufferPool(0, 256)
        self.live: list[LocalBufferPool] = []
        self.dead: list[LocalBufferPool] = []
        self.subpartitions: dict[LocalBufferPool, int] = {}
        self.held: list[tuple[LocalBufferPool, int, int]] = []  # (pool, segment, channel)
        self.unpooled: list[int] = []
        self.overdraft_allowed: dict[LocalBufferPool, int] = {}

    @initialize(total=st.integers(0, 40))
    def start(self, total: int) -> None:
        self.network = NetworkBufferPool(total, 256, "tm-test")

    def _required(self) -> int:
        return sum(pool.min_size for pool in self.live) + len(self.unpooled)

    def _after_resize(self) -> None:
        """A redistribution may shrink a pool below what it holds: that excess is not overdraft."""
        for pool in self.live:
            self.overdraft_allowed[pool] = max(pool.max_overdraft, pool.overdraft_in_use)

    # -- rules --------------------------------------------------------------------------------

    @rule(
        min_size=st.integers(1, 6),
        headroom=st.integers(0, 8),
        subpartitions=st.integers(0, 3),
        quota=st.integers(0, 4),
        overdraft=st.integers(0, 3),
    )
    def create_pool(
        self, min_size: int, headroom: int, subpartitions: int, quota: int, overdraft: int
    ) -> None:
        fits = self._required() + min_size <= self.network.total_segments
        with self.network.lock:
            try:
                pool = self.network.create_pool(
                    min_size,
                    min_size + headroom,
                    num_subpartitions=subpartitions,
                    max_buffers_per_channel=quota,
                    max_overdraft=overdraft,
                )
            except InsufficientBuffersError:
                assert not fits, "a pool was refused although the minimums fit"
                return
        assert fits, "a pool was created although the minimums exceed the segments"
        self.live.append(pool)
        self.subpartitions[pool] = subpartitions
        self._after_resize()

    @precondition(lambda self: self.live)
    @rule(data=st.data())
    def destroy_pool(self, data: st.DataObject) -> None:
        pool = data.draw(st.sampled_from(self.live))
        with self.network.lock:
            pool.destroy()
        self.live.remove(pool)
        self.dead.append(pool)
        self._after_resize()

    @precondition(lambda self: self.live)
    @rule(data=st.data(), count=st.integers(1, 6))
    def request(self, data: st.DataObject, count: int) -> None:
        """Up to ``count`` non-blocking requests, each for a random subpartition (or none)."""
        pool = data.draw(st.sampled_from(self.live))
        for _ in range(count):
            channel = data.draw(st.integers(-1, self.subpartitions[pool] - 1))
            self._request_one(pool, channel)

    def _request_one(self, pool: LocalBufferPool, channel: int) -> None:
        with self.network.lock:
            available, requested, size = pool.num_available, pool.requested, pool.pool_size
            free, was_available = self.network.available_segments, pool.is_available
            segment = pool.request_memory_segment(channel)
        # Flink's requestMemorySegment: a pooled segment, else an overdraft one once the pool
        # size is reached, within max_overdraft and while the global pool has one.
        if segment is not None:
            self.held.append((pool, segment, channel))
        overdraft = requested >= size and requested - size < pool.max_overdraft and free > 0
        assert (segment is not None) == (available > 0 or overdraft)
        if was_available:  # availability promises a non-overdraft segment
            assert segment is not None and pool.requested <= pool.pool_size
        if segment is not None and available == 0:
            assert pool.requested - pool.pool_size <= pool.max_overdraft

    @precondition(lambda self: self.held)
    @rule(data=st.data(), count=st.integers(1, 4))
    def recycle(self, data: st.DataObject, count: int) -> None:
        """Give back up to ``count`` held segments (to live or destroyed pools)."""
        for _ in range(min(count, len(self.held))):
            pool, segment, channel = self.held.pop(data.draw(st.integers(0, len(self.held) - 1)))
            with self.network.lock:
                pool.recycle(segment, channel)

    @rule(count=st.integers(0, 6))
    def request_unpooled(self, count: int) -> None:
        fits = self._required() + count <= self.network.total_segments
        with self.network.lock:
            free = self.network.available_segments
            try:
                segments = self.network.request_unpooled(count, "channel")
            except InsufficientBuffersError:
                # After redistribution, segments still in use beyond a shrunk pool's size may
                # leave too few free: then the request fails, and only then.
                assert not fits or count > free
                return
        assert fits, "exclusive buffers were granted beyond the segments that exist"
        assert len(segments) == count
        self.unpooled.extend(segments)
        self._after_resize()

    @precondition(lambda self: self.unpooled)
    @rule(data=st.data())
    def recycle_unpooled(self, data: st.DataObject) -> None:
        count = data.draw(st.integers(1, len(self.unpooled)))
        returned, self.unpooled = self.unpooled[:count], self.unpooled[count:]
        with self.network.lock:
            self.network.recycle_unpooled(returned)
        self._after_resize()

    # -- invariants ---------------------------------------------------------------------------

    @invariant()
    def every_segment_is_in_exactly_one_place(self) -> None:
        """Free list, a pool's deque, or the test's hands: each id once, none missing."""
        with self.network.lock:
            places = list(self.network._free)
            for pool in self.live + self.dead:
                places.extend(pool._available)
        places += [segment for _, segment, _ in self.held] + self.unpooled
        counts = Counter(places)
        lost = set(range(self.network.total_segments)) - set(counts)
        duplicated = sorted(s for s, n in counts.items() if n > 1)
        assert not lost and not duplicated, f"lost {sorted(lost)}, duplicated {duplicated}"
        assert len(places) == self.network.total_segments

    @invariant()
    def each_pool_accounts_for_its_segments(self) -> None:
        """requested = available + held, per pool and per subpartition count."""
        for pool in self.live + self.dead:
            mine = [channel for p, _, channel in self.held if p is pool]
            assert pool.requested == pool.num_available + len(mine)
            for channel in range(self.subpartitions[pool]):
                assert pool.subpartition_count(channel) == mine.count(channel)
        assert all(pool.num_available == 0 for pool in self.dead)

    @invariant()
    def availability_follows_flink(self) -> None:
        """Available = a segment in the deque and no full subpartition; overdraft bounded."""
        for pool in self.live:
            quota_reached = any(
                pool.subpartition_count(channel) >= pool.max_buffers_per_channel
                for channel in range(self.subpartitions[pool])
            )
            assert pool.is_available == (pool.num_available > 0 and not quota_reached)
            if pool.requested > pool.pool_size:  # overdraft (or shrunk) segments are out
                assert pool.num_available == 0 and not pool.is_available
            allowed = self.overdraft_allowed[pool]
            assert pool.overdraft_in_use <= allowed
            self.overdraft_allowed[pool] = max(pool.max_overdraft, pool.overdraft_in_use)

    @invariant()
    def sizes_share_exactly_the_spare_segments(self) -> None:
        """Redistribution hands out every spare segment some pool has headroom for, no more."""
        sizes = [pool.pool_size for pool in self.live]
        assert all(p.min_size <= p.pool_size <= p.max_size for p in self.live)
        spare = self.network.total_segments - self._required()
        headroom = sum(pool.max_size - pool.min_size for pool in self.live)
        minimums = sum(pool.min_size for pool in self.live)
        assert sum(sizes) == minimums + max(0, min(spare, headroom))
        assert sum(sizes) <= self.network.total_segments - len(self.unpooled)

    @invariant()
    def no_pool_starves_while_segments_are_free(self) -> None:
        """Eager refill: a pool below its size with nothing available means none are free."""
        for pool in self.live:
            if pool.num_available == 0 and pool.requested < pool.pool_size:
                assert self.network.available_segments == 0, f"{pool.owner} did not refill"

    def teardown(self) -> None:
        with self.network.lock:
            for pool in self.live:
                pool.destroy()
            for pool, segment, channel in self.held:
                pool.recycle(segment, channel)
            self.network.recycle_unpooled(self.unpooled)
            free = sorted(self.network._free)
        assert free == list(range(self.network.total_segments))
        assert self.network.pools == ()
        assert all(pool.requested == 0 for pool in self.live + self.dead)


def test_pools_never_lose_or_duplicate_a_segment() -> None:
    run_state_machine_as_test(PoolMachine, settings=SETTINGS)


def test_exclusive_buffers_are_taken_after_redistribution() -> None:
    """Flink raises the required count and redistributes *before* taking exclusive buffers
    (flink-network.md §1.3), so pools shrunk to make room hand back their spare segments first.
    """
    network = NetworkBufferPool(10, 256)
    with network.lock:
        pool = network.create_pool(1, 10)  # alone: size 10
        taken = [pool.request_memory_segment() for _ in range(5)]
        for segment in taken:
            assert segment is not None
            pool.recycle(segment)  # the pool keeps them: 6 available, 4 free
        exclusive = network.request_unpooled(8, "gate[0]")  # 1 + 8 of 10 required: it fits
        assert len(exclusive) == 8
        assert pool.pool_size == 2 and pool.requested <= 2
