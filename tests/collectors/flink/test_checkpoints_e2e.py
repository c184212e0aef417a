"""Checkpoints under backpressure on a real Flink 2.3 cluster: the slow-map job behind its slow
``enrich`` (4 ms a record, offered 4000 records/s for 500), checkpointed every second, aligned and
unaligned (``jobs/BpmonFlinkJobs.java``: ``checkpoint-aligned``, ``checkpoint-unaligned``), watched
with the real ``bpmon monitor --flink`` on the session's cluster (conftest).

Aligned, each barrier queues behind the seconds of records buffered ahead of ``enrich`` (about
4 s measured: the fixtures' recording): ``checkpoint-backpressure``, tied to ``enrich``.
Unaligned, the barriers overtake those records and take them into the checkpoint (persisted
in-flight data): a start delay of milliseconds, no such finding. What is asserted holds on a
loaded machine: the finding's kind and vertex, and margins of seconds, not timings.
"""

from __future__ import annotations

import re
import time
from pathlib import Path
from typing import Any

import pytest

from tests.waiting import wait_until

from .cluster import Cluster
from .test_e2e import WARMUP_S, monitor

pytestmark = pytest.mark.slow

SLOW_MS = 1000.0
"""``[checkpoints] slow_ms`` in the shipped rules: an unaligned barrier must arrive well before."""


def submit(cluster: Cluster, topology: str, storage: Path) -> str:
    """Run a checkpointed job; its id once it runs and one checkpoint completed (the first
    trigger, before every task ran, is counted failed without details)."""
    job = cluster.submit(topology, args=(str(storage),))
    wait_until(
        lambda: cluster.get(f"/jobs/{job}/checkpoints")["counts"]["completed"],
        f"a completed checkpoint of {topology}",
        90,
        poll_s=0.5,
        until=lambda completed: completed >= 1,
    )
    time.sleep(WARMUP_S)
    return job


def kinds(report: dict[str, Any]) -> set[str]:
    return {f["kind"] for f in report["findings"]}


def checkpoint_requests(report: dict[str, Any]) -> int:
    """How many of the window's requests read its checkpoints (the sampling finding says)."""
    [sampling] = [f["detail"] for f in report["findings"] if f["kind"] == "sampling"]
    found = re.search(r"\((\d+) of them for the checkpoints, (\d+) ms\)", sampling)
    assert found, sampling
    return int(found.group(1))


@pytest.fixture
def running(flink_cluster: Cluster) -> Any:
    """Runs checkpointed jobs, cancelled after the test."""
    started: list[str] = []

    def run(topology: str, storage: Path) -> str:
        job = submit(flink_cluster, topology, storage)
        started.append(job)
        return job

    yield run
    for job in started:
        flink_cluster.cancel(job)


def test_aligned_barriers_wait_behind_the_slow_operator(
    flink_cluster: Cluster, running: Any, bpmon_bin: Path, tmp_path: Path
) -> None:
    job = running("checkpoint-aligned", tmp_path / "checkpoints")
    report = monitor(bpmon_bin, flink_cluster, job, tmp_path)
    cause = report["root_causes"][0]
    assert (cause["vertex"], cause["kind"]) == ("enrich", "slow-operator"), cause
    checkpoints = report["checkpoints"]
    assert checkpoints is not None and checkpoints["mode"] == "aligned", checkpoints
    held = [f for f in report["findings"] if f["kind"] == "checkpoint-backpressure"]
    assert [f["vertex"] for f in held] == ["enrich"], (report["findings"], checkpoints)
    assert "checkpoint-slow" not in kinds(report)
    assert "checkpoints-unread" not in kinds(report)
    # the config once, /checkpoints, and each of the 3 vertices of a checkpoint that ended
    assert 1 <= checkpoint_requests(report) <= 1 + 1 + 2 * 3


def test_unaligned_barriers_overtake_the_data(
    flink_cluster: Cluster, running: Any, bpmon_bin: Path, tmp_path: Path
) -> None:
    job = running("checkpoint-unaligned", tmp_path / "checkpoints")
    report = monitor(bpmon_bin, flink_cluster, job, tmp_path)
    cause = report["root_causes"][0]
    assert (cause["vertex"], cause["kind"]) == ("enrich", "slow-operator"), cause
    checkpoints = report["checkpoints"]
    assert checkpoints is not None and checkpoints["mode"] == "unaligned", checkpoints
    last = checkpoints["last"]
    assert last is not None and last["status"] == "completed", checkpoints
    enrich = next(v for v in checkpoints["vertices"] if v["name"] == "enrich")
    assert enrich["start_delay_ms"] < SLOW_MS / 2, checkpoints  # milliseconds, unloaded
    assert last["persisted_bytes"] > 0, checkpoints  # the in-flight records it overtook
    assert "checkpoint-backpressure" not in kinds(report), report["findings"]
    assert "checkpoints-unread" not in kinds(report)


def test_a_job_that_does_not_checkpoint_says_so_in_one_line(
    flink_cluster: Cluster, bpmon_bin: Path, tmp_path: Path
) -> None:
    """slow-map takes no checkpoints: Flink 2.3 answers its checkpoint config with no interval
    (2^63 - 1 ms), not 404."""
    job = flink_cluster.submit("slow-map")
    try:
        report = monitor(bpmon_bin, flink_cluster, job, tmp_path)
    finally:
        flink_cluster.cancel(job)
    assert report["checkpoints"] is None
    [unread] = [f for f in report["findings"] if f["kind"] == "checkpoints-unread"]
    assert unread["detail"].startswith(f"checkpointing is off for this job (GET /jobs/{job}/")
    assert "\n" not in unread["detail"]
