"""The Flink collector's parsing, on responses recorded from a real Flink 2.3 cluster
(``fixtures/``, re-recorded by ``record.py``): plan, metrics, backpressure and thread dumps."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from bpmon.collectors.flink.dumps import Tally, attempt_of, parse_dump, task_thread
from bpmon.collectors.flink.metrics import (
    MAX_QUERY_CHARS,
    BlindShare,
    FlinkLevel,
    blind_share,
    flink_level,
    pool_means,
    query_chunks,
    resolve_names,
    soft_share,
    subtask_metrics,
    values_of,
    window_accounting,
    young_rate,
)
from bpmon.collectors.flink.plan import (
    chained_operators,
    display_names,
    graph_of,
    jobs_of,
    pick_job,
    placements_of,
)
from bpmon.collectors.flink.status import WAITING
from bpmon.collectors.flink.target import FlinkTarget
from bpmon.collectors.flink.window import Blind, blind_notes, disagreements
from bpmon.collectors.profile import StackClassifier, load_profile
from bpmon.model.errors import CollectorError, TargetNotFoundError
from bpmon.model.values import Edge, Metrics, SubtaskWindow, VertexObservation

from .fake_flink import recorded, serving

FIXTURES = Path(__file__).with_name("fixtures")


def doc(topology: str, name: str) -> Any:
    return json.loads((FIXTURES / topology / f"{name}.json").read_text())


def graph(topology: str) -> Any:
    [job] = jobs_of(doc(topology, "overview"))
    return graph_of(job, doc(topology, "job"), doc(topology, "plan"))


# -- the job graph ------------------------------------------------------------------------------


def test_a_chain_is_one_vertex_with_its_operators_and_sources_come_first() -> None:
    g = graph("slow-sink")
    assert [v.name for v in g.vertices] == ["Source: numbers -> parse", "light", "store: Writer"]
    assert g.vertices[0].operators == ("Source: numbers", "parse")
    assert [v.kind for v in g.vertices] == ["source", None, "sink"]
    assert g.vertices[2].inputs == (Edge("light", "forward", "pipelined"),)


def test_a_key_by_is_a_hash_exchange_between_different_parallelisms() -> None:
    count = graph("hot-key").vertices[1]
    assert (count.name, count.parallelism) == ("count", 2)
    assert count.inputs == (Edge("Source: numbers -> parse", "hash", "pipelined"),)


def test_each_vertex_has_its_key_groups_from_the_jobs_details() -> None:
    """Flink 2.3 gives every vertex its ``maxParallelism`` (128 by default below 86 subtasks,
    the job-level field -1 when unset); a Flink before 1.13 gives none: unknown, not 128."""
    assert [v.max_parallelism for v in graph("hot-key").vertices] == [128, 128, 128]
    [job] = jobs_of(doc("hot-key", "overview"))
    details = doc("hot-key", "job")
    assert details["maxParallelism"] == -1
    older = [{k: x for k, x in v.items() if k != "maxParallelism"} for v in details["vertices"]]
    odd = [{**v, "maxParallelism": m} for v, m in zip(older, (-1, 0, "128"), strict=True)]
    plan = doc("hot-key", "plan")
    for rows in (older, odd):
        g = graph_of(job, {**details, "vertices": rows}, plan)
        assert [v.max_parallelism for v in g.vertices] == [None, None, None]


def test_the_observation_carries_the_key_groups_the_autoscaler_aligns_to() -> None:
    with serving(recorded("hot-key")) as url:
        target = FlinkTarget(url)
        target.start()
        try:
            observation = target.observe(samples=2, interval_ms=20)
        finally:
            target.stop()
    count = observation.vertex("count")
    assert count.max_parallelism == 128 and count.inputs[0].partitioner == "hash"


def test_chained_operator_names_are_unescaped() -> None:
    assert chained_operators("Source: a &amp; b<br/>+- map<br/>+- filter<br/>") == (
        "Source: a & b",
        "map",
        "filter",
    )


def test_placements_name_the_task_manager_and_attempt() -> None:
    places = placements_of(doc("hot-key", "vertex-1"))
    assert sorted(places) == [0, 1]
    assert all(p.status == "RUNNING" and p.attempt == 0 for p in places.values())
    assert all(p.task_manager.startswith("127.0.0.1:") for p in places.values())
    assert all(p.running_s is not None and p.running_s > 10 for p in places.values())


def test_the_job_is_picked_by_id_or_name_and_a_stopped_one_is_refused() -> None:
    jobs = jobs_of(doc("hot-key", "overview"))
    assert pick_job(jobs, None, "u") == pick_job(jobs, "bpmon-hot-key", "u")
    assert pick_job(jobs, jobs[0].id, "u") == jobs[0]
    with pytest.raises(TargetNotFoundError, match="no job 'x'"):
        pick_job(jobs, "x", "u")
    stopped = [type(jobs[0])(jobs[0].id, jobs[0].name, "CANCELED")]
    with pytest.raises(CollectorError, match="is CANCELED, not RUNNING"):
        pick_job(stopped, "bpmon-hot-key", "u")


def test_a_job_named_that_is_restarting_is_watched_and_one_that_ended_is_not() -> None:
    [job] = jobs_of(doc("hot-key", "overview"))
    restarting = type(job)(job.id, job.name, "RESTARTING")
    assert pick_job([restarting], job.name, "u", transient=WAITING) == restarting
    with pytest.raises(CollectorError, match="is RESTARTING, not RUNNING"):
        pick_job([restarting], job.name, "u")  # without transient states: running only
    with pytest.raises(TargetNotFoundError, match="no job is running"):
        pick_job([restarting], None, "u", transient=WAITING)  # unnamed: the running one only


# -- metrics ------------------------------------------------------------------------------------


def names(topology: str, vertex: int = 0) -> Any:
    listed = [str(m["id"]) for m in doc(topology, f"metric-list-{vertex}")]
    return resolve_names(listed, "v", "Flink 2.3.0 at u")


def test_flink_2_3_offers_only_the_shuffle_netty_pool_names() -> None:
    listed = {str(m["id"]) for m in doc("slow-sink", "metric-list-0")}
    assert "0.Shuffle.Netty.Output.Buffers.outPoolUsage" in listed
    assert not any(".buffers." in i or i.startswith("0.buffers.") for i in listed)
    chosen = names("slow-sink").names
    assert chosen["out_pool"] == "Shuffle.Netty.Output.Buffers.outPoolUsage"
    assert chosen["busy"] == "busyTimeMsPerSecond"


def test_the_legacy_pool_names_are_taken_when_only_they_exist() -> None:
    legacy = ["0.buffers.outPoolUsage", "0.busyTimeMsPerSecond", "0.idleTimeMsPerSecond"]
    chosen = resolve_names([*legacy, "0.backPressuredTimeMsPerSecond"], "v", "w").names
    assert chosen["out_pool"] == "buffers.outPoolUsage"
    assert "in_pool" not in chosen


def test_a_soft_backpressured_subtask_reads_as_flink_wrote_it() -> None:
    values = values_of(doc("slow-sink", "metrics-1"))
    m = subtask_metrics(values, names("slow-sink", 1), 0)
    assert m.backpressured_time_ratio is not None and m.backpressured_time_ratio >= 0.9
    assert m.busy_ratio is not None and m.busy_ratio <= 0.1
    assert m.out_pool_usage is not None and m.out_pool_usage >= 1.0
    assert m.in_pool_usage == 0.0  # local channels only
    assert m.soft_backpressured_ratio is not None and m.soft_backpressured_ratio >= 0.9
    share = soft_share(m)
    assert share is not None and share >= 0.9


def test_nan_and_text_values_are_unknown() -> None:
    answer = [
        {"id": "0.a", "value": "NaN"},
        {"id": "0.b", "value": "x"},
        {"id": "0.c", "value": "2"},
    ]
    assert values_of(answer) == {"0.c": 2.0}


def test_queries_are_split_only_past_the_url_limit() -> None:
    ids = [f"{i}.Shuffle.Netty.Output.Buffers.outPoolUsage" for i in range(400)]
    chunks = query_chunks(ids)
    assert len(chunks) > 1
    assert all(len(c) <= MAX_QUERY_CHARS for c in chunks)
    assert ",".join(chunks).split(",") == ids
    assert query_chunks(ids[:3]) == [",".join(ids[:3])]


def test_soft_share_is_of_the_time_neither_busy_nor_hard_backpressured() -> None:
    """A FLIP-27 source's idle time overlaps its soft-backpressured time in Flink 2.3."""
    source = Metrics(busy_ratio=0.0, idle_ratio=0.946, soft_backpressured_ratio=0.643)
    assert soft_share(source) == pytest.approx(0.643)
    half = Metrics(busy_ratio=0.5, idle_ratio=0.25, soft_backpressured_ratio=0.25)
    assert soft_share(half) == pytest.approx(0.5)
    assert soft_share(Metrics(busy_ratio=0.5)) is None


def test_young_rates_are_scaled_to_the_seconds_counted() -> None:
    assert young_rate(100.0, 20.0) == pytest.approx(300.0)
    assert young_rate(100.0, 120.0) == 100.0
    assert young_rate(100.0, 3.0) is None
    assert young_rate(None, 20.0) is None


def test_flinks_own_levels_read_from_the_backpressure_endpoint() -> None:
    level = flink_level(doc("slow-sink", "backpressure-1"))
    assert level.level == "HIGH" and list(level.ratios) == [0] and level.ratios[0] > 0.5
    assert flink_level({"status": "deprecated"}).level is None


@pytest.mark.parametrize(
    ("backpressured", "level"), [(10, "OK"), (11, "LOW"), (50, "LOW"), (51, "HIGH")]
)
def test_the_samples_are_held_to_flinks_own_levels_to_find_a_disagreement(
    backpressured: int, level: str
) -> None:
    """Flink's JobVertexBackPressureHandler: OK <= 0.10 < LOW <= 0.50 < HIGH, fixed in Flink
    whatever ``[levels]`` says (the web's Flink endpoint gives the same levels)."""
    sub = SubtaskWindow(0, "map (1/1)#0", samples=100, backpressured=backpressured)
    vertices = (VertexObservation("map", 1, subtasks=(sub,)),)
    assert disagreements(vertices, {"map": FlinkLevel(level, {0: 0.3})}) == []
    other = "HIGH" if level == "OK" else "OK"
    [found] = disagreements(vertices, {"map": FlinkLevel(other, {0: 0.3})})
    assert found.detail.endswith(f"say {level} ({backpressured / 100:.2f})")


BLIND = Metrics(out_pool_usage=0.4)
"""A subtask whose task thread is not the one working: busy time NaN (a legacy source)."""


def test_a_legacy_sources_level_comes_from_its_backpressured_time_pool_or_flinks_ratio() -> None:
    counted = blind_share(replace(BLIND, backpressured_time_ratio=0.8, out_pool_usage=1.0), 0.0)
    assert counted is not None and (counted.share, counted.by) == (0.8, "accounting")
    full = replace(BLIND, out_pool_usage=1.0, backpressured_time_ratio=0.0)
    by_pool = blind_share(full, 0.0)  # Flink's ratio read 0.00 so on 2.3: the pool says more
    assert by_pool is not None and (by_pool.share, by_pool.by, by_pool.value) == (1.0, "pool", 1.0)
    by_flink = blind_share(BLIND, 0.97)  # times NaN, pool not full (SQL's datagen)
    assert by_flink is not None and (by_flink.share, by_flink.by) == (0.97, "flink")
    assert blind_share(BLIND, None) is None  # nothing says backpressured: idle, as the stack says
    assert blind_share(BLIND, 0.0) is None
    # a task thread that has a busy time is read by its own accounting (soft_share)
    assert blind_share(replace(full, busy_ratio=0.0), 0.97) is None


def test_the_flink_level_finding_names_each_subtask_and_what_decided_it() -> None:
    decided = [
        Blind("Source: orders[1]", 0, BlindShare(1.0, "flink", 1.0)),
        Blind("Source: orders[1]", 1, BlindShare(1.0, "pool", 1.0)),
    ]
    [note] = blind_notes(decided)
    assert (note.kind, note.vertex) == ("flink-level", "Source: orders[1]")
    assert "its output pool is full, so its thread waits for buffers ([1] 1.00)" in note.detail
    assert "Flink's own backpressure ratio decides ([0] 1.00)" in note.detail
    assert blind_notes([]) == []


# -- thread dumps -------------------------------------------------------------------------------


def test_frames_lose_their_module_prefix_and_keep_hidden_class_names() -> None:
    threads = {t.name: t for t in parse_dump(doc("slow-sink", "thread-dump"))}
    store = threads["store: Writer (1/1)#0"]
    assert store.frames[-1] == "java.lang.Thread.run"  # was java.base@17.0.15/java.lang...
    assert not any("@" in f or "/" in f.split("$$Lambda")[0] for f in store.frames)
    lambdas = [f for f in store.frames if "$$Lambda" in f]
    assert lambdas and lambdas[0].startswith("org.apache.flink.")  # was app//org.apache...
    assert attempt_of("light (1/1)#3") == 3 and attempt_of("main") is None


def tally(topology: str, attempt: int = 0) -> tuple[Tally, str]:
    g = graph(topology)
    tm = next(iter(placements_of(doc(topology, "vertex-0")).values())).task_manager
    expected = {
        (v.id, i): task_thread(v.task_name, i, v.parallelism, attempt)
        for v in g.vertices
        for i in range(v.parallelism)
    }
    t = Tally(StackClassifier(load_profile("flink-jvm")), {tm: expected})
    return t, tm


def key(topology: str, name: str, index: int = 0) -> tuple[str, int]:
    """A subtask's key: the id of the vertex called ``name``, and its index."""
    return next(v.id for v in graph(topology).vertices if v.name == name), index


def test_task_threads_are_classified_and_helper_threads_left_out() -> None:
    t, tm = tally("slow-sink")
    matched = t.add(tm, parse_dump(doc("slow-sink", "thread-dump")))
    assert matched == 3  # the three task threads; flushers, timers and the JVM's are ignored
    assert t.suspended(key("slow-sink", "light")) == 1  # soft backpressured: in its mailbox
    assert t.suspended(key("slow-sink", "Source: numbers -> parse")) == 1
    store = t.counts(key("slow-sink", "store: Writer"), None)
    assert (store.busy, store.name) == (1, "store: Writer (1/1)#0")  # sleeping in its write
    assert t.missed() == [] and t.ambiguous() == frozenset()


def test_suspended_samples_are_split_by_the_tasks_time_accounting() -> None:
    t, tm = tally("slow-sink")
    for _ in range(4):
        t.add(tm, parse_dump(doc("slow-sink", "thread-dump")))
    light = t.counts(key("slow-sink", "light"), 0.75)
    assert (light.backpressured, light.idle, light.busy) == (3, 1, 0)
    assert t.counts(key("slow-sink", "light"), None).idle == 4  # the stack alone: idle


def test_a_thread_of_another_attempt_is_not_counted() -> None:
    t, tm = tally("slow-sink", attempt=1)
    assert t.add(tm, parse_dump(doc("slow-sink", "thread-dump"))) == 0
    assert t.add("another-task-manager", parse_dump(doc("slow-sink", "thread-dump"))) == 0
    assert [seen for _, seen, _ in t.missed()] == [0, 0, 0]  # no dump showed these attempts


def test_the_windows_accounting_comes_from_the_running_totals() -> None:
    """Flink 2.3's gauge read 1000 then 0 ms/s busy for a subtask whose busy total grew by a
    steady ~210 ms/s (recorded on the hot-key job's cold subtask)."""
    chosen = resolve_names(
        [f"0.{n}" for n in ("busyTimeMsPerSecond", "idleTimeMsPerSecond")]
        + ["0.backPressuredTimeMsPerSecond", "0.accumulateBusyTimeMs", "0.accumulateIdleTimeMs"]
        + ["0.accumulateBackPressuredTimeMs", "0.numRecordsIn", "0.numRecordsOut"],
        "count",
        "w",
    )
    before = {"0.accumulateBusyTimeMs": 2624.0, "0.accumulateIdleTimeMs": 7000.0}
    before |= {"0.accumulateBackPressuredTimeMs": 0.0, "0.numRecordsIn": 1424.0}
    after = {"0.accumulateBusyTimeMs": 4715.0, "0.accumulateIdleTimeMs": 14909.0}
    after |= {"0.accumulateBackPressuredTimeMs": 0.0, "0.numRecordsIn": 2707.0}
    m = window_accounting(before, after, chosen, 0)
    assert m is not None
    assert m.busy_ratio == pytest.approx(2091 / 10000)
    assert m.idle_ratio == pytest.approx(7909 / 10000)
    assert m.records_in_per_s == pytest.approx(128.3)
    assert m.records_out_per_s is None  # no numRecordsOut in either reading
    assert window_accounting(before, before, chosen, 0) is None  # the same fetch twice


def test_a_busy_total_that_steps_back_a_little_is_no_busy_time() -> None:
    """Recorded on Flink 2.3, a paced source chained with ``format`` and held in hard
    backpressure by a slow sink over a 5.6 s window: its busy total went 367 -> 285 ms while its
    backpressured total grew by 5,589. The window is read (it was dropped, and the rates fell
    back to Flink's one-minute gauges, which read ~1.8x the records it emitted); a total that
    steps back by more than a slip is a reset, and is not."""
    gauges = ["busyTimeMsPerSecond", "idleTimeMsPerSecond", "backPressuredTimeMsPerSecond"]
    totals = ["accumulateBusyTimeMs", "accumulateIdleTimeMs", "accumulateBackPressuredTimeMs"]
    counts = ["numRecordsIn", "numRecordsOut", "Source__events.pendingRecords"]
    listed = [f"0.{name}" for name in (*gauges, *totals, *counts)]
    chosen = resolve_names(listed, "Source: events -> format", "w")
    before = {"0.accumulateBusyTimeMs": 367.0, "0.accumulateIdleTimeMs": 891.0}
    before |= {"0.accumulateBackPressuredTimeMs": 13468.0, "0.numRecordsOut": 28088.0}
    before |= {"0.Source__events.pendingRecords": 19059.0}
    after = {"0.accumulateBusyTimeMs": 285.0, "0.accumulateIdleTimeMs": 891.0}
    after |= {"0.accumulateBackPressuredTimeMs": 19057.0, "0.numRecordsOut": 38230.0}
    after |= {"0.Source__events.pendingRecords": 26539.0}
    m = window_accounting(before, after, chosen, 0)
    assert m is not None and m.backlog is not None
    assert (m.busy_ratio, m.backpressured_time_ratio) == (0.0, 1.0)
    assert m.records_out_per_s == pytest.approx(10142 / 5.589)  # ~1,815 a second
    assert m.backlog.growth_per_s == pytest.approx(7480 / 5.589)  # offered: ~3,150 in all
    reset = after | {"0.accumulateBusyTimeMs": 0.0, "0.accumulateBackPressuredTimeMs": 100.0}
    assert window_accounting(before, reset, chosen, 0) is None


def test_pool_usage_is_the_mean_of_the_two_readings() -> None:
    """A writer finishing a big record on overdraft buffers reads 1.5 at one fetch, 1.0 at the
    next: the window shows 1.25; a subtask missing from the first reading shows the last."""
    out = "Shuffle.Netty.Output.Buffers.outPoolUsage"
    chosen = resolve_names(
        ["0.busyTimeMsPerSecond", "0.idleTimeMsPerSecond", "0.backPressuredTimeMsPerSecond",
         f"0.{out}"], "explode", "w",
    )  # fmt: skip
    assert pool_means({f"0.{out}": 1.5}, {f"0.{out}": 1.0}, chosen, 0) == (1.25, None)
    assert pool_means({}, {f"0.{out}": 1.0}, chosen, 0) == (1.0, None)
    assert pool_means({}, {}, chosen, 0) == (None, None)


# -- names and the embedded plan ------------------------------------------------------------------


def test_vertices_of_one_name_are_numbered_in_job_graph_order() -> None:
    shown = display_names([("a", "Map"), ("b", "Map"), ("c", "Map#2"), ("d", "Map"), ("e", "sink")])
    # "Map#2" is a real vertex's name, so the second "Map" skips it
    assert shown == {"a": "Map", "b": "Map#3", "c": "Map#2", "d": "Map#4", "e": "sink"}


def test_the_plan_embedded_in_the_jobs_details_is_enough() -> None:
    """Flink 2.3's ``GET /jobs/{id}`` carries the plan: no ``GET /jobs/{id}/plan`` needed."""
    [job] = jobs_of(doc("same-names", "overview"))
    g = graph_of(job, doc("same-names", "job"))
    assert [v.name for v in g.vertices] == [
        "Source: numbers -> parse",
        "work",
        "work#2",
        "sink: Writer",
    ]
    assert [v.task_name for v in g.vertices][1:3] == ["work", "work"]
    assert g.vertices[2].inputs == (Edge("work", "forward", "pipelined"),)
    assert g.vertices[3].inputs[0].source == "work#2"
    assert g == graph_of(job, {**doc("same-names", "job"), "plan": None}, doc("same-names", "plan"))


def test_a_sources_pending_records_are_its_backlog_and_their_growth() -> None:
    """FLIP-33's lag under the source operator's name, as Flink 2.3 lists it (recorded on a
    paced source offered 1.3x what its chained decoder handles: 7405, then 8474 records)."""
    listed = ["0.busyTimeMsPerSecond", "0.idleTimeMsPerSecond", "0.backPressuredTimeMsPerSecond"]
    listed += ["0.accumulateBusyTimeMs", "0.accumulateIdleTimeMs"]
    listed += ["0.accumulateBackPressuredTimeMs", "0.Source__events.numRecordsOut"]
    listed += ["0.Source__events.pendingRecords", "0.Source__events.sourceIdleTime"]
    chosen = resolve_names(listed, "Source: events -> decode", "w")
    assert chosen.names["pending"] == "Source__events.pendingRecords"
    assert "0.Source__events.pendingRecords" in chosen.ids([0])
    before = {"0.accumulateBusyTimeMs": 1000.0, "0.accumulateIdleTimeMs": 0.0}
    before |= {"0.accumulateBackPressuredTimeMs": 0.0, "0.Source__events.pendingRecords": 7405.0}
    after = {"0.accumulateBusyTimeMs": 2500.0, "0.accumulateIdleTimeMs": 0.0}
    after |= {"0.accumulateBackPressuredTimeMs": 0.0, "0.Source__events.pendingRecords": 8474.0}
    m = window_accounting(before, after, chosen, 0)
    assert m is not None and m.backlog is not None
    assert m.backlog.pending_records == 8474.0
    assert m.backlog.growth_per_s == pytest.approx(1069 / 1.5)
    one = subtask_metrics(after, chosen, 0).backlog  # one reading: no growth
    assert one is not None and (one.pending_records, one.growth_per_s) == (8474.0, None)


def test_a_source_without_pending_records_has_no_backlog() -> None:
    chosen = resolve_names(
        ["0.busyTimeMsPerSecond", "0.idleTimeMsPerSecond", "0.backPressuredTimeMsPerSecond"],
        "Source: numbers",
        "w",
    )
    assert "pending" not in chosen.names
    assert subtask_metrics({}, chosen, 0).backlog is None
