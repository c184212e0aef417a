"""Buffer debloating (FLIP-183): an input gate sizes its buffers to its measured throughput.

As Flink's ``BufferDebloater``: every ``buffer-debloat.period`` (200 ms) the consuming task
measures the bytes its gate read since the last time, smooths them into a throughput (an
exponential moving average over about ``buffer-debloat.samples``, 20, periods), and sizes its
buffers so that the data its channels hold now takes about ``buffer-debloat.target`` (1 s) to
consume:

    size = throughput × target / buffers in use,  between 256 bytes and one segment

A new size that differs from the last by less than ``buffer-debloat.threshold-percentages``
(25%) is not announced. The size is announced to every producer subpartition the gate reads,
whose next buffers are finished at that size (``partition.py``): the buffer *counts* stay as
they were (pool usage keeps its meaning), the bytes in flight, and with them the time a
checkpoint barrier waits behind them, fall. Flink sends the size upstream as an event; here it is
set at once.
"""

from __future__ import annotations

from collections.abc import Callable

from bpmon.runtime.gate import InputGate
from bpmon.scenario.network import MIN_SEGMENT_SIZE

SAMPLES = 20
"""``taskmanager.network.memory.buffer-debloat.samples``: the throughput's smoothing span."""
THRESHOLD = 0.25
"""``buffer-debloat.threshold-percentages``: smaller changes are not announced."""


class BufferDebloater:
    """The buffer size of one input gate (see the module).

    Args:
        gate: the gate whose throughput and buffers are measured.
        segment_size: the largest buffer (a whole segment).
        target_s: how long the buffered data should take to consume.
        clock: monotonic seconds.
    """

    def __init__(
        self, gate: InputGate, segment_size: int, target_s: float, clock: Callable[[], float]
    ) -> None:
        self._gate, self._max, self._target_s, self._clock = gate, segment_size, target_s, clock
        self._bytes = gate.bytes_read
        self._at = clock()
        self.throughput: float | None = None
        """Bytes per second the gate reads, smoothed (None before the first evaluation)."""
        self.size = segment_size
        """The buffer size last announced (a whole segment until the first change)."""

    def evaluate(self) -> None:
        """Measure, and announce a new size if it changed enough (network lock held)."""
        now, read = self._clock(), self._gate.bytes_read
        elapsed = now - self._at
        if elapsed <= 0:
            return
        rate = (read - self._bytes) / elapsed
        self._bytes, self._at = read, now
        alpha = 2 / (SAMPLES + 1)
        self.throughput = (
            rate if self.throughput is None else self.throughput + alpha * (rate - self.throughput)
        )
        in_use = max(1, sum(channel.buffers_in_use() for channel in self._gate.channels))
        wanted = self.throughput * self._target_s / in_use
        size = int(min(self._max, max(MIN_SEGMENT_SIZE, wanted)))
        at_bound = size in (MIN_SEGMENT_SIZE, self._max)
        if size == self.size or (abs(size - self.size) < THRESHOLD * self.size and not at_bound):
            return
        self.size = size
        for channel in self._gate.channels:
            upstream = channel.upstream()
            if upstream is not None:
                upstream.announce_buffer_size(size)

    @property
    def time_to_consume_ms(self) -> float | None:
        """Flink's ``estimatedTimeToConsumeBuffersMs``: the data buffered now at the measured
        throughput (None before a throughput was measured, or with none)."""
        if not self.throughput:
            return None
        queued = sum(channel.queued_input_bytes() for channel in self._gate.channels)
        return queued / self.throughput * 1000
