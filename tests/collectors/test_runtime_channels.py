"""The runtime target reads every channel during a burst: where the data waits, by channel.

A real job on bpmon's runtime: ``src`` (p=2) rebalances into ``work`` (p=2) whose subtask 1 is
40x slow. Round robin sends every other record to work[1], so the channels into work[1] fill to
their limit while the channels into work[0] are drained as fast as they fill. Readings follow
one sample in ``stride`` (20 a burst at most): the picture is the one every sample gave.
"""

from __future__ import annotations

import pytest

from bpmon.collectors.channels import CHANNELS_PER_READING, READINGS_PER_BURST, ChannelTally
from bpmon.collectors.inprocess import RuntimeTarget
from bpmon.collectors.sampler import StackSampler
from bpmon.model.values import ChannelWindow
from bpmon.runtime.channelmetrics import channel_readings
from bpmon.scenario import parse_scenario
from tests.waiting import wait_until

SLOW_INSTANCE = """
name = "slow-instance-channels"
duration_s = 30

[[operators]]
name = "src"
kind = "source"
parallelism = 2
rate = 1500
record_bytes = 1000

[[operators]]
name = "work"
kind = "sink"
parallelism = 2
cost_us = 100
slow_subtasks = { 1 = 40.0 }
inputs = [{ from = "src", partitioner = "rebalance" }]
"""


FILLED = 5
"""Buffers each channel into work[1] holds before a burst: over twice the 2 the tests ask of
the burst's average, and only growing (work[1] takes a sixth of what it is sent)."""


def wait_until_filled(target: RuntimeTarget) -> None:
    """Until every channel into the slow work[1] holds :data:`FILLED` buffers (sender's backlog
    and consumer's queue)."""

    def held() -> list[int]:
        readings = channel_readings(target.runtime.tasks)
        return [r.backlog + r.queued_at_consumer for r in readings if r.consumer_index == 1]

    wait_until(held, "work[1]'s channels to fill", until=lambda h: bool(h) and min(h) >= FILLED)


def test_the_channels_into_the_slow_subtask_hold_the_backlog() -> None:
    target = RuntimeTarget(parse_scenario(SLOW_INSTANCE))
    target.start()
    try:
        wait_until_filled(target)
        obs = target.observe(samples=20, interval_ms=25)
    finally:
        ending = target.stop()
    assert not ending.leaks
    pairs = {(c.producer, c.producer_index, c.consumer, c.consumer_index) for c in obs.channels}
    assert pairs == {("src", p, "work", c) for p in (0, 1) for c in (0, 1)}  # one per channel
    into = {i: [c for c in obs.channels if c.consumer_index == i] for i in (0, 1)}
    slow = min(c.backlog + c.queued for c in into[1])
    fast = max(c.backlog + c.queued for c in into[0])
    assert slow >= 2.0 > fast, (slow, fast)
    assert all(0.0 <= c.blocked <= 1.0 and c.blocked == 0.0 for c in obs.channels)  # no alignment


def waiting(channels: tuple[ChannelWindow, ...]) -> tuple[float, float]:
    """The least data waiting on a channel into work[1], and the most on one into work[0]."""
    into = {i: [c.backlog + c.queued for c in channels if c.consumer_index == i] for i in (0, 1)}
    return min(into[1]), max(into[0])


def test_one_reading_in_five_shows_what_every_sample_showed() -> None:
    """One burst of 100 samples, two tallies: one reading after every sample (as before), one
    after one sample in five (20 readings). Both see the same channels hold the backlog."""
    target = RuntimeTarget(parse_scenario(SLOW_INSTANCE))
    every = ChannelTally(target.runtime.tasks, readings_per_burst=100)
    fifth = ChannelTally(target.runtime.tasks)

    def after(done: int, planned: int) -> None:
        every.after_sample(done, planned)
        fifth.after_sample(done, planned)

    target.start()
    try:
        wait_until_filled(target)
        StackSampler(target.profile).burst(100, 10.0, progress=after)
    finally:
        assert not target.stop().leaks
    assert {s.readings for s in every._sums.values()} == {100}
    assert {s.readings for s in fifth._sums.values()} == {READINGS_PER_BURST}
    (slow_all, fast_all), (slow, fast) = waiting(every.windows()), waiting(fifth.windows())
    assert slow_all >= 2.0 > fast_all, (slow_all, fast_all)
    assert slow >= 2.0 > fast, (slow, fast)
    for a, b in zip(every.windows(), fifth.windows(), strict=True):  # the same channels, in order
        assert (a.producer_index, a.consumer_index) == (b.producer_index, b.consumer_index)
        assert abs(a.backlog - b.backlog) <= 1.0 and abs(a.queued - b.queued) <= 1.0, (a, b)
        assert (a.no_credit is None) == (b.no_credit is None)
        assert abs((a.no_credit or 0.0) - (b.no_credit or 0.0)) <= 0.2, (a, b)


WIDE = """
name = "wide"
duration_s = 30
[[operators]]
name = "src"
kind = "source"
parallelism = {p}
rate = 100
[[operators]]
name = "sink"
kind = "sink"
parallelism = {p}
inputs = [{{ from = "src", partitioner = "rebalance" }}]
"""


def readings_per_channel(parallelism: int, samples: int, **kw: int) -> tuple[int, set[int]]:
    """The stride, and how often each channel of a ``p x p`` rebalance was read, over a burst of
    ``samples`` samples."""
    target = RuntimeTarget(parse_scenario(WIDE.format(p=parallelism)))
    target.start()
    try:
        sinks = target.runtime.tasks["sink"]
        wait_until(lambda: all(t.records_in.total for t in sinks), "records at every sink")
        tally = ChannelTally(target.runtime.tasks, **kw)
        for done in range(1, samples + 1):
            tally.after_sample(done, samples)
    finally:
        assert not target.stop().leaks
    return tally.stride(samples), {s.readings for s in tally._sums.values()}


def test_a_burst_of_100_samples_reads_after_one_in_five() -> None:
    assert readings_per_channel(4, 100) == (5, {20})  # 16 channels: after samples 1, 6, ... 96


def test_a_short_burst_reads_after_every_sample() -> None:
    assert readings_per_channel(4, 9) == (1, {9})


def test_as_many_readings_as_samples_reads_after_every_sample() -> None:
    assert readings_per_channel(4, 100, readings_per_burst=100) == (1, {100})


def test_a_wide_job_is_read_more_sparsely() -> None:
    """13 x 13 = 169 channels: more than 128, so one sample in 2 even in a short burst (1, 3, 5,
    7, 9); in a burst of 100, the one in 5 of any burst is sparser already."""
    assert CHANNELS_PER_READING < 13 * 13
    assert readings_per_channel(13, 9) == (2, {5})
    assert readings_per_channel(13, 100) == (5, {20})


@pytest.mark.parametrize("planned", [10, 20, 30, 50, 100, 110, 1000])
def test_a_burst_takes_at_most_its_readings_whatever_its_samples(planned: int) -> None:
    tally = ChannelTally({})
    taken = [done for done in range(1, planned + 1) if (done - 1) % tally.stride(planned) == 0]
    assert taken[0] == 1  # always a reading after the first sample
    assert min(planned, READINGS_PER_BURST) // 2 <= len(taken) <= READINGS_PER_BURST
