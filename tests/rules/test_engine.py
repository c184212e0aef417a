"""The rules engine on the shapes of spec/scenarios: the named root cause, its kind and subtasks,
the ranking, and that victims are never named.

Each observation is written by hand from the scenario's meaning (what the runtime produces when
that job runs), and each expected answer comes from the scenario, not from the code.
"""

from __future__ import annotations

import re
from dataclasses import replace

import pytest

from bpmon.model.values import Observation, Report, RootCause, RuntimeLoad, TargetSettings
from bpmon.rules.config import RulesConfig
from bpmon.rules.engine import diagnose

from .figures import texts
from .observations import edge, lag, observation, spilled, sub, vertex

RULES = RulesConfig()


def run(obs: Observation) -> Report:
    report = diagnose(obs, RULES)
    assert report.root_causes is not None
    for cause in report.root_causes:
        assert 0.0 <= cause.confidence <= 1.0
        assert texts(cause) and cause.recommendation
    return report


def names(report: Report) -> list[str]:
    return [c.vertex for c in report.root_causes or ()]


def first(report: Report) -> RootCause:
    assert report.root_causes
    return report.root_causes[0]


LAG = lag(4000.0)
"""Each source owes 4,000 more records every second: it would emit 5,000/s."""


def slow_map_chain() -> Observation:
    """source(2, 5000/s each) -> parse -> enrich (2, 1000 records/s each at most) -> sink."""
    return observation(
        vertex("source", sub(0, bp=0.80, busy=0.03, rout=1000, out_pool=1.0, tm=0, metrics=LAG),
               sub(1, bp=0.78, busy=0.04, rout=1000, out_pool=1.0, tm=1, metrics=LAG),
               kind="source"),
        vertex("parse", sub(0, bp=0.97, busy=0.02, rin=1000, rout=1000, in_pool=1.0, tm=0),
               sub(1, bp=0.95, busy=0.03, rin=1000, rout=1000, in_pool=1.0, tm=1),
               inputs=[edge("source", "forward")], kind="map"),
        vertex("enrich", sub(0, busy=0.99, rin=1000, rout=1000, in_pool=1.0, tm=0),
               sub(1, busy=0.97, rin=990, rout=990, in_pool=0.95, tm=1),
               inputs=[edge("parse")], kind="map"),
        vertex("sink", sub(0, busy=0.04, rin=1990, in_pool=0.05, tm=0),
               inputs=[edge("enrich")], kind="sink"),
        job="slow-map-chain",
    )  # fmt: skip


def test_slow_middle_of_a_chain_is_the_root_cause_and_its_victims_are_not() -> None:
    report = run(slow_map_chain())
    assert names(report) == ["enrich"]
    cause = first(report)
    assert cause.kind == "slow-operator"
    assert cause.confidence >= 0.8
    text = " | ".join(texts(cause))
    assert "parse is HIGH" in text and "rebalance" in text
    assert "% (time accounting)" in text and "% (samples)" in text


def test_on_a_busy_host_whose_threads_ran_more_than_they_waited_the_cause_is_named() -> None:
    """Other processes held the cores, but the runtime's threads ran more than they waited:
    the figures hold, enrich is named, and a host-busy finding says the machine was busy."""
    reason = "the machine was busy but the runtime kept up: the job's threads used 0.50 cores"
    load = RuntimeLoad(cpu_cores_used=0.5, lag_ms_p99=900.0, saturated=False, reason=reason,
                       host_busy=True)  # fmt: skip
    report = run(replace(slow_map_chain(), load=load))
    assert names(report) == ["enrich"]
    busy = [f for f in report.findings if f.kind == "host-busy"]
    assert [f.detail for f in busy] == [reason]


def test_when_the_threads_waited_longer_than_they_ran_nothing_is_named() -> None:
    reason = "the machine was too busy for the runtime: the job's threads used 0.10 cores"
    load = RuntimeLoad(cpu_cores_used=0.1, lag_ms_p99=900.0, saturated=True, reason=reason,
                       host_busy=True)  # fmt: skip
    report = run(replace(slow_map_chain(), load=load))
    assert names(report) == []
    (finding,) = report.findings
    assert finding.kind == "runtime-saturated" and "run it again when the machine is quieter" in (
        finding.detail
    )


def test_slow_operator_recommendation_sizes_the_parallelism() -> None:
    # Sources would emit 5000/s each (1000 out + 4000/s more owed); enrich takes ~1,010/s per
    # subtask at 100% busy; at 90% utilisation that is 10000 / 909 = 11 subtasks.
    cause = first(run(slow_map_chain()))
    match = re.search(r"\b(\d+) subtasks instead of 2\b", cause.recommendation)
    assert match, cause.recommendation
    assert int(match.group(1)) == cause.recommended_parallelism == 11
    assert "--verify" in cause.recommendation
    assert any("per subtask at 100% busy" in e for e in texts(cause))


def test_report_carries_the_window_and_every_vertex() -> None:
    obs = slow_map_chain()
    report = run(obs)
    assert (report.run_id, report.job, report.source, report.window) == (
        obs.run_id,
        "slow-map-chain",
        "runtime",
        obs.window,
    )
    assert [v.name for v in report.vertices] == ["source", "parse", "enrich", "sink"]
    parse = report.vertices[1]
    assert parse.level == "HIGH" and parse.ratio == pytest.approx(0.97)
    assert parse.metrics.records_in_per_s == pytest.approx(2000)
    assert report.vertices[2].level == "OK"


def test_slow_sink() -> None:
    # source(2, 4000/s each) -> transform -> db-writer (sink, 2 x 1250 records/s).
    obs = observation(
        vertex("source", sub(0, bp=0.69, busy=0.02, rout=1250), sub(1, bp=0.70, busy=0.02,
               rout=1250), kind="source"),
        vertex("transform", sub(0, bp=0.96, busy=0.03, rin=1250, rout=1250),
               sub(1, bp=0.93, busy=0.04, rin=1250, rout=1250), inputs=[edge("source", "forward")],
               kind="map"),
        vertex("db-writer", sub(0, busy=0.95, rin=1250, in_pool=1.0),
               sub(1, busy=0.97, rin=1250, in_pool=1.0), inputs=[edge("transform")], kind="sink"),
    )  # fmt: skip
    report = run(obs)
    assert names(report) == ["db-writer"]
    cause = first(report)
    assert cause.kind == "slow-sink"
    assert "external system" in cause.recommendation


def test_a_sink_without_kind_is_recognised_by_having_no_consumer() -> None:
    obs = observation(
        vertex("read", sub(0, bp=0.9, busy=0.05, rout=500)),
        vertex("write", sub(0, busy=0.96, rin=500), inputs=[edge("read", "forward")]),
    )
    cause = first(run(obs))
    assert (cause.vertex, cause.kind) == ("write", "slow-sink")


def hot_key() -> Observation:
    """70% of the records carry one key that hashes to count-by-user[0] (2500 records/s max)."""
    return observation(
        vertex("source", sub(0, bp=0.46, busy=0.03, rout=1613), sub(1, bp=0.47, busy=0.03,
               rout=1613), kind="source"),
        vertex("count-by-user", sub(0, busy=0.99, rin=2500, rout=2500, in_pool=1.0),
               sub(1, busy=0.10, rin=242, rout=242, in_pool=0.1),
               sub(2, busy=0.11, rin=243, rout=243, in_pool=0.1),
               sub(3, busy=0.09, rin=241, rout=241, in_pool=0.1),
               inputs=[edge("source", "hash")], kind="map"),
        vertex("sink", sub(0, busy=0.08, rin=3226), inputs=[edge("count-by-user")], kind="sink"),
    )  # fmt: skip


def test_hot_key_is_data_skew_on_the_hot_subtask() -> None:
    report = run(hot_key())
    assert names(report) == ["count-by-user"]
    cause = first(report)
    assert cause.kind == "data-skew"
    assert cause.subtasks == (0,)
    # 2500 of 3226 records/s: 77%, against a fair share of 25%.
    assert "count-by-user[0] receives 77% of the records of count-by-user (fair share 25%)" in (
        texts(cause)
    )
    assert "salt" in cause.recommendation and "hash exchange" in cause.recommendation


def test_slow_subtask_with_an_even_share_of_records() -> None:
    # score[2] runs ten times slower: 500 records/s each, [2] is 100% busy, the others 10%.
    obs = observation(
        vertex("source", sub(0, bp=0.75, busy=0.03, rout=750), sub(1, bp=0.74, busy=0.03,
               rout=750), kind="source"),
        vertex("score", sub(0, busy=0.10, rin=500, rout=500, tm=0),
               sub(1, busy=0.11, rin=500, rout=500, tm=1),
               sub(2, busy=0.98, rin=500, rout=500, tm=0),
               inputs=[edge("source")], kind="map"),
        vertex("sink", sub(0, busy=0.05, rin=1500), inputs=[edge("score")], kind="sink"),
    )  # fmt: skip
    report = run(obs)
    assert names(report) == ["score"]
    cause = first(report)
    assert (cause.kind, cause.subtasks) == ("slow-subtask", (2,))
    assert "task manager 0" in cause.recommendation
    assert any("per record" in e for e in texts(cause))


def test_fan_in_names_the_union_that_cannot_keep_up() -> None:
    obs = observation(
        vertex("clicks", sub(0, bp=0.72, busy=0.03, rout=560), sub(1, bp=0.70, busy=0.03,
               rout=560), kind="source"),
        vertex("views", sub(0, bp=0.63, busy=0.04, rout=1100), kind="source"),
        vertex("merge", sub(0, busy=0.99, rin=1110, rout=1110), sub(1, busy=0.98, rin=1110,
               rout=1110), inputs=[edge("clicks"), edge("views")], kind="map"),
        vertex("sink", sub(0, busy=0.05, rin=2220), inputs=[edge("merge")], kind="sink"),
    )  # fmt: skip
    report = run(obs)
    assert names(report) == ["merge"]
    cause = first(report)
    assert cause.kind == "slow-operator"
    assert any(e.startswith("clicks is HIGH") for e in texts(cause))
    assert any(e.startswith("views is HIGH") for e in texts(cause))


def test_diamond_with_one_slow_branch_names_only_that_branch() -> None:
    # source feeds a fast and a slow branch that join again; the fast branch starves (its input
    # buffers are nearly empty and it idles) because the source waits on the slow branch.
    obs = observation(
        vertex("source", sub(0, bp=0.92, busy=0.03, rout=600, out_pool=1.0, tm=0),
               sub(1, bp=0.90, busy=0.04, rout=600, out_pool=1.0, tm=1), kind="source"),
        vertex("fast", sub(0, busy=0.06, rin=600, rout=600, in_pool=0.05, tm=0),
               sub(1, busy=0.05, rin=600, rout=600, in_pool=0.04, tm=1),
               inputs=[edge("source")], kind="map"),
        vertex("slow", sub(0, busy=0.99, rin=600, rout=600, in_pool=1.0, tm=0),
               sub(1, busy=0.97, rin=600, rout=600, in_pool=1.0, tm=1),
               inputs=[edge("source")], kind="map"),
        vertex("join", sub(0, busy=0.12, rin=1200, rout=1200, in_pool=0.1, tm=0),
               sub(1, busy=0.11, rin=1200, rout=1200, in_pool=0.1, tm=1),
               inputs=[edge("fast"), edge("slow")], kind="map"),
        vertex("sink", sub(0, busy=0.1, rin=2400), inputs=[edge("join")], kind="sink"),
    )  # fmt: skip
    report = run(obs)
    assert names(report) == ["slow"]
    assert first(report).kind == "slow-operator"
    assert report.findings == ()


def test_slow_operator_feeding_a_slower_sink_reports_only_the_sink() -> None:
    # op could do 2750/s but the sink takes 2000/s: op is 73% busy and 26% backpressured (it
    # waits on the sink), so it is a victim although busy; the sink is what limits the job.
    obs = observation(
        vertex("source", sub(0, bp=0.90, busy=0.05, rout=2000), kind="source"),
        vertex("op", sub(0, bp=0.26, busy=0.73, rin=2000, rout=2000), inputs=[edge("source")]),
        vertex("sink", sub(0, busy=0.97, rin=2000), inputs=[edge("op")], kind="sink"),
    )
    report = run(obs)
    assert names(report) == ["sink"]
    assert first(report).kind == "slow-sink"


def test_two_saturated_bottlenecks_in_series_are_both_reported_upstream_first() -> None:
    obs = observation(
        vertex("source", sub(0, bp=0.90, busy=0.05, rout=2000), kind="source"),
        vertex("op", sub(0, bp=0.03, busy=0.95, rin=2000, rout=2000), inputs=[edge("source")]),
        vertex("sink", sub(0, busy=0.96, rin=2000), inputs=[edge("op")], kind="sink"),
    )
    report = run(obs)
    assert names(report) == ["op", "sink"]
    assert report.root_causes
    upstream, downstream = report.root_causes
    assert (upstream.kind, downstream.kind) == ("slow-operator", "slow-sink")
    assert upstream.confidence > downstream.confidence


def test_two_independent_pipelines_are_both_reported_clearest_first() -> None:
    obs = observation(
        vertex("orders", sub(0, bp=0.97, busy=0.02, rout=900), kind="source"),
        vertex("price", sub(0, busy=0.99, rin=900, rout=900), inputs=[edge("orders")]),
        vertex("orders-out", sub(0, busy=0.05, rin=900), inputs=[edge("price")], kind="sink"),
        vertex("clicks", sub(0, bp=0.60, busy=0.10, rout=700), kind="source"),
        vertex("clicks-db", sub(0, busy=0.80, rin=700), inputs=[edge("clicks")], kind="sink"),
    )
    report = run(obs)
    assert names(report) == ["price", "clicks-db"]
    assert [c.kind for c in report.root_causes or ()] == ["slow-operator", "slow-sink"]


def tcp_head_of_line(flow_control: str = "tcp", audit_tm: tuple[int, int] = (0, 1)) -> Observation:
    """Two pipelines share the TM0 <-> TM1 connections; audit (a sink) is slow."""
    return observation(
        vertex("audit-source", sub(0, bp=0.88, busy=0.03, rout=330, out_pool=1.0, tm=0),
               sub(1, bp=0.90, busy=0.03, rout=330, out_pool=1.0, tm=1), kind="source"),
        vertex("audit", sub(0, busy=0.97, rin=660, in_pool=1.0, tm=audit_tm[0]),
               sub(1, busy=0.96, rin=660, in_pool=1.0, tm=audit_tm[1]),
               inputs=[edge("audit-source")], kind="sink"),
        vertex("metrics-source", sub(0, bp=0.85, busy=0.02, rout=150, out_pool=1.0, tm=0),
               sub(1, bp=0.83, busy=0.02, rout=150, out_pool=1.0, tm=1), kind="source"),
        vertex("metrics", sub(0, busy=0.01, rin=150, in_pool=0.02, tm=0),
               sub(1, busy=0.01, rin=150, in_pool=0.03, tm=1),
               inputs=[edge("metrics-source")], kind="sink"),
        settings=TargetSettings(flow_control=flow_control),
    )  # fmt: skip


def test_tcp_keeps_two_exchanges_on_two_connections_so_metrics_is_a_network_cause() -> None:
    # Flink before 1.5 gave each exchange (intermediate result) its own connection: audit's full
    # receiver stops audit's channels only, and metrics, idle behind its blocked producer, is
    # its own link's problem.
    report = run(tcp_head_of_line())
    kinds = {c.vertex: c.kind for c in report.root_causes or ()}
    assert kinds == {"audit": "slow-sink", "metrics": "network"}
    assert not [f for f in report.findings if f.kind == "head-of-line"]


def one_exchange(flow_control: str = "tcp") -> Observation:
    """Three forward sub-pipelines events -> parse -> store on two task managers; store[2] is
    slow. parse[0] -> store[0] and parse[2] -> store[2] both cross TM1 -> TM0 on the one
    parse -> store exchange, so under TCP parse[0] waits behind store[2]'s full receiver."""
    return observation(
        vertex("events", sub(0, bp=0.9, busy=0.02, rout=100, tm=0),
               sub(1, busy=0.1, rout=600, tm=1), sub(2, bp=0.92, busy=0.02, rout=100, tm=0),
               kind="source"),
        vertex("parse", sub(0, bp=0.95, busy=0.02, rin=100, rout=100, tm=1),
               sub(1, busy=0.06, rin=600, rout=600, tm=0),
               sub(2, bp=0.96, busy=0.02, rin=100, rout=100, tm=1),
               inputs=[edge("events", "forward")]),
        vertex("store", sub(0, busy=0.02, rin=100, in_pool=0.0, tm=0),
               sub(1, busy=0.12, rin=600, in_pool=0.1, tm=1),
               sub(2, busy=0.98, rin=100, in_pool=1.0, tm=0),
               inputs=[edge("parse", "forward")], kind="sink"),
        settings=TargetSettings(flow_control=flow_control),  # type: ignore[arg-type]
    )  # fmt: skip


def test_tcp_head_of_line_in_one_exchange_names_the_collateral_producer() -> None:
    report = run(one_exchange())
    assert names(report) == ["store"]
    assert first(report).subtasks == (2,)
    hol = [f for f in report.findings if f.kind == "head-of-line"]
    assert [f.vertex for f in hol] == ["parse"]
    assert "parse[0]" in hol[0].detail and "store[2]" in hol[0].detail
    assert "parse[2]" not in hol[0].detail  # parse[2] is store[2]'s own victim


def test_under_credit_the_same_subtask_is_not_collateral() -> None:
    report = run(one_exchange("credit"))
    assert "store" in names(report)
    assert not [f for f in report.findings if f.kind == "head-of-line"]


def test_same_picture_under_credit_flow_control_is_a_network_cause() -> None:
    report = run(tcp_head_of_line("credit"))
    assert sorted(names(report)) == ["audit", "metrics"]
    kinds = {c.vertex: c.kind for c in report.root_causes or ()}
    assert kinds == {"audit": "slow-sink", "metrics": "network"}
    assert report.findings == ()


def test_tcp_without_a_shared_connection_is_a_network_cause() -> None:
    # audit's receivers and their producers all sit on task managers that the metrics channels do
    # not use in the same direction: audit-source[0] (TM0) and [1] (TM1) feed audit on TM2 only.
    obs = tcp_head_of_line(audit_tm=(2, 2))
    report = run(obs)
    kinds = {c.vertex: c.kind for c in report.root_causes or ()}
    assert kinds == {"audit": "slow-sink", "metrics": "network"}


def network_cap(in_pool: float = 0.05, tms: tuple[int, int] = (0, 1)) -> Observation:
    """Big records over a capped link: source blocked, its consumer starved and idle."""
    return observation(
        vertex("source", sub(0, bp=0.93, busy=0.04, rout=400, out_pool=1.0, tm=tms[0]),
               sub(1, bp=0.91, busy=0.05, rout=400, out_pool=1.0, tm=tms[1]), kind="source"),
        vertex("map", sub(0, busy=0.08, rin=400, rout=400, in_pool=in_pool, tm=tms[0]),
               sub(1, busy=0.07, rin=400, rout=400, in_pool=in_pool, tm=tms[1]),
               inputs=[edge("source")], kind="map"),
        vertex("sink", sub(0, busy=0.05, rin=800, in_pool=0.02, tm=0), inputs=[edge("map")],
               kind="sink"),
    )  # fmt: skip


def test_network_cap_names_the_consuming_vertex() -> None:
    report = run(network_cap())
    assert names(report) == ["map"]
    cause = first(report)
    assert cause.kind == "network"
    assert cause.subtasks == (0, 1)
    assert "bandwidth" in cause.recommendation


def test_full_input_buffers_rule_the_network_out() -> None:
    report = run(network_cap(in_pool=0.9))
    assert names(report) == []
    assert [(f.kind, f.vertex) for f in report.findings] == [("unexplained", "source")]


def test_all_local_channels_rule_the_network_out() -> None:
    assert names(run(network_cap(tms=(0, 0)))) == []


def test_healthy_job_has_no_root_cause() -> None:
    obs = observation(
        vertex("source", sub(0, bp=0.02, busy=0.10, rout=2000), sub(1, bp=0.0, busy=0.1,
               rout=2000), kind="source"),
        vertex("parse", sub(0, busy=0.22, rin=2000, rout=2000), sub(1, busy=0.2, rin=2000,
               rout=2000), inputs=[edge("source", "forward")]),
        vertex("sink", sub(0, busy=0.2, rin=4000), inputs=[edge("parse")], kind="sink"),
    )  # fmt: skip
    report = run(obs)
    assert report.root_causes == ()
    assert report.findings == ()
    assert {v.level for v in report.vertices} == {"OK"}


def test_busy_vertex_without_backpressure_is_not_a_root_cause() -> None:
    # 10% backpressured is still OK: a saturated sink does not make a backpressure root cause.
    obs = observation(
        vertex("source", sub(0, bp=0.10, busy=0.1, rout=900)),
        vertex("sink", sub(0, busy=0.99, rin=900), inputs=[edge("source")], kind="sink"),
    )
    assert run(obs).root_causes == ()


def test_pyspy_samples_only_still_finds_the_slow_thread() -> None:
    # bpmon monitor on a queue pipeline: no time accounting, no pools, no record rates.
    obs = observation(
        vertex("ingest", sub(0, bp=0.92, busy=0.05, timed=False)),
        vertex("transform", sub(0, busy=0.95, timed=False), sub(1, busy=0.15, timed=False),
               inputs=[edge("ingest")]),
        vertex("upload", sub(0, busy=0.05, timed=False), inputs=[edge("transform")]),
        source="pyspy",
    )  # fmt: skip
    report = run(obs)
    assert names(report) == ["transform"]
    cause = first(report)
    assert (cause.kind, cause.subtasks) == ("slow-subtask", (0,))
    assert any("no record rates" in e for e in texts(cause))
    assert report.vertices[1].metrics.busy_ratio == pytest.approx(0.95)
    assert report.vertices[1].metrics.records_in_per_s is None
    assert "no record rates" in cause.recommendation or "Investigate" in cause.recommendation


def test_pyspy_samples_only_is_less_certain_than_with_rates() -> None:
    def hot(timed: bool, rates: bool) -> Observation:
        return observation(
            vertex("a", sub(0, bp=0.9, busy=0.05, timed=timed, rout=900 if rates else None)),
            vertex("b", sub(0, busy=0.97, timed=timed, rin=300 if rates else None),
                   sub(1, busy=0.1, timed=timed, rin=300 if rates else None),
                   sub(2, busy=0.1, timed=timed, rin=300 if rates else None),
                   inputs=[edge("a")]),
            vertex("c", sub(0, busy=0.1, timed=timed), inputs=[edge("b")]),
        )  # fmt: skip

    with_rates = first(run(hot(True, True)))
    samples_only = first(run(hot(False, False)))
    assert with_rates.kind == samples_only.kind == "slow-subtask"
    assert samples_only.confidence < with_rates.confidence


def test_without_topology_the_busiest_unblocked_thread_is_named_with_low_confidence() -> None:
    obs = observation(
        vertex("reader", sub(0, bp=0.9, busy=0.05, timed=False)),
        vertex("parser", sub(0, busy=0.93, timed=False)),
        vertex("writer", sub(0, busy=0.75, timed=False)),
        vertex("logger", sub(0, busy=0.02, timed=False)),
        source="pyspy",
    )
    report = run(obs)
    assert names(report) == ["parser"]
    assert first(report).confidence < 0.5


def test_consumer_that_does_not_run_is_resource_starved() -> None:
    obs = observation(
        vertex("source", sub(0, bp=0.98, busy=0.01, rout=0)),
        vertex("agg", sub(0, samples=0, timed=False), sub(1, samples=0, timed=False),
               inputs=[edge("source")]),
    )  # fmt: skip
    report = run(obs)
    assert [(c.vertex, c.kind) for c in report.root_causes or ()] == [("agg", "resource-starved")]
    assert report.vertices[1].level is None and report.vertices[1].ratio is None
    assert "slots" in first(report).recommendation


def test_spilling_bottleneck() -> None:
    obs = observation(
        vertex("source", sub(0, bp=0.9, busy=0.05, rout=800)),
        vertex("window", sub(0, busy=0.97, rin=800, rout=10,
                             metrics=spilled(4_000_000.0)),
               inputs=[edge("source", "hash")]),
        vertex("sink", sub(0, busy=0.02, rin=10), inputs=[edge("window")], kind="sink"),
    )  # fmt: skip
    cause = first(run(obs))
    assert (cause.vertex, cause.kind) == ("window", "spilling")
    assert any("4,000,000 bytes/s" in e for e in texts(cause))


def test_deep_chain_of_victims_names_only_the_end() -> None:
    stages = [vertex("s0", sub(0, bp=0.99, busy=0.01, rout=100), kind="source")]
    for i in range(1, 6):
        stages.append(
            vertex(
                f"s{i}", sub(0, bp=0.97, busy=0.02, rin=100, rout=100), inputs=[edge(f"s{i - 1}")]
            )
        )
    stages.append(vertex("last", sub(0, busy=0.9, rin=100, rout=100), inputs=[edge("s5")]))
    stages.append(vertex("out", sub(0, busy=0.01, rin=100), inputs=[edge("last")], kind="sink"))
    assert names(run(observation(*stages))) == ["last"]


def test_diagnose_loads_the_shipped_rules_by_default() -> None:
    assert names(diagnose(slow_map_chain())) == ["enrich"]


def capped_fan_out(score_rate_in: float) -> Observation:
    """source (TM0, owes 140 records/s more each second: offers 800/s) -> ship on TM1 over a
    capped link (idle) and -> score, local, 80% busy at ``score_rate_in`` records/s."""
    owed = lag(140.0)
    return observation(
        vertex("source", sub(0, bp=0.98, busy=0.01, rout=660, out_pool=0.6, tm=0, metrics=owed),
               kind="source"),
        vertex("ship", sub(0, busy=0.03, rin=660, rout=660, in_pool=0.0, tm=1),
               inputs=[edge("source", "forward")]),
        vertex("score", sub(0, busy=0.80, rin=score_rate_in, rout=score_rate_in, in_pool=0.0,
                            tm=0), inputs=[edge("source", "forward")]),
        vertex("sink", sub(0, busy=0.02, rin=660, tm=1), inputs=[edge("ship")], kind="sink"),
    )  # fmt: skip


def test_a_busy_sibling_whose_capacity_takes_the_offered_rate_is_not_the_cause() -> None:
    # score: 660 / 0.8 = 825 records/s of capacity, above the 800 offered: it has headroom,
    # so the source waits on the link to ship.
    report = run(capped_fan_out(660))
    assert [(c.vertex, c.kind) for c in report.root_causes or ()] == [("ship", "network")]


def test_a_busy_sibling_that_cannot_take_the_offered_rate_stays_the_cause() -> None:
    # score: 600 / 0.8 = 750 records/s of capacity, below the 800 offered: it is a bottleneck.
    report = run(capped_fan_out(600))
    assert "score" in names(report)
