"""Checkpoint barriers at a task's inputs: aligned and unaligned alignment.

As Flink's ``CheckpointBarrierHandler`` for one checkpoint at a time (research notes,
``flink-network.md`` §5):

- **aligned**: a channel that delivered the barrier is blocked, so none of its data after the
  barrier is processed, until every live channel delivered it; then the task forwards the
  barrier to its outputs, unblocks its inputs and takes its snapshot. The alignment time is what
  a backpressured job pays: the barrier waits behind the buffered data of the slowest channel.
- **unaligned** (FLIP-76): the first barrier is forwarded at once, as a priority event that
  overtakes the data queued in the outputs, and the task snapshots the in-flight data instead:
  the output bytes the barrier overtook plus the input bytes queued in its remote channels. The
  remaining barriers only complete the checkpoint; no channel is blocked.

A channel that finishes (end of partition) while the task waits for its barrier no longer counts.
The task owns its outputs and the coordinator, so the handler reaches them through two callables:
``forward`` (put a barrier into every output, returning the bytes it overtook) and
``acknowledge`` (the snapshot is taken). Everything here runs on the task's thread.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence

from bpmon.runtime.credit import RemoteInputChannel
from bpmon.runtime.gate import InputGate
from bpmon.runtime.subpartition import ChannelEvent

Forward = Callable[[int], int]
"""``forward(checkpoint_id)``: the barrier into every output; returns the bytes it overtook."""

Acknowledge = Callable[[int, float, int], None]
"""``acknowledge(checkpoint_id, alignment_s, in_flight_bytes)``: the task took its snapshot."""


class BarrierHandler:
    """Which input channels delivered the current checkpoint's barrier, and what follows.

    Args:
        gates: the task's input gates, in the task's order.
        aligned: the checkpoint mode (``aligned`` or ``unaligned``).
        lock: the task's mailbox condition (entering it takes the network lock).
        clock: monotonic seconds (alignment time).
        forward: puts a barrier into every output of the task.
        acknowledge: reports the task's snapshot to the coordinator.
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
    ) -> None:
        self._gates = list(gates)
        self.aligned = aligned
        self._lock = lock
        self._clock = clock
        self._forward = forward
        self._acknowledge = acknowledge
        self._checkpoint_id = 0
        self._channels: set[tuple[int, int]] = set()  # (gate index, channel index)
        self._started = 0.0
        self._in_flight = 0

    def barrier(self, checkpoint_id: int) -> ChannelEvent:
        """The barrier this task sends for ``checkpoint_id``: a priority event when unaligned."""
        return ChannelEvent("barrier", checkpoint_id, priority=not self.aligned)

    def on_event(self, event: ChannelEvent, gate_index: int, channel: int) -> None:
        """An event other than end-of-partition was read from ``channel`` of gate ``gate_index``."""
        if event.kind != "barrier":
            return
        if event.checkpoint_id != self._checkpoint_id:
            self._start(event.checkpoint_id)
        self._channels.add((gate_index, channel))
        if self.aligned:
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

    def _start(self, checkpoint_id: int) -> None:
        self._checkpoint_id = checkpoint_id
        self._channels = set()
        self._started = self._clock()
        self._in_flight = 0
        if not self.aligned:  # the first barrier overtakes everything: forward it now
            self._in_flight = self._forward(checkpoint_id)
            self._in_flight += sum(_queued_remote_bytes(gate) for gate in self._gates)

    def _complete(self) -> None:
        alignment = self._clock() - self._started
        if self.aligned:
            self._forward(self._checkpoint_id)
            with self._lock:
                for gate in self._gates:
                    gate.unblock_all()
        self._acknowledge(self._checkpoint_id, alignment, self._in_flight)
        self._channels = set()

    def _live_channels(self) -> int:
        return sum(len(gate.channels) - gate.finished_channels for gate in self._gates)


def _queued_remote_bytes(gate: InputGate) -> int:
    """In-flight input an unaligned barrier overtakes: remote channels only, as a local
    channel's data is the producer's output, which the producer already counted."""
    return sum(
        channel.queued_input_bytes()
        for channel in gate.channels
        if isinstance(channel, RemoteInputChannel)
    )
