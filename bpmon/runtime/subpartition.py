"""Subpartitions: what one consuming subtask reads of a result partition, and what travels in it.

A result partition (``partition.py``) has one subpartition per consuming subtask. Through the
:class:`ResultSubpartition` interface its reader takes finished buffers and events in order;
:class:`PipelinedSubpartition` is the streaming implementation (Flink's ``PipelinedSubpartition``:
in memory, read while it is written). Events (end of partition, checkpoint barriers) travel in
order with the buffers and take no buffer; a priority event (an unaligned barrier) overtakes the
buffers queued before it.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections import deque
from dataclasses import dataclass, replace
from typing import Protocol

from bpmon.runtime.buffers import Buffer
from bpmon.runtime.spill import SpillCounters


@dataclass(frozen=True, slots=True)
class ChannelEvent:
    """An event travelling with the data: ``end-of-partition`` or a checkpoint ``barrier``.

    ``priority`` events (unaligned checkpoint barriers) overtake the buffers queued before them.
    A barrier carries when its checkpoint was triggered (monotonic seconds), which is how every
    task measures its start delay and when an aligned barrier times out into an unaligned one.
    """

    kind: str
    checkpoint_id: int = 0
    priority: bool = False
    triggered_at: float = 0.0


END_OF_PARTITION = ChannelEvent("end-of-partition")


class OwningPartition(Protocol):
    """The result partition a subpartition belongs to, as the subpartition's readers know it."""

    @property
    def name(self) -> str:
        """The partition's name, shown in errors and metrics."""
        ...


class SubpartitionReader(Protocol):
    """The consumer side of a subpartition: a local input channel or a connection's sender."""

    def notify_data_available(self, priority: bool = False) -> None:
        """The subpartition went from nothing to read to something to read.

        ``priority``: a priority event (unaligned barrier) was put at the head.
        """
        ...


class ResultSubpartition(ABC):
    """One consuming subtask's share of a result partition (Flink's ``ResultSubpartition``).

    The partition adds finished buffers and events; one reader (a local input channel, or a
    connection's sender view for a remote channel) takes them in order. Readers, gates and
    connections use only this interface, so a subpartition that keeps its data elsewhere (a
    blocking one on disk, a hybrid one in memory or on disk) plugs in without touching them.

    Attributes (kept current by every implementation; metrics read them from any thread):
        index: the consuming subtask this subpartition is for.
        partition: the result partition it belongs to.
        reader: who is told when data becomes available (:meth:`connect`).
        backlog: data buffers queued (events not counted), as Flink announces it to the reader.
        queued_bytes: bytes of the data buffers queued.
        announced_size: the buffer size its consumer announced (buffer debloating, FLIP-183);
            0: whole segments. Only a pipelined subpartition is debloated.
    """

    __slots__ = ()

    index: int
    partition: OwningPartition
    reader: SubpartitionReader | None
    backlog: int
    queued_bytes: int
    announced_size: int = 0

    @abstractmethod
    def __len__(self) -> int:
        """Items (buffers and events) the reader could take now."""

    @abstractmethod
    def connect(self, reader: SubpartitionReader) -> None:
        """Make ``reader`` the one told when data becomes available (it reads from now on)."""

    @abstractmethod
    def add(self, item: Buffer | ChannelEvent) -> None:
        """Queue a finished buffer or an event (the partition, lock held).

        A priority event goes to the head. The reader is notified when the subpartition goes
        from nothing to read to something, and for every priority event.
        """

    @abstractmethod
    def peek(self) -> Buffer | ChannelEvent | None:
        """The next item without taking it."""

    @abstractmethod
    def poll(self) -> Buffer | ChannelEvent | None:
        """Take the next buffer or event, or None; the reader recycles a buffer it took."""

    @abstractmethod
    def release(self) -> None:
        """Give back every buffer still held (teardown, lock held)."""

    def spill_counters(self) -> SpillCounters:
        """Bytes spilled to and read from disk, and disk time (none for an in-memory one)."""
        return SpillCounters()

    def announce_buffer_size(self, size: int) -> None:  # noqa: B027 (a no-op by default)
        """The consumer's debloated buffer size (lock held); only a pipelined one takes it."""

    def promote_barrier(self, checkpoint_id: int) -> int | None:
        """Turn the queued aligned barrier of ``checkpoint_id`` into a priority one at the head
        (its aligned checkpoint timed out, lock held); the bytes it overtook, None when it is not
        queued here."""
        return None

    def leaks(self) -> list[str]:
        """What :meth:`release` failed to give back (files, read buffers); empty when nothing."""
        return []


class PipelinedSubpartition(ResultSubpartition):
    """The queue of finished buffers and events for one consuming subtask, read while written.

    Flink's ``PipelinedSubpartition``: everything stays in memory until its reader takes it.
    """

    __slots__ = (
        "_queue",
        "announced_size",
        "backlog",
        "index",
        "partition",
        "queued_bytes",
        "reader",
    )

    def __init__(self, partition: OwningPartition, index: int) -> None:
        self.partition = partition
        self.index = index
        self._queue: deque[Buffer | ChannelEvent] = deque()
        self.backlog = 0  # data buffers queued (events not counted), as Flink announces it
        self.queued_bytes = 0
        self.reader: SubpartitionReader | None = None
        self.announced_size = 0

    def announce_buffer_size(self, size: int) -> None:
        """The consumer's debloated buffer size: the partition's next buffers hold at most it."""
        self.announced_size = size

    def promote_barrier(self, checkpoint_id: int) -> int | None:
        """Move the aligned barrier of ``checkpoint_id`` to the head as a priority event."""
        found = promote_in(self._queue, checkpoint_id)
        if found is None:
            return None
        if self.reader is not None:
            self.reader.notify_data_available(True)
        return found

    def __len__(self) -> int:
        return len(self._queue)

    def connect(self, reader: SubpartitionReader) -> None:
        """Make ``reader`` the one told when data becomes available."""
        self.reader = reader

    def add(self, item: Buffer | ChannelEvent) -> None:
        """Queue a finished buffer or an event; a priority event goes to the head."""
        was_empty = not self._queue
        priority = False
        if isinstance(item, Buffer):
            self._queue.append(item)
            self.backlog += 1
            self.queued_bytes += item.size
        elif item.priority:
            self._queue.appendleft(item)
            priority = True
        else:
            self._queue.append(item)
        if (was_empty or priority) and self.reader is not None:
            self.reader.notify_data_available(priority)

    def extend_tail(self, tail: Buffer, records: list[object], size: int) -> bool:
        """Add a later slice's records and bytes to ``tail`` if it is still queued, unread, last.

        Flink's reader slices an open buffer when it reads, so bytes flushed twice before a read
        arrive as one buffer (one credit); returns False when ``tail`` was already taken.
        """
        if not self._queue or self._queue[-1] is not tail:
            return False
        tail.records.extend(records)
        tail.size += size
        self.queued_bytes += size
        return True

    def peek(self) -> Buffer | ChannelEvent | None:
        """The next item without taking it."""
        return self._queue[0] if self._queue else None

    def poll(self) -> Buffer | ChannelEvent | None:
        """Take the next buffer or event, or None."""
        if not self._queue:
            return None
        item = self._queue.popleft()
        if isinstance(item, Buffer):
            self.backlog -= 1
            self.queued_bytes -= item.size
        return item

    def release(self) -> None:
        """Recycle every queued buffer (teardown)."""
        while self._queue:
            item = self.poll()
            if isinstance(item, Buffer):
                item.recycle()


def promote_in(queue: deque[Buffer | ChannelEvent], checkpoint_id: int) -> int | None:
    """Move ``queue``'s aligned barrier of ``checkpoint_id`` to its head as a priority event;
    the bytes of the buffers it overtook, None when it holds no such barrier."""
    overtaken = 0
    for position, item in enumerate(queue):
        if isinstance(item, Buffer):
            overtaken += item.size
        elif item.kind == "barrier" and item.checkpoint_id == checkpoint_id:
            if item.priority:
                return None
            del queue[position]
            queue.appendleft(replace(item, priority=True))
            return overtaken
    return None
