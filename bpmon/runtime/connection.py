"""Connections between task managers: the remote channels from A to B that share one.

A ``Connection`` plays the part of Flink's Netty pipeline for one :class:`ConnectionID`: an ordered
pair of task managers and a connection index. Which channels share one is the deployment's
decision (``deployment.connection_index``): under ``credit`` every channel from A to B (Flink 1.20
keeps one TCP connection per pair of task managers), under ``tcp`` the channels of one intermediate
result from A to B (Flink before 1.5 kept one per remote task manager and intermediate result).
Transfers happen synchronously, under the network lock, in whichever thread made them possible: the
producer finishing a buffer, the consumer returning credit or freeing a buffer, or the link timer
when the bandwidth cap lets the next buffer go. No thread is needed unless a cap or a latency is
set.

- ``credit``: a FIFO of sender views with something to send (Flink's ``PartitionRequestQueue``),
  served round robin; a buffer goes only against credit, events go without. One slow receiver stops
  only its own channel.
- ``tcp``: no credit. Sent data sits on the wire (the socket buffers, ``TCP_WINDOW_SEGMENTS``
  segments' worth) in order; the receiver delivers the head into a buffer of its gate's pool, and
  when that pool is empty it stops reading the whole connection (``autoRead = false``), so every
  channel behind the head (every channel of that result between the two task managers) stalls
  until that gate frees a buffer.
- ``link_bandwidth_mb_s``: each buffer occupies the link for ``size / bandwidth`` seconds; the next
  one waits for the link. The link (:class:`Link`) is one direction between two task managers,
  shared by every connection in that direction, so the cap does not multiply with connections.
- ``latency_ms``: what is sent arrives that much later. Each item on its way is timestamped with
  its arrival (send time + latency) in one FIFO per connection (the latency is constant, so the
  FIFO is in arrival order) and the link timer delivers the head when it is due: a buffer or event
  to the receiving channel, a credit announcement (AddCredit) back to the sender. A channel with
  ``c`` credits then carries at most ``c`` buffers per round trip (2 x latency), as in Flink.
  Under ``tcp`` the data on the wire arrives that much later and its window is freed on arrival.
  At latency 0 nothing is queued and every transfer is synchronous, as without the key.
"""

from __future__ import annotations

import heapq
import threading
from collections import deque
from collections.abc import Callable
from typing import NamedTuple

from bpmon.runtime.buffers import Buffer
from bpmon.runtime.credit import RemoteInputChannel
from bpmon.runtime.subpartition import ChannelEvent, ResultSubpartition


class ConnectionID(NamedTuple):
    """Which connection a remote channel uses (Flink's ``ConnectionID(address, connectionIndex)``,
    seen from the consuming task manager ``dst``)."""

    src: int
    """The producing task manager (the remote address)."""
    dst: int
    """The consuming task manager (whose client factory keeps the connection)."""
    connection_index: int
    """The connection index (``deployment.connection_index``)."""


class _Payload(NamedTuple):
    """A buffer's content on a ``tcp`` wire: its segment went back to the sender already."""

    records: list[object]
    size: int


TCP_WINDOW_SEGMENTS = 1
"""Data a ``tcp`` connection holds on the wire (socket buffers), in segments.

Real socket buffers are larger, but real links carry ~100x the bytes of a simulated job: one
segment keeps the time a stalled connection takes to fill close to what it is on a cluster.
"""


class SenderView:
    """The sender's side of one remote channel (Flink's credit-based view reader)."""

    __slots__ = ("channel", "connection", "credit", "queued", "requested", "subpartition")

    def __init__(
        self,
        connection: Connection,
        subpartition: ResultSubpartition,
        channel: RemoteInputChannel,
        initial_credit: int,
        requested: bool = True,
    ) -> None:
        self.connection = connection
        self.subpartition = subpartition
        self.channel = channel
        self.credit = initial_credit if requested else 0
        self.requested = requested  # the consumer asked for the subpartition: a reader exists
        self.queued = False
        subpartition.connect(self)
        channel.sender = self

    def request(self) -> None:
        """The consumer asks for the subpartition (lock held)."""
        self.connection.request(self)

    def announce_credit(self, credit: int) -> None:
        """The channel announced ``credit`` more buffers (lock held)."""
        self.connection.add_credit(self, credit)

    def notify_data_available(self, priority: bool = False) -> None:
        """The subpartition has something: try to send it."""
        self.connection.reader_available(self)

    def sendable(self, credit_based: bool) -> bool:
        """True when the head of the subpartition may go now (an event, or a buffer with credit)."""
        if not self.requested:
            return False
        head = self.subpartition.peek()
        if head is None:
            return False
        return not credit_based or not isinstance(head, Buffer) or self.credit > 0


class Link:
    """One direction between two task managers, which a bandwidth cap applies to.

    Every connection from ``src`` to ``dst`` sends over it (under ``tcp`` one per exchange), so a
    buffer on one connection delays the next buffer of every other.
    """

    __slots__ = ("bandwidth", "free_at")

    def __init__(self, bandwidth: float) -> None:
        self.bandwidth = bandwidth
        """Bytes per second; 0 for unlimited."""
        self.free_at = 0.0
        """When the buffer being sent has left (monotonic seconds)."""


class _InFlight(NamedTuple):
    """One item on its way over a connection with a latency."""

    due: float
    """When it arrives (monotonic seconds)."""
    view: SenderView
    item: _Payload | ChannelEvent | int
    """A buffer's content or an event for the receiver, or credit for the sender."""
    backlog: int
    """The sender's backlog a buffer carries (0 otherwise)."""


class LinkTimer:
    """One thread that runs callbacks at given times, under the network lock.

    Started on first use (only connections with a bandwidth cap or a latency need it) and stopped
    by the network environment's shutdown.
    """

    def __init__(self, lock: threading.Lock, clock: Callable[[], float], name: str) -> None:
        self._cond = threading.Condition(lock)
        self._clock = clock
        self._name = name
        self._heap: list[tuple[float, int, Callable[[], None]]] = []
        self._seq = 0
        self._thread: threading.Thread | None = None
        self._stopped = False
        self.error: BaseException | None = None

    def call_at(self, when: float, callback: Callable[[], None]) -> None:
        """Run ``callback`` at ``when`` (lock held by the caller)."""
        if self._stopped:
            return
        self._seq += 1
        heapq.heappush(self._heap, (when, self._seq, callback))
        if self._thread is None:
            self._thread = threading.Thread(target=self._run, name=self._name, daemon=True)
            self._thread.start()
        self._cond.notify()

    def stop(self) -> None:
        """Stop the thread and drop pending callbacks (lock NOT held by the caller)."""
        with self._cond:
            self._stopped = True
            self._heap.clear()
            self._cond.notify()
        if self._thread is not None:
            self._thread.join(timeout=2.0)

    @property
    def alive(self) -> bool:
        """True while the timer thread runs."""
        return self._thread is not None and self._thread.is_alive()

    def _run(self) -> None:
        with self._cond:
            try:
                while not self._stopped:
                    self.wait_for_link()
                    now = self._clock()
                    while self._heap and self._heap[0][0] <= now and not self._stopped:
                        heapq.heappop(self._heap)[2]()
            except BaseException as exc:  # a dead timer would freeze its links: say so
                self.error = exc

    def wait_for_link(self) -> None:
        """Wait until the earliest callback is due (the link timer's only waiting point)."""
        if not self._heap:
            self._cond.wait()
            return
        delay = self._heap[0][0] - self._clock()
        if delay > 0:
            self._cond.wait(delay)


class Connection:
    """The remote channels from task manager ``src`` to ``dst`` that share connection ``index``.

    Args:
        credit_based: ``flow_control == "credit"``.
        link: the direction ``src -> dst`` it sends over (its bandwidth cap).
        segment_size: bytes per buffer (sizes the ``tcp`` window).
        clock: monotonic seconds.
        timer: runs delayed sends when the link is busy, and deliveries after the latency.
        index: the connection index (``ConnectionID.index``).
        latency: one-way seconds for a buffer, event or credit announcement; 0 for none.
    """

    def __init__(
        self,
        src: int,
        dst: int,
        *,
        credit_based: bool,
        link: Link,
        segment_size: int,
        clock: Callable[[], float],
        timer: LinkTimer,
        index: int = 0,
        latency: float = 0.0,
    ) -> None:
        self.src = src
        self.dst = dst
        self.index = index
        self.credit_based = credit_based
        self._link = link
        self._clock = clock
        self._timer = timer
        self._ready: deque[SenderView] = deque()
        self._pumping = False
        self._timer_pending = False
        self._latency = latency
        self._in_flight: deque[_InFlight] = deque()
        self._arrival_pending = False
        self._wire: deque[tuple[SenderView, _Payload | ChannelEvent, float]] = deque()
        self._wire_bytes = 0
        self._window = TCP_WINDOW_SEGMENTS * segment_size
        self.stalled = False
        self.closed = False
        self.views: list[SenderView] = []

    def register(
        self, subpartition: ResultSubpartition, channel: RemoteInputChannel, requested: bool = True
    ) -> SenderView:
        """Connect a producer's subpartition to a consumer's remote channel; ``requested=False``
        until the consumer's task starts (:meth:`request`): nothing is sent before."""
        view = SenderView(self, subpartition, channel, channel.initial_credit, requested)
        self.views.append(view)
        return view

    def request(self, view: SenderView) -> None:
        """The consumer requested ``view``'s subpartition with its initial credit (lock held)."""
        view.requested = True
        if view.channel.initial_credit > 0:
            self.add_credit(view, view.channel.initial_credit)
        else:
            self.reader_available(view)

    @property
    def id(self) -> ConnectionID:
        """Which connection this is."""
        return ConnectionID(self.src, self.dst, self.index)

    # -- events from both ends (lock held) --------------------------------------------------

    def reader_available(self, view: SenderView) -> None:
        """``view`` may have something to send: queue it and pump."""
        if not view.queued and view.sendable(self.credit_based):
            view.queued = True
            self._ready.append(view)
        self.pump()

    def add_credit(self, view: SenderView, credit: int) -> None:
        """The receiver announced ``credit`` more buffers for ``view``'s channel."""
        if self._latency:
            self._send_later(view, credit, 0)
            return
        view.credit += credit
        self.reader_available(view)

    def pump(self) -> None:
        """Move as much data as flow control and the link allow (re-entrant calls return)."""
        if self._pumping or self.closed:
            return
        self._pumping = True
        try:
            if self.credit_based:
                self._pump_credit()
            else:
                self._pump_tcp()
        finally:
            self._pumping = False

    # -- credit-based -----------------------------------------------------------------------

    def _pump_credit(self) -> None:
        ready = self._ready
        while ready:
            if not self._link_ready():
                return
            view = ready.popleft()
            view.queued = False
            if not view.sendable(True):
                continue
            item = view.subpartition.poll()
            channel = view.channel
            if isinstance(item, Buffer):
                view.credit -= 1
                if view.credit < 0:
                    raise RuntimeError(f"{channel.gate.name}: sent a buffer without credit")
                records, size = item.records, item.size
                item.recycle()
                self._occupy_link(size)
                if self._latency:
                    self._send_later(view, _Payload(records, size), view.subpartition.backlog)
                elif not channel.released:
                    channel.on_buffer(records, size, view.subpartition.backlog)
            elif item is not None and self._latency:
                self._send_later(view, item, 0)
            elif item is not None and not channel.released:
                channel.on_event(item)
            if view.sendable(True) and not view.queued:
                view.queued = True
                ready.append(view)

    # -- tcp --------------------------------------------------------------------------------

    def _pump_tcp(self) -> None:
        progress = True
        while progress:
            progress = self._deliver_wire() | self._fill_wire()

    def _fill_wire(self) -> bool:
        moved = False
        ready = self._ready
        while ready and self._wire_bytes < self._window:
            if not self._link_ready():
                break
            view = ready.popleft()
            view.queued = False
            item = view.subpartition.poll()
            if isinstance(item, Buffer):
                item.recycle()
                self._wire_bytes += item.size
                self._occupy_link(item.size)
                self._wire.append((view, _Payload(item.records, item.size), self._due()))
                moved = True
            elif item is not None:
                self._wire.append((view, item, self._due()))
                moved = True
            if view.sendable(False):
                view.queued = True
                ready.append(view)
        return moved

    def _deliver_wire(self) -> bool:
        delivered = False
        wire = self._wire
        while wire:
            view, item, due = wire[0]
            if due and not self._arrived(due):
                return delivered
            channel = view.channel
            if channel.released:
                pass
            elif isinstance(item, ChannelEvent):
                channel.on_event(item)
            elif not channel.on_buffer(item.records, item.size, -1):
                if not self.stalled:
                    self.stalled = True
                    channel.gate.pool.add_listener(_Unstall(self))
                return delivered
            wire.popleft()
            if isinstance(item, _Payload):
                self._wire_bytes -= item.size
            delivered = True
        return delivered

    def resume(self, segment: int) -> bool:
        """A receive buffer freed up for the stalled head: hand it over and read on.

        Returns False (the segment stays with the pool) when nothing waits any more.
        """
        self.stalled = False
        if self.closed or not self._wire:
            return False
        view = self._wire[0][0]
        view.channel.gate.pool.recycle(segment)
        self.pump()
        return True

    # -- latency ----------------------------------------------------------------------------

    def _due(self) -> float:
        """When something sent now arrives (0: at once, no latency)."""
        return self._clock() + self._latency if self._latency else 0.0

    def _arrived(self, due: float) -> bool:
        """Whether a ``tcp`` wire item sent to arrive at ``due`` has; if not, wake up then."""
        if self._clock() >= due:
            return True
        if not self._arrival_pending:
            self._arrival_pending = True
            self._timer.call_at(due, self._on_wire_due)
        return False

    def _on_wire_due(self) -> None:
        self._arrival_pending = False
        self.pump()

    def _send_later(
        self, view: SenderView, item: _Payload | ChannelEvent | int, backlog: int
    ) -> None:
        """Put ``item`` on its way: it arrives after the latency, in the order sent."""
        self._in_flight.append(_InFlight(self._clock() + self._latency, view, item, backlog))
        if not self._arrival_pending:
            self._arrival_pending = True
            self._timer.call_at(self._in_flight[0].due, self._on_arrival)

    def _on_arrival(self) -> None:
        """Deliver everything due: data to the receivers, credit to the senders."""
        if self.closed:
            self._arrival_pending = False
            return
        now = self._clock()
        flight = self._in_flight
        while flight and flight[0].due <= now:  # what this delivers sends more: still pending
            arrival = flight.popleft()
            view, item = arrival.view, arrival.item
            if isinstance(item, int):
                view.credit += item
                self.reader_available(view)
            elif view.channel.released:
                continue
            elif isinstance(item, ChannelEvent):
                view.channel.on_event(item)
            else:
                view.channel.on_buffer(item.records, item.size, arrival.backlog)
        self._arrival_pending = bool(flight)
        if flight:
            self._timer.call_at(flight[0].due, self._on_arrival)

    # -- bandwidth --------------------------------------------------------------------------

    def _link_ready(self) -> bool:
        link = self._link
        if link.bandwidth <= 0:
            return True
        if self._clock() >= link.free_at:
            return True
        if not self._timer_pending:
            self._timer_pending = True
            self._timer.call_at(link.free_at, self._on_link_free)
        return False

    def _on_link_free(self) -> None:
        self._timer_pending = False
        self.pump()

    def _occupy_link(self, size: int) -> None:
        link = self._link
        if link.bandwidth > 0:
            link.free_at = max(self._clock(), link.free_at) + size / link.bandwidth

    # -- teardown ---------------------------------------------------------------------------

    def close(self) -> None:
        """Drop what is on the wire (it holds no segments) and forget the senders."""
        self.closed = True
        self._in_flight.clear()
        self._wire.clear()
        self._wire_bytes = 0
        self._ready.clear()


class _Unstall:
    """Listens on a gate pool for the buffer a stalled ``tcp`` connection waits for."""

    def __init__(self, connection: Connection) -> None:
        self.connection = connection

    def notify_buffer_available(self, segment: int) -> bool:
        return self.connection.resume(segment)
