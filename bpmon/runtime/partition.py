"""Result partitions: where a task writes its records, serialized into network buffers.

One ``ResultPartition`` per outgoing edge of a subtask, with one subpartition per consuming subtask
(Flink's ``BufferWritingResultPartition``); its subpartitions are pipelined (``subpartition.py``),
blocking (``blocking.py``) or hybrid (``hybrid.py``), and only the ``ResultSubpartition``
interface is used to reach them.

Records are carried as objects with their exact serialized size: a record is appended to the
buffer being built for its subpartition while it fits; one larger than the free space fills the
buffer, which is finished, and continues in new ones (it travels with the buffer its last byte
lands in). Buffers are finished when full and before an event. The output flusher
(:meth:`ResultPartition.flush_all`, called by the task every ``buffer_timeout_ms``, so an idle task
still flushes) does by default (``output_flush = "publish"``) what Flink's does on a pipelined
partition: it makes the bytes written so far readable as a *slice* of the open buffer and the
writer keeps filling the same segment, so the open buffer keeps its segment (and counts in
``outPoolUsage``) until it is full. With ``output_flush = "finish"`` it finishes every partly
filled buffer instead: less data is in flight, and backpressure builds sooner. Each slice is read,
sent (one credit, one receiver buffer) and recycled like a buffer; a slice not yet read takes the
bytes of later flushes too (Flink's reader slices at read time, so one unread flush is one buffer).
The segment returns to the pool once the writer finished the buffer and every slice of it was
recycled (:class:`_SharedSegment`). Blocking and hybrid partitions always finish on flush.
Events (end of partition, checkpoint barriers) travel in order with the buffers and take no buffer.

The per-record path (:meth:`ResultPartition.emit`) touches only the builder of its own thread and
takes no lock; the network lock is taken once per buffer.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from bpmon.model.errors import ConfigError
from bpmon.runtime.buffers import Buffer
from bpmon.runtime.local_pool import LocalBufferPool
from bpmon.runtime.spill import SpillCounters
from bpmon.runtime.subpartition import (
    END_OF_PARTITION,
    ChannelEvent,
    PipelinedSubpartition,
    ResultSubpartition,
)

SubpartitionFactory = Callable[["ResultPartition", int], ResultSubpartition]
"""Makes subpartition ``i`` of a partition: pipelined by default, blocking or hybrid otherwise."""


class _SharedSegment:
    """The segment of a buffer read in slices (Flink's reference-counted ``MemorySegment``).

    Every slice holds a reference; the writer holds one until it finishes the buffer. The segment
    goes back to the pool when the last reference goes, whichever that is.
    """

    __slots__ = ("channel", "open", "pool", "refs", "segment")

    def __init__(self, pool: LocalBufferPool, segment: int, channel: int) -> None:
        self.pool = pool
        self.segment = segment
        self.channel = channel
        self.refs = 0
        self.open = True

    def recycle(self, segment: int, channel: int) -> None:
        """A reader is done with one slice (lock held)."""
        self.refs -= 1
        if self.refs == 0 and not self.open:
            self.pool.recycle(segment, channel)

    def close(self) -> None:
        """The writer finished the buffer (lock held)."""
        self.open = False
        if self.refs == 0:
            self.pool.recycle(self.segment, self.channel)


class _Builder:
    """The buffer being written for one subpartition: its segment, records and free bytes.

    One object per subpartition for the partition's whole life (reset, never replaced), so the
    writer closures can hold it directly. ``published`` bytes were already made readable as
    slices; ``tail`` is the last slice queued, which later bytes join while it is unread.
    ``capacity`` is the buffer's size: the whole segment, or less with buffer debloating.
    """

    __slots__ = ("capacity", "free", "published", "records", "segment", "shared", "tail")

    def __init__(self) -> None:
        self.segment: int | None = None
        self.records: list[object] = []
        self.capacity = 0
        self.free = 0
        self.published = 0
        self.shared: _SharedSegment | None = None
        self.tail: Buffer | None = None


class ResultPartition:
    """The output of one subtask towards one downstream vertex.

    Args:
        pool: the partition's local buffer pool (min = subpartitions + 1, max = subpartitions ×
            buffers_per_channel + floating_buffers_per_gate, overdraft per FLIP-227).
        num_subpartitions: one per consuming subtask.
        segment_size: bytes per buffer.
        name: shown in errors and metrics.
        subpartition: makes the subpartitions (pipelined when None).
        publish_on_flush: a flush publishes a slice of each open buffer and keeps filling it, as
            Flink does (pipelined partitions only); else it finishes the buffer.
    """

    def __init__(
        self,
        pool: LocalBufferPool,
        num_subpartitions: int,
        segment_size: int,
        name: str,
        subpartition: SubpartitionFactory | None = None,
        *,
        publish_on_flush: bool = False,
    ) -> None:
        self.pool = pool
        self.name = name
        self.segment_size = segment_size
        self.on_segment_requested: Callable[[], None] | None = None
        """Called (lock held) after each segment the partition takes: a hybrid partition's memory
        data manager decides there whether to spill or release."""
        make = subpartition or PipelinedSubpartition
        self.spills = subpartition is not None
        """Whether its subpartitions keep data on disk (blocking or hybrid)."""
        self.slices = publish_on_flush and not self.spills
        """Whether a flush publishes a slice of an open buffer (else it finishes the buffer)."""
        self.subpartitions: list[ResultSubpartition] = [
            make(self, i) for i in range(num_subpartitions)
        ]
        self._lock = pool.lock
        self._builders = [_Builder() for _ in range(num_subpartitions)]
        self.hard_backpressure: Callable[[bool], None] | None = None
        self.buffers_out = 0
        self.released = False

    @property
    def num_subpartitions(self) -> int:
        """Number of consuming subtasks."""
        return len(self.subpartitions)

    # -- writing (the task thread only) -----------------------------------------------------

    def emit(self, record: object, nbytes: int, target: int) -> None:
        """Write one record of ``nbytes`` serialized bytes to subpartition ``target``.

        May block in the buffer pool (hard backpressure) when a new buffer is needed.
        """
        builder = self._builders[target]
        if builder.free > nbytes > 0:  # a record that fills the buffer exactly finishes it
            builder.free -= nbytes
            builder.records.append(record)
        else:
            self._emit_spanning(record, nbytes, target)

    def writer(self, record_bytes: int) -> Callable[[object, int], None]:
        """A fast ``emit(record, target)`` for records of a fixed size (an operator's output).

        The hot path of the runtime: a closure over the builders, so that writing one record is a
        subtraction and a list append; it takes the spanning path (and the lock) only when the
        record does not fit in the buffer being built.
        """
        self._check_size(record_bytes)
        builders, spanning = self._builders, self._emit_spanning

        def emit(record: object, target: int) -> None:
            builder = builders[target]
            left = builder.free - record_bytes
            if left > 0:
                builder.free = left
                builder.records.append(record)
            else:
                spanning(record, record_bytes, target)

        return emit

    def channel_writer(self, record_bytes: int, target: int) -> Callable[[object], None]:
        """Like :meth:`writer`, bound to one subpartition (a forward edge): ``emit(record)``."""
        self._check_size(record_bytes)
        builder, spanning = self._builders[target], self._emit_spanning

        def emit(record: object) -> None:
            left = builder.free - record_bytes
            if left > 0:
                builder.free = left
                builder.records.append(record)
            else:
                spanning(record, record_bytes, target)

        return emit

    def write_all(self, records: Sequence[object], record_bytes: int, target: int) -> None:
        """Write a list of records of one size to ``target``: whole slices per buffer.

        The same bytes and buffers as emitting them one by one, at a fraction of the cost: the
        task loop uses it when an operator turns a whole input buffer into output records.
        """
        self._check_size(record_bytes)
        builder = self._builders[target]
        done, total = 0, len(records)
        while done < total:
            free = builder.free  # the record that would fill it exactly goes the slow way
            fit = min((free - 1) // record_bytes if free else 0, total - done)
            if fit:
                builder.records.extend(records[done : done + fit])
                builder.free -= fit * record_bytes
                done += fit
            else:
                self._emit_spanning(records[done], record_bytes, target)
                done += 1

    def _check_size(self, nbytes: int) -> None:
        if nbytes <= 0:
            raise ConfigError(
                f"{self.name}: a record of {nbytes} bytes: records have at least 1 byte"
            )

    def broadcast(self, record: object, nbytes: int) -> None:
        """Write one record to every subpartition."""
        for target in range(len(self.subpartitions)):
            self.emit(record, nbytes, target)

    def _emit_spanning(self, record: object, nbytes: int, target: int) -> None:
        self._check_size(nbytes)
        builder = self._builders[target]
        remaining = nbytes
        with self._lock:
            while True:
                if builder.segment is None:
                    self._new_builder(target)
                free = builder.free
                if remaining <= free:
                    builder.records.append(record)
                    builder.free = free - remaining
                    if remaining == free:
                        self._finish(target)
                    return
                remaining -= free
                builder.free = 0
                self._finish(target)

    def _new_builder(self, target: int) -> None:
        """Take a segment for ``target``'s next buffer, blocking while the pool has none."""
        segment = self.pool.request_memory_segment(target)
        if segment is None:
            hook = self.hard_backpressure
            if hook is not None:
                hook(True)
            try:
                segment = self.pool.request_buffer_builder_blocking(target)
            finally:
                if hook is not None:
                    hook(False)
        builder = self._builders[target]
        builder.segment = segment
        builder.capacity = self.subpartitions[target].announced_size or self.segment_size
        builder.free = builder.capacity
        builder.published = 0
        if self.slices:
            builder.shared = _SharedSegment(self.pool, segment, target)
        if self.on_segment_requested is not None:
            self.on_segment_requested()

    def _finish(self, target: int) -> None:
        """Close ``target``'s builder into a buffer and queue it (lock held)."""
        builder = self._builders[target]
        segment = builder.segment
        if segment is None:
            return
        shared = builder.shared
        if shared is not None:
            self._publish(target)
            builder.segment, builder.shared, builder.tail, builder.free = None, None, None, 0
            self.buffers_out += 1
            shared.close()
            return
        records = builder.records
        size = builder.capacity - builder.free
        builder.segment, builder.records, builder.free = None, [], 0
        self.buffers_out += 1
        self.subpartitions[target].add(Buffer(segment, records, size, self.pool, target))

    def _publish(self, target: int) -> None:
        """Make the bytes written to ``target``'s open buffer since the last slice readable.

        They join the last slice while its reader has not taken it (Flink slices at read time),
        else they travel as a new slice of the same segment (lock held).
        """
        builder = self._builders[target]
        shared = builder.shared
        size = builder.capacity - builder.free - builder.published
        if shared is None or size <= 0:
            return
        records = builder.records
        builder.records = []
        builder.published += size
        sub = self.subpartitions[target]
        tail = builder.tail
        if (
            tail is not None
            and isinstance(sub, PipelinedSubpartition)
            and sub.extend_tail(tail, records, size)
        ):
            return
        shared.refs += 1
        builder.tail = Buffer(shared.segment, records, size, shared, target)
        sub.add(builder.tail)

    def flush_all(self) -> None:
        """Make everything written readable (the output flusher).

        Publishing (pipelined only): a slice of each open buffer, which keeps being filled; else
        the open buffers are finished.
        """
        with self._lock:
            for target, builder in enumerate(self._builders):
                if builder.segment is None:
                    continue
                if builder.shared is not None:
                    self._publish(target)
                elif builder.free < builder.capacity:
                    self._finish(target)

    def _finish_all_locked(self) -> None:
        for target, builder in enumerate(self._builders):
            if builder.segment is not None and builder.free < builder.capacity:
                self._finish(target)

    def add_event(self, event: ChannelEvent) -> int:
        """Flush, then send ``event`` to every subpartition; returns the bytes it overtook.

        A priority event (unaligned barrier) jumps ahead of the queued buffers; the bytes it
        overtakes are the in-flight data an unaligned checkpoint must store.
        """
        with self._lock:
            self._finish_all_locked()
            overtaken = 0
            for sub in self.subpartitions:
                if event.priority:
                    overtaken += sub.queued_bytes
                sub.add(event)
            return overtaken

    def finish(self) -> None:
        """Flush and send end-of-partition: the producer is done."""
        self.add_event(END_OF_PARTITION)

    def promote_barrier(self, checkpoint_id: int) -> int:
        """Every subpartition's queued aligned barrier of ``checkpoint_id`` to the head, as a
        priority event (the aligned checkpoint timed out, lock held); the bytes they overtook,
        which the checkpoint now stores as in-flight data."""
        return sum(sub.promote_barrier(checkpoint_id) or 0 for sub in self.subpartitions)

    # -- metrics (any thread) ---------------------------------------------------------------

    def backlog(self, target: int) -> int:
        """Finished data buffers queued for subpartition ``target``."""
        return self.subpartitions[target].backlog

    def queue_length(self) -> int:
        """Flink's ``outputQueueLength``: buffers queued in all subpartitions."""
        return sum(sub.backlog for sub in self.subpartitions)

    def spill_counters(self) -> SpillCounters:
        """Bytes its subpartitions spilled and read back, and their disk time (any thread)."""
        total = SpillCounters()
        for sub in self.subpartitions:
            total += sub.spill_counters()
        return total

    def builder_bytes(self, target: int) -> int:
        """Bytes written to ``target``'s unfinished buffer (readable slices included)."""
        builder = self._builders[target]
        return 0 if builder.segment is None else builder.capacity - builder.free

    def unpublished_bytes(self, target: int) -> int:
        """Bytes written to ``target``'s unfinished buffer that no reader can see yet."""
        builder = self._builders[target]
        if builder.segment is None:
            return 0
        return builder.capacity - builder.free - builder.published

    # -- teardown ---------------------------------------------------------------------------

    def release(self) -> None:
        """Recycle builders and queued buffers and destroy the pool (lock held by caller)."""
        if self.released:
            return
        self.released = True
        for target, builder in enumerate(self._builders):
            if builder.segment is not None:
                segment, shared = builder.segment, builder.shared
                builder.segment, builder.records, builder.free = None, [], 0
                builder.shared, builder.tail = None, None
                if shared is not None:
                    shared.close()  # back once the queued and read slices are recycled
                else:
                    self.pool.recycle(segment, target)
        for sub in self.subpartitions:
            sub.release()
        self.pool.destroy()
