"""Checkpoint barriers at a task's inputs: aligned and unaligned alignment, and the switch.

As Flink's ``SingleCheckpointBarrierHandler`` for one checkpoint at a time (``docs/scenario.md``,
``[checkpoints]``):

- **aligned**: a channel that delivered the barrier is blocked, so none of its data after the
  barrier is processed, until every live channel delivered it; then the task forwards the
  barrier to its outputs, unblocks its inputs and takes its snapshot. The alignment time is what
  a backpressured job pays: the barrier waits behind the buffered data of the slowest channel.
- **unaligned** (FLIP-76): the first barrier is forwarded at once, as a priority event that
  overtakes the data queued in the outputs, and the task snapshots the in-flight data instead:
  the output bytes the barrier overtook plus the input bytes queued in its remote channels. The
  remaining barriers only complete the checkpoint; no channel is blocked.
- **aligned, then unaligned** (``aligned_timeout_ms``, Flink's aligned-checkpoint-timeout): the
  checkpoint starts aligned; once that long has passed since its trigger, a barrier that reaches
  the task (or a task still aligning, :meth:`BarrierHandler.check_timeout`) goes on unaligned.
  The coordinator moves the barriers still queued behind data to the head of their queues at the
  same moment.

A channel that finishes (end of partition) while the task waits for its barrier no longer counts.
A checkpoint the coordinator aborted (it timed out) is dropped: its alignment ends and its late
barriers are ignored. The task owns its outputs and the coordinator, so the handler reaches them
through two callables: ``forward`` (put a barrier into every output, returning the bytes it
overtook) and ``acknowledge`` (the alignment is done, with what it measured). Everything here
runs on the task's thread.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from bpmon.runtime.credit import RemoteInputChannel
from bpmon.runtime.gate import InputGate
from bpmon.runtime.subpartition import ChannelEvent

Forward = Callable[[ChannelEvent], int]
"""``forward(barrier)``: the barrier into every output; returns the bytes it overtook."""


@dataclass(frozen=True, slots=True)
class BarrierTiming:
    """What a task's handling of one checkpoint's barriers measured.

    Attributes:
        triggered_at: when the checkpoint was triggered (monotonic seconds).
        first_barrier_at: when the first barrier reached the task (a source: when it injected it).
        alignment_s: from the first barrier to the last.
        processed_bytes: input bytes the task processed meanwhile.
        persisted_bytes: in-flight bytes the snapshot stores (unaligned only).
        unaligned: the barriers went on unaligned (the mode, or an aligned timeout).
    """

    triggered_at: float
    first_barrier_at: float
    alignment_s: float = 0.0
    processed_bytes: int = 0
    persisted_bytes: int = 0
    unaligned: bool = False


@dataclass(frozen=True, slots=True)
class SnapshotTaken:
    """What a task reports to the coordinator at the end of its snapshot's sync phase."""

    timing: BarrierTiming
    sync_s: float
    state_bytes: int


Acknowledge = Callable[[int, BarrierTiming], None]
"""``acknowledge(checkpoint_id, timing)``: the task's barriers are handled; it snapshots next."""


class BarrierHandler:
    """Which input channels delivered the current checkpoint's barrier, and what follows.

    Args:
        gates: the task's input gates, in the task's order.
        aligned: checkpoints start aligned (``mode = "aligned"``, or unaligned with an aligned
            timeout).
        lock: the task's mailbox condition (entering it takes the network lock).
        clock: monotonic seconds.
        forward: puts a barrier into every output of the task.
        acknowledge: reports the task's alignment to the task.
        switch_after_s: aligned barriers go on unaligned this long after the trigger (None:
            never; the aligned timeout).
    """

    def __init__(
        self,
        gates: Sequence[InputGate],
        *,
        aligned: bool,
        lock: threading.Condition,
        clock: Callable[[], float],
        forward: Forward,
        acknowledge: Acknowledge,
        switch_after_s: float | None = None,
    ) -> None:
        self._gates = list(gates)
        self.aligned = aligned
        self._lock = lock
        self._clock = clock
        self._forward = forward
        self._acknowledge = acknowledge
        self._switch_after = switch_after_s
        self._checkpoint_id = 0
        self._triggered_at = 0.0
        self._channels: set[tuple[int, int]] = set()  # (gate index, channel index)
        self._started = 0.0
        self._bytes_at_start = 0
        self._in_flight = 0
        self._unaligned = False
        self._aborted = 0

    def barrier(self, checkpoint_id: int, triggered_at: float) -> ChannelEvent:
        """The barrier this task sends for ``checkpoint_id``: a priority event when unaligned
        (the mode, or an aligned one past its timeout)."""
        return ChannelEvent(
            "barrier",
            checkpoint_id,
            priority=self._unaligned_at(triggered_at),
            triggered_at=triggered_at,
        )

    def _unaligned_at(self, triggered_at: float) -> bool:
        if not self.aligned:
            return True
        switch = self._switch_after
        return switch is not None and self._clock() >= triggered_at + switch

    @property
    def aligning(self) -> bool:
        """True while some but not all channels delivered the current barrier."""
        return bool(self._channels)

    def on_event(self, event: ChannelEvent, gate_index: int, channel: int) -> None:
        """An event other than end-of-partition was read from ``channel`` of gate ``gate_index``."""
        if event.kind != "barrier" or event.checkpoint_id <= self._aborted:
            return  # a barrier of an aborted checkpoint: late, and ignored
        if event.checkpoint_id < self._checkpoint_id:
            return
        if event.checkpoint_id != self._checkpoint_id:
            self._start(event, (gate_index, channel))
        self._channels.add((gate_index, channel))
        if not self._unaligned:
            with self._lock:
                self._gates[gate_index].block(channel)
        if len(self._channels) >= self._live_channels():
            self._complete()

    def on_channel_finished(self) -> None:
        """A channel delivered end-of-partition: it may have been the last one waited for."""
        if self._channels and len(self._channels) >= self._live_channels():
            self._complete()

    def priority_barrier(self) -> tuple[ChannelEvent, int, int] | None:
        """Take an unaligned barrier waiting at the head of any channel (lock held).

        Returns the barrier, its gate index and its channel index. A task that cannot process
        data (its output is unavailable) still reacts to these.
        """
        for gate_index, gate in enumerate(self._gates):
            found = gate.priority_event()
            if found is not None:
                return found[0], gate_index, found[1]
        return None

    def check_timeout(self) -> None:
        """An aligning task whose checkpoint passed its aligned timeout goes on unaligned: it
        unblocks its inputs, forwards the barrier ahead of its output data and stores the data
        its barrier overtook and the input still queued before the missing barriers."""
        if not self._channels or self._unaligned:
            return
        if not self._unaligned_at(self._triggered_at):
            return
        self._go_unaligned()
        with self._lock:
            for gate in self._gates:
                gate.unblock_all()

    def abort(self, checkpoint_id: int) -> None:
        """The coordinator gave up ``checkpoint_id`` (it timed out): end its alignment here and
        ignore its barriers from now on."""
        self._aborted = max(self._aborted, checkpoint_id)
        if self._checkpoint_id <= checkpoint_id and self._channels:
            self._channels = set()
            with self._lock:
                for gate in self._gates:
                    gate.unblock_all()

    def _start(self, event: ChannelEvent, arrived: tuple[int, int]) -> None:
        if self._channels:  # a newer checkpoint's barrier: the older alignment is abandoned
            with self._lock:
                for gate in self._gates:
                    gate.unblock_all()
        self._checkpoint_id = event.checkpoint_id
        self._triggered_at = event.triggered_at
        self._channels = set()
        self._started = self._clock()
        self._bytes_at_start = self._bytes_read()
        self._in_flight = 0
        self._unaligned = False
        if event.priority:  # it overtook its channel's data: that data is in flight too
            self._go_unaligned(set())
        elif self._unaligned_at(event.triggered_at):  # in order, behind its channel's data
            self._go_unaligned({arrived})

    def _go_unaligned(self, delivered: set[tuple[int, int]] | None = None) -> None:
        """Forward the barrier now, as a priority event, and count what it leaves in flight:
        what it overtook in the outputs, and the remote input queued before the barriers not
        yet ``delivered`` (default: those delivered so far, whose queues hold later data)."""
        self._unaligned = True
        barrier = self.barrier(self._checkpoint_id, self._triggered_at)
        self._in_flight += self._forward(barrier)
        delivered = self._channels if delivered is None else delivered
        self._in_flight += sum(
            _queued_remote_bytes(gate, {c for g, c in delivered if g == i})
            for i, gate in enumerate(self._gates)
        )

    def _complete(self) -> None:
        alignment = self._clock() - self._started
        if not self._unaligned:
            self._forward(self.barrier(self._checkpoint_id, self._triggered_at))
            with self._lock:
                for gate in self._gates:
                    gate.unblock_all()
        timing = BarrierTiming(
            triggered_at=self._triggered_at,
            first_barrier_at=self._started,
            alignment_s=alignment,
            processed_bytes=self._bytes_read() - self._bytes_at_start,
            persisted_bytes=self._in_flight,
            unaligned=self._unaligned,
        )
        self._channels = set()
        self._acknowledge(self._checkpoint_id, timing)

    def _bytes_read(self) -> int:
        return sum(gate.bytes_read for gate in self._gates)

    def _live_channels(self) -> int:
        return sum(len(gate.channels) - gate.finished_channels for gate in self._gates)


def _queued_remote_bytes(gate: InputGate, delivered: set[int]) -> int:
    """In-flight input an unaligned barrier overtakes: remote channels whose barrier has not
    arrived yet only, as a local channel's data is the producer's output, which the producer
    already counted, and a channel whose barrier arrived holds data after it."""
    return sum(
        channel.queued_input_bytes()
        for channel in gate.channels
        if isinstance(channel, RemoteInputChannel) and channel.index not in delivered
    )
