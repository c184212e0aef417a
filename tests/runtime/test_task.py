"""Tasks in running jobs: rates, service time, time accounting and the three named waits.

Each group of jobs shares one warm-up (a module fixture starts them together and reads their
counters at both ends of one interval), so that the file costs a few seconds in all. What is
asserted follows from the scenario format (``docs/scenario.md``: ``rate`` is records per second per
subtask on an absolute schedule; ``cost_us`` is service time, so ``cost_us = 500`` allows at most
2,000 records/s; ``slow_subtasks`` multiplies it) and Flink's definitions (busy + idle +
backpressured = 1,000 ms per second), as mechanisms a loaded machine cannot bend: a source never
ahead of its schedule and never dropping from it, records conserved through every operator,
service never faster than its cost and always accounted busy, each subtask mostly in the state its
part demands. How close to the nominal figures the runtime gets is measured by
``tests/benchmarks/bench_fidelity.py``.
"""

from __future__ import annotations

import collections
import dataclasses
import sys
import threading
import time
from dataclasses import dataclass

import pytest

from bpmon.runtime.accounting import State
from bpmon.runtime.job import Job
from bpmon.runtime.metrics import (
    Counters,
    TaskMetrics,
    counters,
    job_metrics,
    task_metrics,
    window_metrics,
)
from bpmon.runtime.pacing import SOURCE_CHUNK, Schedule
from bpmon.runtime.task import Task
from bpmon.scenario import Scenario, parse_scenario
from tests.runtime.jobs import StartJob, StopJob, dominant
from tests.waiting import wait_until

INTERVAL_S = 2.0
"""Measured once the first flushes have reached every sink."""
BUFFER_RECORDS = 32768 // 100 + 1
"""The most 100-byte records one 32 KiB buffer holds (records span buffers): at most this many
records a task has received but not processed yet."""
MAX_LAG_S, SLICE_S = 0.02, 0.002
"""ServiceTime's defaults: a gap it may count as served, and the debt it pays before sleeping."""


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


@dataclass(frozen=True)
class Interval:
    """One job over the measured interval: counters and source schedules at both ends."""

    job: Job
    start: Counters
    end: Counters
    schedules: dict[str, list[tuple[Schedule, Schedule]]]

    @property
    def metrics(self) -> dict[str, list[TaskMetrics]]:
        """Every subtask's metrics over exactly the interval."""
        return window_metrics(self.start, self.end)

    def total(self, vertex: str, which: str, at: str = "end") -> float:
        """``records_in`` or ``records_out`` of all of ``vertex``'s subtasks at one end."""
        reading = self.start if at == "start" else self.end
        return float(sum(getattr(c, which) for c in reading.tasks[vertex]))

    def delta(self, vertex: str, index: int, which: str) -> float:
        """How much one subtask's ``records_in`` or ``records_out`` grew over the interval."""
        a, b = self.start.tasks[vertex][index], self.end.tasks[vertex][index]
        return float(getattr(b, which) - getattr(a, which))

    def span(self, vertex: str, index: int) -> float:
        """The interval as one subtask's readings saw it, in seconds."""
        return self.end.tasks[vertex][index].time.at - self.start.tasks[vertex][index].time.at


def _schedules(job: Job) -> dict[str, list[Schedule]]:
    found: dict[str, list[Schedule]] = {}
    for vertex, tasks in job.tasks.items():
        readings = [t.limiter.schedule() for t in tasks if t.limiter is not None]
        if readings and all(r is not None for r in readings):
            found[vertex] = [r for r in readings if r is not None]
    return found


def measure(jobs: dict[str, Job], stop: StopJob) -> dict[str, Interval]:
    """Once records reach every sink, read every job at both ends of :data:`INTERVAL_S`; then
    stop them."""
    sinks = [t for job in jobs.values() for t in job.tasks["sink"]]
    wait_until(
        lambda: [t.name for t in sinks if not t.records_in.total],
        "records at every sink",
        until=lambda empty: not empty,
    )
    first = {name: (counters(job.tasks), _schedules(job)) for name, job in jobs.items()}
    time.sleep(INTERVAL_S)
    last = {name: (counters(job.tasks), _schedules(job)) for name, job in jobs.items()}
    for job in jobs.values():
        stop(job)
    intervals = {}
    for name, job in jobs.items():
        (start, s0), (end, s1) = first[name], last[name]
        pairs = {v: list(zip(s0[v], s1[v], strict=True)) for v in s0}
        intervals[name] = Interval(job, start, end, pairs)
    return intervals


def _show(m: TaskMetrics) -> str:
    return (
        f"{m.thread}: busy {m.busy_ms_per_s:.0f} idle {m.idle_ms_per_s:.0f} "
        f"bp {m.backpressured_ms_per_s:.0f} (soft {m.soft_backpressured_ms_per_s:.0f}, "
        f"hard {m.hard_backpressured_ms_per_s:.0f})"
    )


@pytest.fixture(scope="module")
def rates(start_module_job: StartJob, stop_job: StopJob) -> dict[str, Interval]:
    """Every job of RATE_JOBS started together and measured over one interval, then stopped."""
    return measure({name: start_module_job(s) for name, s in RATE_JOBS.items()}, stop_job)


def check_schedule_kept(interval: Interval, vertex: str, rate: float) -> None:
    """Each subtask of the source follows its own schedule at ``rate``: never ahead of it, and no
    record of it dropped (a stall would have to outlast the 1 s catch-up for that)."""
    for first, last in interval.schedules[vertex]:
        assert first.rate == last.rate == rate
        assert last.due - first.due == pytest.approx(rate * (last.at - first.at), abs=1)
        released = last.released - first.released
        # a reading races the source by at most one chunk at each end
        assert released <= last.due - first.due + first.behind + 2 * SOURCE_CHUNK
        assert last.forgiven == 0, last


def check_delivered(interval: Interval, source: str, sink: str, factor: float = 1.0) -> None:
    """Records are conserved: the sink got no more than ``factor`` x what the source emitted,
    and by the end of the interval at least what it had emitted at its start."""
    assert interval.total(sink, "records_in") <= factor * interval.total(source, "records_out")
    assert interval.total(sink, "records_in") >= factor * interval.total(
        source, "records_out", at="start"
    )


@pytest.mark.slow
def test_a_source_holds_its_rate(rates: dict[str, Interval]) -> None:
    check_schedule_kept(rates["rate"], "source", 1000)
    check_delivered(rates["rate"], "source", "sink")


@pytest.mark.slow
def test_the_rate_is_per_subtask(rates: dict[str, Interval]) -> None:
    interval = rates["per-subtask"]
    assert len(interval.schedules["source"]) == 2
    check_schedule_kept(interval, "source", 700)
    check_delivered(interval, "source", "sink")


def check_ratio(interval: Interval, vertex: str, factor: float) -> None:
    """``vertex`` emitted ``factor`` records per record it processed (exactly, as held by an
    accumulator); it may have received up to one buffer it has not processed yet."""
    received = interval.total(vertex, "records_in")
    emitted = interval.total(vertex, "records_out")
    assert factor * (received - BUFFER_RECORDS) - 1 <= emitted <= factor * received + 1


@pytest.mark.slow
def test_a_filter_passes_its_selectivity(rates: dict[str, Interval]) -> None:
    interval = rates["filter"]
    check_schedule_kept(interval, "source", 1000)
    check_ratio(interval, "op", 0.25)
    check_delivered(interval, "op", "sink")
    assert interval.total("sink", "records_in") > 0


@pytest.mark.slow
def test_a_flatmap_emits_its_fanout(rates: dict[str, Interval]) -> None:
    interval = rates["flatmap"]
    check_schedule_kept(interval, "source", 500)
    check_ratio(interval, "op", 3.0)
    check_delivered(interval, "op", "sink")
    assert interval.total("sink", "records_in") > 0


def check_service(interval: Interval, vertex: str, index: int, cost_s: float) -> float:
    """One subtask processed no faster than its service time allows, and its busy time (hard
    backpressure included: a gap the service may count as served) covers that service.

    Returns the records it processed in the interval.
    """
    m = interval.metrics[vertex][index]
    span = interval.span(vertex, index)
    processed = interval.delta(vertex, index, "records_out")  # a map emits what it processes
    chunk_s = SLICE_S + cost_s  # at most one chunk past a deadline
    assert processed * cost_s <= span + MAX_LAG_S + chunk_s, (processed, span)
    working_s = (m.busy_ms_per_s + m.hard_backpressured_ms_per_s) / 1000 * span
    assert working_s >= processed * cost_s - MAX_LAG_S - chunk_s, _show(m)
    assert processed > 0
    return processed


@pytest.mark.slow
def test_cost_us_is_service_time(rates: dict[str, Interval]) -> None:
    """cost_us = 500 behind an unlimited source: at most 2,000 records/s, served busy; the
    source waits for output, the sink for input."""
    interval = rates["service"]
    assert interval.job.tasks["op"][0].service.cost_s == pytest.approx(500e-6)
    check_service(interval, "op", 0, 500e-6)
    metrics = interval.metrics
    assert dominant(metrics["op"][0]) == "busy", _show(metrics["op"][0])
    assert dominant(metrics["source"][0]) == "bp", _show(metrics["source"][0])
    assert dominant(metrics["sink"][0]) == "idle", _show(metrics["sink"][0])


@pytest.mark.slow
def test_slow_subtasks_multiply_the_cost(rates: dict[str, Interval]) -> None:
    interval = rates["slow-subtask"]
    fast_task, slow_task = interval.job.tasks["op"]
    assert fast_task.service.cost_s == pytest.approx(500e-6)
    assert slow_task.service.cost_s == pytest.approx(1500e-6)
    fast = check_service(interval, "op", 0, 500e-6)
    slow = check_service(interval, "op", 1, 1500e-6)
    assert fast > slow
    for m in interval.metrics["op"]:
        assert dominant(m) == "busy", _show(m)


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
    (op,) = job.tasks["op"]

    def read_all_the_time() -> None:
        # until the op has processed records, and at least 300 readings were taken meanwhile
        while not done.is_set() and (len(readings) < 300 or op.records_out.total == 0):
            readings.extend(task_metrics(task) for task in job.all_tasks())

    reader = threading.Thread(target=read_all_the_time, name="metrics-reader")
    job.start()
    reader.start()
    try:
        reader.join(timeout=60)  # a guard against a hang only
    finally:
        done.set()
        reader.join()
        stop_job(job)
    assert len(readings) >= 300
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


def _until_seen(states: dict[Task, State], what: str) -> None:
    """Until each task has been seen in its state (a backpressure built stays)."""
    left = dict(states)

    def not_yet() -> list[str]:
        for task, state in list(left.items()):
            if task.account.state is state:
                del left[task]
        return [task.name for task in left]

    wait_until(not_yet, what, until=lambda names: not names)


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
    _until_seen(
        {job.tasks["source"][0]: State.SOFT_BP, job.tasks["explode"][0]: State.HARD_BP},
        "the source waiting for output and explode blocked in a buffer request",
    )
    start = counters(job.tasks)
    where = _where_threads_wait(job.all_tasks())
    window = window_metrics(start, counters(job.tasks))  # exactly while the stacks were sampled
    metrics = {m.thread: m for ms in window.values() for m in ms}
    source, explode = metrics["source (1/1)"], metrics["explode (1/1)"]
    assert where["source (1/1)"] == "wait_for_output"
    assert dominant(source) == "bp" and source.soft_backpressured_ms_per_s > 0, _show(source)
    assert source.soft_backpressured_ms_per_s > source.hard_backpressured_ms_per_s
    assert where["explode (1/1)"] == "request_buffer_builder_blocking"
    assert dominant(explode) == "bp", _show(explode)
    assert explode.hard_backpressured_ms_per_s > explode.soft_backpressured_ms_per_s
    assert where["slow (1/1)"] == "_serve"
    assert dominant(metrics["slow (1/1)"]) == "busy", _show(metrics["slow (1/1)"])
    assert where["idle (1/1)"] == "wait_for_input"
    assert dominant(metrics["idle (1/1)"]) == "idle", _show(metrics["idle (1/1)"])
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
    _until_seen(
        {
            with_overdraft.tasks["explode"][0]: State.SOFT_BP,
            without.tasks["explode"][0]: State.HARD_BP,
        },
        "explode backpressured in both jobs",
    )
    starts = counters(with_overdraft.tasks), counters(without.tasks)
    drawn: dict[str, list[int]] = {"with": [], "without": []}
    for _ in range(30):
        drawn["with"].append(task_metrics(with_overdraft.tasks["explode"][0]).overdraft_buffers)
        drawn["without"].append(task_metrics(without.tasks["explode"][0]).overdraft_buffers)
        time.sleep(0.01)
    (soft,) = window_metrics(starts[0], counters(with_overdraft.tasks))["explode"]
    (hard,) = window_metrics(starts[1], counters(without.tasks))["explode"]
    assert dominant(soft) == "bp", _show(soft)
    assert soft.soft_backpressured_ms_per_s > soft.hard_backpressured_ms_per_s, _show(soft)
    assert 0 < max(drawn["with"]) <= 5  # max_overdraft_buffers_per_gate
    assert hard.hard_backpressured_ms_per_s > soft.hard_backpressured_ms_per_s, _show(hard)
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
    """Records of 1,000 bytes fill 32 KiB buffers (records span buffers): every full buffer is
    one out, plus at most one partial buffer per flush of the 100 ms flusher."""
    job = start_job(parse_scenario(BUFFERS))
    wait_until(
        lambda: counters(job.tasks).tasks["source"][0].out,
        "the source's first buffer out",
        until=lambda out: out is not None and out.buffers_out > 0,
    )
    start = counters(job.tasks)
    time.sleep(1.5)  # the window measured
    end = counters(job.tasks)
    (source,) = window_metrics(start, end)["source"]
    a, b = start.tasks["source"][0], end.tasks["source"][0]
    assert a.out is not None and b.out is not None
    span = b.time.at - a.time.at
    buffers = b.out.buffers_out - a.out.buffers_out
    full = (b.records_out - a.records_out) * 1000 / 32768
    assert full - 2 <= buffers <= full + span / 0.1 + 2, (buffers, full, span)
    assert buffers > 0
    assert source.buffers_out_per_s == pytest.approx(buffers / span)
    assert source.as_flink()["numBuffersOutPerSecond"] == source.buffers_out_per_s
