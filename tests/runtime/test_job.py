"""Jobs: deployment (threads, placement, channels), lifecycle, failures, Ctrl-C and checkpoints.

Expected placements are written out by hand from the slot sharing rule (subtask i of every vertex
of a group in the group's slot i, slot k on task manager k mod task managers), and a channel is
local exactly when producer and consumer share a task manager. Every job is ended through
``stop_job`` (or the ``start_job`` teardown), which asserts that no segment leaked and no task
thread outlived it.
"""

from __future__ import annotations

import itertools
import re
import signal
import statistics
import subprocess
import sys
import threading
import time
from collections.abc import Sequence
from pathlib import Path

import pytest

from bpmon.model.errors import InsufficientBuffersError, JobError
from bpmon.runtime.accounting import State
from bpmon.runtime.checkpoint import CheckpointOutcome
from bpmon.runtime.gate import LocalInputChannel
from bpmon.runtime.job import Job
from bpmon.scenario import parse_scenario
from tests.runtime.jobs import DIAMOND, StartJob, StopJob, producer_of
from tests.waiting import wait_until

REPO = Path(__file__).resolve().parents[2]


def _channels(job: Job, thread: str) -> list[tuple[str, str]]:
    """(kind, producer) of every input channel of the subtask called ``thread``."""
    task = next(t for t in job.all_tasks() if t.name == thread)
    return [
        ("local" if isinstance(c, LocalInputChannel) else "remote", producer_of(c))
        for gate in task.gates
        for c in gate.channels
    ]


# -- deployment -------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("tms", "placement"),
    [
        (1, {"source": [0, 0], "map": [0, 0, 0], "sink": [0]}),
        (2, {"source": [0, 1], "map": [0, 1, 0], "sink": [0]}),
        (3, {"source": [0, 1], "map": [0, 1, 2], "sink": [0]}),
    ],
)
def test_subtasks_are_placed_in_slots_by_slot_sharing(
    stop_job: StopJob, tms: int, placement: dict[str, list[int]]
) -> None:
    job = Job(parse_scenario(DIAMOND.format(tms=tms)))
    try:
        assert list(job.tasks) == ["source", "map", "sink"]
        assert {v: [t.task_manager for t in ts] for v, ts in job.tasks.items()} == placement
    finally:
        stop_job(job)


def test_channels_are_local_or_remote_by_placement(stop_job: StopJob) -> None:
    job = Job(parse_scenario(DIAMOND.format(tms=2)))  # source [0, 1], map [0, 1, 0], sink [0]
    try:
        assert _channels(job, "map (1/3)") == [
            ("local", "source (1/2) -> map"),
            ("remote", "source (2/2) -> map"),
        ]
        assert _channels(job, "map (2/3)") == [
            ("remote", "source (1/2) -> map"),
            ("local", "source (2/2) -> map"),
        ]
        assert _channels(job, "sink (1/1)") == [
            ("local", "map (1/3) -> sink"),
            ("remote", "map (2/3) -> sink"),
            ("local", "map (3/3) -> sink"),
        ]
    finally:
        stop_job(job)


def test_forward_connects_subtask_i_to_subtask_i(stop_job: StopJob) -> None:
    job = Job(
        parse_scenario(
            """
            name = "forward"
            [[operators]]
            name = "a"
            kind = "source"
            parallelism = 3
            rate = 10
            [[operators]]
            name = "b"
            kind = "sink"
            parallelism = 3
            inputs = [{ from = "a" }]
            """
        )
    )
    try:
        for i in range(3):
            assert [p for _, p in _channels(job, f"b ({i + 1}/3)")] == [f"a ({i + 1}/3) -> b"]
        for source in job.tasks["a"]:
            assert source.outputs[0].partition.num_subpartitions == 1
    finally:
        stop_job(job)


def test_one_named_thread_per_subtask_and_no_others(start_job: StartJob) -> None:
    before = set(threading.enumerate())
    job = start_job(parse_scenario(DIAMOND.format(tms=2)))
    started = [t for t in threading.enumerate() if t not in before]
    names = [t.thread.name for t in job.all_tasks()]
    assert names == [
        "source (1/2)",
        "source (2/2)",
        "map (1/3)",
        "map (2/3)",
        "map (3/3)",
        "sink (1/1)",
    ]
    assert all(t.thread.is_alive() for t in job.all_tasks())
    assert len({id(t.thread) for t in job.all_tasks()}) == 6
    others = sorted(t.name for t in started if t.name not in names)
    assert set(others) <= {"bpmon-link-timer"}, others


# -- lifecycle --------------------------------------------------------------------------------

SMALL = DIAMOND.format(tms=2)


def test_run_returns_after_its_duration(stop_job: StopJob) -> None:
    job = Job(parse_scenario(SMALL))
    began = time.monotonic()
    result = job.run(0.5)
    # it waited its duration, then stopped: every thread ended (checked by stop_job below);
    # the upper bound only guards against run() waiting for something else, such as a hang
    assert 0.5 <= time.monotonic() - began < 0.5 + 30
    assert result.state == "cancelled"
    assert result.error is None
    assert result.checkpoints == ()
    assert stop_job(job) is result  # stop is idempotent


def test_a_job_stopped_before_it_started_releases_everything(stop_job: StopJob) -> None:
    job = Job(parse_scenario(SMALL))
    result = stop_job(job)
    assert result.state == "cancelled"
    assert job.elapsed_s == 0


def test_a_job_starts_once(start_job: StartJob) -> None:
    job = start_job(parse_scenario(SMALL))
    with pytest.raises(JobError, match="already started"):
        job.start()


def test_too_few_buffers_fail_clearly_before_any_thread_starts() -> None:
    before = set(threading.enumerate())
    text = SMALL.replace("task_managers = 2", "task_managers = 2\ntotal_buffers = 4")
    with pytest.raises(InsufficientBuffersError, match="total_buffers"):
        Job(parse_scenario(text))
    assert set(threading.enumerate()) <= before


# A failing task is injected with the scenario key ``fail`` (tests/runtime/test_faults.py): the
# subtask raises a plain RuntimeError in its own thread, the path a bug in user code takes.
FAILING = """
name = "failing"

[[operators]]
name = "source"
kind = "source"
rate = 2000

[[operators]]
name = "enrich"
kind = "map"
parallelism = 2
fail = { after_records = 100 }
inputs = [{ from = "source", partitioner = "rebalance" }]

[[operators]]
name = "sink"
kind = "sink"
inputs = [{ from = "enrich", partitioner = "rebalance" }]
"""


def test_a_task_that_raises_fails_the_job(stop_job: StopJob) -> None:
    job = Job(parse_scenario(FAILING))
    began = time.monotonic()
    result = job.run(30)
    # run() returned because of the failure, not at the end of its 30 s
    assert time.monotonic() - began < 30, "run() did not return when a task failed"
    assert result.state == "failed"
    assert result.error is not None
    assert re.fullmatch(
        r"subtask 'enrich \(([12])/2\)' failed: RuntimeError: injected failure: "
        r"enrich \(\1/2\) processed 100 records \(scenario key fail.after_records\)",
        result.error,
    ), result.error
    assert job.failed
    stop_job(job)


BLOCKED = """
name = "blocked"

[network]
task_managers = 1
max_overdraft_buffers_per_gate = 0

[[operators]]
name = "source"
kind = "source"
rate = 0

[[operators]]
name = "explode"
kind = "flatmap"
fanout = 2
record_bytes = 50000
inputs = [{ from = "source" }]

[[operators]]
name = "store"
kind = "sink"
cost_us = 2000
fail = { after_records = 1500 }
inputs = [{ from = "explode" }]
"""
"""The sink serves at most 500 records/s, so it cannot fail before 3 s; the source and explode,
unlimited and with no overdraft buffers, block long before."""


def _wait_for_states(job: Job, states: dict[str, State]) -> bool:
    """Poll until every named subtask is in its state at once (False: the job failed first)."""
    tasks = {t.name: t for t in job.all_tasks()}

    def now() -> dict[str, State]:
        return {name: tasks[name].account.state for name in states}

    seen = wait_until(
        now, f"the states {states}", poll_s=0.005, until=lambda s: s == states or job.failed
    )
    return seen == states


@pytest.mark.slow
def test_a_failure_while_everything_upstream_is_blocked(stop_job: StopJob) -> None:
    """The sink dies after 1,500 records, once explode is blocked inside a buffer request and the
    source waits for an available output: the job still fails and gives every buffer back."""
    job = Job(parse_scenario(BLOCKED))
    job.start()
    try:
        blocked = {"explode (1/1)": State.HARD_BP, "source (1/1)": State.SOFT_BP}
        assert _wait_for_states(job, blocked), "upstream never blocked before the failure"
        assert job.wait(60), "the sink's failure did not reach the job"
    finally:
        result = stop_job(job)
    assert result.state == "failed"
    assert result.error == (
        "subtask 'store (1/1)' failed: RuntimeError: injected failure: store (1/1) processed "
        "1500 records (scenario key fail.after_records)"
    )


CTRL_C = """
import sys
import threading
import time
from bpmon.runtime.accounting import State
from bpmon.runtime.job import Job
from bpmon.scenario import load_example

job = Job(load_example("slow-sink"))


def announce_backpressure():
    while not any(t.account.state in (State.SOFT_BP, State.HARD_BP) for t in job.tasks["format"]):
        time.sleep(0.02)
    print("backpressured", flush=True)


threading.Thread(target=announce_backpressure, daemon=True).start()
print("running", flush=True)
if sys.argv[1] == "catch":
    try:
        job.run(60)
    except KeyboardInterrupt:
        result = job.stop()
        print("stopped", result.state, len(result.leaks), flush=True)
        sys.exit(130)
else:
    job.run(60)
print("not interrupted", flush=True)
"""


@pytest.mark.slow
@pytest.mark.parametrize("mode", ["catch", "plain"])
def test_ctrl_c_stops_a_running_job(mode: str) -> None:
    proc = subprocess.Popen(
        [sys.executable, "-c", CTRL_C, mode],
        cwd=REPO,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert proc.stdout is not None
        assert proc.stdout.readline().strip() == "running"
        # the job is running, its pipeline backpressured (a job of 60 s bounds the read)
        assert proc.stdout.readline().strip() == "backpressured"
        proc.send_signal(signal.SIGINT)
        # stopping takes well under a second; on a loaded 2-core machine (CI: four workers, a
        # Flink cluster) the child once took over 3 s to get the CPU to do it
        out, err = proc.communicate(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
    if mode == "catch":
        assert proc.returncode == 130, err
        assert out.strip() == "stopped cancelled 0"
    else:
        assert proc.returncode != 0
        assert "KeyboardInterrupt" in err
        assert "not interrupted" not in out


# -- checkpoints ------------------------------------------------------------------------------

CHECKPOINTED = """
name = "checkpointed-{mode}"

[checkpoints]
interval_ms = 500
mode = "{mode}"

[[operators]]
name = "source"
kind = "source"
parallelism = 2
rate = 2000

[[operators]]
name = "slow"
kind = "map"
parallelism = 2
cost_us = 1000
inputs = [{{ from = "source", partitioner = "rebalance" }}]

[[operators]]
name = "sink"
kind = "sink"
inputs = [{{ from = "slow", partitioner = "rebalance" }}]
"""


def _check_sequence(checkpoints: Sequence[CheckpointOutcome]) -> None:
    assert [c.checkpoint_id for c in checkpoints] == list(range(1, len(checkpoints) + 1))
    for c in checkpoints:
        assert c.duration_s >= c.alignment_s >= 0
        assert c.in_flight_bytes >= 0
    for earlier, later in itertools.pairwise(checkpoints):
        # one at a time, each triggered at least one interval after the one before
        assert later.triggered_at >= earlier.triggered_at + earlier.duration_s
        assert later.triggered_at - earlier.triggered_at >= 0.45


@pytest.mark.slow
def test_aligned_and_unaligned_checkpoints_under_backpressure(
    start_job: StartJob, stop_job: StopJob
) -> None:
    """4,000 records/s into 2,000/s of capacity, a checkpoint every 500 ms in both modes."""
    aligned = start_job(parse_scenario(CHECKPOINTED.format(mode="aligned")))
    unaligned = start_job(parse_scenario(CHECKPOINTED.format(mode="unaligned")))
    time.sleep(3.5)
    so_far = unaligned.checkpoints()
    a, u = stop_job(aligned).checkpoints, stop_job(unaligned).checkpoints
    assert len(a) >= 1 and len(u) >= 1
    assert u[: len(so_far)] == so_far
    _check_sequence(a)
    _check_sequence(u)
    # aligned: barriers wait behind the queued data, nothing is stored in flight
    assert all(c.in_flight_bytes == 0 for c in a)
    assert max(c.alignment_s for c in a) > 0
    # unaligned: barriers overtake the queued data, which becomes part of the checkpoint
    assert max(c.in_flight_bytes for c in u) >= 32768
    assert statistics.median(c.duration_s for c in u) < statistics.median(c.duration_s for c in a)


def test_no_checkpoints_unless_configured(start_job: StartJob) -> None:
    job = start_job(parse_scenario(SMALL))
    time.sleep(0.6)  # no condition to wait for: none may be taken in this time
    assert job.checkpoints() == ()
    assert not any(t.name == "checkpoint-coordinator" for t in threading.enumerate())


TWICE = """
name = "twice"
[network]
task_managers = 1
buffer_timeout_ms = {timeout}
[[operators]]
name = "source"
kind = "source"
rate = {rate}
[[operators]]
name = "sink"
kind = "sink"
inputs = [{{ from = "source" }}, {{ from = "source" }}]
"""


def test_an_operator_reading_one_upstream_twice_gets_both_edges(start_job: StartJob) -> None:
    """Each input edge is its own result partition: neither is left without a reader."""
    job = start_job(parse_scenario(TWICE.format(timeout=20, rate=500)))
    (source,), (sink,) = job.tasks["source"], job.tasks["sink"]
    assert len(sink.gates) == 2

    def read() -> tuple[float, float]:
        received = sink.records_in.total
        emitted = source.records_out.total  # read after: at least what one edge delivered
        return received, emitted

    received, emitted = wait_until(
        read, "the sink to receive more than the source emitted", until=lambda r: r[0] > r[1]
    )
    # both edges deliver: the sink receives every record twice, more than the source emitted
    assert received > emitted > 0, (received, emitted)
    assert all(output.partition.subpartitions[0].reader is not None
               for output in job.tasks["source"][0].outputs)  # fmt: skip


def test_flushing_after_every_record_does_not_spin_while_idle(stop_job: StopJob) -> None:
    """``buffer_timeout_ms = 0``: idle tasks still sleep in their waits."""
    job = Job(parse_scenario(TWICE.format(timeout=0, rate=10)))
    job.start()
    try:
        before = time.process_time()
        time.sleep(1.5)
        used = time.process_time() - before
    finally:
        stop_job(job)
    assert used < 0.5, f"an idle job used {used:.2f} s of CPU in 1.5 s"
