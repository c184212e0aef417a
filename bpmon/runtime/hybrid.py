"""Hybrid subpartitions (FLIP-235): buffers in memory, spilled by a strategy, read from either.

Flink's legacy hybrid shuffle (``HsResultPartition``, ``HsMemoryDataManager``; ``docs/scenario.md``,
the ``hybrid_*`` keys of ``[network]``). Every finished buffer stays in memory; a
partition-wide :class:`HybridMemoryDataManager` asks its spilling strategy what to do on three
events and carries the decision out:

- **selective** (``hybrid-selective``, ``HYBRID_SELECTIVE``): a buffer finished: nothing; a buffer
  consumed: release it; memory usage changed: below ``hybrid_spill_threshold`` (0.7) x pool size
  requested buffers nothing, else spill **and release** ``hybrid_spill_buffer_ratio`` (0.4) x pool
  size buffers, furthest from their subpartition's next-to-consume index first, among those not
  spilled and not consumed;
- **full** (``hybrid-full``, ``HYBRID_FULL``): a buffer finished: once the finished buffers not yet
  spilled reach ``hybrid_full_spill_trigger`` (0.5) x pool size, spill **all** of them (they stay
  in memory); a buffer consumed: nothing; memory usage changed: at ``hybrid_full_release_threshold``
  (0.7) x pool size requested, release ``hybrid_full_release_buffer_ratio`` (0.4) x pool size
  spilled buffers, evenly over the subpartitions, from the head of each;
- both: when the partition closes (its producer finished), spill everything not spilled and release
  everything.

"Requested" is what the partition holds of its pool (``LocalBufferPool.used``), checked after
every buffer it requests; a hybrid pool lends no overdraft buffers (FLINK-31288). A consumer may
read while the producer runs: its :class:`HybridSubpartition` view takes each buffer from memory
while it is there and from the spill file once it was released, never both and never neither. A
buffer read from memory is shared with the reader: its segment goes back to the pool when the
reader has recycled it *and* the manager has released it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from bpmon.runtime.buffers import Buffer
from bpmon.runtime.spill import READ_SEGMENT, SpillCounters, SpillFile, SpillReader
from bpmon.runtime.subpartition import END_OF_PARTITION, ChannelEvent, ResultSubpartition
from bpmon.scenario import NetworkConfig

if TYPE_CHECKING:
    from bpmon.runtime.partition import ResultPartition
    from bpmon.runtime.subpartition import SubpartitionReader


class BufferEntry:
    """One finished buffer of a hybrid subpartition and where it is: memory, disk, or both."""

    __slots__ = ("consumed", "number", "records", "refs", "released", "segment", "size", "sub")

    def __init__(self, sub: HybridSubpartition, number: int, buffer: Buffer) -> None:
        self.sub = sub
        self.number = number
        self.segment = buffer.segment
        self.records = buffer.records
        self.size = buffer.size
        self.consumed = False
        self.released = False  # no longer in memory (its segment goes back once unreferenced)
        self.refs = 0  # readers holding it from memory

    @property
    def spilled(self) -> bool:
        """Whether it is on disk."""
        return self.number in self.sub.spill

    @property
    def in_memory(self) -> bool:
        """Whether a reader may take it from memory."""
        return not self.released

    def recycle(self, segment: int, channel: int) -> None:
        """A reader is done with it (it read it from memory)."""
        self.refs -= 1
        self._give_back()

    def release(self) -> None:
        """Drop it from memory; the segment returns once no reader holds it."""
        if not self.released:
            self.released = True
            self._give_back()

    def _give_back(self) -> None:
        if self.released and self.refs == 0 and self.segment != READ_SEGMENT:
            self.sub.partition.pool.recycle(self.segment, self.sub.index)
            self.segment = READ_SEGMENT


class HybridMemoryDataManager:
    """The memory of one hybrid partition and its spilling strategy (selective or full).

    Args:
        partition: the hybrid result partition.
        full: the full spilling strategy; else selective.
        config: the ratios (``[network] hybrid_*``).
    """

    def __init__(self, partition: ResultPartition, *, full: bool, config: NetworkConfig) -> None:
        self.partition = partition
        self.full = full
        self.config = config
        self.subpartitions: list[HybridSubpartition] = []
        self.closed = False

    @property
    def pool_size(self) -> int:
        """The partition pool's current size."""
        return self.partition.pool.pool_size

    def _unspilled(self) -> list[BufferEntry]:
        return [e for s in self.subpartitions for e in s.entries if e.in_memory and not e.spilled]

    # -- the three events -----------------------------------------------------------------------

    def on_buffer_finished(self) -> None:
        """Full: spill every unspilled buffer once they reach the trigger share of the pool."""
        if not self.full:
            return
        unspilled = self._unspilled()
        if len(unspilled) >= self.config.hybrid_full_spill_trigger * self.pool_size:
            for entry in unspilled:
                entry.sub.spill_entry(entry)

    def on_buffer_consumed(self, entry: BufferEntry) -> None:
        """Selective: a consumed buffer is released at once."""
        if not self.full:
            entry.release()

    def on_memory_usage_changed(self) -> None:
        """After each buffer request: the strategy's global decision, if its threshold is met."""
        requested, size = self.partition.pool.used, self.pool_size
        if self.full:
            if requested >= self.config.hybrid_full_release_threshold * size:
                self._release_spilled_fairly(
                    int(self.config.hybrid_full_release_buffer_ratio * size)
                )
        elif requested >= self.config.hybrid_spill_threshold * size:
            self._spill_by_priority(int(self.config.hybrid_spill_buffer_ratio * size))

    def on_close(self) -> None:
        """The producer finished: spill everything not spilled, release everything."""
        if self.closed:
            return
        self.closed = True
        for sub in self.subpartitions:
            for entry in sub.entries:
                if entry.in_memory and not entry.spilled:
                    sub.spill_entry(entry)
                entry.release()

    # -- decisions --------------------------------------------------------------------------------

    def _spill_by_priority(self, count: int) -> None:
        """Spill and release ``count`` buffers, those furthest from being consumed first."""
        candidates = [
            e
            for s in self.subpartitions
            for e in s.entries
            if e.in_memory and not e.spilled and not e.consumed
        ]
        candidates.sort(key=lambda e: e.number - e.sub.next_buffer, reverse=True)
        for entry in candidates[:count]:
            entry.sub.spill_entry(entry)
            entry.release()

    def _release_spilled_fairly(self, count: int) -> None:
        """Release ``count`` spilled buffers, ``count / subpartitions`` from the head of each."""
        each = count // max(1, len(self.subpartitions))
        for sub in self.subpartitions:
            spilled = [e for e in sub.entries if e.in_memory and e.spilled]
            for entry in spilled[:each]:
                entry.release()


class HybridSubpartition(ResultSubpartition):
    """One consumer's view of a hybrid partition: each buffer from memory or from disk.

    Args:
        partition: the result partition.
        index: the consuming subtask it is for.
        manager: the partition's memory data manager (shared by its subpartitions).
        spill: this subpartition's file.
    """

    partition: ResultPartition

    __slots__ = (
        "_head",
        "_items",
        "_next",
        "backlog",
        "ended",
        "entries",
        "from_disk",
        "from_memory",
        "index",
        "manager",
        "next_buffer",
        "partition",
        "queued_bytes",
        "read_back",
        "reader",
        "spill",
    )

    def __init__(
        self,
        partition: ResultPartition,
        index: int,
        manager: HybridMemoryDataManager,
        spill: SpillFile,
    ) -> None:
        self.partition = partition
        self.index = index
        self.manager = manager
        self.spill = spill
        self.read_back = SpillReader(spill, index)
        manager.subpartitions.append(self)
        self.entries: list[BufferEntry] = []
        self._items: list[BufferEntry | ChannelEvent] = []
        self._next = 0
        self.next_buffer = 0  # the number of the next buffer to consume
        self._head: tuple[Buffer | ChannelEvent, BufferEntry | None] | None = None
        self.backlog = 0
        self.queued_bytes = 0
        self.from_memory = 0
        self.from_disk = 0
        self.ended = False
        self.reader: SubpartitionReader | None = None

    def __len__(self) -> int:
        return len(self._items) - self._next

    def connect(self, reader: SubpartitionReader) -> None:
        """Make ``reader`` the one told when data becomes available."""
        self.reader = reader

    def add(self, item: Buffer | ChannelEvent) -> None:
        """Keep a finished buffer in memory (the strategy may spill it) or queue an event."""
        was_empty = len(self) == 0
        if isinstance(item, Buffer):
            entry = BufferEntry(self, len(self.entries), item)
            self.entries.append(entry)
            self._items.append(entry)
            self.backlog += 1
            self.queued_bytes += item.size
            self.manager.on_buffer_finished()
        else:
            self._items.append(item)
            if item is END_OF_PARTITION:
                self.ended = True
                if all(s.ended for s in self.manager.subpartitions):
                    self.manager.on_close()
        if was_empty and self.reader is not None:
            self.reader.notify_data_available(False)

    def spill_entry(self, entry: BufferEntry) -> None:
        """Write ``entry`` to this subpartition's file (the manager's decision)."""
        if not entry.spilled:
            self.spill.write(entry.number, entry.records, entry.size)

    def peek(self) -> Buffer | ChannelEvent | None:
        """The next item; a buffer comes from memory if it is there, else from disk."""
        if self._head is None and len(self) > 0:
            item = self._items[self._next]
            if isinstance(item, ChannelEvent):
                self._head = (item, None)
            elif item.in_memory:
                item.refs += 1
                item.consumed = True
                self._head = (Buffer(item.segment, item.records, item.size, item, self.index), item)
            else:
                if not item.spilled:
                    raise RuntimeError(f"{self.partition.name}: buffer {item.number} was lost")
                item.consumed = True
                self._head = (self.read_back.read(item.number), None)
        return None if self._head is None else self._head[0]

    def poll(self) -> Buffer | ChannelEvent | None:
        """Take the next buffer or event, or None."""
        item = self.peek()
        if item is None or self._head is None:
            return None
        entry = self._head[1]
        self._head = None
        self._next += 1
        if isinstance(item, Buffer):
            self.next_buffer += 1
            self.backlog -= 1
            self.queued_bytes -= item.size
            if entry is not None:
                self.from_memory += 1
                self.manager.on_buffer_consumed(entry)
            else:
                self.from_disk += 1
        return item

    def spill_counters(self) -> SpillCounters:
        """Bytes spilled and read back, and disk time."""
        return self.spill.counters()

    def leaks(self) -> list[str]:
        """Segments or read buffers not given back, or a file left, after :meth:`release`."""
        held = [e.number for e in self.entries if e.segment != READ_SEGMENT]
        problems = (
            [f"buffers {held} of subpartition {self.index} still hold segments"] if held else []
        )
        return problems + self.read_back.leaks()

    def release(self) -> None:
        """Teardown: drop a peeked buffer, release every buffer in memory, delete the file.

        What was not read is forgotten with it: once released, the subpartition is empty. A
        reader may still look after teardown (a channel of a consumer that never deployed, given
        a floating buffer as its gate closes, announces credit and its sender peeks), and a
        buffer neither in memory nor in the deleted file is no longer lost, just gone.
        """
        if self._head is not None:
            buffer, _ = self._head
            if isinstance(buffer, Buffer):
                buffer.recycle()
            self._head = None
        self._next = len(self._items)
        self.backlog = 0
        self.queued_bytes = 0
        for entry in self.entries:
            entry.release()
        self.spill.close()
