"""Whether a job's backpressure is still building: buffer pools that keep filling.

A fixed warm-up can end while buffers are still piling up in front of a bottleneck: the first
burst then samples a transient (a source not yet backpressured, a pool half full) and the
diagnosis reads the wrong job. With Flink's flushing, an output buffer is handed on only when it
is full, so how long a job takes to fill its pools depends on its rates, record sizes and
buffer size, not on any fixed delay. :class:`PoolTrend` watches the live snapshots of a watch
and says when no pool is filling any more; the service waits for that, up to a limit,
after the warm-up (``[monitor] settle_s``).

A subtask's output or input pool is *filling* when, over the last two seconds of snapshots, the
mean of its last three readings is at least :data:`RISE` above the mean of its first three, and
it is not yet full (:data:`FULL`). Input pools count too: behind a remote channel the
receiver's buffers fill first, while the sender's output pool still looks calm. Means of three
readings, because a pool that has settled still moves a buffer up and down from one reading to
the next.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Iterable

from bpmon.model import VertexStatus

WINDOW = 9
"""Snapshots looked at: two seconds' worth, at the watch's four a second."""
EDGE = 3
"""Readings averaged at each end of the window."""
RISE = 0.08
"""Least rise over the window that counts as filling: about one buffer of a pool of 12."""
FULL = 0.9
"""Usage from which a pool counts as full (the first vertex's backpressure has built)."""


class PoolTrend:
    """The last :data:`WINDOW` readings of every subtask's output and input pool usage."""

    def __init__(self) -> None:
        self._seen: dict[tuple[str, int, str], deque[float]] = {}
        self._snapshots = 0

    def add(self, vertices: Iterable[VertexStatus]) -> None:
        """One live snapshot's vertices."""
        self._snapshots += 1
        for vertex in vertices:
            for sub in vertex.subtasks:
                pools = (("out", sub.metrics.out_pool_usage), ("in", sub.metrics.in_pool_usage))
                for side, usage in pools:
                    if usage is None:
                        continue
                    key = (vertex.name, sub.index, side)
                    self._seen.setdefault(key, deque(maxlen=WINDOW)).append(usage)

    def filling(self) -> list[str]:
        """The pools still filling, as ``vertex[index] out`` or ``in``; empty once settled."""
        out = []
        for (vertex, index, side), seen in self._seen.items():
            if len(seen) < WINDOW:
                continue
            values = list(seen)
            first, last = sum(values[:EDGE]) / EDGE, sum(values[-EDGE:]) / EDGE
            if last - first >= RISE and values[-1] < FULL:
                out.append(f"{vertex}[{index}] {side}")
        return out

    def settled(self) -> bool:
        """Two seconds of snapshots were seen and no pool in them is filling."""
        return self._snapshots >= WINDOW and not self.filling()
