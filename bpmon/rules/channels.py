"""What the channels between subtasks say: where the data waits, and who waits on whom.

Only bpmon's runtime reads channels (``Observation.channels``; Flink publishes no per-channel
metric), so every rule that uses them has a verdict without them too; the channels make it exact
where pool usages, averaged over a whole pool, blur it:

- A remote channel **held by the link**: a backlog of at least ``[network] link_backlog_min``
  buffers waits at the producer, the consumer gave credit for it (or, under TCP, its connection
  is not stopped), and nothing waits in the consumer's input buffers. The data is between the
  two: the link is the limit. A fan-out producer's output pool can be far from full while one of
  its channels is held so (the pool is shared by every subpartition).
- **Pointers** for the waits of a stall: a producer waits on the consumers whose channels hold
  its data (a backlog, no credit, a stopped connection); a consumer on the producers whose
  channels have nothing for it to read and are not held by an alignment.
"""

from __future__ import annotations

from collections.abc import Collection, Sequence

from bpmon.model import ChannelWindow
from bpmon.rules.config import RulesConfig
from bpmon.rules.execution import node


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
