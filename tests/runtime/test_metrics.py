"""Metrics over an exact interval: ``counters`` at both ends, ``window_metrics`` between them.

The first tests drive real tasks of a real (unstarted) job on a manual clock, standing in for the
task threads, so every expected figure is exact; the last reads a running job from another thread.
"""

from __future__ import annotations

import time

import pytest

from bpmon.model.clock import ManualClock
from bpmon.runtime.accounting import State
from bpmon.runtime.job import Job
from bpmon.runtime.metrics import counters, job_metrics, task_metrics, window_metrics
from bpmon.scenario import parse_scenario
from tests.runtime.jobs import StartJob, StopJob

PIPELINE = """
name = "window"
[network]
task_managers = 1
[[operators]]
name = "source"
kind = "source"
rate = {rate}
[[operators]]
name = "sink"
kind = "sink"
parallelism = 2
inputs = [{{ from = "source" }}]
"""


def test_window_metrics_cover_exactly_the_interval_between_two_readings(
    stop_job: StopJob,
) -> None:
    clock = ManualClock(100.0)
    job = Job(parse_scenario(PIPELINE.format(rate=1000)), clock=clock.now)
    try:
        (source,) = job.tasks["source"]
        # before the window: 3 s backpressured, 3,000 records out
        source.account.mark(State.SOFT_BP)
        clock.advance(3.0)
        source.records_out.add(3000)
        start = counters(job.tasks)
        # the window, 5 s (longer than the 3 s sliding view): busy 1 s, hard 1 s, idle 3 s
        source.account.mark(State.BUSY)
        clock.advance(1.0)
        source.records_out.add(800)
        source.account.mark(State.HARD_BP)
        clock.advance(1.0)
        source.account.mark(State.IDLE)
        source.outputs[0].write(list(range(700)))  # 70 KB of 100-byte records: 2 full buffers
        clock.advance(3.0)
        end = counters(job.tasks)
        window = window_metrics(start, end)
        live = job_metrics(job.tasks)
    finally:
        stop_job(job)
    (m,) = window["source"]
    assert m.busy_ms_per_s == pytest.approx(200)
    assert m.hard_backpressured_ms_per_s == pytest.approx(200)
    assert m.soft_backpressured_ms_per_s == pytest.approx(0)
    assert m.backpressured_ms_per_s == pytest.approx(200)
    assert m.idle_ms_per_s == pytest.approx(600)
    assert m.records_out_per_s == pytest.approx(800 / 5)
    assert m.buffers_out_per_s == pytest.approx(2 / 5)
    assert m.buffers_out == 2  # a gauge: the count at the end
    assert m.out_pool_usage is not None and m.out_pool_usage > 0  # the buffers are still queued
    out = end.tasks["source"][0].out
    assert out is not None and m.output_queue_length == out.output_queue_length == 2
    # the sliding view, over the last 3 s only, saw the source idle
    assert live["source"][0].idle_ms_per_s == pytest.approx(1000)
    assert [s.thread for s in window["sink"]] == ["sink (1/2)", "sink (2/2)"]
    assert all(s.idle_ms_per_s == pytest.approx(1000) for s in window["sink"])
    assert all(s.out_pool_usage is None for s in window["sink"])


def test_readings_of_different_jobs_are_refused(stop_job: StopJob) -> None:
    one = Job(parse_scenario(PIPELINE.format(rate=10)))
    other = Job(parse_scenario(PIPELINE.format(rate=10).replace("parallelism = 2", "")))
    try:
        with pytest.raises(ValueError, match="different jobs"):
            window_metrics(counters(one.tasks), counters(other.tasks))
    finally:
        stop_job(one)
        stop_job(other)


def test_window_metrics_of_a_running_job_add_up(start_job: StartJob) -> None:
    """Read from another thread while the tasks run: every share is consistent, every rate is
    the counted records over the interval, and the gauges are those of the end."""
    job = start_job(parse_scenario(PIPELINE.format(rate=2000)))
    start = counters(job.tasks)
    time.sleep(1.0)
    end = counters(job.tasks)
    window = window_metrics(start, end)
    for vertex, group in window.items():
        for i, m in enumerate(group):
            parts = (m.busy_ms_per_s, m.idle_ms_per_s, m.backpressured_ms_per_s)
            assert all(0 <= p <= 1000 for p in parts), m
            assert sum(parts) == pytest.approx(1000), m
            a, b = start.tasks[vertex][i], end.tasks[vertex][i]
            span = b.time.at - a.time.at
            assert m.records_in_per_s * span == pytest.approx(b.records_in - a.records_in)
            assert m.records_out_per_s * span == pytest.approx(b.records_out - a.records_out)
    source = window["source"][0]
    assert source.records_out_per_s > 0
    # conserved: the sinks received no more than the source emitted (read after them)
    received = sum(c.records_in for c in end.tasks["sink"])
    assert 0 < received <= job.tasks["source"][0].records_out.total
    assert task_metrics(job.tasks["source"][0]).vertex == source.vertex


def test_pending_records_are_the_records_a_source_owes_its_schedule(stop_job: StopJob) -> None:
    """FLIP-33's pendingRecords: due and not emitted, including what a stall made the pacing
    skip (a Kafka source's lag keeps those too); its growth is rate minus emission rate."""
    clock = ManualClock(100.0)
    job = Job(parse_scenario(PIPELINE.format(rate=1000)), clock=clock.now)
    try:
        (source,) = job.tasks["source"]
        limiter = source.limiter
        assert limiter is not None
        assert limiter.permits(1) == 1  # the schedule starts: record 0 is due and emitted
        start = counters(job.tasks)
        clock.advance(2.0)  # 2,000 more records due; only 500 emitted
        assert limiter.permits(500) == 500
        end = counters(job.tasks)
        live = job_metrics(job.tasks)
    finally:
        stop_job(job)
    (m,) = window_metrics(start, end)["source"]
    schedule = end.tasks["source"][0].schedule
    assert schedule is not None
    assert schedule.forgiven == 1000  # beyond the one second of catch-up
    assert schedule.behind == 500
    assert m.pending_records == 2001 - 501 == schedule.behind + schedule.forgiven
    assert m.pending_records_growth_per_s == pytest.approx((1000 * 2.0 - 500) / 2.0)
    flink = m.as_flink()
    assert flink["pendingRecords"] == 1500
    assert flink["bpmon_pendingRecordsGrowthPerSecond"] == pytest.approx(750)
    assert live["source"][0].pending_records == 1500
    for sink in live["sink"]:  # not a source: no such metric, not a zero
        assert sink.pending_records is None and sink.pending_records_growth_per_s is None
        assert "pendingRecords" not in sink.as_flink()


def test_a_source_without_a_rate_limit_owes_nothing(stop_job: StopJob) -> None:
    """rate = 0: emits as fast as it can, so nothing is ever due: no pendingRecords at all."""
    job = Job(parse_scenario(PIPELINE.format(rate=0)))
    try:
        start = counters(job.tasks)
        end = counters(job.tasks)
    finally:
        stop_job(job)
    (m,) = window_metrics(start, end)["source"]
    assert m.pending_records is None and m.pending_records_growth_per_s is None
    assert "pendingRecords" not in m.as_flink()
    assert "bpmon_pendingRecordsGrowthPerSecond" not in m.as_flink()
