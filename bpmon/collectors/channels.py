"""Per-channel readings over a burst: the runtime's channels, read after some of its samples.

A channel reading (``runtime.channelmetrics``) is one instant: a backlog of 3 buffers or a credit
of 0 may be the moment between two buffers. Read through a burst and averaged, the same figures
say where data waited over the window: at the producer for a consumer that takes nothing
(backlog, no credit), in the consumer's input buffers, or held by a checkpoint alignment.

A reading runs on the sampling thread, which holds the interpreter meanwhile: about 18 µs for
the 4 channels of a small job in a tight loop, but 70 µs right after a sample, as the thread
wakes with cold caches (and about 6 µs more per channel: 0.4 ms for 128, 3.1 ms for 512). Read
after every sample, that made a sample of a small job cost 1.6x the stacks alone. So readings
are taken after one sample in :meth:`ChannelTally.stride`: at most :data:`READINGS_PER_BURST`
per burst (Flink's 100 samples: one in 5, four readings a second, enough for the means and
shares the rules compare with their thresholds), and for a job of more than
:data:`CHANNELS_PER_READING` channels sparser still, so a reading's share of the interpreter
stays near that of 128 channels. A reading always follows its sample, so it never delays one:
the samples keep to their grid.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from bpmon.model.values import ChannelWindow
from bpmon.runtime.channelmetrics import ChannelReading, channel_readings
from bpmon.runtime.task import Task

READINGS_PER_BURST = 20
"""Readings a burst takes at most: after one sample in ``samples // READINGS_PER_BURST``."""

CHANNELS_PER_READING = 128
"""A job with more channels is read more sparsely: one reading per this many channels' worth
of samples (512 channels: one sample in 4 at least)."""

Key = tuple[str, int, str, int, int]
"""A channel: producer, producer subtask, consumer, consumer subtask, consumer input edge."""


@dataclass(slots=True)
class _Sums:
    remote: bool
    readings: int = 0
    backlog: int = 0
    queued: int = 0
    credit_readings: int = 0
    no_credit: int = 0
    tcp_readings: int = 0
    stalled: int = 0
    blocked: int = 0

    def add(self, r: ChannelReading) -> None:
        self.readings += 1
        self.backlog += r.backlog
        self.queued += r.queued_at_consumer
        self.blocked += r.blocked
        if r.credit is not None:
            self.credit_readings += 1
            self.no_credit += r.credit == 0 and r.backlog > 0
        if r.connection_stalled is not None:
            self.tcp_readings += 1
            self.stalled += r.connection_stalled


@dataclass
class ChannelTally:
    """Channel readings taken during a burst, summed per channel until :meth:`windows`.

    Args:
        tasks: the job's tasks (``job.tasks``).
        readings_per_burst: readings a burst takes at most (:data:`READINGS_PER_BURST`; as many
            as its samples reads after every sample, as bpmon did before).
    """

    tasks: Mapping[str, Sequence[Task]]
    readings_per_burst: int = READINGS_PER_BURST
    _sums: dict[Key, _Sums] = field(default_factory=dict)

    def stride(self, planned: int) -> int:
        """Read after one sample in this many, in a burst of ``planned`` samples."""
        by_burst = math.ceil(planned / max(1, self.readings_per_burst))
        by_width = math.ceil(len(self._sums) / CHANNELS_PER_READING)
        return max(1, by_burst, by_width)

    def after_sample(self, done: int, planned: int) -> None:
        """A burst's progress callback: a reading after its first sample and after every
        :meth:`stride`-th one from there (1, 6, 11, ... of 100)."""
        if (done - 1) % self.stride(planned) == 0:
            self.read()

    def read(self) -> None:
        """Take one reading of every channel now (any thread; it takes no lock).

        A job whose channels cannot all be read now (one not bound yet, a kind of exchange the
        readings do not know) gives no reading this time, rather than failing the burst.
        """
        try:
            found = channel_readings(self.tasks)
        except ValueError:
            return
        for r in found:
            key = (r.producer, r.producer_index, r.consumer, r.consumer_index, r.edge)
            sums = self._sums.get(key)
            if sums is None:
                sums = self._sums[key] = _Sums(remote=r.remote)
            sums.add(r)

    def windows(self) -> tuple[ChannelWindow, ...]:
        """Each channel's means and shares over the readings taken."""
        out = []
        for (producer, pi, consumer, ci, _), s in self._sums.items():
            n = s.readings
            out.append(
                ChannelWindow(
                    producer=producer,
                    producer_index=pi,
                    consumer=consumer,
                    consumer_index=ci,
                    remote=s.remote,
                    backlog=s.backlog / n,
                    queued=s.queued / n,
                    no_credit=s.no_credit / s.credit_readings if s.credit_readings else None,
                    stalled=s.stalled / s.tcp_readings if s.tcp_readings else None,
                    blocked=s.blocked / n,
                )
            )
        return tuple(out)
