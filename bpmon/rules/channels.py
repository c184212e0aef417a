"""What the channels between subtasks say: where the data waits, and who waits on whom.

Only bpmon's runtime reads channels (``Observation.channels``; Flink publishes no per-channel
metric), so every rule that uses them has a verdict without them too; the channels make it exact
where pool usages, averaged over a whole pool, blur it:

- A remote channel **held by the link**: a backlog of at least ``[network] link_backlog_min``
  buffers waits at the producer, the consumer gave credit for it (or, under TCP, its connection
  is not stopped), and nothing waits in the consumer's input buffers. The data is between the
  two: the link is the limit. A fan-out producer's output pool can be far from full while one of
  its channels is held so (the pool is shared by every subpartition).
- A remote channel **waiting for its credit**: the sender had a backlog and no credit
  (``no_credit``) while the consumer subtask idled with nothing queued, in shares that add up to
  more than the window by ``[network] round_trip_overlap_min``, so they overlapped. An idle
  consumer has returned every buffer, so its credit was on its way back: the channel carries its
  few credits per round trip (a latency) and that, not the operators, is the limit. Without a
  latency a credit arrives at once and an idle consumer's sender is never without one.
- **Nothing waits**: the remote channels of an exchange were read and none holds a whole buffer
  at its producer, none lacks credit: data waits neither for the link nor for credit, whatever
  the pools' usage says (a pool of few buffers reads 75% used with only its open buffers).
- **Pointers** for the waits of a stall: a producer waits on the consumers whose channels hold
  its data (a backlog, no credit, a stopped connection); a consumer on the producers whose
  channels have nothing for it to read and are not held by an alignment.
"""

from __future__ import annotations

from collections.abc import Collection, Sequence

from bpmon.model.values import ChannelWindow, Observation
from bpmon.rules.config import RulesConfig
from bpmon.rules.execution import node
from bpmon.rules.levels import blended_idle


def held_at_link(
    channels: Sequence[ChannelWindow],
    producers: Collection[str],
    consumer: str,
    rules: RulesConfig,
) -> list[ChannelWindow]:
    """The remote channels from ``producers`` into ``consumer`` whose data waits for the link."""
    least = rules.network.link_backlog_min
    return [
        c
        for c in channels
        if c.consumer == consumer
        and c.producer in producers
        and c.remote
        and c.backlog >= least
        and (c.no_credit or 0.0) < 0.5
        and (c.stalled or 0.0) < 0.5
        and c.queued < 1.0
    ]


def remote_channels(
    channels: Sequence[ChannelWindow], producers: Collection[str], consumer: str
) -> list[ChannelWindow]:
    """The remote channels read from ``producers`` into ``consumer`` (empty: none read)."""
    return [c for c in channels if c.consumer == consumer and c.producer in producers and c.remote]


def credit_in_transit(
    obs: Observation, producers: Collection[str], consumer: str, rules: RulesConfig
) -> list[ChannelWindow]:
    """The remote channels from ``producers`` into ``consumer`` that wait for credit on its way."""
    idle = {s.index: blended_idle(s) or 0.0 for s in obs.vertex(consumer).subtasks}
    least = 1.0 + rules.network.round_trip_overlap_min
    return [
        c
        for c in remote_channels(obs.channels, producers, consumer)
        if c.no_credit is not None
        and c.queued < 1.0
        and c.no_credit + idle.get(c.consumer_index, 0.0) >= least
    ]


def nothing_waits(channels: Sequence[ChannelWindow]) -> bool:
    """Whether remote channels were read and none holds data at its producer or lacks credit."""
    return bool(channels) and all(
        c.backlog < 1.0 and (c.no_credit or 0.0) < 0.5 and (c.stalled or 0.0) < 0.5
        for c in channels
    )


def pointed(channels: Sequence[ChannelWindow]) -> dict[str, frozenset[str]]:
    """The subtasks (execution-graph nodes) each subtask's channels say it waits on."""
    out: dict[str, set[str]] = {}
    for ch in channels:
        producer = node(ch.producer, ch.producer_index)
        consumer = node(ch.consumer, ch.consumer_index)
        if ch.backlog >= 1.0 or (ch.no_credit or 0.0) >= 0.5 or (ch.stalled or 0.0) >= 0.5:
            out.setdefault(producer, set()).add(consumer)  # its data waits there
        if ch.blocked < 0.5 and ch.queued < 1.0:
            out.setdefault(consumer, set()).add(producer)  # nothing to read there, not held
    return {n: frozenset(s) for n, s in out.items()}
