"""A batch job stopped while its hybrid consumer region still waits for slots ends cleanly.

The shape of the crash issue 20 reports: ``prep`` (3 subtasks) writes a hybrid exchange to
``aggregate``, whose region waits for slots the first region holds, and the job is stopped
before ``aggregate`` deploys. Buffers then sat in ``aggregate``'s remote channels (sent against
credit a consumer not deployed had announced); closing its gate handed a floating buffer to a
channel not yet released, whose credit made the (already released) hybrid subpartition look
for its next buffer: ``RuntimeError: prep (3/3) -> aggregate: buffer 6 was lost``, and no
report. Stopping must end every thread, give every buffer back and remove every spill file, and
the CLI must print the report. As in Flink, a consumer requests its subpartitions when its task
starts: until then nothing is sent to it, and its data waits in the producer's subpartitions.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from bpmon.cli.commands import app
from bpmon.runtime.credit import RemoteInputChannel
from bpmon.runtime.job import Job
from bpmon.scenario import parse_scenario
from tests.runtime.jobs import StopJob
from tests.waiting import wait_until

WAITING = """
name = "hybrid-waits"
duration_s = {duration}
mode = "batch"

[cluster]
slots_per_task_manager = 2            # 4 slots: region 0 takes 3, region 1 needs 2

[network]
task_managers = 2

[monitor]
warmup_s = 1
samples = 10
interval_ms = 50
settle_s = 0

[[operators]]
name = "source"
kind = "source"
parallelism = 3
rate = 2000
records = 100000

[[operators]]
name = "prep"
kind = "map"
parallelism = 3
cost_us = 50
inputs = [{{ from = "source" }}]

[[operators]]
name = "aggregate"
kind = "map"
parallelism = 2
cost_us = 100
inputs = [{{ from = "prep", partitioner = "hash", exchange = "hybrid-selective" }}]

[[operators]]
name = "sink"
kind = "sink"
parallelism = 2
inputs = [{{ from = "aggregate" }}]
"""

QUEUED = 40
"""Buffers waiting for the consumer (in its remote channels and its local subpartitions) by
which its gates' floating buffers are all taken and channels wait for more: the state the crash
needs (about one second of this job)."""


def _remote_at_consumer(job: Job) -> list[RemoteInputChannel]:
    return [
        channel
        for task in job.tasks["aggregate"]
        for gate in task.gates
        for channel in gate.channels
        if isinstance(channel, RemoteInputChannel)
    ]


def test_a_consumer_not_deployed_is_sent_nothing(stop_job: StopJob) -> None:
    """Its remote channels have requested nothing: no credit at the sender, no buffer received,
    while the data it will read piles up at the producers (its local channels' subpartitions)."""
    job = Job(parse_scenario(WAITING.format(duration=60)))
    job.start()
    _wait_for_the_queue(job)
    with job.env.lock:
        remote = _remote_at_consumer(job)
        sent = [(c.queued_buffers, c.sender.credit if c.sender else None) for c in remote]
        requested = [c.sender is not None and c.sender.requested for c in remote]
    waiting = [t for t in job.tasks["aggregate"] if not t.thread.is_alive()]
    stop_job(job)
    assert len(waiting) == 2, "aggregate must not have deployed"
    assert remote, "the shape needs remote channels (two task managers)"
    assert sent == [(0, 0)] * len(remote) and not any(requested)


def _queued_at_consumer(job: Job) -> int:
    with job.env.lock:
        return sum(gate.queue_length() for task in job.tasks["aggregate"] for gate in task.gates)


def _wait_for_the_queue(job: Job) -> None:
    """Until :data:`QUEUED` buffers wait for the consumer (or the job failed: the tests say so)."""
    wait_until(
        lambda: job.failed or _queued_at_consumer(job) >= QUEUED,
        f"{QUEUED} buffers queued for the consumer",
    )


def test_a_job_stopped_before_its_hybrid_consumer_deploys_ends_cleanly(stop_job: StopJob) -> None:
    job = Job(parse_scenario(WAITING.format(duration=60)))
    job.start()
    _wait_for_the_queue(job)
    queued = _queued_at_consumer(job)
    waiting = [t for t in job.tasks["aggregate"] if not t.thread.is_alive()]
    result = stop_job(job)  # asserts no leak and no live thread
    assert queued >= QUEUED, "the shape needs buffers waiting for the consumer"
    assert len(waiting) == 2, "aggregate must not have deployed"
    assert (result.state, result.error) == ("cancelled", None)


@pytest.mark.slow
def test_bpmon_run_prints_the_report_of_such_a_job(tmp_path: Path) -> None:
    scenario = tmp_path / "hybrid-waits.toml"
    scenario.write_text(WAITING.format(duration=3))
    runs = tmp_path / "runs"
    result = CliRunner().invoke(app, ["run", str(scenario), "--runs-dir", str(runs)])
    assert result.exception is None, result.output
    assert result.exit_code == 0, result.output
    assert "resource-starved at aggregate" in result.output
    [run] = [d for d in runs.iterdir() if d.name != "history"]
    shown = CliRunner().invoke(app, ["diagnose", str(run), "--format", "json"])
    causes = json.loads(shown.output)["root_causes"]
    [starved] = [c for c in causes if c["kind"] == "resource-starved"]
    assert "blocking or hybrid" not in starved["recommendation"]  # the exchange is hybrid already
    for spilling in (c for c in causes if c["kind"] == "spilling"):  # aggregate never started
        assert "aggregate has not started" in " ".join(spilling["evidence"])
        assert spilling["recommendation"].startswith("give aggregate slots")
