"""Scheduling regions as bulks of slots: region by region, waiting for slots, the timeout failure.

The claims are Flink's (``reference/flink-network.md`` §7) and FLIP-119's: with fewer slots than
its parallelism a pipelined job waits and then fails with ``NoResourceAvailableException``, while a
blocking job runs region by region in as few slots as its largest region needs. What is asserted
is the mechanism (which regions were deployed when, which states the tasks reached, what the job's
error says), never how fast; every job ends through ``stop_job``, which proves nothing leaked.
"""

from __future__ import annotations

import time

from bpmon.runtime.job import Job
from bpmon.runtime.metrics import counters, window_metrics
from bpmon.runtime.scheduler import NO_RESOURCE, TaskState
from bpmon.scenario import parse_scenario
from tests.runtime.jobs import StopJob
from tests.waiting import wait_until


def three_stages(exchange: str, slots: int, *, mode: str = "batch", timeout: float = 0.6) -> str:
    """source p2 -> hash -> sort p2 -> sink p2 on 2 task managers with ``slots`` slots each."""
    bounded = "records = 3000" if mode == "batch" else ""
    return f"""
name = "stages-{exchange}"
mode = "{mode}"
[network]
task_managers = 2
[cluster]
slots_per_task_manager = {slots}
slot_request_timeout_s = {timeout}
[[operators]]
name = "source"
kind = "source"
parallelism = 2
rate = 30000
{bounded}
[[operators]]
name = "sort"
kind = "map"
parallelism = 2
cost_us = 10
inputs = [{{ from = "source", partitioner = "hash", exchange = "{exchange}" }}]
[[operators]]
name = "sink"
kind = "sink"
parallelism = 2
inputs = [{{ from = "sort", exchange = "{exchange}" }}]
"""


def run_to_end(job: Job, timeout_s: float = 30.0) -> None:
    """Start ``job`` and wait until it finishes or fails (or ``timeout_s`` passes)."""
    job.start()
    deadline = time.monotonic() + timeout_s
    while not (job.finished or job.failed) and time.monotonic() < deadline:
        job.wait(0.05)


def test_a_blocking_job_runs_region_by_region_in_the_slots_of_its_largest_region(
    stop_job: StopJob,
) -> None:
    job = Job(parse_scenario(three_stages("blocking", 1)))  # 2 slots; all at once needs 6
    try:
        run_to_end(job)
        assert job.finished, {v: [t.state.name for t in ts] for v, ts in job.tasks.items()}
        scheduler = job.scheduler
        assert scheduler is not None
        assert scheduler.deployed == [(0, ()), (1, ("0",)), (2, ("0", "1"))]
        assert scheduler.peak_slots == 2
        assert sum(t.records_in.total for t in job.tasks["sink"]) == 6000
        assert all(t.state == TaskState.FINISHED for t in job.all_tasks())
    finally:
        result = stop_job(job)
    assert result.state == "finished"


def test_blocking_partitions_write_real_files_which_the_job_removes(stop_job: StopJob) -> None:
    job = Job(parse_scenario(three_stages("blocking", 3)))
    spill_dir = job.spill_dir
    assert spill_dir is not None and spill_dir.is_dir()
    try:
        run_to_end(job)
        assert job.finished
        files = sorted(spill_dir.glob("*.spill"))
        assert len(files) == 2 * 2 + 2  # a file per subpartition: hash 2 x 2, forward 2 x 1
        assert sum(f.stat().st_size for f in files) > 0
        outputs = [o.partition for t in job.tasks["source"] for o in t.outputs]
        written = sum(p.spill_counters().written_bytes for p in outputs)
        read = sum(p.spill_counters().read_bytes for p in outputs)
        assert written == read == 6000 * 100  # every record's bytes, written once, read once
    finally:
        stop_job(job)
    assert not spill_dir.exists()


def test_a_job_stopped_while_spilling_removes_its_files_and_returns_every_buffer(
    stop_job: StopJob,
) -> None:
    text = three_stages("blocking", 1).replace("records = 3000", "records = 10000000")
    job = Job(parse_scenario(text))
    job.start()
    outputs = [o.partition for t in job.tasks["source"] for o in t.outputs]
    wait_until(
        lambda: sum(p.spill_counters().written_bytes for p in outputs),
        "the sources to write to their spill files",
    )
    assert job.tasks["source"][0].state == TaskState.RUNNING
    assert job.tasks["sink"][0].state == TaskState.CREATED  # its input is not finished
    spill_dir = job.spill_dir
    result = stop_job(job)  # asserts no leak and no thread left
    assert result.state == "cancelled"
    assert spill_dir is not None and not spill_dir.exists()


def test_a_pipelined_job_with_too_few_slots_waits_then_fails_with_flinks_message(
    stop_job: StopJob,
) -> None:
    text = three_stages("pipelined", 1, timeout=0.5).replace("parallelism = 2", "parallelism = 3")
    job = Job(parse_scenario(text))  # needs 3 slots, has 2
    try:
        job.start()
        assert job.scheduler is not None
        scheduler = job.scheduler
        wait_until(scheduler.waiting, "the job's region to wait for slots")
        assert {t.state for t in job.all_tasks()} == {TaskState.SCHEDULED}
        [(region, missing, _)] = job.scheduler.waiting()
        assert (region.index, missing) == (0, 1)
        assert job.wait(30)
        assert not any(t.thread.ident for t in job.all_tasks()), "no task may have run"
    finally:
        result = stop_job(job)
    assert result.state == "failed"
    assert result.error is not None and result.error.startswith(NO_RESOURCE)
    assert "region 0 (source, sort, sink) needs 3 slots" in result.error


def test_a_streaming_region_waits_for_slots_another_region_holds_for_ever(
    stop_job: StopJob,
) -> None:
    """Two pipelines in their own groups need 2 + 2 slots and get 3: the second waits."""
    text = """
name = "two-pipelines"
[network]
task_managers = 1
[cluster]
slots_per_task_manager = 3
slot_request_timeout_s = 60
[[operators]]
name = "a"
kind = "source"
parallelism = 2
rate = 100
slot_sharing_group = "a"
[[operators]]
name = "a-out"
kind = "sink"
parallelism = 2
slot_sharing_group = "a"
inputs = [{ from = "a" }]
[[operators]]
name = "b"
kind = "source"
parallelism = 2
rate = 100
slot_sharing_group = "b"
[[operators]]
name = "b-out"
kind = "sink"
parallelism = 2
slot_sharing_group = "b"
inputs = [{ from = "b" }]
"""
    job = Job(parse_scenario(text))
    try:
        job.start()
        start = counters(job.tasks)
        a_tasks = job.tasks["a"] + job.tasks["a-out"]
        wait_until(
            lambda: all(t.state == TaskState.RUNNING for t in a_tasks),
            "pipeline a to run in its slots",
        )
        states = {v: {t.state for t in ts} for v, ts in job.tasks.items()}
        assert states["a"] == states["a-out"] == {TaskState.RUNNING}
        assert states["b"] == states["b-out"] == {TaskState.SCHEDULED}
        assert job.scheduler is not None
        [(region, missing, waited)] = job.scheduler.waiting()
        assert (region.vertices, missing) == (("b", "b-out"), 1)
        assert waited > 0
        metrics = window_metrics(start, counters(job.tasks))
        assert [m.state for m in metrics["b"]] == [TaskState.SCHEDULED] * 2
        assert metrics["b"][0].as_flink()["bpmon_taskState"] == 1.0
        assert metrics["a"][0].as_flink()["bpmon_taskState"] == 4.0
    finally:
        stop_job(job)


def test_a_blocking_consumer_starts_only_after_its_producers_finished(stop_job: StopJob) -> None:
    """With slots for everything, the blocking edge alone holds the consumer back."""
    job = Job(parse_scenario(three_stages("blocking", 3)))
    try:
        run_to_end(job)
        assert job.scheduler is not None
        assert job.scheduler.deployed == [(0, ()), (1, ("0",)), (2, ("0", "1"))]
    finally:
        stop_job(job)


def test_a_hybrid_job_runs_with_too_few_slots_for_pipelined_and_finishes(
    stop_job: StopJob,
) -> None:
    """FLIP-235: with fewer slots than the job's parallelism a hybrid job still finishes."""
    text = three_stages("hybrid-selective", 1).replace("parallelism = 2", "parallelism = 3")
    job = Job(parse_scenario(text))  # regions of 3 slots each; 2 slots in all... too few
    try:
        run_to_end(job)
        assert job.failed, "3 slots per region cannot fit in 2"
    finally:
        stop_job(job)
    job = Job(parse_scenario(three_stages("hybrid-full", 1)))  # regions of 2, 2 slots
    try:
        run_to_end(job)
        assert job.finished
        assert sum(t.records_in.total for t in job.tasks["sink"]) == 6000
    finally:
        stop_job(job)


def test_with_slots_for_all_a_hybrid_consumer_runs_beside_its_producer(stop_job: StopJob) -> None:
    text = three_stages("hybrid-selective", 3).replace("records = 3000", "records = 20000")
    job = Job(parse_scenario(text.replace("rate = 30000", "rate = 10000")))
    try:
        run_to_end(job)
        assert job.finished
        assert job.scheduler is not None
        assert job.scheduler.deployed == [(0, ()), (1, ()), (2, ())]  # none waited for another
        views = [
            s for t in job.tasks["source"] for o in t.outputs for s in o.partition.subpartitions
        ]
        assert sum(getattr(v, "from_memory", 0) for v in views) > 0
    finally:
        stop_job(job)


def test_with_slots_for_all_selective_spills_far_less_than_full(stop_job: StopJob) -> None:
    """FLIP-235: selective spilling persists only what is not consumed in time, full all of it."""
    spilled = {}
    for exchange in ("hybrid-selective", "hybrid-full"):
        text = three_stages(exchange, 3).replace("records = 3000", "records = 20000")
        job = Job(parse_scenario(text.replace("rate = 30000", "rate = 10000")))
        try:
            run_to_end(job)
            assert job.finished
            partitions = [o.partition for t in job.tasks["source"] for o in t.outputs]
            spilled[exchange] = sum(p.spill_counters().written_bytes for p in partitions)
        finally:
            stop_job(job)
    assert spilled["hybrid-full"] == 40000 * 100  # every byte the sources wrote
    assert spilled["hybrid-selective"] * 5 < spilled["hybrid-full"], spilled
