"""The global pool of one task manager: Flink's ``NetworkBufferPool``.

A fixed set of memory segments per task manager (research notes, ``flink-network.md`` §1.3), handed
to local pools (one per result partition, one per input gate; ``local_pool.py``) whose sizes are
redistributed among them as pools come and go, plus *unpooled* segments for the exclusive buffers
of remote input channels. Every method expects the network lock held (``buffers.py``).
"""

from __future__ import annotations

import threading

from bpmon.model.errors import ConfigError, InsufficientBuffersError
from bpmon.runtime.local_pool import LocalBufferPool


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
        # The free segments first: redistributing lets a pool below its new size take one, and
        # Flink's request would then wait (up to its exclusive-buffers timeout) for it back.
        taken = [self._free.pop() for _ in range(min(count, len(self._free)))]
        self._redistribute()  # pools above their new size hand back what they do not use
        while len(taken) < count and self._free:
            taken.append(self._free.pop())
        if len(taken) < count:
            self._required -= count
            for segment in taken:
                self.recycle_segment(segment)
            self._redistribute()
            raise InsufficientBuffersError(
                f"{self.name}: {owner} needs {count} exclusive buffers but only "
                f"{len(self._free)} of {self.total_segments} are free now; raise "
                f"network.total_buffers"
            )
        return taken

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
