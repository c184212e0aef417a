"""Network buffers: the global ``NetworkBufferPool`` of a task manager and its ``LocalBufferPool``s.

A faithful model of Flink 1.20's ``NetworkBufferPool`` / ``LocalBufferPool`` (research notes,
``flink-network.md`` §1): a fixed set of memory segments per task manager, handed to local pools
(one per result partition, one per input gate) whose sizes are redistributed among them, plus
*unpooled* segments for the exclusive buffers of remote input channels.

Segments are plain integers (their ids): the simulation needs their identity, not their bytes, and
ints make "no segment lost or duplicated" cheap to check. Records are carried by :class:`Buffer`
objects with their exact byte count.

Locking: every object of one simulated cluster shares one lock (``NetworkEnvironment.lock``); every
method here expects it held, except where a docstring says otherwise. The GIL serialises Python
anyway, so one lock costs little parallelism and makes every transition (a recycle that wakes a
channel that announces credit that lets a sender send) atomic and deadlock-free. The per-record
write path takes no lock at all (see ``partition.py``).
"""

from __future__ import annotations

import threading
from collections import deque
from typing import Protocol

from bpmon.errors import CancelledError, ConfigError, InsufficientBuffersError


class BufferListener(Protocol):
    """Something waiting for a segment of a pool (a remote channel wanting floating buffers)."""

    def notify_buffer_available(self, segment: int) -> bool:
        """Offer ``segment``; return True to keep it, False to decline (it goes elsewhere)."""
        ...


class Recycler(Protocol):
    """Where a buffer's segment goes back when its reader is done with it."""

    def recycle(self, segment: int, channel: int) -> None:
        """Take ``segment`` back; ``channel`` is the subpartition it was written for, or -1."""
        ...


class Buffer:
    """A network buffer: one segment and the records completed in it, with its exact byte size.

    A record that spans several buffers is carried by the buffer its last byte lands in, so a reader
    sees it exactly when Flink's deserializer would: once its last piece has arrived.
    """

    __slots__ = ("channel", "records", "recycler", "segment", "size")

    def __init__(
        self, segment: int, records: list[object], size: int, recycler: Recycler, channel: int
    ) -> None:
        self.segment = segment
        self.records = records
        self.size = size
        self.recycler = recycler
        self.channel = channel

    def recycle(self) -> None:
        """Return the segment to its owner (lock held)."""
        self.recycler.recycle(self.segment, self.channel)


class NetworkBufferPool:
    """All network segments of one task manager, and the local pools carved out of them.

    Args:
        total_segments: the fixed number of segments (``total_buffers``).
        segment_size: bytes per segment.
        name: shown in errors (``"tm-0"``).
        lock: the network lock shared by every object of the simulated cluster (a new one if
            None); the conditions of its local pools are built on it.
    """

    def __init__(
        self,
        total_segments: int,
        segment_size: int,
        name: str = "tm-0",
        lock: threading.Lock | None = None,
    ) -> None:
        if total_segments < 0:
            raise ConfigError(f"{name}: total_buffers = {total_segments}: must be 0 or more")
        self.name = name
        self.lock = lock or threading.Lock()
        self.total_segments = total_segments
        self.segment_size = segment_size
        self._free: list[int] = list(range(total_segments - 1, -1, -1))
        self._pools: list[LocalBufferPool] = []
        self._required = 0  # Σ pool minimums + unpooled (exclusive) segments handed out
        self._waiting: list[LocalBufferPool] = []

    # -- segments ---------------------------------------------------------------------------

    @property
    def available_segments(self) -> int:
        """Segments not handed to any pool or channel."""
        return len(self._free)

    def grow(self, count: int) -> None:
        """Add ``count`` new segments ("enough for the job" sizing, ``total_buffers = 0``)."""
        self._free.extend(range(self.total_segments + count - 1, self.total_segments - 1, -1))
        self.total_segments += count
        if self._waiting:
            self._redistribute()
            waiting, self._waiting = self._waiting, []
            for pool in waiting:
                pool.on_global_pool_available()

    def request_segment(self) -> int | None:
        """One segment for a local pool, or None if none is free (never blocks)."""
        return self._free.pop() if self._free else None

    def recycle_segment(self, segment: int) -> None:
        """Take a segment back and let pools that waited for one try again."""
        self._free.append(segment)
        if self._waiting:
            waiting, self._waiting = self._waiting, []
            for pool in waiting:
                pool.on_global_pool_available()

    def wait_for_segment(self, pool: LocalBufferPool) -> None:
        """Call ``pool.on_global_pool_available()`` when a segment comes back."""
        if pool not in self._waiting:
            self._waiting.append(pool)

    def request_unpooled(self, count: int, owner: str) -> list[int]:
        """``count`` segments outside any local pool (a remote channel's exclusive buffers)."""
        self._check_required(count, owner, "exclusive buffers of a remote input channel")
        self._required += count
        self._redistribute()  # pools above their new size hand back what they do not use
        if count > len(self._free):
            self._required -= count
            self._redistribute()
            raise InsufficientBuffersError(
                f"{self.name}: {owner} needs {count} exclusive buffers but only "
                f"{len(self._free)} of {self.total_segments} are free now; raise "
                f"network.total_buffers"
            )
        return [self._free.pop() for _ in range(count)]

    def recycle_unpooled(self, segments: list[int]) -> None:
        """Give back segments from :meth:`request_unpooled`."""
        self._required -= len(segments)
        for segment in segments:
            self.recycle_segment(segment)
        self._redistribute()

    # -- local pools ------------------------------------------------------------------------

    def create_pool(
        self,
        min_size: int,
        max_size: int,
        *,
        num_subpartitions: int = 0,
        max_buffers_per_channel: int = 0,
        max_overdraft: int = 0,
        condition: threading.Condition | None = None,
        owner: str = "pool",
    ) -> LocalBufferPool:
        """A local pool of at least ``min_size`` segments, growing up to ``max_size``.

        Raises:
            InsufficientBuffersError: the minimums of all pools would exceed the segments that
                exist; the message states both numbers and the setting to raise.
        """
        if min_size < 1 or max_size < min_size:
            raise ConfigError(f"{owner}: pool sizes min={min_size}, max={max_size} are invalid")
        self._check_required(min_size, owner, "buffer pool")
        pool = LocalBufferPool(
            self,
            min_size,
            max_size,
            num_subpartitions=num_subpartitions,
            max_buffers_per_channel=max_buffers_per_channel,
            max_overdraft=max_overdraft,
            condition=condition,
            owner=owner,
        )
        self._required += min_size
        self._pools.append(pool)
        self._redistribute()
        pool.check_and_update_availability()
        return pool

    def destroy_pool(self, pool: LocalBufferPool) -> None:
        """Forget ``pool`` (called by ``LocalBufferPool.destroy``) and share its headroom."""
        if pool in self._pools:
            self._pools.remove(pool)
            self._required -= pool.min_size
            if pool in self._waiting:
                self._waiting.remove(pool)
            self._redistribute()

    @property
    def pools(self) -> tuple[LocalBufferPool, ...]:
        """The live local pools, in creation order."""
        return tuple(self._pools)

    def _check_required(self, count: int, owner: str, what: str) -> None:
        if self._required + count > self.total_segments:
            raise InsufficientBuffersError(
                f"{self.name}: insufficient network buffers for the {what} of {owner}: "
                f"{self._required + count} needed in all, {self.total_segments} exist; "
                f"raise network.total_buffers to at least {self._required + count} "
                f"(or 0 for enough)"
            )

    def _redistribute(self) -> None:
        """Share the segments beyond the minimums in proportion to each pool's headroom.

        Flink 1.x's algorithm (``NetworkBufferPool.redistributeBuffers``): cumulative rounding so
        the sizes add up exactly.
        """
        spare = self.total_segments - self._required
        if spare <= 0:
            for pool in self._pools:
                pool.set_num_buffers(pool.min_size)
            return
        caps = [min(spare, p.max_size - p.min_size) for p in self._pools]
        total_cap = sum(caps)
        if total_cap == 0:
            for pool in self._pools:
                pool.set_num_buffers(pool.min_size)
            return
        to_share = min(spare, total_cap)
        parts = given = 0
        for pool, cap in zip(self._pools, caps, strict=True):
            parts += cap
            mine = to_share * parts // total_cap - given
            given += mine
            pool.set_num_buffers(pool.min_size + mine)


class LocalBufferPool:
    """A pool of segments for one result partition or one input gate (Flink's LocalBufferPool).

    Availability, as Flink defines it: the pool is available when it holds a segment and no
    subpartition holds ``max_buffers_per_channel`` buffers. Once it has requested ``pool_size``
    segments, up to ``max_overdraft`` more (overdraft, FLIP-227) come from the global pool so that a
    record needing several buffers can be finished; while any are out, the pool stays unavailable,
    and recycling returns them to the global pool first.
    """

    def __init__(
        self,
        global_pool: NetworkBufferPool,
        min_size: int,
        max_size: int,
        *,
        num_subpartitions: int,
        max_buffers_per_channel: int,
        max_overdraft: int,
        condition: threading.Condition | None,
        owner: str,
    ) -> None:
        self.owner = owner
        self.min_size = min_size
        self.max_size = max_size
        self.pool_size = min_size
        self.max_overdraft = max_overdraft
        self.max_buffers_per_channel = max_buffers_per_channel or (1 << 30)
        self._global = global_pool
        self._available: deque[int] = deque()
        self._requested = 0
        self._subpartition_counts = [0] * num_subpartitions
        self._unavailable_subpartitions = 0
        self._listeners: deque[BufferListener] = deque()
        self._is_available = False
        self._destroyed = False
        self.condition = condition or threading.Condition(global_pool.lock)

    # -- state ------------------------------------------------------------------------------

    @property
    def lock(self) -> threading.Lock:
        """The network lock this pool's state is guarded by."""
        return self._global.lock

    @property
    def requested(self) -> int:
        """Segments this pool holds from the global pool (handed out or available)."""
        return self._requested

    @property
    def num_available(self) -> int:
        """Segments in the pool, ready to be handed out."""
        return len(self._available)

    @property
    def used(self) -> int:
        """Flink's ``bestEffortGetNumOfUsedBuffers``: segments handed out."""
        return max(0, self._requested - len(self._available))

    @property
    def overdraft_in_use(self) -> int:
        """Segments beyond the pool size (overdraft, or a pool that was just shrunk)."""
        return max(0, self._requested - self.pool_size)

    @property
    def is_available(self) -> bool:
        """True when a request would return a non-overdraft segment without blocking."""
        return self._is_available

    @property
    def destroyed(self) -> bool:
        """True once the pool was destroyed; later recycles go straight to the global pool."""
        return self._destroyed

    def subpartition_count(self, channel: int) -> int:
        """Buffers of this pool held by subpartition ``channel``."""
        return self._subpartition_counts[channel]

    # -- requests ---------------------------------------------------------------------------

    def request_memory_segment(self, channel: int = -1) -> int | None:
        """A segment for ``channel`` (-1: none), or None; never blocks.

        Takes an overdraft segment from the global pool once ``pool_size`` segments are out.
        """
        if self._destroyed:
            raise CancelledError(f"{self.owner}: buffer pool has already been destroyed")
        if self._available:
            segment = self._available.popleft()
        elif self._requested >= self.pool_size:
            if self._requested - self.pool_size >= self.max_overdraft:
                return None
            overdraft = self._global.request_segment()
            if overdraft is None:
                return None
            segment = overdraft
            self._requested += 1
        else:
            return None
        if channel >= 0:
            count = self._subpartition_counts[channel] + 1
            self._subpartition_counts[channel] = count
            if count == self.max_buffers_per_channel:
                self._unavailable_subpartitions += 1
        self.check_and_update_availability()
        return segment

    def request_buffer_builder_blocking(self, channel: int = -1) -> int:
        """A segment for ``channel``, waiting as long as the pool has none.

        This is the one function in which a task thread waits for an output buffer: the stack
        collectors recognise a thread inside it as (hard) backpressured. The caller holds the
        network lock, which the wait releases.

        Raises:
            CancelledError: the pool was destroyed (the job is ending) while waiting.
        """
        segment = self.request_memory_segment(channel)
        while segment is None:
            self.condition.wait()
            segment = self.request_memory_segment(channel)
        return segment

    def add_listener(self, listener: BufferListener) -> bool:
        """Register ``listener`` for the next recycled segment; False if one is available now."""
        if self._destroyed or self._available:
            return False
        self._listeners.append(listener)
        return True

    def remove_listener(self, listener: BufferListener) -> None:
        """Forget a listener that no longer wants segments."""
        if listener in self._listeners:
            self._listeners.remove(listener)

    # -- recycling --------------------------------------------------------------------------

    def recycle(self, segment: int, channel: int = -1) -> None:
        """Take a segment back from a buffer written for ``channel``.

        Excess segments (overdraft, or a pool shrunk by redistribution) go back to the global
        pool first; otherwise a waiting listener gets it, else the pool keeps it.
        """
        if channel >= 0:
            if self._subpartition_counts[channel] == self.max_buffers_per_channel:
                self._unavailable_subpartitions -= 1
            self._subpartition_counts[channel] -= 1
        if self._destroyed or self._requested > self.pool_size:
            self._requested -= 1
            self._global.recycle_segment(segment)
        elif not self._hand_to_listener(segment):
            self._available.append(segment)
        if not self._destroyed:
            self.check_and_update_availability()

    def _hand_to_listener(self, segment: int) -> bool:
        while self._listeners:
            listener = self._listeners.popleft()
            if listener.notify_buffer_available(segment):
                return True
        return False

    # -- availability and size --------------------------------------------------------------

    def check_and_update_availability(self) -> None:
        """Recompute availability, eagerly fetching one segment from the global pool."""
        # Refill up to pool_size while nothing is available: a segment fetched for a waiting
        # listener (a channel wanting floating buffers) leaves the pool empty, so fetch again.
        while not self._available and self._requested < self.pool_size:
            segment = self._global.request_segment()
            if segment is None:
                self._global.wait_for_segment(self)
                break
            self._requested += 1
            if not self._hand_to_listener(segment):
                self._available.append(segment)
        available = bool(self._available) and self._unavailable_subpartitions == 0
        if available != self._is_available:
            self._is_available = available
            if available:
                self._wake()

    def on_global_pool_available(self) -> None:
        """The global pool got a segment back: try to take one if this pool needs it."""
        if not self._destroyed and not self._is_available:
            self.check_and_update_availability()

    def set_num_buffers(self, size: int) -> None:
        """Resize (redistribution); excess available segments go back to the global pool."""
        self.pool_size = max(self.min_size, min(size, self.max_size))
        while self._requested > self.pool_size and self._available:
            self._requested -= 1
            self._global.recycle_segment(self._available.pop())
        if not self._destroyed:
            self.check_and_update_availability()

    def destroy(self) -> None:
        """Return every available segment, wake every waiter, and forget this pool.

        Segments still out in buffers return to the global pool when they are recycled.
        """
        if self._destroyed:
            return
        self._destroyed = True
        while self._available:
            self._requested -= 1
            self._global.recycle_segment(self._available.pop())
        self._listeners.clear()
        self._global.destroy_pool(self)
        self._wake()

    def _wake(self) -> None:
        self.condition.notify_all()
