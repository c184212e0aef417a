"""A checkpoint slow for its own reasons on a real Flink 2.3 cluster: a large keyed state and no
backpressure is ``checkpoint-slow``, not ``checkpoint-backpressure``.

The ``big-state`` job (``jobs/BpmonFlinkJobs.java``) counts records per key over 8 million keys
in the hashmap state backend (about 1 GB of heap, 136 MB written per checkpoint into filesystem
checkpoint storage), built in its first seconds, then fed 100 records/s: nothing backpressured.
Every 5 s a full checkpoint writes that state, entry by entry, in its async phase: 4-6 s measured
on a loaded 2-core machine, its barriers there in milliseconds.

Why so many entries, not a few hundred MB of large values: this machine's disk takes a write at
page-cache speed (2 GB/s measured), so 400 MB of 100 KB values checkpointed in 0.4-0.7 s, under
bpmon's ``slow_ms`` (1 s); the snapshot's own cost is its serialisation, per entry (about 250 ns
here), as it is for a job of many small keys anywhere. The TaskManager gets a heap to hold it
(3 GB, managed memory 5%: the session cluster's task heap is a few dozen MB), in a cluster of
its own for the module.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.waiting import wait_until

from .cluster import Cluster
from .conftest import started_cluster
from .test_e2e import monitor

pytestmark = pytest.mark.slow

KEYS = 8_000_000
"""The job's keys (its default)."""
FULL_BYTES = KEYS * 17
"""A checkpoint's state size once every key is in the state: 17 bytes a key (its 8, its count's
8 and one more), 136,004,121 bytes with the source's own state (measured)."""


@pytest.fixture(scope="module")
def roomy_cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    """One TaskManager with a task heap of about 1.8 GB; stopped at the end of the module."""
    with started_cluster(
        tmp_path_factory,
        "flink-big-state",
        task_manager_memory="3g",
        config={"taskmanager.memory.managed.fraction": "0.05"},
    ) as cluster:
        yield cluster


def latest(cluster: Cluster, job: str) -> dict[str, Any]:
    """The newest completed checkpoint's summary (``{}``: none yet)."""
    completed: dict[str, Any] | None = cluster.get(f"/jobs/{job}/checkpoints")["latest"][
        "completed"
    ]
    return completed or {}


def test_a_large_state_is_a_slow_checkpoint_not_backpressure(
    roomy_cluster: Cluster, bpmon_bin: Path, tmp_path: Path
) -> None:
    job = roomy_cluster.submit("big-state", args=(str(tmp_path / "checkpoints"),))
    try:
        full = wait_until(
            lambda: latest(roomy_cluster, job),
            "a checkpoint of the whole state",
            180,
            poll_s=1.0,
            until=lambda c: c.get("state_size", 0) >= FULL_BYTES,
        )
        # the next one was triggered after the state was built: no backpressure held it up
        wait_until(
            lambda: latest(roomy_cluster, job),
            "a checkpoint after the state was built",
            120,
            poll_s=1.0,
            until=lambda c: c.get("id", 0) > full["id"],
        )
        report = monitor(bpmon_bin, roomy_cluster, job, tmp_path)
    finally:
        roomy_cluster.cancel(job)
    checkpoints = report["checkpoints"]
    slow = [f for f in report["findings"] if f["kind"] == "checkpoint-slow"]
    assert [f["vertex"] for f in slow] == ["count"], (report["findings"], checkpoints)
    assert "checkpoint-backpressure" not in {f["kind"] for f in report["findings"]}
    last = checkpoints["last"]
    assert last["state_bytes"] >= FULL_BYTES, checkpoints
    assert last["async_ms"] > last["barrier_wait_ms"], checkpoints
