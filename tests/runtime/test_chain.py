"""Operator chaining: a chain is one task (a thread per subtask); records and time per member."""

from __future__ import annotations

import time
from collections.abc import Callable

import pytest

from bpmon.errors import ScenarioError
from bpmon.runtime.job import Job, JobResult
from bpmon.runtime.metrics import counters, window_metrics
from bpmon.scenario import parse_scenario
from bpmon.scenario.chained import chained_scenario

StopJob = Callable[[Job], JobResult]

CHAINED = """
name = "chained"
chaining = true
[monitor]
warmup_s = 0.8
samples = 20
interval_ms = 20
[[operators]]
name = "source"
kind = "source"
parallelism = 2
rate = 1000
records = {records}
[[operators]]
name = "parse"
kind = "map"
parallelism = 2
cost_us = 50
inputs = [{{ from = "source" }}]
[[operators]]
name = "enrich"
kind = "map"
parallelism = 2
cost_us = 1500
inputs = [{{ from = "parse", partitioner = "rebalance" }}]
[[operators]]
name = "check"
kind = "filter"
parallelism = 2
selectivity = 0.5
cost_us = 100
inputs = [{{ from = "enrich" }}]
[[operators]]
name = "sink"
kind = "sink"
inputs = [{{ from = "check", partitioner = "rebalance" }}]
"""


def test_a_chained_scenario_has_one_operator_per_task() -> None:
    tasks = chained_scenario(parse_scenario(CHAINED.format(records=100)))
    assert [op.name for op in tasks.operators] == ["source -> parse", "enrich -> check", "sink"]
    head, middle, sink = tasks.operators
    assert (head.kind, head.rate, head.records) == ("source", 1000, 100)
    assert [m.name for m in middle.members] == ["enrich", "check"]
    assert [(e.source, e.partitioner) for e in middle.inputs] == [("source -> parse", "rebalance")]
    assert [e.source for e in sink.inputs] == ["enrich -> check"]
    assert not tasks.chaining and sink.members == ()


def test_a_chain_runs_as_one_thread_and_counts_records_per_member(stop_job: StopJob) -> None:
    job = Job(parse_scenario(CHAINED.format(records=300)))
    try:
        assert [t.name for t in job.all_tasks()] == [
            "source -> parse (1/2)",
            "source -> parse (2/2)",
            "enrich -> check (1/2)",
            "enrich -> check (2/2)",
            "sink (1/1)",
        ]
        job.start()
        deadline = time.monotonic() + 30
        while not job.finished and time.monotonic() < deadline:
            job.wait(0.05)
        assert job.finished
        totals = [t.chain.totals() for t in job.tasks["enrich -> check"] if t.chain is not None]
        enrich_in = sum(member[0][1] for member in totals)
        check_out = sum(member[1][2] for member in totals)
        assert enrich_in == 600  # every record of the two sources
        assert check_out == sum(t.records_in.total for t in job.tasks["sink"]) == 300  # half pass
        for member_totals in totals:
            (_, e_in, _, e_busy), (_, c_in, _, c_busy) = member_totals
            assert e_busy == pytest.approx(1500 * e_in) and c_busy == pytest.approx(100 * c_in)
    finally:
        stop_job(job)


def test_window_metrics_report_each_member(stop_job: StopJob) -> None:
    job = Job(parse_scenario(CHAINED.format(records=100000)))
    try:
        job.start()
        time.sleep(0.5)
        start = counters(job.tasks)
        time.sleep(0.5)
        metrics = window_metrics(start, counters(job.tasks))["enrich -> check"][0]
        names = [op.name for op in metrics.operators]
        assert names == ["enrich", "check"]
        extra = metrics.as_flink()
        assert (
            extra["bpmon_operator.enrich.busyTimeMsPerSecond"]
            > (extra["bpmon_operator.check.busyTimeMsPerSecond"])
        )
    finally:
        stop_job(job)


def test_a_failure_inside_a_chain_is_refused_at_load() -> None:
    text = CHAINED.format(records=10).replace(
        "cost_us = 100\n", "cost_us = 100\nfail = { after_records = 3 }\n"
    )
    with pytest.raises(ScenarioError, match='operator "check" has "fail" inside the chain'):
        parse_scenario(text)
