"""The runtime target reads every channel with each sample: where the data waits, by channel.

A real job on bpmon's runtime: ``src`` (p=2) rebalances into ``work`` (p=2) whose subtask 1 is
40x slow. Round robin sends every other record to work[1], so the channels into work[1] fill to
their limit while the channels into work[0] are drained as fast as they fill.
"""

from __future__ import annotations

import time

from bpmon.collectors.channels import CHANNELS_PER_READING, ChannelTally
from bpmon.collectors.runtime import RuntimeTarget
from bpmon.scenario import parse_scenario

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


def test_the_channels_into_the_slow_subtask_hold_the_backlog() -> None:
    target = RuntimeTarget(parse_scenario(SLOW_INSTANCE))
    target.start()
    try:
        time.sleep(1.5)  # 1,000-byte records fill work[1]'s channels well within this
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


def readings_per_channel(parallelism: int, calls: int) -> tuple[int, set[int]]:
    """How often a tally read each channel of a ``p x p`` rebalance in ``calls`` calls."""
    target = RuntimeTarget(parse_scenario(WIDE.format(p=parallelism)))
    target.start()
    try:
        time.sleep(0.5)
        tally = ChannelTally(target.runtime.tasks)
        for _ in range(calls):
            tally.read()
    finally:
        assert not target.stop().leaks
    return tally.stride, {s.readings for s in tally._sums.values()}


def test_a_small_job_is_read_on_every_sample() -> None:
    assert readings_per_channel(4, 9) == (1, {9})  # 16 channels


def test_a_wide_job_is_read_on_one_sample_in_stride() -> None:
    """13 x 13 = 169 channels: more than 128, so every second call reads (calls 1, 3, 5, 7, 9)."""
    assert CHANNELS_PER_READING < 13 * 13
    assert readings_per_channel(13, 9) == (2, {5})
