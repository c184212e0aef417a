"""Blocking subpartitions: every buffer written to a real file, read after the producer finished.

Flink's ``BLOCKING`` result partitions (``BoundedBlockingSubpartition``, sort-merge) persist all
the data a producer writes and release it to consumers only once the producer has finished; the
consumer's region is scheduled then (``scheduler.py``). Here each finished buffer goes to the
subpartition's :class:`~bpmon.runtime.spill.SpillFile` and its network segment goes straight back
to the producer's pool, so a blocking producer is never backpressured by its consumer: it waits
for the disk only. Once end-of-partition arrives the subpartition becomes readable, and each read
takes the next buffer back from the file into a read buffer of its own (Flink reads blocking
partitions into the batch-shuffle read memory, not into network buffers), which the reader
recycles like any other.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from bpmon.runtime.buffers import Buffer
from bpmon.runtime.spill import SpillCounters, SpillFile, SpillReader
from bpmon.runtime.subpartition import END_OF_PARTITION, ChannelEvent, ResultSubpartition

if TYPE_CHECKING:
    from bpmon.runtime.partition import ResultPartition
    from bpmon.runtime.subpartition import SubpartitionReader


class BlockingSubpartition(ResultSubpartition):
    """One consumer's share of a blocking partition: a spill file, readable once finished.

    Args:
        partition: the result partition it belongs to.
        index: the consuming subtask it is for.
        spill: its file.
    """

    __slots__ = (
        "_head",
        "_items",
        "_next",
        "_sizes",
        "backlog",
        "finished",
        "index",
        "partition",
        "queued_bytes",
        "read_back",
        "reader",
        "spill",
    )

    def __init__(self, partition: ResultPartition, index: int, spill: SpillFile) -> None:
        self.partition = partition
        self.index = index
        self.spill = spill
        self.read_back = SpillReader(spill, index)
        self._items: list[int | ChannelEvent] = []  # a buffer's number in the file, or an event
        self._sizes: dict[int, int] = {}
        self._next = 0
        self._head: Buffer | ChannelEvent | None = None
        self.finished = False
        self.backlog = 0
        self.queued_bytes = 0
        self.reader: SubpartitionReader | None = None

    def __len__(self) -> int:
        return len(self._items) - self._next if self.finished else 0

    def connect(self, reader: SubpartitionReader) -> None:
        """Make ``reader`` the one told when the data becomes readable."""
        self.reader = reader

    def add(self, item: Buffer | ChannelEvent) -> None:
        """Write a buffer to the file (its segment goes back at once) or note an event.

        End-of-partition makes everything readable and tells the reader.
        """
        if isinstance(item, Buffer):
            number = len(self._sizes)
            self.spill.write(number, item.records, item.size)
            self._sizes[number] = item.size
            self._items.append(number)
            item.recycle()
            return
        self._items.append(item)
        if item is END_OF_PARTITION and not self.finished:
            self.finished = True
            self.backlog = len(self._sizes)
            self.queued_bytes = sum(self._sizes.values())
            if self.reader is not None:
                self.reader.notify_data_available(False)

    def peek(self) -> Buffer | ChannelEvent | None:
        """The next item (a buffer is read from the file once, then held until polled)."""
        if self._head is None and len(self) > 0:
            item = self._items[self._next]
            if isinstance(item, ChannelEvent):
                self._head = item
            else:
                self._head = self.read_back.read(item)
        return self._head

    def poll(self) -> Buffer | ChannelEvent | None:
        """Take the next buffer or event, or None (nothing before the producer finished)."""
        item = self.peek()
        if item is None:
            return None
        self._head = None
        self._next += 1
        if isinstance(item, Buffer):
            self.backlog -= 1
            self.queued_bytes -= item.size
        return item

    def spill_counters(self) -> SpillCounters:
        """Bytes written to and read from the file, and disk time."""
        return self.spill.counters()

    def leaks(self) -> list[str]:
        """Read buffers never recycled, or a file left behind, after :meth:`release`."""
        return self.read_back.leaks()

    def release(self) -> None:
        """Drop a read buffer held for peeking and delete the file (teardown)."""
        if isinstance(self._head, Buffer):
            self._head.recycle()
        self._head = None
        self.spill.close()
