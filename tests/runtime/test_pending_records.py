"""pendingRecords on running jobs: a source behind a bottleneck falls behind, a healthy one not.

FLIP-33's ``pendingRecords`` is what a Kafka source owes (its lag); bpmon's rate-limited sources
owe what their schedule called for and they did not emit. Behind a slow operator the lag grows at
the offered rate minus what the job takes; a source the job keeps up with owes at most the few
records due since its last wake-up. Both jobs run at once after one shared warm-up.
"""

from __future__ import annotations

import time

import pytest

from bpmon.runtime.accounting import State
from bpmon.runtime.metrics import TaskMetrics, counters, window_metrics
from bpmon.scenario import parse_scenario
from tests.runtime.jobs import StartJob
from tests.waiting import wait_until

SPAN_S = 3.0
"""Measured once the behind job's source is backpressured (about 2.6 s on an idle machine)."""
RATE = 2000

CHAIN = """
name = "{name}"
[network]
task_managers = 1
[[operators]]
name = "source"
kind = "source"
rate = {rate}
[[operators]]
name = "map"
kind = "map"
cost_us = 1000
inputs = [{{ from = "source" }}]
[[operators]]
name = "sink"
kind = "sink"
inputs = [{{ from = "map" }}]
"""
"""The map serves at most 1,000 records/s."""


@pytest.fixture(scope="module")
def spans(start_module_job: StartJob) -> dict[str, dict[str, list[TaskMetrics]]]:
    jobs = {
        "behind": start_module_job(parse_scenario(CHAIN.format(name="behind", rate=RATE))),
        "healthy": start_module_job(parse_scenario(CHAIN.format(name="healthy", rate=200))),
    }
    (source,) = jobs["behind"].tasks["source"]
    wait_until(
        lambda: source.account.state in (State.SOFT_BP, State.HARD_BP),
        "the behind job's source to be backpressured",
    )
    first = {name: counters(job.tasks) for name, job in jobs.items()}
    time.sleep(SPAN_S)
    last = {name: counters(job.tasks) for name, job in jobs.items()}
    return {name: window_metrics(first[name], last[name]) for name in jobs}


@pytest.mark.slow
def test_a_source_behind_a_slow_operator_owes_more_and_more(
    spans: dict[str, dict[str, list[TaskMetrics]]],
) -> None:
    """2,000 records/s offered, 1,000 taken: the lag grows by about the other 1,000 a second,
    and is far beyond the one second of records the pacing would ever catch up on."""
    (source,) = spans["behind"]["source"]
    (slow,) = spans["behind"]["map"]
    growth, pending = source.pending_records_growth_per_s, source.pending_records
    assert growth is not None and pending is not None, source
    # the lag's growth is what the schedule asked for beyond what the source emitted
    assert growth == pytest.approx(RATE - source.records_out_per_s, abs=0.05 * RATE), source
    # and what it emitted is what the bottleneck took (up to the buffers between them)
    assert growth >= 0.5 * (RATE - 1000), f"{source}; map in {slow.records_in_per_s:.0f}/s"
    assert pending > RATE, source  # several seconds of records: forgiven ones count
    assert source.records_out_per_s + growth == pytest.approx(RATE, rel=0.05)


@pytest.mark.slow
def test_a_source_the_job_keeps_up_with_owes_almost_nothing(
    spans: dict[str, dict[str, list[TaskMetrics]]],
) -> None:
    (source,) = spans["healthy"]["source"]
    growth, pending = source.pending_records_growth_per_s, source.pending_records
    assert growth is not None and pending is not None, source
    assert pending <= 0.5 * 200, source  # at most half a second late, however loaded
    assert abs(growth) <= 0.25 * 200, source
