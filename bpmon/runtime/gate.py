"""Input gates: where a task reads the buffers of one incoming edge, fairly across its channels.

One ``InputGate`` per incoming edge of a subtask, with one channel per producing subtask. A local
channel (producer on the same task manager) reads the producer's subpartition directly: the buffer
is recycled into the *producer's* pool when the consumer is done with it, so backpressure is
natural.
A remote channel (``credit.py``) receives copies through a ``Connection``.

The gate keeps a FIFO of channels that have data (Flink's ``inputChannelsWithData``): polling takes
one buffer from the head channel and re-queues it at the tail if it has more, so channels are served
round robin.
"""

from __future__ import annotations

import threading
from collections import deque

from bpmon.runtime.buffers import Buffer
from bpmon.runtime.local_pool import LocalBufferPool
from bpmon.runtime.subpartition import END_OF_PARTITION, ChannelEvent, ResultSubpartition


class InputChannel:
    """One producing subtask as seen by the consuming gate."""

    def __init__(self, gate: InputGate, index: int) -> None:
        self.gate = gate
        self.index = index
        self.enqueued = False
        self.finished = False

    def request_subpartition(self) -> None:
        """The consuming task started: ask for the data (a remote channel's partition request;
        a local channel reads the subpartition itself once its task runs). Lock held."""

    def poll(self) -> Buffer | ChannelEvent | None:
        """Take the next buffer or event, or None."""
        raise NotImplementedError

    def has_data(self) -> bool:
        """True when :meth:`poll` would return something."""
        raise NotImplementedError

    def peek(self) -> Buffer | ChannelEvent | None:
        """The next buffer or event without taking it."""
        raise NotImplementedError

    def queue_length(self) -> int:
        """Buffers waiting to be read on this channel."""
        raise NotImplementedError

    def queued_input_bytes(self) -> int:
        """Bytes of the buffers waiting to be read on this channel."""
        raise NotImplementedError

    def release(self) -> None:
        """Give back whatever the channel holds (teardown)."""

    def upstream(self) -> ResultSubpartition | None:
        """The producer's subpartition this channel reads (where a debloated size is
        announced); None before a remote channel's connection bound it."""
        return None

    def promote_barrier(self, checkpoint_id: int) -> int | None:
        """A received aligned barrier of ``checkpoint_id`` moved to the head as a priority one
        (lock held); the bytes it overtook, None when none waits here (a local channel's data
        is its producer's, promoted there)."""
        return None

    def buffers_in_use(self) -> int:
        """Buffers this channel's data holds now (Flink's ``getBuffersInUseCount``)."""
        return self.queue_length()


class LocalInputChannel(InputChannel):
    """Reads a producer's subpartition on the same task manager: no copy, no credit."""

    def __init__(self, gate: InputGate, index: int, subpartition: ResultSubpartition) -> None:
        super().__init__(gate, index)
        self.subpartition = subpartition
        subpartition.connect(self)

    def notify_data_available(self, priority: bool = False) -> None:
        """Called by the subpartition when it goes from empty to non-empty (or gets a priority
        event at its head)."""
        self.gate.notify_channel_non_empty(self, priority)

    def poll(self) -> Buffer | ChannelEvent | None:
        """Take the producer's next buffer; the reader recycles it into the producer's pool."""
        return self.subpartition.poll()

    def has_data(self) -> bool:
        """True when the subpartition holds something."""
        return len(self.subpartition) > 0

    def peek(self) -> Buffer | ChannelEvent | None:
        """The producer's next buffer or event, left in place."""
        return self.subpartition.peek()

    def queue_length(self) -> int:
        """Data buffers queued in the producer's subpartition."""
        return self.subpartition.backlog

    def queued_input_bytes(self) -> int:
        """Bytes queued in the producer's subpartition."""
        return self.subpartition.queued_bytes

    def upstream(self) -> ResultSubpartition:
        """The producer's subpartition, read directly."""
        return self.subpartition


class InputGate:
    """The input of one subtask from one upstream vertex.

    Args:
        name: shown in errors and metrics.
        pool: the gate's floating buffer pool.
        condition: what a waiting reader waits on (the task's mailbox), built on the network lock.
    """

    def __init__(self, name: str, pool: LocalBufferPool, condition: threading.Condition) -> None:
        self.name = name
        self.pool = pool
        self.condition = condition
        self.channels: list[InputChannel] = []
        self._with_data: deque[InputChannel] = deque()
        self._blocked: set[int] = set()
        self._parked: list[InputChannel] = []
        self.finished_channels = 0
        self.closed = False
        self.bytes_read = 0
        """Bytes of the data buffers polled so far (buffer debloating's throughput)."""

    def request_partitions(self) -> None:
        """The consuming task starts: every channel asks for its subpartition (Flink's
        ``SingleInputGate.requestPartitions`` at task setup), so nothing is sent to a consumer
        not yet deployed (a hybrid consumer waiting for slots, a batch stage's next region)."""
        with self.condition:
            for channel in self.channels:
                channel.request_subpartition()

    @property
    def is_available(self) -> bool:
        """True when a poll would return data now."""
        return bool(self._with_data)

    @property
    def is_finished(self) -> bool:
        """True once every channel delivered end-of-partition."""
        return self.finished_channels == len(self.channels)

    def notify_channel_non_empty(self, channel: InputChannel, priority: bool = False) -> None:
        """A channel got data: queue it for polling and wake the reader (lock held).

        The reader is woken when the gate goes from nothing to read to something, and for every
        priority event: a task waiting for output space must see an unaligned barrier at once.
        """
        if not channel.enqueued:
            channel.enqueued = True
            self._with_data.append(channel)
            if len(self._with_data) == 1:
                self.condition.notify_all()
                return
        if priority:
            self.condition.notify_all()

    def poll_next(self) -> tuple[Buffer | ChannelEvent, int] | None:
        """The next buffer or event and its channel index, round robin; None if nothing (lock held).

        End-of-partition events are counted here; the caller still sees them.
        """
        with_data = self._with_data
        while with_data:
            channel = with_data.popleft()
            channel.enqueued = False
            if channel.index in self._blocked:
                self._parked.append(channel)
                continue
            item = channel.poll()
            if item is None:
                continue
            if channel.has_data():
                channel.enqueued = True
                with_data.append(channel)
            if item is END_OF_PARTITION:
                channel.finished = True
                self.finished_channels += 1
            elif isinstance(item, Buffer):
                self.bytes_read += item.size
            return item, channel.index
        return None

    def block(self, channel: int) -> None:
        """Stop reading ``channel`` (aligned checkpoint: its barrier arrived first)."""
        self._blocked.add(channel)

    def is_blocked(self, channel: int) -> bool:
        """True while ``channel`` is blocked by an aligned checkpoint (any thread, no lock)."""
        return channel in self._blocked

    def unblock_all(self) -> None:
        """Read every channel again (the checkpoint is aligned)."""
        self._blocked.clear()
        parked, self._parked = self._parked, []
        for channel in parked:
            if channel.has_data():
                self.notify_channel_non_empty(channel)

    def priority_event(self) -> tuple[ChannelEvent, int] | None:
        """Take a priority event (unaligned barrier) waiting at the head of a channel, if any.

        A task that cannot process data (its output is unavailable) still reacts to these.
        """
        for channel in self.channels:
            head = channel.peek()
            if isinstance(head, ChannelEvent) and head.priority:
                channel.poll()
                return head, channel.index
        return None

    def queue_length(self) -> int:
        """Flink's ``inputQueueLength``: buffers waiting in all channels."""
        return sum(channel.queue_length() for channel in self.channels)

    def promote_barrier(self, checkpoint_id: int) -> int:
        """Every received aligned barrier of ``checkpoint_id`` to its channel's head (lock
        held); the bytes they overtook."""
        return sum(c.promote_barrier(checkpoint_id) or 0 for c in self.channels)

    def close(self) -> None:
        """Release every channel and the floating pool, and wake the reader (lock held)."""
        if self.closed:
            return
        self.closed = True
        for channel in self.channels:
            channel.release()
        self._with_data.clear()
        self.pool.destroy()
        self.condition.notify_all()
