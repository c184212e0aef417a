"""A stateful operator whose working set outgrows its managed memory slows down by the spill cost.

Expected rates come from the documented arithmetic (docs/scenario.md, Scheduling step 5): a slot
gets ``managed_memory_mb / slots_per_task_manager``, a weight's share of it is its weight over
its group's, and a subtask serves ``cost_us + spill_cost_us x (state_mb - its MB) / state_mb``
per record, so it handles at most 1e6 / that many records a second. The source has no rate
limit, so the stateful operator runs at its capacity and its measured records/s is that
capacity. Service is paced on an absolute schedule, so it cannot run faster (upper margin 3%);
a loaded machine may make it a little slower (lower margin 15%, as the chain tests allow).
"""

from __future__ import annotations

import time

import pytest

from bpmon.runtime.job import Job
from bpmon.runtime.metrics import counters, window_metrics
from bpmon.scenario import parse_scenario
from tests.runtime.jobs import StopJob

JOB = """
name = "spilling-state"
chaining = {chaining}

[cluster]
slots_per_task_manager = 1
managed_memory_mb = 256              # one slot per task manager: 256 MB a slot

[network]
task_managers = 2

[[operators]]
name = "source"
kind = "source"
rate = 0

[[operators]]
name = "parse"
kind = "map"
cost_us = 20
managed_memory = 1                   # weights 1 and 3: parse 64 MB, aggregate 192 MB
inputs = [{{ from = "source", partitioner = "rebalance" }}]

[[operators]]
name = "aggregate"
kind = "map"
cost_us = 200
managed_memory = 3
state_mb = 768                       # 192 of 768 MB fit: 75% of the records miss memory
spill_cost_us = 400
inputs = [{{ from = "parse" }}]

[[operators]]
name = "sink"
kind = "sink"
inputs = [{{ from = "aggregate", partitioner = "rebalance" }}]
"""

EXPECTED_US = 200 + 400 * (768 - 192) / 768  # 500 us a record
EXPECTED_RATE = 1e6 / EXPECTED_US  # 2,000 records/s, against 5,000 if the state fitted


def measured_rate(job: Job, task: str) -> float:
    """Records/s into ``task``'s one subtask over two seconds, after one of warm-up."""
    job.start()
    time.sleep(1.0)
    start = counters(job.tasks)
    time.sleep(2.0)
    return window_metrics(start, counters(job.tasks))[task][0].records_in_per_s


@pytest.mark.slow
@pytest.mark.parametrize(
    ("chaining", "task"), [("false", "aggregate"), ("true", "parse -> aggregate")]
)
def test_a_spilling_operator_handles_what_its_cost_and_spill_cost_allow(
    stop_job: StopJob, chaining: str, task: str
) -> None:
    scenario = parse_scenario(JOB.format(chaining=chaining))
    job = Job(scenario)
    expected = EXPECTED_RATE if chaining == "false" else 1e6 / (EXPECTED_US + 20)
    try:
        rate = measured_rate(job, task)
        assert expected * 0.85 < rate < expected * 1.03, (rate, expected)
    finally:
        stop_job(job)
