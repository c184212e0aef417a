"""Tasks in running jobs: rates, service time, time accounting and the three named waits.

Each group of jobs shares one warm-up (a module fixture starts them together and snapshots their
metrics once), so that the file costs a few seconds in all. The expected values come from the
scenario format (``spec/scenario.md``: ``rate`` is records per second per subtask; ``cost_us`` is
service time, so ``cost_us = 500`` allows at most 2,000 records/s; ``slow_subtasks`` multiplies
it) and from Flink's definitions (busy + idle + backpressured = 1,000 ms per second).
"""

from __future__ import annotations

import collections
import dataclasses
import sys
import threading
import time
from collections.abc import Callable

import pytest

from bpmon.runtime.job import Job, JobResult
from bpmon.runtime.metrics import TaskMetrics, job_metrics, task_metrics
from bpmon.runtime.task import Task
from bpmon.scenario import Scenario, parse_scenario

StartJob = Callable[[Scenario], Job]
StopJob = Callable[[Job], JobResult]
Snapshot = dict[str, dict[str, list[TaskMetrics]]]

WARMUP_S = 3.5
"""One 3 s metric window plus the first flush: rates hold from the first record on, and these
jobs need no buffers to fill before they show their steady state."""


def _scenario(name: str, operators: str, network: str = "") -> Scenario:
    return parse_scenario(f'name = "{name}"\n{network}\n{operators}', f"<{name}>")


CHAIN = """
[[operators]]
name = "source"
kind = "source"
parallelism = {p}
rate = {rate}

[[operators]]
name = "op"
kind = "{kind}"
parallelism = {p}
cost_us = {cost}
{extra}
inputs = [{{ from = "source" }}]

[[operators]]
name = "sink"
kind = "sink"
inputs = [{{ from = "op", partitioner = "rebalance" }}]
"""


def _chain(
    name: str,
    *,
    rate: float,
    kind: str = "map",
    p: int = 1,
    cost: float = 0,
    extra: str = "",
    network: str = "",
) -> Scenario:
    operators = CHAIN.format(p=p, rate=rate, kind=kind, cost=cost, extra=extra)
    return _scenario(name, operators, network)


RATE_JOBS = {
    "rate": _chain("rate", rate=1000),
    "per-subtask": _chain("per-subtask", rate=700, p=2),
    "filter": _chain("filter", rate=1000, kind="filter", extra="selectivity = 0.25"),
    "flatmap": _chain("flatmap", rate=500, kind="flatmap", extra="fanout = 3"),
    "service": _chain("service", rate=0, cost=500),
    "slow-subtask": _chain(
        "slow-subtask", rate=0, p=2, cost=500, extra="slow_subtasks = { 1 = 3.0 }"
    ),
}


@pytest.fixture(scope="module")
def rates(start_module_job: StartJob, stop_job: StopJob) -> Snapshot:
    """Every job of RATE_JOBS started together; their metrics after one warm-up, then stopped."""
    jobs = {name: start_module_job(scenario) for name, scenario in RATE_JOBS.items()}
    time.sleep(WARMUP_S)
    snapshot = {name: job_metrics(job.tasks) for name, job in jobs.items()}
    for job in jobs.values():
        stop_job(job)
    return snapshot


def _in(snapshot: dict[str, list[TaskMetrics]], vertex: str) -> float:
    return sum(m.records_in_per_s for m in snapshot[vertex])


@pytest.mark.slow
def test_a_source_holds_its_rate(rates: Snapshot) -> None:
    metrics = rates["rate"]
    assert metrics["source"][0].records_out_per_s == pytest.approx(1000, rel=0.1)
    assert _in(metrics, "sink") == pytest.approx(1000, rel=0.1)


@pytest.mark.slow
def test_the_rate_is_per_subtask(rates: Snapshot) -> None:
    metrics = rates["per-subtask"]
    for source in metrics["source"]:
        assert source.records_out_per_s == pytest.approx(700, rel=0.1)
    assert _in(metrics, "sink") == pytest.approx(1400, rel=0.1)


@pytest.mark.slow
def test_a_filter_passes_its_selectivity(rates: Snapshot) -> None:
    metrics = rates["filter"]
    assert _in(metrics, "op") == pytest.approx(1000, rel=0.1)
    assert _in(metrics, "sink") == pytest.approx(250, rel=0.1)


@pytest.mark.slow
def test_a_flatmap_emits_its_fanout(rates: Snapshot) -> None:
    metrics = rates["flatmap"]
    assert metrics["op"][0].records_out_per_s == pytest.approx(1500, rel=0.1)
    assert _in(metrics, "sink") == pytest.approx(1500, rel=0.1)


@pytest.mark.slow
def test_cost_us_is_service_time(rates: Snapshot) -> None:
    """cost_us = 500 behind an unlimited source: at most (and close to) 2,000 records/s."""
    metrics = rates["service"]
    op = metrics["op"][0]
    assert 1500 <= op.records_in_per_s <= 2100
    assert op.busy_ms_per_s >= 800
    assert metrics["source"][0].backpressured_ms_per_s >= 700
    assert metrics["sink"][0].idle_ms_per_s >= 700


@pytest.mark.slow
def test_slow_subtasks_multiply_the_cost(rates: Snapshot) -> None:
    fast, slow = rates["slow-subtask"]["op"]
    assert 1500 <= fast.records_in_per_s <= 2100
    assert 500 <= slow.records_in_per_s <= 700  # 1,500 us per record
    assert fast.records_in_per_s / slow.records_in_per_s == pytest.approx(3, rel=0.2)
    assert fast.busy_ms_per_s >= 800
    assert slow.busy_ms_per_s >= 800


# -- time accounting --------------------------------------------------------------------------


def _check_shares(m: TaskMetrics) -> None:
    parts = (m.busy_ms_per_s, m.idle_ms_per_s, m.backpressured_ms_per_s)
    assert all(0 <= part <= 1000 for part in parts), m
    assert sum(parts) == pytest.approx(1000, abs=1), m
    assert m.backpressured_ms_per_s == pytest.approx(
        m.soft_backpressured_ms_per_s + m.hard_backpressured_ms_per_s, abs=1
    )
    assert m.records_in_per_s >= 0
    assert m.records_out_per_s >= 0


def test_time_accounting_is_readable_before_during_and_after(stop_job: StopJob) -> None:
    # one task manager: local channels only (remote ones: see the test below)
    job = Job(_chain("readable", rate=2000, cost=400, network="[network]\ntask_managers = 1"))
    for task in job.all_tasks():  # built, not started: nothing done yet
        m = task_metrics(task)
        assert m.records_in_per_s == m.records_out_per_s == 0
        assert m.busy_ms_per_s == 0
    readings: list[TaskMetrics] = []
    done = threading.Event()

    def read_all_the_time() -> None:
        while not done.is_set():
            readings.extend(task_metrics(task) for task in job.all_tasks())

    reader = threading.Thread(target=read_all_the_time, name="metrics-reader")
    job.start()
    reader.start()
    try:
        time.sleep(1.0)
    finally:
        done.set()
        reader.join()
        stop_job(job)
    assert len(readings) > 100
    for m in readings:
        _check_shares(m)
    for m in (task_metrics(task) for task in job.all_tasks()):  # after the end, still readable
        _check_shares(m)
    assert job_metrics(job.tasks)["op"][0].records_in_per_s > 0


@pytest.mark.slow
def test_remote_input_queues_are_readable_while_buffers_arrive(start_job: StartJob) -> None:
    """inputQueueLength read in a tight loop from another thread, as a collector would."""
    job = start_job(
        _scenario(
            "remote-reads",
            CHAIN.format(p=2, rate=0, kind="map", cost=20, extra=""),
            "[network]\ntask_managers = 2\nbuffer_timeout_ms = 0\nsegment_size = 4096",
        )
    )
    gates = [gate for task in job.all_tasks() for gate in task.gates]
    failures: list[str] = []
    deadline = time.monotonic() + 2.0
    while time.monotonic() < deadline:
        for gate in gates:
            try:
                gate.queue_length()
            except RuntimeError as exc:
                failures.append(str(exc))
    assert failures == []


def test_flink_names_leave_out_what_a_task_does_not_have(start_job: StartJob) -> None:
    job = start_job(_chain("names", rate=100))
    metrics = job_metrics(job.tasks)
    source = metrics["source"][0].as_flink()
    op = metrics["op"][0].as_flink()
    sink = metrics["sink"][0].as_flink()
    assert "outPoolUsage" in source and "inPoolUsage" not in source
    assert "outPoolUsage" not in sink and "inPoolUsage" in sink
    for name in ("busyTimeMsPerSecond", "idleTimeMsPerSecond", "backPressuredTimeMsPerSecond"):
        assert name in op
    assert {"softBackPressuredTimeMsPerSecond", "hardBackPressuredTimeMsPerSecond"} <= set(op)


# -- the named waits --------------------------------------------------------------------------

WAITS = ("wait_for_output", "wait_for_input", "request_buffer_builder_blocking", "_serve")

EXPLODE = """
[[operators]]
name = "source"
kind = "source"
rate = 0

[[operators]]
name = "explode"
kind = "flatmap"
fanout = {fanout}
record_bytes = {record_bytes}
inputs = [{{ from = "source" }}]

[[operators]]
name = "slow"
kind = "sink"
cost_us = 2000
inputs = [{{ from = "explode" }}]
"""
"""An unlimited source, a flatmap of records bigger than a buffer, and a slow sink."""

IDLE_PIPELINE = """
[[operators]]
name = "trickle"
kind = "source"
rate = 20

[[operators]]
name = "idle"
kind = "sink"
inputs = [{ from = "trickle" }]
"""


def _explode(name: str, *, fanout: int, record_bytes: int, network: str) -> Scenario:
    operators = EXPLODE.format(fanout=fanout, record_bytes=record_bytes)
    return _scenario(name, operators, f"[network]\n{network}")


def _where_threads_wait(tasks: list[Task], samples: int = 30) -> dict[str, str]:
    """The named wait (or service) each task thread is found in most often."""
    counts = {task.name: collections.Counter[str]() for task in tasks}
    for _ in range(samples):
        frames = sys._current_frames()
        for task in tasks:
            frame = frames.get(task.thread.ident or -1)
            names = []
            while frame is not None:
                names.append(frame.f_code.co_name)
                frame = frame.f_back
            counts[task.name][next((n for n in names if n in WAITS), "elsewhere")] += 1
        time.sleep(0.02)
    return {name: count.most_common(1)[0][0] for name, count in counts.items()}


@pytest.mark.slow
def test_each_wait_is_one_named_function_and_its_time_is_accounted(start_job: StartJob) -> None:
    """The source finds its output unavailable (soft backpressure); explode, whose every input
    record makes 400 KB of output and which has no overdraft buffers, blocks inside a buffer
    request (hard); the sink serves its cost (busy); a sink with nothing to do waits for input
    (idle), and so does a source waiting for its next record."""
    scenario = _explode(
        "stacks",
        fanout=4,
        record_bytes=100_000,
        network="task_managers = 1\nmax_overdraft_buffers_per_gate = 0",
    )
    idle = _scenario("idle", IDLE_PIPELINE)
    scenario = dataclasses.replace(scenario, operators=scenario.operators + idle.operators)
    job = start_job(scenario)
    time.sleep(3.0)
    where = _where_threads_wait(job.all_tasks())
    metrics = {m.thread: m for ms in job_metrics(job.tasks).values() for m in ms}
    assert where["source (1/1)"] == "wait_for_output"
    assert metrics["source (1/1)"].soft_backpressured_ms_per_s >= 500
    assert where["explode (1/1)"] == "request_buffer_builder_blocking"
    assert metrics["explode (1/1)"].hard_backpressured_ms_per_s >= 500
    assert where["slow (1/1)"] == "_serve"
    assert metrics["slow (1/1)"].busy_ms_per_s >= 800
    assert where["idle (1/1)"] == "wait_for_input"
    assert metrics["idle (1/1)"].idle_ms_per_s >= 800
    assert where["trickle (1/1)"] == "wait_for_input"


@pytest.mark.slow
def test_overdraft_buffers_let_a_big_record_finish_without_blocking(
    start_job: StartJob,
) -> None:
    """Each input record of explode makes 100 KB, about three buffers (FLIP-227's case).

    With overdraft buffers the task only ever waits, responsive, for an available output (soft)
    and draws on overdraft to finish a record; without them it blocks inside buffer requests.
    """
    with_overdraft = start_job(
        _explode("overdraft", fanout=2, record_bytes=50_000, network="task_managers = 2")
    )
    without = start_job(
        _explode(
            "no-overdraft",
            fanout=2,
            record_bytes=50_000,
            network="task_managers = 2\nmax_overdraft_buffers_per_gate = 0",
        )
    )
    time.sleep(3.0)
    drawn: dict[str, list[int]] = {"with": [], "without": []}
    for _ in range(30):
        drawn["with"].append(task_metrics(with_overdraft.tasks["explode"][0]).overdraft_buffers)
        drawn["without"].append(task_metrics(without.tasks["explode"][0]).overdraft_buffers)
        time.sleep(0.01)
    soft = task_metrics(with_overdraft.tasks["explode"][0])
    hard = task_metrics(without.tasks["explode"][0])
    assert soft.backpressured_ms_per_s >= 700
    assert soft.hard_backpressured_ms_per_s < 50
    assert 0 < max(drawn["with"]) <= 5  # max_overdraft_buffers_per_gate
    assert hard.hard_backpressured_ms_per_s >= 200
    assert max(drawn["without"]) == 0


BUFFERS = """
name = "buffers"
[network]
task_managers = 1
[[operators]]
name = "source"
kind = "source"
rate = 2000
record_bytes = 1000
[[operators]]
name = "sink"
kind = "sink"
inputs = [{ from = "source" }]
"""


def test_buffers_out_per_second_follows_the_bytes_written(start_job: StartJob) -> None:
    """2,000 records/s of 1,000 bytes fill a 32 KiB buffer about 61 times a second."""
    job = start_job(parse_scenario(BUFFERS))
    time.sleep(3.5)
    (source,) = job_metrics(job.tasks)["source"]
    assert 45 <= source.buffers_out_per_s <= 80, source.buffers_out_per_s
    assert source.as_flink()["numBuffersOutPerSecond"] == source.buffers_out_per_s
