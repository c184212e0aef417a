"""Bottleneck localisation on the graph: suspects, victims, siblings, series, findings."""

from __future__ import annotations

from dataclasses import replace

import pytest

from bpmon.model.values import ChannelWindow, Observation, TargetSettings
from bpmon.rules.config import BottleneckRules, RulesConfig
from bpmon.rules.graph import build_graph, summarize
from bpmon.rules.localize import Localization, localize

from .observations import edge, observation, sub, vertex

RULES = RulesConfig()


def found(obs: Observation) -> Localization:
    return localize(obs, RULES)


def suspects(obs: Observation) -> dict[str, str]:
    return {s.vertex: s.mechanism for s in found(obs).suspects}


def test_topology_orders_a_diamond_and_lists_consumers() -> None:
    obs = observation(
        vertex("join", sub(0), inputs=[edge("left"), edge("right")]),
        vertex("right", sub(0), inputs=[edge("src")]),
        vertex("left", sub(0), inputs=[edge("src")]),
        vertex("src", sub(0)),
    )
    graph = build_graph(obs)
    assert graph.order.index("src") == 0
    assert graph.order[-1] == "join"
    assert sorted(c for c, _ in graph.consumers["src"]) == ["left", "right"]
    assert graph.has_edges


def test_topology_survives_a_cycle_and_unknown_inputs() -> None:
    obs = observation(
        vertex("a", sub(0), inputs=[edge("b"), edge("ghost")]),
        vertex("b", sub(0), inputs=[edge("a")]),
    )
    graph = build_graph(obs)
    assert sorted(graph.order) == ["a", "b"]
    assert [e.source for e in graph.producers["a"]] == ["b"]


def test_profile_takes_the_worst_subtask_so_skew_does_not_average_out() -> None:
    v = vertex("agg", sub(0, busy=0.99), sub(1, busy=0.05), sub(2, busy=0.04), sub(3, busy=0.05))
    prof = summarize(v)
    assert prof.busy is not None and prof.busy > 0.95
    assert prof.running


def test_nothing_above_ok_means_no_suspect_even_if_something_is_saturated() -> None:
    obs = observation(
        vertex("src", sub(0, bp=0.08, busy=0.1)),
        vertex("map", sub(0, busy=1.0), inputs=[edge("src")]),
    )
    loc = found(obs)
    assert loc.suspects == () and loc.findings == ()


def test_a_busy_vertex_that_is_backpressured_by_its_own_consumer_is_a_victim() -> None:
    # a is LOW (0.3) yet busy (0.72) and much less backpressured than src, but its consumer b is
    # HIGH: a only passes b's backpressure on. b waits on c, which is busy: c is the cause.
    obs = observation(
        vertex("src", sub(0, bp=0.95, busy=0.03)),
        vertex("a", sub(0, bp=0.27, busy=0.72), inputs=[edge("src")]),
        vertex("b", sub(0, bp=0.80, busy=0.15), inputs=[edge("a")]),
        vertex("c", sub(0, busy=0.97), inputs=[edge("b")]),
    )
    assert suspects(obs) == {"c": "busy"}


def test_less_backpressured_than_its_producers_by_the_margin_is_still_a_suspect() -> None:
    # map is LOW (0.2) but 0.75 less than src and busy; its consumer idles: map is the limit.
    obs = observation(
        vertex("src", sub(0, bp=0.95, busy=0.03)),
        vertex("map", sub(0, bp=0.20, busy=0.78), inputs=[edge("src")]),
        vertex("sink", sub(0, busy=0.05), inputs=[edge("map")]),
    )
    assert suspects(obs) == {"map": "busy"}


def test_fan_out_drops_a_moderately_busy_sibling_of_the_saturated_consumer() -> None:
    obs = observation(
        vertex("src", sub(0, bp=0.93, busy=0.03)),
        vertex("slow", sub(0, busy=0.98), inputs=[edge("src")]),
        vertex("busyish", sub(0, busy=0.76), inputs=[edge("src")]),
    )
    assert suspects(obs) == {"slow": "busy"}


def test_fan_out_keeps_two_saturated_consumers() -> None:
    obs = observation(
        vertex("src", sub(0, bp=0.93, busy=0.03)),
        vertex("one", sub(0, busy=0.98), inputs=[edge("src")]),
        vertex("two", sub(0, busy=0.95), inputs=[edge("src")]),
    )
    assert suspects(obs) == {"one": "busy", "two": "busy"}


def test_second_bottleneck_in_series_is_secondary_and_names_its_feeder() -> None:
    obs = observation(
        vertex("src", sub(0, bp=0.9, busy=0.05)),
        vertex("op", sub(0, bp=0.02, busy=0.96), inputs=[edge("src")]),
        vertex("sink", sub(0, busy=0.95), inputs=[edge("op")]),
    )
    by_name = {s.vertex: s for s in found(obs).suspects}
    assert not by_name["op"].secondary and by_name["op"].pressing == ("src",)
    assert by_name["sink"].secondary and by_name["sink"].pressing == ("op",)


def test_a_merely_busy_vertex_after_the_bottleneck_is_not_a_second_bottleneck() -> None:
    obs = observation(
        vertex("src", sub(0, bp=0.9, busy=0.05)),
        vertex("op", sub(0, busy=0.97), inputs=[edge("src")]),
        vertex("sink", sub(0, busy=0.80), inputs=[edge("op")]),
    )
    assert suspects(obs) == {"op": "busy"}


def test_idle_consumer_of_a_blocked_producer_is_explained_by_its_busy_sibling() -> None:
    # src waits on slow; quick idles with an empty input: not a network cause.
    obs = observation(
        vertex("src", sub(0, bp=0.93, busy=0.03, out_pool=1.0, tm=0)),
        vertex("slow", sub(0, busy=0.98, tm=1), inputs=[edge("src")]),
        vertex("quick", sub(0, busy=0.05, in_pool=0.0, tm=1), inputs=[edge("src")]),
    )
    assert suspects(obs) == {"slow": "busy"}


def test_a_producer_only_low_is_held_back_by_the_link_when_the_pools_say_so() -> None:
    # src only LOW (0.3), but its output buffers are full and map's input buffers empty over a
    # remote link: the data is stuck between them, so the link is the limit.
    obs = observation(
        vertex("src", sub(0, bp=0.30, busy=0.03, out_pool=1.0, tm=0)),
        vertex("map", sub(0, busy=0.05, in_pool=0.0, tm=1), inputs=[edge("src")]),
    )
    assert suspects(obs) == {"map": "network"}


@pytest.mark.parametrize("out_pool", [None, 0.2])
def test_a_producer_only_low_without_full_output_buffers_is_unexplained(
    out_pool: float | None,
) -> None:
    obs = observation(
        vertex("src", sub(0, bp=0.30, busy=0.03, out_pool=out_pool, tm=0)),
        vertex("map", sub(0, busy=0.05, in_pool=0.0, tm=1), inputs=[edge("src")]),
    )
    loc = found(obs)
    assert loc.suspects == ()
    assert [(f.kind, f.vertex) for f in loc.findings] == [("unexplained", "src")]


def test_a_link_starved_consumer_is_the_network_however_busy_it_is() -> None:
    # map is 60% busy and idles 40%: not idle enough for the old rule, but its input buffers
    # are empty while src's output buffers are full, over a remote link.
    obs = observation(
        vertex("src", sub(0, bp=0.92, busy=0.05, out_pool=1.0, tm=0)),
        vertex("map", sub(0, busy=0.60, in_pool=0.02, tm=1), inputs=[edge("src")]),
    )
    assert suspects(obs) == {"map": "network"}


def test_a_busy_sibling_with_headroom_is_not_blamed_for_a_capped_link() -> None:
    # fan-out: src waits on the link to far (idle, input empty); near runs 79% busy with its
    # input buffers empty too: it has headroom and is not what src waits on.
    obs = observation(
        vertex("src", sub(0, bp=0.90, busy=0.05, out_pool=1.0, tm=0)),
        vertex("near", sub(0, busy=0.79, in_pool=0.05, tm=1), inputs=[edge("src")]),
        vertex("far", sub(0, busy=0.05, in_pool=0.0, tm=2), inputs=[edge("src")]),
    )
    assert suspects(obs) == {"far": "network"}


def test_a_channel_held_by_the_link_names_it_though_the_shared_output_pool_is_not_full() -> None:
    # three-way fan-out: src's channel to far waits for a capped link (9 buffers queued at src,
    # credit to send, none at far); its other two subpartitions drain, so its whole output pool
    # is only 40% used, below out_pool_min. The pools alone cannot tell; the channel can. (A
    # busier sibling with headroom is set aside by the engine: test_engine, the corpus.)
    obs = observation(
        vertex("src", sub(0, bp=0.95, busy=0.02, out_pool=0.4, tm=0)),
        vertex("far", sub(0, busy=0.05, in_pool=0.0, tm=1), inputs=[edge("src", "forward")]),
        vertex("near", sub(0, busy=0.30, in_pool=0.0, tm=0), inputs=[edge("src", "forward")]),
        vertex("log", sub(0, busy=0.10, in_pool=0.0, tm=0), inputs=[edge("src", "forward")]),
    )
    assert suspects(obs) == {}  # the pools say nothing: an unexplained finding, no guess
    drained = ChannelWindow("src", 0, "near", 0, remote=False, backlog=0.2, queued=0.0)
    held = ChannelWindow("src", 0, "far", 0, remote=True, backlog=9.0, queued=0.0, no_credit=0.0)
    assert suspects(replace(obs, channels=(held, drained))) == {"far": "network"}
    # far gives no credit and holds what it received: it is full, not the link (no credit with
    # nothing queued at an idle consumer would be credit on its way back: test_round_trip)
    starved = replace(held, no_credit=1.0, queued=2.0)
    assert suspects(replace(obs, channels=(starved, drained))) == {}


def test_a_saturated_vertex_with_full_input_is_still_the_busy_bottleneck() -> None:
    obs = observation(
        vertex("src", sub(0, bp=0.92, busy=0.05, out_pool=1.0, tm=0)),
        vertex("map", sub(0, busy=0.97, in_pool=1.0, tm=1), inputs=[edge("src")]),
    )
    assert suspects(obs) == {"map": "busy"}


def test_a_slow_subtask_in_one_sub_pipeline_is_found_beside_a_victim_in_the_other() -> None:
    # two forward sub-pipelines: a[0] -> b[0] -> c[0] and a[1] -> b[1] -> c[1]. b[0] is the
    # bottleneck of the first; b[1] is a victim of c[1], the bottleneck of the second. b's worst
    # subtask is HIGH, so b as a whole looks like a victim; on subtasks both bottlenecks show.
    forward = [edge("a", "forward")]
    obs = observation(
        vertex("a", sub(0, bp=0.9, busy=0.05, tm=0), sub(1, bp=0.9, busy=0.05, tm=1)),
        vertex("b", sub(0, busy=0.98, tm=0), sub(1, bp=0.9, busy=0.05, tm=1), inputs=forward),
        vertex("c", sub(0, busy=0.3, tm=0), sub(1, busy=0.98, tm=1), inputs=[edge("b", "forward")]),
    )
    loc = found(obs)
    assert {s.vertex: s.mechanism for s in loc.suspects} == {"b": "busy", "c": "busy"}
    assert loc.blamed == {"b": (0,), "c": (1,)}


def test_network_is_ruled_out_by_a_producer_whose_output_pool_is_not_full() -> None:
    obs = observation(
        vertex("src", sub(0, bp=0.90, busy=0.03, out_pool=0.2, tm=0)),
        vertex("map", sub(0, busy=0.05, in_pool=0.0, tm=1), inputs=[edge("src")]),
    )
    assert suspects(obs) == {}


def test_network_without_pool_metrics_or_task_managers_is_still_a_suspect() -> None:
    obs = observation(
        vertex("src", sub(0, bp=0.90, busy=0.03)),
        vertex("map", sub(0, busy=0.05), inputs=[edge("src")]),
    )
    assert suspects(obs) == {"map": "network"}


def test_tcp_never_blames_another_exchange_whatever_the_task_managers() -> None:
    # Flink before 1.5 kept one connection per exchange: a-src -> a and b-src -> b never share
    # one, so b, idle behind its blocked producer, is its own link's problem, not collateral.
    obs = observation(
        vertex("a-src", sub(0, bp=0.9, busy=0.03)),
        vertex("a", sub(0, busy=0.97), inputs=[edge("a-src")]),
        vertex("b-src", sub(0, bp=0.9, busy=0.03)),
        vertex("b", sub(0, busy=0.02), inputs=[edge("b-src")]),
        settings=TargetSettings(flow_control="tcp"),
    )
    loc = found(obs)
    assert {s.vertex: s.mechanism for s in loc.suspects} == {"a": "busy", "b": "network"}
    assert not [f for f in loc.findings if f.kind == "head-of-line"]


def test_consumer_that_never_ran_is_starved() -> None:
    obs = observation(
        vertex("src", sub(0, bp=0.97, busy=0.02)),
        vertex("agg", sub(0, samples=0, timed=False), inputs=[edge("src")]),
    )
    assert suspects(obs) == {"agg": "starved"}


def test_time_accounting_alone_localises_when_there_are_no_samples() -> None:
    # A Flink cluster without thread dumps: no samples, only the ms/s metrics.
    obs = observation(
        vertex("src", sub(0, bp=0.9, busy=0.05, samples=0)),
        vertex("map", sub(0, busy=0.95, samples=0), inputs=[edge("src")]),
    )
    assert suspects(obs) == {"map": "busy"}


def test_backpressured_sink_is_unexplained_not_a_cause() -> None:
    obs = observation(
        vertex("src", sub(0, busy=0.2)),
        vertex("sink", sub(0, bp=0.6, busy=0.3), inputs=[edge("src")]),
    )
    loc = found(obs)
    assert loc.suspects == ()
    assert [(f.kind, f.vertex) for f in loc.findings] == [("unexplained", "sink")]


def test_without_edges_the_busiest_unblocked_vertex_is_the_only_suspect() -> None:
    obs = observation(
        vertex("t1", sub(0, bp=0.9, busy=0.05)),
        vertex("t2", sub(0, busy=0.85)),
        vertex("t3", sub(0, busy=0.95)),
        vertex("t4", sub(0, bp=0.2, busy=0.99)),
    )
    loc = found(obs)
    assert not loc.with_topology
    assert [(s.vertex, s.pressing) for s in loc.suspects] == [("t3", ("t1", "t4"))]


def test_without_edges_a_thread_never_on_the_data_path_is_never_a_suspect() -> None:
    # MainThread sleeps to keep the program alive: 100% busy by its stack, but never seen in a
    # queue operation; the slow stage is a little less busy by the samples.
    keeper = replace(sub(0, busy=1.0, timed=False), thread="MainThread", data_path=False)
    obs = observation(
        vertex("MainThread", keeper),
        vertex("ingest", sub(0, bp=0.95, busy=0.05, timed=False)),
        vertex("upload", sub(0, busy=0.92, timed=False)),
    )
    assert [(s.vertex, s.pressing) for s in found(obs).suspects] == [("upload", ("ingest",))]


def test_a_keeper_thread_alone_leaves_the_backpressure_unexplained_and_says_so() -> None:
    keeper = replace(sub(0, busy=1.0, timed=False), thread="MainThread", data_path=False)
    obs = observation(
        vertex("MainThread", keeper),
        vertex("ingest", sub(0, bp=0.95, busy=0.05, timed=False)),
    )
    loc = found(obs)
    assert loc.suspects == ()
    ((kind, name, detail),) = [(f.kind, f.vertex, f.detail) for f in loc.findings]
    assert (kind, name) == ("unexplained", "ingest")
    assert "never seen on the data path, so not blamed: MainThread" in detail


def test_a_vertex_nearly_as_backpressured_as_its_producer_is_not_a_suspect() -> None:
    # map is LOW (0.20), only 0.25 below src (0.45), though busy 0.78: not clearly the limit
    # (with a margin of 0.2 it would be).
    obs = observation(
        vertex("src", sub(0, bp=0.45, busy=0.05)),
        vertex("map", sub(0, bp=0.20, busy=0.78), inputs=[edge("src")]),
        vertex("sink", sub(0, busy=0.05), inputs=[edge("map")]),
    )
    assert suspects(obs) == {}
    looser = RulesConfig(bottleneck=BottleneckRules(less_backpressured_margin=0.2))
    assert [s.vertex for s in localize(obs, looser).suspects] == ["map"]


def test_tcp_head_of_line_in_one_exchange_is_reported_even_for_a_mildly_blocked_producer() -> None:
    # p[0] -> c[0] and p[1] -> c[1] cross TM0 -> TM1 on the one p -> c exchange; c[1] is slow.
    obs = observation(
        vertex("p", sub(0, bp=0.3, busy=0.03, tm=0), sub(1, bp=0.9, busy=0.03, tm=0)),
        vertex("c", sub(0, busy=0.02, tm=1), sub(1, busy=0.97, tm=1),
               inputs=[edge("p", "forward")]),
        settings=TargetSettings(flow_control="tcp"),
    )  # fmt: skip
    loc = found(obs)
    assert [s.vertex for s in loc.suspects] == ["c"]
    assert loc.blamed == {"c": (1,)}
    assert [(f.kind, f.vertex) for f in loc.findings] == [("head-of-line", "p")]
    assert "p[0] is LOW (0.30)" in loc.findings[0].detail
