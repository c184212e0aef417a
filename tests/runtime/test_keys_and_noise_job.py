"""``keys`` and ``cost_cv`` in a real runtime job: where keyed records land, what noisy costs allow.

One job of two independent pipelines, measured over one window:

- ``src -> count``: 3,000 records/s hashed by ``keys = { count = 1000, zipf = 1.0 }`` onto 8
  subtasks (``count`` costs 50 us a record: nothing is held back). Each subtask's share of the
  records must be the weight of the keys its key groups hold (``subtask_of_key``, checked against
  Flink's arithmetic in ``test_keygroups.py``): subtask 5, with keys 0 and 1, about 27%.
- ``feed -> noisy``: 1,500 records/s into one subtask that costs 1,000 us a record with
  ``cost_cv = 1.0``: the mean cost is kept, so it handles about 1,000 records/s (over a 2.5 s
  window, ~2,500 draws, the mean cost's sd is 2%: the bounds allow 5 sd above, and below also
  the runtime's usual shortfall on a loaded machine).
"""

from __future__ import annotations

import time

import pytest

from bpmon.runtime.keygroups import subtask_of_key
from bpmon.runtime.metrics import TaskMetrics, counters, window_metrics
from bpmon.scenario import parse_scenario
from tests.runtime.jobs import StartJob
from tests.waiting import wait_until

SCENARIO = """
name = "keys-and-noise"
seed = 3
[[operators]]
name = "src"
kind = "source"
parallelism = 2
rate = 1500
[[operators]]
name = "count"
kind = "map"
parallelism = 8
cost_us = 50
inputs = [{ from = "src", partitioner = "hash", keys = { count = 1000, zipf = 1.0 } }]
[[operators]]
name = "feed"
kind = "source"
rate = 1500
[[operators]]
name = "noisy"
kind = "map"
cost_us = 1000
cost_cv = 1.0
inputs = [{ from = "feed" }]
"""


@pytest.fixture(scope="module")
def window(start_module_job: StartJob) -> dict[str, list[TaskMetrics]]:
    """The job's metrics over 2.5 s once records reach every subtask of count and noisy (the job
    is ended by the fixture)."""
    job = start_module_job(parse_scenario(SCENARIO))
    fed = [*job.tasks["count"], *job.tasks["noisy"]]
    wait_until(
        lambda: [t.name for t in fed if not t.records_in.total],
        "records at every subtask of count and noisy",
        until=lambda waiting: not waiting,
    )
    start = counters(job.tasks)
    time.sleep(2.5)  # the window measured
    return window_metrics(start, counters(job.tasks))


def test_keyed_records_land_where_the_key_groups_send_them(
    window: dict[str, list[TaskMetrics]],
) -> None:
    harmonic = sum(1 / k for k in range(1, 1001))
    expected = [0.0] * 8
    for key in range(1000):
        expected[subtask_of_key(key, 128, 8)] += 1 / (key + 1) / harmonic
    rates = [m.records_in_per_s for m in window["count"]]
    total = sum(rates)
    assert total > 2000, rates  # the sources' 3,000/s, less a loaded machine's shortfall
    # ~7,500 records: the binomial sd of a share is at most 0.006; 0.035 is about 6 sd
    for index, rate in enumerate(rates):
        assert rate / total == pytest.approx(expected[index], abs=0.035), (index, rates)
    assert max(range(8), key=lambda i: rates[i]) == 5


def test_noisy_costs_keep_the_mean_capacity(window: dict[str, list[TaskMetrics]]) -> None:
    rate = window["noisy"][0].records_in_per_s
    assert 1000 * 0.8 < rate < 1000 * 1.1, rate
