"""A local pool of segments for one result partition or one input gate: Flink's ``LocalBufferPool``.

It holds at least its minimum and at most its maximum of its task manager's segments (the global
pool, ``network_pool.py``, resizes it), answers availability as Flink defines it, lends overdraft
buffers (FLIP-227), and holds the one function in which a task thread waits for an output buffer
(:meth:`LocalBufferPool.request_buffer_builder_blocking`). Research notes, ``flink-network.md``
§1.4-1.5. Every method expects the network lock held (``buffers.py``).
"""

from __future__ import annotations

import threading
from collections import deque
from typing import Protocol

from bpmon.model.errors import WaitCancelledError
from bpmon.runtime.buffers import BufferListener


class GlobalPool(Protocol):
    """What a local pool needs of its task manager's global pool (``NetworkBufferPool``)."""

    @property
    def lock(self) -> threading.Lock:
        """The network lock."""
        ...

    def request_segment(self) -> int | None:
        """One free segment, or None."""
        ...

    def recycle_segment(self, segment: int) -> None:
        """Take a segment back."""
        ...

    def wait_for_segment(self, pool: LocalBufferPool) -> None:
        """Call ``pool.on_global_pool_available()`` when a segment comes back."""
        ...

    def destroy_pool(self, pool: LocalBufferPool) -> None:
        """Forget a destroyed pool."""
        ...


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
        global_pool: GlobalPool,
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
            raise WaitCancelledError(f"{self.owner}: buffer pool has already been destroyed")
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
            WaitCancelledError: the pool was destroyed (the job is ending) while waiting.
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
