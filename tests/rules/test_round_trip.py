"""Remote channels and the network kind: a round trip that limits a channel's few credits, and
a tight-credit job whose channels say nothing waits (issue 20's false positive).

The figures are those of real runs: ``source -> parse`` on two task managers with one exclusive
buffer and a 5 ms latency (the sender had a backlog and no credit 100% of the time while parse
idled 90%), and a healthy three-task-manager job with one exclusive and one floating buffer,
where the source's output pool read 75% used (three open buffers of four) and no remote channel
held a buffer.
"""

from __future__ import annotations

from dataclasses import replace

from bpmon.model.values import ChannelWindow, Observation
from bpmon.rules.config import RulesConfig
from bpmon.rules.engine import diagnose

from .figures import texts
from .observations import edge, lag, observation, sub, vertex

RULES = RulesConfig()


def _pair(*, src_bp: float, out_pool: float, idle: float) -> Observation:
    """source (tm 0) -> parse (tm 1), parse's input buffers empty."""
    return observation(
        vertex("source", sub(0, bp=src_bp, busy=0.02, out_pool=out_pool, tm=0), kind="source"),
        vertex(
            "parse",
            sub(0, busy=1.0 - idle, in_pool=0.0, tm=1),
            inputs=[edge("source", "forward")],
            kind="map",
        ),
        vertex("sink", sub(0, busy=0.05, in_pool=0.0, tm=0), inputs=[edge("parse")], kind="sink"),
    )


def _channel(*, backlog: float, no_credit: float, queued: float = 0.0) -> ChannelWindow:
    return ChannelWindow(
        "source", 0, "parse", 0, remote=True, backlog=backlog, queued=queued, no_credit=no_credit
    )


def test_credit_on_its_way_back_to_an_idle_consumer_is_the_network_with_credit_advice() -> None:
    obs = replace(
        _pair(src_bp=1.0, out_pool=0.5, idle=0.9),
        channels=(_channel(backlog=1.1, no_credit=1.0),),
    )
    report = diagnose(obs, RULES)
    assert [(c.vertex, c.kind) for c in report.root_causes] == [("parse", "network")]
    cause = report.root_causes[0]
    assert any("round trip" in line for line in texts(cause))
    assert "buffers-per-channel" in cause.recommendation
    assert "bandwidth" not in cause.recommendation.split(";")[0]


def test_a_busy_consumer_holding_its_one_buffer_is_not_a_round_trip() -> None:
    """Without a latency a sender lacks credit only while the consumer holds its buffer, busy:
    no credit 40% of the time and idle 60% do not overlap, so no channel waits for credit."""
    obs = replace(
        _pair(src_bp=0.3, out_pool=0.2, idle=0.6),
        channels=(_channel(backlog=0.6, no_credit=0.4),),
    )
    assert diagnose(obs, RULES).root_causes == ()


def test_tight_credit_with_nothing_waiting_on_a_remote_channel_names_nothing() -> None:
    """Issue 20: a healthy job on 3 task managers with tight credit was named network at parse
    (0.64) from the pools alone: a LOW source with its small pool 75% used by open buffers, an
    idle parse. The channels were read and none held a buffer or lacked credit."""
    pools_only = _pair(src_bp=0.23, out_pool=0.75, idle=0.6)
    assert [c.kind for c in diagnose(pools_only, RULES).root_causes] == ["network"]
    read = replace(pools_only, channels=(_channel(backlog=0.0, no_credit=0.0, queued=0.3),))
    assert diagnose(read, RULES).root_causes == ()


def _fed_by_a_source(growth: float) -> Observation:
    """The false positive's pools, as Flink shows them (no channels), with the source's lag."""
    return observation(
        vertex(
            "source",
            sub(0, bp=0.23, busy=0.02, out_pool=0.75, rout=1000.0, tm=0, metrics=lag(growth)),
            kind="source",
        ),
        vertex(
            "parse",
            sub(0, busy=0.4, in_pool=0.0, rin=1000.0, tm=1),
            inputs=[edge("source", "forward")],
            kind="map",
        ),
    )


def test_without_channels_a_source_that_builds_no_lag_is_not_held_by_a_link() -> None:
    """A link that held the source back would make its pendingRecords grow; at 0.5% of what it
    emits (noise) nothing holds it, at 50% the link does."""
    assert diagnose(_fed_by_a_source(growth=5.0), RULES).root_causes == ()
    held = diagnose(_fed_by_a_source(growth=500.0), RULES).root_causes
    assert [(c.vertex, c.kind) for c in held] == [("parse", "network")]
