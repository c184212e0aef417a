"""The receiving end of a remote channel, and credit-based flow control (FLINK-7282).

With ``flow_control = "credit"`` a remote channel owns ``buffers_per_channel`` exclusive buffers
(unpooled segments of its task manager's global pool): its initial credit. The sender sends a buffer
only against credit and attaches its backlog; the receiver then wants ``backlog + initial credit``
buffers in all and borrows floating buffers from the gate's pool for the difference (registering
as a listener when the pool is empty). Credit is announced when the unannounced credit goes from
zero to positive. A recycled exclusive buffer returns one credit, unless the channel holds more
buffers than it needs, in which case a floating buffer goes back to the gate's pool instead.

Invariant (checked by the tests): the credit the sender holds equals the free buffers of the
channel, so a sender never sends a buffer the receiver has no room for.

With ``flow_control = "tcp"`` the channel has no exclusive buffers and no credit: a buffer arriving
takes a segment of the gate's pool, and when there is none the whole connection stalls
(``connection.py``).
"""

from __future__ import annotations

from collections import deque
from typing import Protocol

from bpmon.runtime.buffers import Buffer, Recycler
from bpmon.runtime.gate import InputChannel, InputGate
from bpmon.runtime.network_pool import NetworkBufferPool
from bpmon.runtime.subpartition import ChannelEvent, ResultSubpartition, promote_in


class ChannelSender(Protocol):
    """The producer's end of a remote channel, as the channel and its metrics see it.

    A connection's ``SenderView`` (``connection.py``) is the one: it sends ``subpartition`` over
    the connection against the credit the channel announces.
    """

    @property
    def requested(self) -> bool:
        """Whether the consumer asked for the subpartition yet (nothing is sent before)."""
        ...

    @property
    def credit(self) -> int:
        """The credit the sender holds: buffers it may still send."""
        ...

    @property
    def subpartition(self) -> ResultSubpartition:
        """The producer's subpartition it sends."""
        ...

    def request(self) -> None:
        """The consumer asks for the subpartition, with the channel's initial credit."""
        ...

    def announce_credit(self, credit: int) -> None:
        """The channel has ``credit`` more free buffers for the sender."""
        ...


class RemoteInputChannel(InputChannel):
    """A channel from a producer on another task manager, fed by a ``Connection``.

    Args:
        gate: the consuming gate; its pool holds the floating buffers.
        index: the channel index in the gate.
        global_pool: the consumer's task manager pool, source of the exclusive buffers.
        initial_credit: exclusive buffers (``buffers_per_channel``); 0 under ``tcp``.
    """

    def __init__(
        self, gate: InputGate, index: int, global_pool: NetworkBufferPool, initial_credit: int
    ) -> None:
        super().__init__(gate, index)
        self.initial_credit = initial_credit
        self._global = global_pool
        self._exclusive = global_pool.request_unpooled(initial_credit, f"{gate.name}[{index}]")
        self._floating: list[int] = []
        self._required = initial_credit
        self._waiting_floating = False
        self.unannounced_credit = 0
        self._queue: deque[Buffer | ChannelEvent] = deque()
        self.queued_bytes = 0
        self.queued_buffers = 0  # kept as a count: other threads read it while data arrives
        self.sender: ChannelSender | None = None  # bound by the connection that feeds it
        self.released = False

    def request_subpartition(self) -> None:
        """The partition request: the sender may send from now on, against the initial credit
        (it travels as the request does: after the link's latency)."""
        if self.sender is not None and not self.sender.requested:
            self.sender.request()

    # -- buffers held -----------------------------------------------------------------------

    @property
    def available_buffers(self) -> int:
        """Free buffers (exclusive + floating) the channel can receive into: its total credit."""
        return len(self._exclusive) + len(self._floating)

    @property
    def available_exclusive(self) -> int:
        """Free exclusive buffers."""
        return len(self._exclusive)

    @property
    def available_floating(self) -> int:
        """Floating buffers borrowed from the gate and not yet used."""
        return len(self._floating)

    @property
    def exclusive_used(self) -> int:
        """Exclusive buffers holding data (Flink's ``exclusiveBuffersUsed``)."""
        return max(0, self.initial_credit - len(self._exclusive))

    # -- receiving (the connection calls these, lock held) ----------------------------------

    def on_buffer(self, records: list[object], size: int, backlog: int) -> bool:
        """A buffer arrives; False (tcp only) when there is no segment to receive it into."""
        recycler: Recycler
        if self.initial_credit > 0:
            segment, recycler = self._take_buffer()
        else:
            taken = self.gate.pool.request_memory_segment()
            if taken is None:
                return False
            segment, recycler = taken, self.gate.pool
        self.enqueue(Buffer(segment, records, size, recycler, -1))
        if self.initial_credit > 0:
            self.on_sender_backlog(backlog)
        return True

    def _take_buffer(self) -> tuple[int, Recycler]:
        if self._floating:
            return self._floating.pop(), self.gate.pool
        if self._exclusive:
            return self._exclusive.pop(), self
        raise RuntimeError(f"{self.gate.name}[{self.index}]: buffer received without credit")

    def enqueue(self, item: Buffer | ChannelEvent) -> None:
        """Queue a received buffer or event (a priority event at the head) and tell the gate."""
        if isinstance(item, Buffer):
            self._queue.append(item)
            self.queued_bytes += item.size
            self.queued_buffers += 1
        elif item.priority:
            self._queue.appendleft(item)
        else:
            self._queue.append(item)
        self.gate.notify_channel_non_empty(self, isinstance(item, ChannelEvent) and item.priority)

    def on_event(self, event: ChannelEvent) -> None:
        """An event arrives (events need no buffer and no credit)."""
        self.enqueue(event)

    def on_sender_backlog(self, backlog: int) -> None:
        """The sender has ``backlog`` buffers queued: hold ``backlog + initial_credit`` buffers."""
        self._required = backlog + self.initial_credit
        self._announce(self._request_floating())

    def _request_floating(self) -> int:
        obtained = 0
        pool = self.gate.pool
        while not self._waiting_floating and self.available_buffers < self._required:
            segment = pool.request_memory_segment()
            if segment is None:
                self._waiting_floating = pool.add_listener(self)
                if not self._waiting_floating:  # a segment appeared meanwhile: retry
                    continue
                break
            self._floating.append(segment)
            obtained += 1
        return obtained

    def notify_buffer_available(self, segment: int) -> bool:
        """The gate's pool offers a floating buffer we waited for; keep it if still needed."""
        self._waiting_floating = False
        if self.released or self.available_buffers >= self._required:
            return False
        self._floating.append(segment)
        self._announce(1 + self._request_floating())
        return True

    def _announce(self, credit: int) -> None:
        if credit <= 0:
            return
        self.unannounced_credit += credit
        if self.unannounced_credit == credit and self.sender is not None:
            announced, self.unannounced_credit = self.unannounced_credit, 0
            self.sender.announce_credit(announced)

    # -- reading (the consuming task) -------------------------------------------------------

    def poll(self) -> Buffer | ChannelEvent | None:
        """Take the next received buffer or event."""
        if not self._queue:
            return None
        item = self._queue.popleft()
        if isinstance(item, Buffer):
            self.queued_bytes -= item.size
            self.queued_buffers -= 1
        return item

    def has_data(self) -> bool:
        """True when a received buffer or event waits."""
        return bool(self._queue)

    def peek(self) -> Buffer | ChannelEvent | None:
        """The next received buffer or event, left in place."""
        return self._queue[0] if self._queue else None

    def queue_length(self) -> int:
        """Received buffers not read yet."""
        return self.queued_buffers

    def queued_input_bytes(self) -> int:
        """Bytes of the received buffers not read yet."""
        return self.queued_bytes

    def upstream(self) -> ResultSubpartition | None:
        """The producer's subpartition, on the other task manager (its sender's)."""
        return self.sender.subpartition if self.sender is not None else None

    def promote_barrier(self, checkpoint_id: int) -> int | None:
        """A received aligned barrier of ``checkpoint_id`` to the head, as a priority event."""
        found = promote_in(self._queue, checkpoint_id)
        if found is not None:
            self.gate.notify_channel_non_empty(self, priority=True)
        return found

    def buffers_in_use(self) -> int:
        """Received buffers not read yet plus the sender's announced backlog, as Flink's
        ``getBuffersInUseCount`` (queued + required - initial credit)."""
        return self.queued_buffers + max(0, self._required - self.initial_credit)

    def recycle(self, segment: int, channel: int = -1) -> None:
        """An exclusive buffer was read: one more credit, or one floating buffer goes back."""
        if self.released:
            self._global.recycle_unpooled([segment])
            return
        self._exclusive.append(segment)
        if self.available_buffers > self._required and self._floating:
            self.gate.pool.recycle(self._floating.pop())
        else:
            self._announce(1)

    def release(self) -> None:
        """Recycle queued buffers, return exclusive and floating buffers (teardown)."""
        if self.released:
            return
        self.released = True
        while self._queue:
            item = self.poll()
            if isinstance(item, Buffer):
                item.recycle()
        self.gate.pool.remove_listener(self)
        for segment in self._floating:
            self.gate.pool.recycle(segment)
        self._floating.clear()
        self._global.recycle_unpooled(self._exclusive)
        self._exclusive = []
