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

A subtask's *backpressure* is building the same way: its backpressured share of time (the live
view's, over a sliding window) risen by :data:`RISE` over the window and not yet :data:`FULL`.
With Flink's flushing a writer keeps filling its open buffer, so a source can read a full output
pool and still be only LOW for seconds, until its open buffers fill and it waits for new ones.

A pool can also pause for seconds while backpressure still builds: behind a remote channel the
receiver's buffers first fill with the small slices of early flushes, then hold more bytes as
the sender's backlog makes later slices larger, and meanwhile the sender's output pool stays
where it is. So a job is also still building while a subtask is *saturated and queued* (its
input pool full and it busy at least :data:`BUSY`) and none of its producer vertices is *held*
yet (no subtask of any of them HIGH): the backlog in front of the bottleneck has not reached its
producers yet. A subtask with a full input pool whose busy share is still *rising* below
:data:`BUSY` counts the same way: the live busy share is an average over a sliding window that
starts at zero, so a saturated subtask reads below :data:`BUSY` for its first seconds (on a busy
machine, past the end of the warm-up) and cannot yet be told from one that waits on something
else; once its share stops rising, it is one or the other.

Once one producer is held, the others count through their own pools and backpressure: an input
with room to spare (a light side of a join) never holds, and must not keep the wait going. A
producer that stays LOW (a small excess) keeps it going until the limit.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Iterable, Sequence

from bpmon.model.values import SubtaskStatus, VertexStatus

WINDOW = 9
"""Snapshots looked at: two seconds' worth, at the watch's four a second."""
EDGE = 3
"""Readings averaged at each end of the window."""
RISE = 0.08
"""Least rise over the window that counts as filling: about one buffer of a pool of 12."""
FULL = 0.9
"""Usage from which a pool counts as full (the first vertex's backpressure has built)."""
BUSY = 0.9
"""Busy ratio from which a subtask with a full input pool counts as saturated."""
BUSY_RISE = 0.02
"""Least rise of a queued subtask's busy share over the window that counts as still climbing
towards :data:`BUSY` (an average over a few seconds converges by more than this in two)."""


class PoolTrend:
    """The last :data:`WINDOW` readings of every subtask's output and input pool usage and of its
    backpressured share of time."""

    def __init__(self) -> None:
        self._seen: dict[tuple[str, int, str], deque[float]] = {}
        self._snapshots = 0
        self._unheld: list[tuple[str, int]] = []
        self._climbing: list[tuple[str, int]] = []

    def add(self, vertices: Iterable[VertexStatus]) -> None:
        """One live snapshot's vertices."""
        self._snapshots += 1
        vertices = list(vertices)
        queued = _queued_unheld(vertices)
        self._unheld = [(name, sub.index) for name, sub in queued if _busy(sub) >= BUSY]
        self._climbing = [(name, sub.index) for name, sub in queued if _busy(sub) < BUSY]
        for vertex in vertices:
            for sub in vertex.subtasks:
                series = (
                    ("out", sub.metrics.out_pool_usage),
                    ("in", sub.metrics.in_pool_usage),
                    ("backpressure", sub.ratio),
                    ("busy", sub.metrics.busy_ratio),
                )
                for side, usage in series:
                    if usage is None:
                        continue
                    key = (vertex.name, sub.index, side)
                    self._seen.setdefault(key, deque(maxlen=WINDOW)).append(usage)

    def filling(self) -> list[str]:
        """What still builds: pools filling, as ``vertex[index] out`` or ``in``, backpressure
        rising, as ``vertex[index] backpressure``, and saturated queued subtasks whose producers
        are not yet held, as ``vertex[index] queued``; empty once settled."""
        out = []
        for (vertex, index, side), seen in self._seen.items():
            if side == "busy" or len(seen) < WINDOW:
                continue
            if _rise(seen) >= RISE and seen[-1] < FULL:
                out.append(f"{vertex}[{index}] {side}")
        for vertex, index in self._climbing:
            busy = self._seen.get((vertex, index, "busy"), ())
            if len(busy) == WINDOW and _rise(busy) >= BUSY_RISE:
                out.append(f"{vertex}[{index}] queued")
        return out + [f"{vertex}[{index}] queued" for vertex, index in self._unheld]

    def settled(self) -> bool:
        """Two seconds of snapshots were seen and no pool in them is filling."""
        return self._snapshots >= WINDOW and not self.filling()


def _rise(seen: Sequence[float]) -> float:
    """The mean of the last :data:`EDGE` readings less that of the first."""
    values = list(seen)
    return (sum(values[-EDGE:]) - sum(values[:EDGE])) / EDGE


def _queued_unheld(vertices: list[VertexStatus]) -> list[tuple[str, SubtaskStatus]]:
    """Queued subtasks (input pool at least :data:`FULL`) whose producers are not yet held, with
    their vertex's name: saturated when also :data:`BUSY` busy, else climbing or waiting on
    something else, which the busy share's trend tells (:meth:`PoolTrend.filling`).

    Read from the latest snapshot only: none of the subtask's pipelined input vertices has a
    subtask HIGH (a producer across a hybrid or blocking exchange is never held: it spills, or
    writes its file).
    """
    by_name = {v.name: v for v in vertices}
    out = []
    for vertex in vertices:
        producers = [
            by_name[e.source]
            for e in vertex.inputs
            if e.source in by_name and e.exchange == "pipelined"
        ]
        if not producers or not all(_not_yet_held(p) for p in producers):
            continue
        out += [(vertex.name, sub) for sub in vertex.subtasks if _queued(sub)]
    return out


def _queued(sub: SubtaskStatus) -> bool:
    return (sub.metrics.in_pool_usage or 0.0) >= FULL


def _busy(sub: SubtaskStatus) -> float:
    return sub.metrics.busy_ratio or 0.0


def saturated(vertices: Iterable[VertexStatus]) -> list[str]:
    """Subtasks that cannot keep up, as ``vertex[index]``: busy at least :data:`BUSY` with an
    input pool at least :data:`FULL` (a queue that grew until it filled its buffers)."""
    return [
        f"{vertex.name}[{sub.index}]"
        for vertex in vertices
        for sub in vertex.subtasks
        if _queued(sub) and _busy(sub) >= BUSY
    ]


def _not_yet_held(vertex: VertexStatus) -> bool:
    """No subtask of ``vertex`` is HIGH.

    Its output pools are not asked: with Flink's flushing a pool reads full while its writers
    still fill their open buffers, seconds before the first of them waits for a new one.
    """
    return all(sub.level != "HIGH" for sub in vertex.subtasks)
