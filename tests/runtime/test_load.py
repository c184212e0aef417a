"""The runtime's own load: saturated by cheap work at a huge rate, not by a slow operator.

The crucial distinction: a source held back by a slow operator and a source held back by an
interpreter that cannot keep up both show backpressure; only the second is runtime saturation.
The rule is checked on synthetic snapshots first (every branch, exact figures), then on real jobs.
"""

from __future__ import annotations

import time

import pytest

from bpmon.runtime.job import Job
from bpmon.runtime.load import (
    BUSY_HOST_CORES,
    SATURATED_CORES,
    LoadSnapshot,
    ThreadTimes,
    WindowLoad,
    runtime_load,
)
from bpmon.runtime.metrics import counters, window_metrics
from bpmon.runtime.pacing import Schedule
from bpmon.scenario import Scenario, parse_scenario
from tests.runtime.jobs import StartJob, StopJob
from tests.waiting import wait_until


def _snapshot(
    at: float,
    cpu: float,
    wait: float = 0.0,
    *,
    due: int | None = None,
    released: int = 0,
    unlimited: int = 0,
    emitted: float = 0.0,
    process: float | None = None,
    machine: float | None = None,
) -> LoadSnapshot:
    """``process``: the whole process's CPU seconds (default: the task thread's alone)."""
    schedules = {}
    if due is not None:
        schedules["source (1/1)"] = Schedule(at, 1000.0, due, released, 0)
    return LoadSnapshot(
        at=at,
        per_thread=True,
        process_cpu_s=cpu if process is None else process,
        threads={"map (1/1)": ThreadTimes(cpu, wait)},
        schedules=schedules,
        unlimited_sources=unlimited,
        emitted=emitted,
        machine_busy_s=machine,
    )


# -- the rule ---------------------------------------------------------------------------------


def test_busy_interpreter_and_sources_behind_is_saturation() -> None:
    """The task threads ran 0.75 cores, the process 0.9 (the sampler and the main thread too)."""
    start = _snapshot(10.0, 1.0, due=1000, released=1000, emitted=1000, process=1.2)
    end = _snapshot(12.0, 2.5, 0.2, due=3000, released=2000, emitted=2000, process=3.0)
    load = runtime_load(start, end)
    assert load.window_s == pytest.approx(2.0)
    assert load.cpu_cores_used == pytest.approx(0.75)
    assert load.process_cores == pytest.approx(0.9)
    assert load.cpu_wait_cores == pytest.approx(0.1)
    assert load.delivered == pytest.approx(0.5)
    assert load.lag_ms_p99 == pytest.approx(1000.0)  # 1,000 records owed at 1,000/s
    assert load.saturated
    assert load.capacity_records_per_s == pytest.approx(500.0)
    assert load.reason.startswith("the runtime could not keep up") and not load.host_busy
    assert "above 500 records/s" in load.reason


def test_threads_waiting_for_a_core_more_than_running_is_a_busy_machine() -> None:
    """Seen in CI beside two Flink clusters: 0.03 cores used, 1.01 waited, sources behind."""
    start = _snapshot(10.0, 1.0, 0.0, due=1000, released=1000, emitted=1000)
    end = _snapshot(12.0, 1.06, 2.02, due=3000, released=2000, emitted=2000)
    load = runtime_load(start, end)
    assert load.saturated and load.host_busy  # the figures describe the machine either way
    assert load.reason.startswith("the machine was too busy for the runtime")
    assert "0.03 cores" in load.reason and "waited 1.01" in load.reason


def test_an_interpreter_near_its_core_on_a_busy_host_is_saturation() -> None:
    """Seen in CI on six million records/s of zero-cost work: the process used 0.79 cores (just
    short of 0.8, the other processes took the rest), its threads waited 0.49 more, and the
    sources released 10% of their schedules. That is the interpreter's limit, not a job whose
    figures hold; a slow job's threads on a busy host (0.60 cores at most) stay diagnosed."""
    start = _snapshot(10.0, 1.0, 0.0, due=1000, released=1000, emitted=1000)
    end = _snapshot(12.0, 2.58, 0.98, due=3000, released=1200, emitted=1200)
    load = runtime_load(start, end)
    assert load.saturated and not load.host_busy
    assert load.reason.startswith("the runtime could not keep up"), load.reason
    slow = _snapshot(12.0, 2.2, 0.8, due=3000, released=2000)  # 0.60 cores ran, 0.40 waited
    assert not runtime_load(start, slow).saturated


def test_a_busy_host_whose_threads_ran_more_than_they_waited_is_diagnosed() -> None:
    """The 7-of-42 shape: a slow operator holds the source back (behind its schedule) while
    other processes keep the 2 cores busy; the threads ran 0.5 cores and waited 0.4 for one.
    The interpreter was not the limit: the window is diagnosed, and the reason says the host
    was busy, with the other processes' share of the machine."""
    start = _snapshot(10.0, 1.0, due=1000, released=1000, machine=100.0)
    end = _snapshot(12.0, 2.0, 0.8, due=3000, released=2000, machine=103.6)
    load = runtime_load(start, end)
    assert (load.saturated, load.host_busy) == (False, True)
    assert load.other_cores == pytest.approx(1.3)  # 1.8 cores busy in all, 0.5 of them ours
    assert load.reason.startswith("the machine was busy but the runtime kept up")
    assert "other processes 1.30" in load.reason


def test_threads_that_waited_more_than_they_ran_but_kept_the_schedule_say_so() -> None:
    """Seen in CI: the job's threads used 0.11 cores and waited 1.23, yet the sources released
    all of their schedules. The figures hold, but not because the threads ran more than they
    waited: the reason must not say they did."""
    start = _snapshot(10.0, 1.0, 0.0, due=1000, released=1000)
    end = _snapshot(12.0, 1.22, 2.46, due=3000, released=3000)
    load = runtime_load(start, end)
    assert (load.saturated, load.host_busy) == (False, True)
    assert "ran more than they waited" not in load.reason
    assert "waited for a core more than they ran, but the sources kept their schedules" in (
        load.reason
    )


def test_a_quiet_host_is_not_busy() -> None:
    start = _snapshot(10.0, 1.0, due=1000, released=1000, machine=100.0)
    end = _snapshot(12.0, 1.2, 0.02, due=3000, released=2000, machine=100.3)
    load = runtime_load(start, end)
    assert (load.saturated, load.host_busy) == (False, False)


def test_sources_behind_while_the_interpreter_idles_is_a_slow_job_not_saturation() -> None:
    """The slow-operator case: the source is far behind, but the threads barely use a core."""
    start = _snapshot(10.0, 1.0, due=1000, released=1000)
    end = _snapshot(12.0, 1.1, 0.05, due=3000, released=2000)
    load = runtime_load(start, end)
    assert not load.saturated and load.capacity_records_per_s is None
    assert load.lag_ms_p99 == pytest.approx(1000.0)
    assert "kept up" in load.reason and "below 0.8" in load.reason


def test_a_busy_interpreter_that_keeps_the_schedule_is_not_saturated() -> None:
    start = _snapshot(10.0, 1.0, due=1000, released=1000)
    end = _snapshot(12.0, 2.9, due=3000, released=3000)
    load = runtime_load(start, end)
    assert (load.saturated, load.delivered, load.lag_ms_p99) == (False, 1.0, 0.0)


def test_an_unlimited_source_on_a_busy_interpreter_is_saturation() -> None:
    start = _snapshot(10.0, 0.0, unlimited=1, emitted=0)
    end = _snapshot(11.0, 0.5, 0.4, unlimited=1, emitted=3_000_000)
    load = runtime_load(start, end)
    assert load.saturated and load.unlimited_sources
    assert (load.lag_ms_p99, load.delivered) == (None, None)
    assert load.capacity_records_per_s == pytest.approx(3_000_000)


def test_without_per_thread_times_the_process_cpu_stands_in() -> None:
    start = LoadSnapshot(10.0, False, 5.0, {}, {}, 1, 0.0)
    end = LoadSnapshot(11.0, False, 5.9, {}, {}, 1, 100.0)
    load = runtime_load(start, end)
    assert load.cpu_cores_used == pytest.approx(0.9) and load.cpu_wait_cores == 0.0
    assert load.saturated


def test_swapped_snapshots_are_refused() -> None:
    with pytest.raises(ValueError, match="later than start"):
        runtime_load(_snapshot(12.0, 1.0), _snapshot(10.0, 1.0))


# -- real jobs --------------------------------------------------------------------------------

CHAIN = """
name = "{name}"
[network]
task_managers = 2
segment_size = 4096
[[operators]]
name = "source"
kind = "source"
parallelism = {p}
rate = {rate}
[[operators]]
name = "map"
kind = "map"
parallelism = {p}
cost_us = {cost}
inputs = [{{ from = "source" }}]
[[operators]]
name = "sink"
kind = "sink"
parallelism = {p}
inputs = [{{ from = "map" }}]
"""


def _chain(name: str, rate: float, cost: float = 0, p: int = 1) -> Scenario:
    return parse_scenario(CHAIN.format(name=name, rate=rate, cost=cost, p=p), name)


def _measure(job: Job, seconds: float = 1.5) -> WindowLoad:
    since = job.load_snapshot()
    time.sleep(seconds)
    return job.load(since)


def _wait_until_behind(job: Job, lag_s: float = 0.5) -> None:
    """Until every source subtask is ``lag_s`` behind its schedule (a state, not a time)."""

    def lags() -> list[float | None]:
        readings = [t.limiter.schedule() for t in job.tasks["source"] if t.limiter]
        return [None if r is None else r.lag_s for r in readings]

    wait_until(
        lags,
        f"{job.name}: the sources {lag_s} s behind their schedule",
        until=lambda seen: all(lag is not None and lag >= lag_s for lag in seen),
    )


@pytest.mark.slow
def test_cheap_work_at_a_huge_rate_saturates_the_runtime(start_job: StartJob) -> None:
    """Six million zero-cost records per second: nothing in the job is slow, yet the sources
    cannot be served. The runtime says so, and how many records per second it managed."""
    job = start_job(_chain("saturating", rate=6_000_000))
    _wait_until_behind(job)
    load = _measure(job)
    assert load.saturated, load.reason
    assert load.cpu_cores_used + load.cpu_wait_cores >= 0.8
    assert load.lag_ms_p99 is not None and load.lag_ms_p99 > 100
    assert load.capacity_records_per_s == load.source_records_per_s > 0
    assert load.capacity_records_per_s < 6_000_000
    # Which limit it met: the interpreter's when the process ran most of a core, else the
    # machine's (a busy host: its threads waited for a core longer than they ran).
    near = load.process_cores >= BUSY_HOST_CORES and load.cpu_cores_used >= load.cpu_wait_cores
    if load.process_cores >= SATURATED_CORES or near:
        assert "could not keep up" in load.reason, load.reason
    else:
        assert load.cpu_wait_cores > load.cpu_cores_used, load
        assert "the machine was too busy" in load.reason, load.reason


@pytest.mark.slow
def test_a_source_held_back_by_a_slow_operator_is_not_runtime_saturation(
    start_job: StartJob,
) -> None:
    """1,500 records/s into an operator that serves 1,000: the source is backpressured and
    falls behind its schedule as in the saturated job, but the operator sleeps its cost, so the
    threads use little CPU: a slow job, not a runtime that cannot keep up."""
    job = start_job(_chain("slow-operator", rate=1500, cost=1000))
    _wait_until_behind(job)
    start = counters(job.tasks)
    load = _measure(job)
    (source,) = window_metrics(start, counters(job.tasks))["source"]
    assert source.backpressured_ms_per_s > 0
    assert load.lag_ms_p99 is not None and load.lag_ms_p99 > 100  # behind, as when saturated
    assert not load.saturated, load.reason
    assert load.capacity_records_per_s is None
    assert load.cpu_cores_used + load.cpu_wait_cores < 0.8


@pytest.mark.slow
def test_a_moderate_rate_of_cheap_work_keeps_up(start_job: StartJob) -> None:
    job = start_job(_chain("moderate", rate=2000, p=2))
    sinks = job.tasks["sink"]
    wait_until(lambda: all(t.records_in.total for t in sinks), "records at every sink")
    load = _measure(job)
    assert not load.saturated, load.reason
    assert load.delivered is not None and load.delivered >= 0.95
    assert load.lag_ms_p99 is not None and load.lag_ms_p99 < 100


def test_a_job_not_started_reads_as_idle(stop_job: StopJob) -> None:
    job = Job(_chain("unstarted", rate=10))
    try:
        since = job.load_snapshot()
        assert since.per_thread and dict(since.threads) == {}
        time.sleep(0.01)
        load = job.load(since)
    finally:
        stop_job(job)
    assert (load.cpu_cores_used, load.source_records_per_s, load.saturated) == (0, 0, False)
