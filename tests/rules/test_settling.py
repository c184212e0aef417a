"""The warm-up waits while backpressure is still building (``[monitor] settle_s``)."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest

from bpmon.model.events import LiveSnapshot
from bpmon.model.values import Edge, Level, Metrics, SubtaskStatus, VertexStatus
from bpmon.rules.settling import WINDOW, PoolTrend
from bpmon.scenario import parse_scenario
from bpmon.service.facade import Settings, run_scenario


def snapshot(*usages: float) -> list[VertexStatus]:
    subtasks = tuple(
        SubtaskStatus(index=i, metrics=Metrics(out_pool_usage=u)) for i, u in enumerate(usages)
    )
    return [VertexStatus(name="source", parallelism=len(usages), subtasks=subtasks)]


def trend_of(*readings: tuple[float, ...]) -> PoolTrend:
    trend = PoolTrend()
    for usages in readings:
        trend.add(snapshot(*usages))
    return trend


def test_a_pool_that_keeps_rising_is_filling_until_it_is_full() -> None:
    rising = [(0.05 * i,) for i in range(WINDOW)]
    assert trend_of(*rising).filling() == ["source[0] out"]
    full = [(0.5 + 0.05 * i,) for i in range(WINDOW)]  # ends at 0.9
    assert trend_of(*full).filling() == []


def test_a_pool_that_moves_a_buffer_up_and_down_or_barely_rises_has_settled() -> None:
    flicker = [(0.2 + 0.08 * (i % 2),) for i in range(WINDOW)]
    assert trend_of(*flicker).settled()
    slow = [(0.1 + 0.005 * i,) for i in range(WINDOW)]
    assert trend_of(*slow).settled()


def test_two_seconds_of_readings_are_needed_and_each_subtask_counts() -> None:
    short = trend_of(*[(0.05 * i, 0.1) for i in range(WINDOW - 1)])
    assert short.filling() == [] and not short.settled()
    assert trend_of(*[(0.2, 0.1)] * WINDOW).settled()
    second = [(0.1, 0.05 * i) for i in range(WINDOW)]
    assert trend_of(*second).filling() == ["source[1] out"]


def test_input_pools_count_too() -> None:
    trend = PoolTrend()
    for i in range(WINDOW):
        metrics = Metrics(out_pool_usage=0.1, in_pool_usage=0.1 * i)
        sub = SubtaskStatus(index=0, metrics=metrics)
        trend.add([VertexStatus(name="enrich", parallelism=1, subtasks=(sub,))])
    assert trend.filling() == ["enrich[0] in"]


def test_backpressure_that_keeps_rising_is_building_even_with_a_full_pool() -> None:
    """With Flink's flushing a source's pool reads full while its open buffers still fill: it is
    LOW and rising for seconds before it is HIGH."""

    def source(ratio: float) -> list[VertexStatus]:
        sub = SubtaskStatus(index=0, ratio=ratio, metrics=Metrics(out_pool_usage=0.92))
        return [VertexStatus(name="source", parallelism=1, subtasks=(sub,))]

    rising, steady_low, high = PoolTrend(), PoolTrend(), PoolTrend()
    for i in range(WINDOW):
        rising.add(source(0.05 * i))  # 0 to 0.4
        steady_low.add(source(0.3 + 0.04 * (i % 2)))
        high.add(source(0.6 + 0.05 * i))  # ends at 1.0: built
    assert rising.filling() == ["source[0] backpressure"]
    assert steady_low.settled()
    assert high.settled()


def two_vertices(
    producer_out: float, producer_level: Level, consumer_in: float, consumer_busy: float
) -> list[VertexStatus]:
    """parse -> enrich, one subtask each, with the pools, level and busy ratio given."""
    parse = SubtaskStatus(
        index=0, level=producer_level, metrics=Metrics(out_pool_usage=producer_out)
    )
    enrich = SubtaskStatus(
        index=0, metrics=Metrics(in_pool_usage=consumer_in, busy_ratio=consumer_busy)
    )
    return [
        VertexStatus(name="parse", parallelism=1, subtasks=(parse,)),
        VertexStatus(
            name="enrich", parallelism=1, inputs=(Edge("parse", "rebalance"),), subtasks=(enrich,)
        ),
    ]


def steady(vertices: list[VertexStatus]) -> PoolTrend:
    trend = PoolTrend()
    for _ in range(WINDOW):
        trend.add(vertices)
    return trend


@pytest.mark.parametrize("producer_out", [0.42, 0.95])
def test_a_saturated_queued_consumer_whose_producer_is_not_held_yet_is_still_building(
    producer_out: float,
) -> None:
    """Flat pools, but the backlog in front of enrich has not reached parse yet: parse is not
    HIGH, whether its pool is half full or full (its open buffers still filling)."""
    trend = steady(two_vertices(producer_out, "OK", 1.0, 0.98))
    assert trend.filling() == ["enrich[0] queued"]


def test_once_one_input_of_a_join_is_held_the_other_does_not_keep_the_wait_going() -> None:
    """A join with a light side: the heavy side is HIGH, the light one has room and never
    holds; its pool and backpressure are flat, so the job has settled."""
    heavy, light, join = (
        SubtaskStatus(index=0, level="HIGH", ratio=0.97, metrics=Metrics(out_pool_usage=1.0)),
        SubtaskStatus(index=0, level="OK", ratio=0.0, metrics=Metrics(out_pool_usage=0.2)),
        SubtaskStatus(index=0, metrics=Metrics(in_pool_usage=1.0, busy_ratio=1.0)),
    )
    inputs = (Edge("heavy", "rebalance"), Edge("light", "rebalance"))
    vertices = [
        VertexStatus(name="heavy", parallelism=1, subtasks=(heavy,)),
        VertexStatus(name="light", parallelism=1, subtasks=(light,)),
        VertexStatus(name="join", parallelism=1, inputs=inputs, subtasks=(join,)),
    ]
    assert steady(vertices).settled()
    unheld = [
        replace(vertices[0], subtasks=(replace(heavy, level="OK", ratio=0.0),)),
        *vertices[1:],
    ]
    assert steady(unheld).filling() == ["join[0] queued"]
    # across a hybrid exchange the producer spills instead of being held: nothing to wait for
    spilling = [
        *unheld[:2],
        replace(vertices[2], inputs=(Edge("heavy", "rebalance", "hybrid-selective"),)),
    ]
    assert steady(spilling).settled()


def test_a_queued_consumer_whose_busy_share_still_climbs_is_still_building() -> None:
    """demo at 4 subtasks on a loaded CI machine: at the end of the warm-up enrich's input pools
    were full and its live busy share (an average since it started) was still climbing, 0.80 to
    0.88; the wait ended, the burst sampled parse before it was held, and no cause was named.
    A share that climbs keeps the wait going; one that stays below 0.9 (the consumer waits on
    something else) does not, and neither does a climbing one whose pool has room."""
    climbing = [two_vertices(0.42, "OK", 1.0, 0.72 + 0.02 * i) for i in range(WINDOW)]
    assert 0.72 + 0.02 * (WINDOW - 1) < 0.9  # below BUSY throughout
    trend = PoolTrend()
    for vertices in climbing:
        trend.add(vertices)
    assert trend.filling() == ["enrich[0] queued"]
    flat = PoolTrend()
    for i in range(WINDOW):
        flat.add(two_vertices(0.42, "OK", 1.0, 0.6 + 0.01 * (i % 2)))
    assert flat.settled()
    roomy = PoolTrend()
    for i in range(WINDOW):
        roomy.add(two_vertices(0.42, "OK", 0.5, 0.5 + 0.04 * i))
    assert roomy.settled()
    held = PoolTrend()
    for i in range(WINDOW):
        held.add(two_vertices(0.42, "HIGH", 1.0, 0.72 + 0.02 * i))
    assert held.settled()


@pytest.mark.parametrize(
    ("producer_out", "producer_level", "consumer_in", "consumer_busy"),
    [
        (0.42, "HIGH", 1.0, 0.98),  # the producer is backpressured: built
        (0.42, "OK", 0.5, 0.98),  # the consumer keeps its queue short: keeping up
        (0.42, "OK", 1.0, 0.6),  # the consumer waits on something else (a capped link)
    ],
)
def test_a_consumer_that_is_not_saturated_and_queued_or_a_held_producer_has_settled(
    producer_out: float, producer_level: Level, consumer_in: float, consumer_busy: float
) -> None:
    vertices = two_vertices(producer_out, producer_level, consumer_in, consumer_busy)
    assert steady(vertices).settled()


SLOW_FILL = """
name = "slow-fill"
duration_s = 30
[monitor]
warmup_s = 0.5
samples = 20
interval_ms = 25
settle_s = {settle}
[[operators]]
name = "source"
kind = "source"
rate = 2000
[[operators]]
name = "slow"
kind = "map"
cost_us = 1000
inputs = [{{ from = "source" }}]
[[operators]]
name = "sink"
kind = "sink"
inputs = [{{ from = "slow" }}]
"""
"""2,000 records/s into a map that takes 1,000: its 32 KiB buffers hold 327 records of 100 bytes,
so the source's ten take about three seconds to fill, far longer than the warm-up."""


def first_burst(settle: float, tmp_path: Path) -> tuple[str | None, list[str]]:
    """The source's level in the first report, and the phases the live view went through."""
    scenario = parse_scenario(SLOW_FILL.format(settle=settle))
    phases: list[str] = []
    events = run_scenario(scenario, Settings(runs_dir=tmp_path / str(settle)), duration_s=0.1)
    level = None
    for event in events:
        if isinstance(event, LiveSnapshot) and event.phase not in phases:
            phases.append(event.phase)
        if hasattr(event, "report"):
            level = {v.name: v.level for v in event.report.vertices}["source"]
    return level, phases


def test_the_first_burst_waits_for_the_pools_to_fill(tmp_path: Path) -> None:
    level, phases = first_burst(10.0, tmp_path)
    assert phases[:2] == ["warming up", "settling"], phases
    assert level == "HIGH"


def test_without_settling_the_burst_samples_the_job_halfway_there(tmp_path: Path) -> None:
    level, phases = first_burst(0.0, tmp_path)
    assert "settling" not in phases
    assert level != "HIGH"
