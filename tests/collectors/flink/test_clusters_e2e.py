"""``bpmon serve --monitor-flink URL`` over a whole real cluster (its own, 8 slots): the two jobs
running when it starts are watched, a third submitted during the watch is picked up, one
cancelled ends its watch (``ended``), and each has reports of its own. The server is the real
command, a child process; its API and the runs directory are read as a user reads them.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from bpmon.model.report_json import report_from_json
from tests.web.serve_process import bpmon_serve

from .cluster import Cluster
from .conftest import started_cluster
from .test_chaos import wait_for

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    with started_cluster(tmp_path_factory, "flink-clusters") as started:
        yield started


def jobs(url: str) -> dict[str, dict[str, Any]]:
    """The server's jobs (``GET /api/v1/jobs``) by name."""
    answer = httpx.get(f"{url}/api/v1/jobs", timeout=10)
    answer.raise_for_status()
    return {j["job"]: j for j in answer.json()["jobs"]}


def reported(runs: Path) -> dict[str, int]:
    """Reports saved per job under ``runs`` (each must parse: valid and whole)."""
    counts: dict[str, int] = {}
    for path in runs.glob("*/report*.json"):
        job = report_from_json(path.read_text()).job
        counts[job] = counts.get(job, 0) + 1
    return counts


def test_every_job_of_a_cluster_is_watched_a_new_one_picked_up_a_cancelled_one_ended(
    cluster: Cluster, bpmon_bin: Path, tmp_path: Path
) -> None:
    runs = tmp_path / "runs"
    first = {
        "bpmon-slow-map": cluster.submit("slow-map"),
        "bpmon-healthy": cluster.submit("healthy"),
    }
    later = None
    flags = ["--monitor-flink", cluster.url, "--every", "2", "--runs-dir", str(runs)]
    try:
        with bpmon_serve(bpmon_bin, *flags, graceful=True) as server:
            both = wait_for(
                "reports of both running jobs",
                lambda: reported(runs) if set(first) <= set(reported(runs)) else None,
            )
            assert set(both) == set(first), both
            assert {n: j["state"] for n, j in jobs(server.url).items()} == dict.fromkeys(
                first, "running"
            )

            later = cluster.submit("hot-key")  # submitted while the server watches
            wait_for(
                "a report of the job submitted later", lambda: reported(runs).get("bpmon-hot-key")
            )

            cluster.cancel(first["bpmon-slow-map"])
            ended = wait_for(
                "the cancelled job's watch to end",
                lambda: (
                    j if (j := jobs(server.url)["bpmon-slow-map"])["state"] != "running" else None
                ),
            )
            assert ended["state"] == "ended", ended
            states = {n: j["state"] for n, j in jobs(server.url).items()}
            assert states == {
                "bpmon-slow-map": "ended",
                "bpmon-healthy": "running",
                "bpmon-hot-key": "running",
            }, states
        assert not any("Traceback" in line for line in server.rest())
    finally:
        for job in [first["bpmon-healthy"], *([later] if later else [])]:
            cluster.cancel(job)
    counts = reported(runs)
    assert set(counts) == {"bpmon-slow-map", "bpmon-healthy", "bpmon-hot-key"}, counts
    assert all(n >= 1 for n in counts.values()), counts
