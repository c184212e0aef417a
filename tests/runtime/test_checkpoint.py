"""The checkpoint coordinator on real jobs: timeouts, the snapshot's phases, the aligned timeout
and buffer debloating, each measured against what the scenario's arithmetic says.

Every job is backpressured the same way unless said otherwise: 2,000 records/s of 1,000 bytes
(or 200) into ``slow``, 2 subtasks x 2 ms after a hash exchange (1,000/s), so the buffers in
front of it fill and an aligned barrier waits behind them for seconds (``docs/scenario.md``).
"""

from __future__ import annotations

import time

import pytest

from bpmon.runtime.checkpoint import CheckpointOutcome
from bpmon.runtime.job import Job
from bpmon.scenario import parse_scenario

from .jobs import StartJob, StopJob

BEHIND = """
name = "behind"
[network]
debloat = {debloat}
[checkpoints]
interval_ms = {interval}
mode = "{mode}"
timeout_ms = {timeout}
aligned_timeout_ms = {switch}
[[operators]]
name = "source"
kind = "source"
parallelism = 2
rate = 1000
record_bytes = {nbytes}
[[operators]]
name = "slow"
kind = "map"
parallelism = 2
cost_us = 2000
record_bytes = {nbytes}
inputs = [{{ from = "source", partitioner = "hash" }}]
[[operators]]
name = "sink"
kind = "sink"
inputs = [{{ from = "slow", partitioner = "rebalance" }}]
"""


def behind(
    mode: str = "aligned",
    timeout: int = 600_000,
    switch: int = 0,
    interval: int = 500,
    debloat: bool = False,
    nbytes: int = 1000,
) -> str:
    return BEHIND.format(
        nbytes=nbytes,
        mode=mode,
        timeout=timeout,
        switch=switch,
        interval=interval,
        debloat=str(debloat).lower(),
    )


def outcomes_after(job: Job, seconds: float, least: int = 1) -> list[CheckpointOutcome]:
    """The checkpoints that ended once ``seconds`` passed, waiting up to as long again for
    ``least`` of them (a loaded machine runs the job slower)."""
    coordinator = job.coordinator
    assert coordinator is not None
    time.sleep(seconds)
    deadline = time.monotonic() + seconds
    while len(coordinator.outcomes) < least and time.monotonic() < deadline:
        time.sleep(0.1)
    return list(coordinator.outcomes)


@pytest.mark.slow
def test_a_checkpoint_past_its_timeout_fails_is_aborted_everywhere_and_the_job_goes_on(
    start_job: StartJob, stop_job: StopJob
) -> None:
    job = start_job(parse_scenario(behind(timeout=800, interval=300)))
    ended = outcomes_after(job, 8.0, least=3)
    result = stop_job(job)
    failed = [o for o in ended if o.failure is not None]
    assert failed, [(o.checkpoint_id, o.duration_s) for o in ended]
    for outcome in failed:
        assert outcome.duration_s >= 0.8
        assert "expired before completing" in outcome.failure
        assert outcome.pending  # somebody had not acknowledged
    coordinator = job.coordinator
    assert coordinator is not None and coordinator.failed_count >= len(failed)
    ids = [o.checkpoint_id for o in ended]
    assert ids == sorted(ids) and len(set(ids)) == len(ids)  # one at a time, the next after
    # the aborted alignments let the data flow again: the sink still receives records
    assert sum(t.records_in.total for t in job.tasks["sink"]) > 1000
    assert result.leaks == ()


STATEFUL = """
name = "stateful"
[checkpoints]
interval_ms = 500
upload_mb_per_s = 200
[[operators]]
name = "source"
kind = "source"
rate = 200
[[operators]]
name = "aggregate"
kind = "map"
parallelism = 2
cost_us = 100
state_mb = 100
inputs = [{ from = "source", partitioner = "hash" }]
[[operators]]
name = "sink"
kind = "sink"
inputs = [{ from = "aggregate" , partitioner = "rebalance" }]
"""


@pytest.mark.slow
def test_the_sync_phase_is_on_the_task_and_the_upload_after_it(
    start_job: StartJob, stop_job: StopJob
) -> None:
    """100 MB of state per subtask: a 50 ms sync phase (0.5 ms per MB) and 0.5 s of upload at
    200 MB/s; nothing is backpressured, so the checkpoint is its snapshot."""
    job = start_job(parse_scenario(STATEFUL))
    ended = outcomes_after(job, 3.0, least=2)
    stop_job(job)
    done = [o for o in ended if o.failure is None]
    assert done
    for outcome in done:
        stateful = [a for a in outcome.acked if a.vertex == "aggregate"]
        assert len(stateful) == 2
        for ack in stateful:
            assert ack.state_bytes == 100 << 20
            assert ack.sync_s == pytest.approx(0.05)
            assert ack.async_s == pytest.approx(0.5)
        others = [a for a in outcome.acked if a.vertex != "aggregate"]
        assert all(a.sync_s == a.async_s == 0 for a in others)
        # the upload happens after the barrier passed: the checkpoint lasts at least it
        assert outcome.duration_s >= 0.5 + 0.05
        assert outcome.duration_s < 2.0  # and no barrier waited long


@pytest.mark.slow
def test_an_aligned_timeout_turns_waiting_barriers_unaligned(
    start_job: StartJob, stop_job: StopJob
) -> None:
    aligned = start_job(parse_scenario(behind()))
    switched = start_job(parse_scenario(behind(mode="unaligned", switch=400)))
    slow, quick = outcomes_after(aligned, 9.0, least=2), outcomes_after(switched, 0.1, least=2)
    stop_job(aligned)
    stop_job(switched)
    slow_done = [o for o in slow if o.failure is None][1:]  # the first may precede the queues
    quick_done = [o for o in quick if o.failure is None][1:]
    assert slow_done and quick_done
    assert max(o.duration_s for o in quick_done) < min(o.duration_s for o in slow_done)
    # waited at least the 400 ms before switching, then stored the overtaken data
    assert min(o.duration_s for o in quick_done) >= 0.4
    assert any(a.unaligned for o in quick_done for a in o.acked)
    assert any(o.in_flight_bytes > 0 for o in quick_done)
    assert all(o.in_flight_bytes == 0 for o in slow_done)


@pytest.mark.slow
def test_debloating_shrinks_the_buffers_in_front_of_the_bottleneck(
    start_job: StartJob, stop_job: StopJob
) -> None:
    """Records of 200 bytes: ``slow`` reads about 100 KB/s per subtask, while some 20 buffers of
    32 KiB (6 s of it) wait in front of it; with a 1 s target its gates ask for about 100 KB / 20
    = 5 KB buffers, and the data queued before it falls about sixfold."""
    plain = start_job(parse_scenario(behind(nbytes=200)))
    debloated = start_job(parse_scenario(behind(debloat=True, nbytes=200)))
    time.sleep(6.0)
    queued = {}
    for name, job in (("plain", plain), ("debloated", debloated)):
        with job.env.lock:
            queued[name] = sum(
                c.queued_input_bytes()
                for t in job.tasks["slow"]
                for g in t.gates
                for c in g.channels
            )
    sizes = [d.size for t in debloated.tasks["slow"] for d in t.debloaters]
    announced = {
        c.upstream().announced_size
        for t in debloated.tasks["slow"]
        for g in t.gates
        for c in g.channels
        if c.upstream() is not None
    }
    stop_job(plain)
    stop_job(debloated)
    assert sizes and all(256 <= s < 32768 // 3 for s in sizes), sizes
    assert announced <= set(sizes) | {0}, announced  # what the gates asked the producers for
    assert queued["debloated"] * 3 < queued["plain"], queued
