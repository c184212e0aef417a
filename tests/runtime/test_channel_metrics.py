"""Per-channel evidence on running jobs: a slow consumer subtask shows on exactly its channels.

``source p=2 -> rebalance -> map p=3 -> sink`` on two task managers, map (3/3) ten times slower
than its siblings. Under credit-based flow control its two channels hold the backlog (its
subpartition in each source's partition fills) and its remote channel has no credit left and a
full receiver, while the channels into map (1/3) and (2/3) stay empty with full credit. Under
``tcp`` the remote channel into map (3/3) shares its connection with the one into map (1/3), so
the stalled connection leaves a backlog on map (1/3)'s channel too (head-of-line blocking), and
no channel reports credit.

Readings are taken from the test thread while the jobs run (and hammered from a second thread
meanwhile); each figure asserted is the median of a few readings.
"""

from __future__ import annotations

import statistics
import threading
import time

import pytest

from bpmon.runtime.channelmetrics import ChannelReading, channel_readings
from bpmon.runtime.job import Job
from bpmon.scenario import parse_scenario
from tests.runtime.jobs import StartJob, StopJob

WARMUP_S = 6.0
"""Backpressure builds for a few seconds with Flink's flushing; the readings come after it."""
READINGS = 5

JOB = """
name = "slow-channel-{flow_control}"
[network]
task_managers = 2
flow_control = "{flow_control}"
[[operators]]
name = "source"
kind = "source"
parallelism = 2
rate = 2000
[[operators]]
name = "map"
kind = "map"
parallelism = 3
cost_us = 200
slow_subtasks = {{ 2 = 10.0 }}
inputs = [{{ from = "source", partitioner = "rebalance" }}]
[[operators]]
name = "sink"
kind = "sink"
inputs = [{{ from = "map", partitioner = "rebalance" }}]
"""
"""source on tm 0, 1; map on 0, 1, 0; sink on 1. map (3/3) serves 500 records/s."""

Key = tuple[str, int, str, int]
"""(producer, producer index, consumer, consumer index)."""


def _key(r: ChannelReading) -> Key:
    return (r.producer, r.producer_index, r.consumer, r.consumer_index)


@pytest.fixture(scope="module")
def readings(start_module_job: StartJob) -> dict[str, tuple[Job, list[list[ChannelReading]]]]:
    jobs = {
        fc: start_module_job(parse_scenario(JOB.format(flow_control=fc)))
        for fc in ("credit", "tcp")
    }
    stop, errors = threading.Event(), []

    def hammer() -> None:  # reads all the time while the jobs run: must never fail
        while not stop.is_set():
            for job in jobs.values():
                try:
                    channel_readings(job.tasks)
                except Exception as exc:
                    errors.append(repr(exc))
            time.sleep(0.001)

    reader = threading.Thread(target=hammer, daemon=True)
    reader.start()
    time.sleep(WARMUP_S)
    taken: dict[str, list[list[ChannelReading]]] = {fc: [] for fc in jobs}
    for _ in range(READINGS):
        for fc, job in jobs.items():
            taken[fc].append(channel_readings(job.tasks))
        time.sleep(0.1)
    stop.set()
    reader.join(timeout=5.0)
    assert errors == []
    return {fc: (jobs[fc], taken[fc]) for fc in jobs}


def _median(samples: list[list[ChannelReading]], field: str) -> dict[Key, float]:
    """The median of ``field`` over the readings, per channel (None counted as -1)."""
    values: dict[Key, list[float]] = {}
    for sample in samples:
        for r in sample:
            value = getattr(r, field)
            values.setdefault(_key(r), []).append(-1.0 if value is None else float(value))
    return {key: statistics.median(v) for key, v in values.items()}


@pytest.mark.slow
@pytest.mark.parametrize("flow_control", ["credit", "tcp"])
def test_one_reading_per_channel_of_the_plan_with_its_task_managers(
    readings: dict[str, tuple[Job, list[list[ChannelReading]]]], flow_control: str
) -> None:
    job, samples = readings[flow_control]
    placement = job.plan.placement()
    sample = samples[-1]
    assert len(sample) == sum(len(g.channels) for g in job.plan.gates) == 2 * 3 + 3
    for r in sample:
        assert r.producer_task_manager == placement[r.producer][r.producer_index]
        assert r.consumer_task_manager == placement[r.consumer][r.consumer_index]
        assert r.remote == (r.producer_task_manager != r.consumer_task_manager)
        assert (r.connection is not None) == r.remote
        assert r.subpartition == (r.consumer_index if r.consumer == "map" else 0)
        assert not r.blocked  # no checkpoints: nothing aligns (tests/runtime/test_stall.py)
        if not r.remote:
            assert r.queued_at_consumer == 0 and r.credit is None
            assert r.connection_stalled is None


@pytest.mark.slow
def test_under_credit_the_slow_subtask_holds_the_backlog_of_exactly_its_channels(
    readings: dict[str, tuple[Job, list[list[ChannelReading]]]],
) -> None:
    _, samples = readings["credit"]
    backlog, credit = _median(samples, "backlog"), _median(samples, "credit")
    queued = _median(samples, "queued_at_consumer")
    slow = [k for k in backlog if k[2] == "map" and k[3] == 2]
    others = [k for k in backlog if k not in slow]
    assert len(slow) == 2
    assert min(backlog[k] for k in slow) > max(backlog[k] for k in others), backlog
    assert min(backlog[k] for k in slow) >= 3, backlog
    remote_slow = ("source", 1, "map", 2)  # tm 1 -> tm 0
    assert credit[remote_slow] == 0, credit  # its receiver is full: no credit left
    assert queued[remote_slow] >= 2, queued  # at least its exclusive buffers hold data
    for key in (("source", 1, "map", 0), ("source", 0, "map", 1)):  # remote, idle receivers
        assert credit[key] >= 1 and queued[key] == 0, (credit, queued)
    assert all(r.connection_stalled is None for s in samples for r in s)


@pytest.mark.slow
def test_under_tcp_the_stalled_connection_leaves_a_backlog_on_the_other_channel_too(
    readings: dict[str, tuple[Job, list[list[ChannelReading]]]],
) -> None:
    _, samples = readings["tcp"]
    backlog, stalled = _median(samples, "backlog"), _median(samples, "connection_stalled")
    slow, victim = ("source", 1, "map", 2), ("source", 1, "map", 0)
    connection = {_key(r): r.connection for r in samples[-1]}
    assert connection[slow] == connection[victim] is not None  # one exchange, tm 1 -> tm 0
    assert stalled[slow] == stalled[victim] == 1, stalled
    assert backlog[victim] >= 1, backlog  # map (1/3) is idle, yet its channel is backed up
    assert stalled[("source", 0, "map", 1)] == 0, stalled  # tm 0 -> tm 1 keeps reading
    assert all(r.credit is None for s in samples for r in s)


def test_readings_of_part_of_a_job_are_refused(stop_job: StopJob) -> None:
    job = Job(parse_scenario(JOB.format(flow_control="credit")))
    try:
        assert len(channel_readings(job.tasks)) == 9  # a job not started reads as well
        with pytest.raises(ValueError, match=r"pass every task of the job \(job.tasks\)"):
            channel_readings({"map": job.tasks["map"]})
    finally:
        stop_job(job)
