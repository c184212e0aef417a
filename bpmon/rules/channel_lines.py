"""The evidence lines of a network cause: the channel the data waits in, or whose credit is late.

Where bpmon's runtime read the channels (:mod:`bpmon.rules.channels`), a network cause names the
channel that shows it: the fullest one holding buffers for the link, or the one most often
without credit while its consumer idled. Each figure is the channel's own, as the report's
``channels`` carry it.
"""

from __future__ import annotations

from collections.abc import Sequence

from bpmon.model.evidence import (
    EvidenceLine,
    EvidencePart,
    count,
    decimal,
    line,
    percent,
    subtasks,
)
from bpmon.model.values import ChannelWindow


def held_line(held: Sequence[ChannelWindow], consumer: str) -> EvidenceLine:
    """``source[0] holds 3.0 buffers for parse[0] on a remote channel ...``: the fullest of
    ``held``, the channels into ``consumer`` whose data waits for the link."""
    worst = max(held, key=lambda c: c.backlog)
    backlog = decimal(
        "backlog", worst.backlog, "buffers", 1, worst.producer, [worst.producer_index]
    )
    return line(
        _producer(worst),
        " holds ",
        backlog,
        " buffers for ",
        subtasks(worst.consumer, [worst.consumer_index]),
        " on a remote channel with credit to send and none queued at the consumer: the "
        "data waits for the link (",
        _such_channels(held, consumer),
        ")",
    )


def transit_line(transit: Sequence[ChannelWindow], consumer: str) -> EvidenceLine:
    """``source[0] had buffers for parse[0] and no credit 100% of the time ...``: the one of
    ``transit`` most often without credit, its credit on the way back to it."""
    worst = max(transit, key=lambda c: c.no_credit or 0.0)
    at = [worst.producer_index]
    no_credit = percent("no-credit", worst.no_credit or 0.0, worst.producer, at)
    return line(
        _producer(worst),
        " had buffers for ",
        subtasks(worst.consumer, [worst.consumer_index]),
        " and no credit ",
        no_credit,
        " of the time while the consumer idled with none queued: its credit was on the "
        "way back, so the channel carries its few credits per round trip (",
        _such_channels(transit, consumer),
        ")",
    )


def _producer(channel: ChannelWindow) -> tuple[EvidencePart, ...]:
    """The producing subtask of ``channel``, as a line names it: ``source[0]``."""
    return subtasks(channel.producer, [channel.producer_index])


def _such_channels(found: Sequence[ChannelWindow], consumer: str) -> tuple[EvidencePart, ...]:
    """``3 such channels`` (or ``1 such channel``) into ``consumer``."""
    plural = "s" if len(found) != 1 else ""
    return (count("channels", len(found), consumer), f" such channel{plural}")
