"""Bounded sources: a source with ``records`` emits exactly that many, then every task finishes."""

from __future__ import annotations

from bpmon.runtime.job import Job
from bpmon.scenario import parse_scenario
from tests.runtime.jobs import StopJob
from tests.waiting import wait_until

BOUNDED = """
name = "bounded"

[network]
task_managers = 2

[[operators]]
name = "source"
kind = "source"
parallelism = 2
rate = 20000
records = 700

[[operators]]
name = "double"
kind = "flatmap"
fanout = 2
parallelism = 3
inputs = [{ from = "source", partitioner = "rebalance" }]

[[operators]]
name = "sink"
kind = "sink"
inputs = [{ from = "double", partitioner = "rebalance" }]
"""


def wait_until_finished(job: Job) -> None:
    """Wait until every task thread of ``job`` has returned (the mechanism, not a clock bound)."""
    wait_until(
        lambda: [t.name for t in job.all_tasks() if t.thread.is_alive()],
        f"every task thread of {job.name} to return",
        until=lambda alive: not alive,
    )


def test_a_bounded_source_emits_its_records_and_every_task_finishes(
    stop_job: StopJob,
) -> None:
    job = Job(parse_scenario(BOUNDED))
    job.start()
    try:
        wait_until_finished(job)
        assert not [t.name for t in job.all_tasks() if t.thread.is_alive()]
        assert [t.records_out.total for t in job.tasks["source"]] == [700, 700]
        assert sum(t.records_in.total for t in job.tasks["double"]) == 1400
        assert sum(t.records_in.total for t in job.tasks["sink"]) == 2800
        assert all(t.error is None for t in job.all_tasks())
    finally:
        result = stop_job(job)
    assert result.state == "finished"
