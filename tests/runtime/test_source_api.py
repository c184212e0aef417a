"""Flink's two kinds of source: ``source_api = "flip-27"`` (the default) and ``"legacy"``.

A FLIP-27 ``Source`` is read in the task's mailbox: an unavailable output suspends it (soft
backpressure) and, with no record due yet, it waits idle. A legacy ``SourceFunction`` runs its own
loop on its own thread: it never checks its output, so it waits only in the buffer request (hard
backpressure), its rate waits are neither idle nor backpressured, Flink reports its busy time as
NaN, and its partitions lend no overdraft buffers (FLINK-27789). Research notes,
``flink-network.md`` §1.2 and §3.2.
"""

from __future__ import annotations

import math
import time

import pytest

from bpmon.collectors.inprocess import metrics_of
from bpmon.model.errors import ScenarioError
from bpmon.runtime.accounting import State
from bpmon.runtime.job import Job
from bpmon.runtime.metrics import TaskMetrics, counters, window_metrics
from bpmon.scenario import Scenario, parse_scenario
from tests.runtime.jobs import StartJob, StopJob
from tests.waiting import wait_until

JOB = """
name = "{name}"
[network]
task_managers = 1
segment_size = 1024
[[operators]]
name = "source"
kind = "source"
rate = {rate}
{api}
[[operators]]
name = "map"
kind = "map"
cost_us = {cost}
inputs = [{{ from = "source" }}]
"""


def _scenario(api: str | None, *, rate: int, cost: int) -> Scenario:
    line = "" if api is None else f'source_api = "{api}"'
    return parse_scenario(JOB.format(name=f"api-{api}-{cost}", rate=rate, api=line, cost=cost))


@pytest.fixture(scope="module")
def sources(start_module_job: StartJob) -> dict[tuple[str, str], TaskMetrics]:
    """The source's metrics over one window: per kind, backpressured (slow map) and light."""
    jobs = {
        (api, load): start_module_job(
            _scenario(api, rate=2000, cost=2000 if load == "slow" else 10)
        )
        for api in ("flip-27", "legacy")
        for load in ("slow", "light")
    }
    slow = [job.tasks["source"][0] for (_, load), job in jobs.items() if load == "slow"]
    wait_until(  # 1 KiB buffers: within a tenth of a second
        lambda: [t.name for t in slow if t.account.state not in (State.SOFT_BP, State.HARD_BP)],
        "the slow jobs' sources to be backpressured",
        until=lambda free: not free,
    )
    start = {key: counters(job.tasks) for key, job in jobs.items()}
    time.sleep(1.0)  # the window measured
    return {
        key: window_metrics(start[key], counters(job.tasks))["source"][0]
        for key, job in jobs.items()
    }


@pytest.mark.slow
def test_a_flip27_source_waits_in_the_mailbox(
    sources: dict[tuple[str, str], TaskMetrics],
) -> None:
    slow, light = sources["flip-27", "slow"], sources["flip-27", "light"]
    assert slow.soft_backpressured_ms_per_s > 500, slow
    assert slow.soft_backpressured_ms_per_s > slow.hard_backpressured_ms_per_s, slow
    assert light.idle_ms_per_s > 500, light  # 2,000 records/s cost it little: idle in between
    assert not math.isnan(slow.busy_ms_per_s) and not math.isnan(light.busy_ms_per_s)


@pytest.mark.slow
def test_a_legacy_source_blocks_hard_and_is_never_idle(
    sources: dict[tuple[str, str], TaskMetrics],
) -> None:
    slow, light = sources["legacy", "slow"], sources["legacy", "light"]
    assert slow.hard_backpressured_ms_per_s > 500, slow
    assert slow.soft_backpressured_ms_per_s == 0, slow
    assert slow.idle_ms_per_s == light.idle_ms_per_s == 0, (slow, light)
    assert slow.records_out_per_s > 0 and light.records_out_per_s > 0


@pytest.mark.slow
def test_a_legacy_sources_busy_time_is_not_measured(
    sources: dict[tuple[str, str], TaskMetrics],
) -> None:
    m = sources["legacy", "light"]
    assert math.isnan(m.busy_ms_per_s)
    assert "busyTimeMsPerSecond" not in m.as_flink()
    assert metrics_of(m).busy_ratio is None  # unknown, not invented
    assert metrics_of(sources["flip-27", "light"]).busy_ratio is not None


def test_a_legacy_sources_partitions_lend_no_overdraft(stop_job: StopJob) -> None:
    legacy = Job(_scenario("legacy", rate=100, cost=10))
    flip27 = Job(_scenario(None, rate=100, cost=10))
    try:
        (source,) = legacy.tasks["source"]
        (other,) = flip27.tasks["source"]
        assert source.legacy_source and not other.legacy_source
        assert source.outputs[0].partition.pool.max_overdraft == 0
        assert other.outputs[0].partition.pool.max_overdraft == 5
        (mapper,) = legacy.tasks["map"]
        assert not mapper.legacy_source
    finally:
        legacy.stop()
        flip27.stop()


def test_source_api_is_read_and_checked() -> None:
    assert _scenario(None, rate=1, cost=1).operators[0].source_api == "flip-27"
    assert _scenario("legacy", rate=1, cost=1).operators[0].source_api == "legacy"
    with pytest.raises(ScenarioError, match="source_api"):
        _scenario("datagen", rate=1, cost=1)
    text = JOB.format(name="x", rate=1, api="", cost=1).replace(
        "cost_us = 1", 'cost_us = 1\nsource_api = "legacy"'
    )
    with pytest.raises(ScenarioError, match='only valid for kind "source"'):
        parse_scenario(text)
