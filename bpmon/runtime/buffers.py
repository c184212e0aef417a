"""Network buffers: a memory segment and the records completed in it, and who takes it back.

Segments are plain integers (their ids): the simulation needs their identity, not their bytes, and
ints make "no segment lost or duplicated" cheap to check. Records are carried by :class:`Buffer`
objects with their exact byte count. The pools that hand segments out are
``network_pool.NetworkBufferPool`` (one per task manager) and ``local_pool.LocalBufferPool`` (one
per result partition and per input gate), a faithful model of Flink 1.20's (research notes,
``flink-network.md`` §1).

Locking: every object of one simulated cluster shares one lock (``NetworkEnvironment.lock``); every
pool and buffer method expects it held, except where a docstring says otherwise. The GIL serialises
Python anyway, so one lock costs little parallelism and makes every transition (a recycle that
wakes a channel that announces credit that lets a sender send) atomic and deadlock-free. The
per-record write path takes no lock at all (see ``partition.py``).
"""

from __future__ import annotations

from typing import Protocol


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
