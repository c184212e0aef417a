"""Stalls: a region that moves no records is reported as stalled, with its cycle of waits."""

from __future__ import annotations

from dataclasses import replace

from bpmon.model.values import ChannelWindow, TargetSettings
from bpmon.rules.config import RulesConfig
from bpmon.rules.engine import diagnose

from .figures import evidence_problems, texts
from .observations import edge, observation, sub, vertex

RULES = RulesConfig()


def deadlock(flow_control: str = "tcp", rate: float = 0.0) -> object:
    """source -> map -> sink where nothing moves: map blocked on sink, sink idle waiting on map."""
    return observation(
        vertex("source", sub(0, bp=0.98, busy=0.01, rout=rate), sub(1, bp=0.97, rout=rate)),
        vertex("map", sub(0, bp=0.99, rin=rate, rout=rate), sub(1, bp=0.96, rin=rate, rout=rate),
               inputs=[edge("source")]),
        vertex("sink", sub(0, busy=0.0, rin=rate), sub(1, busy=0.0, rin=rate),
               inputs=[edge("map")], kind="sink"),
        settings=TargetSettings(flow_control=flow_control),  # type: ignore[arg-type]
    )  # fmt: skip


def test_a_job_that_moves_no_records_is_stalled_with_its_cycle_of_waits() -> None:
    report = diagnose(deadlock(), RULES)  # type: ignore[arg-type]
    assert report.root_causes is not None and len(report.root_causes) == 1
    cause = report.root_causes[0]
    assert (cause.vertex, cause.kind) == ("sink", "stalled")  # it waits for input: it holds
    assert cause.subtasks == (0,)
    assert cause.confidence < 0.9  # inferred from where threads sit: never certain
    assert any("no records moved" in line for line in texts(cause))
    cycle = next(line for line in texts(cause) if line.startswith("a cycle of waits"))
    assert "map[0] -> sink[0] -> map[0]" in cycle  # followed on subtasks
    assert "TCP" in cause.recommendation
    assert not [c for c in report.root_causes if c.kind == "network"]
    assert evidence_problems(report) == []


def test_a_slow_job_that_still_moves_a_record_is_not_stalled() -> None:
    report = diagnose(deadlock(rate=0.4), RULES)  # type: ignore[arg-type]
    assert not [c for c in report.root_causes or () if c.kind == "stalled"]


def test_without_record_rates_a_stall_is_not_claimed() -> None:
    quiet = observation(
        vertex("a", sub(0, bp=0.99, timed=False)),
        vertex("b", sub(0, busy=0.0, timed=False), inputs=[edge("a")]),
        source="pyspy",
    )
    report = diagnose(quiet, RULES)
    assert not [c for c in report.root_causes or () if c.kind == "stalled"]


def test_a_stall_in_one_region_leaves_the_other_diagnosed() -> None:
    obs = observation(
        vertex("a", sub(0, bp=0.99, rout=0.0)),
        vertex("b", sub(0, busy=0.0, rin=0.0, rout=0.0), inputs=[edge("a")]),
        vertex("x", sub(0, busy=0.1, rout=500)),
        vertex("y", sub(0, busy=0.2, rin=500), inputs=[edge("x")]),
    )
    report = diagnose(obs, RULES)
    kinds = {(c.vertex, c.kind) for c in report.root_causes or ()}
    assert ("b", "stalled") in kinds  # b waits for input from a, which waits on b
    assert not {v for v, _ in kinds} & {"x", "y"}
    assert evidence_problems(report) == []


def test_the_cycle_is_followed_on_subtasks_to_the_one_that_holds_it() -> None:
    """agg[0] aligns a checkpoint and waits for input while agg[1] is blocked on the sink.

    On vertices agg looks backpressured (its worst subtask) and the walk goes agg -> sink -> agg,
    naming the idle sink; on subtasks it reaches agg[0], which waits on the cleaners that wait
    on it.
    """
    obs = observation(
        vertex("source", sub(0, bp=1.0, rout=0.0), sub(1, bp=1.0, rout=0.0)),
        vertex("clean", sub(0, bp=1.0, rin=0.0, rout=0.0), sub(1, bp=1.0, rin=0.0, rout=0.0),
               inputs=[edge("source", "forward")]),
        vertex("agg", sub(0, busy=0.0, rin=0.0, rout=0.0, in_pool=1.0),
               sub(1, bp=1.0, rin=0.0, rout=0.0, in_pool=1.0), inputs=[edge("clean", "hash")]),
        vertex("sink", sub(0, busy=0.0, rin=0.0, in_pool=1.0), inputs=[edge("agg")],
               kind="sink"),
        settings=TargetSettings(flow_control="tcp"),
    )  # fmt: skip
    causes = diagnose(obs, RULES).root_causes
    assert causes
    cause = causes[0]
    assert (cause.vertex, cause.kind, cause.subtasks) == ("agg", "stalled", (0,))
    cycle = next(line for line in texts(cause) if line.startswith("a cycle of waits"))
    assert "agg[0]" in cycle and "sink" not in cycle


def test_the_channels_say_which_producer_the_aligning_consumer_waits_for() -> None:
    """sink[0] holds map[0]'s channel (its barrier came) and waits for map[1]'s, stuck behind a
    stopped TCP connection: the channels name map[1], where the vertices alone name map[0]."""
    obs = observation(
        vertex("map", sub(0, bp=1.0, rin=0.0, rout=0.0), sub(1, bp=1.0, rin=0.0, rout=0.0)),
        vertex("sink", sub(0, busy=0.0, rin=0.0, in_pool=1.0), inputs=[edge("map")],
               kind="sink"),
        settings=TargetSettings(flow_control="tcp"),
    )  # fmt: skip
    blind = diagnose(obs, RULES).root_causes
    assert blind and "map[0] -> sink[0]" in texts(blind[0])[-1]  # the first producer, a guess
    channels = (
        ChannelWindow("map", 0, "sink", 0, remote=False, backlog=5.0, queued=0.0, blocked=1.0),
        ChannelWindow("map", 1, "sink", 0, remote=True, backlog=6.0, queued=0.0, stalled=1.0),
    )
    causes = diagnose(replace(obs, channels=channels), RULES).root_causes
    assert causes
    cause = causes[0]
    assert (cause.vertex, cause.kind, cause.subtasks) == ("sink", "stalled", (0,))
    assert "sink[0] idles 100% and waits for input from map[1]" in texts(cause)
    assert texts(cause)[-1] == "a cycle of waits: sink[0] -> map[1] -> sink[0]"
