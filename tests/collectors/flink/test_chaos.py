"""``bpmon serve --monitor-flink`` through what a production job goes through, on a real Flink 2.3
of its own (it kills a TaskManager, so not the session's cluster): the TaskManager ``kill -9``-ed
and a new one started (the job fails over: RESTARTING, waiting for resources, RUNNING again), the
job rescaled by Flink's adaptive scheduler (``PUT /jobs/{id}/resource-requirements``: ``enrich``
2 -> 3), then cancelled. The server is the real command, a child process; ``/healthz`` is polled
every second throughout, and every report is read back from the runs directory.

The cluster's start is most of the time (about 40 s on 2 cores); each step waits on what it
needs with a generous deadline, never on a fixed sleep.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

import httpx
import pytest

from bpmon.model.report_json import report_from_json
from bpmon.model.values import Report
from tests.web.serve_process import bpmon_serve

from .cluster import Cluster

pytestmark = pytest.mark.slow

JOB = "bpmon-healthy"
STEP_S = 120.0
"""The most any one step may take (a failover on a loaded 2-core machine takes 20-40 s)."""

T = TypeVar("T")


@pytest.fixture(scope="module")
def chaos_cluster(adaptive_cluster: Cluster) -> Cluster:
    """The adaptive cluster (not the session's: a TaskManager is killed here)."""
    return adaptive_cluster


def wait_for(what: str, found: Callable[[], T | None], timeout_s: float = STEP_S) -> T:
    """Poll ``found`` every half second until it gives something; fail naming ``what``."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        value = found()
        if value is not None:
            return value
        time.sleep(0.5)
    raise AssertionError(f"no {what} within {timeout_s:g} s")


class Health:
    """``/healthz`` polled every second on a thread; every answer that was not a 200."""

    def __init__(self, url: str) -> None:
        self.url, self.polls = url, 0
        self.failures: list[str] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._poll, daemon=True)
        self._thread.start()

    def _poll(self) -> None:
        with httpx.Client(timeout=5) as client:
            while not self._stop.wait(1.0):
                try:
                    status = client.get(f"{self.url}/healthz").status_code
                except httpx.HTTPError as exc:
                    self.failures.append(f"{type(exc).__name__}: {exc}")
                    continue
                self.polls += 1
                if status != 200:
                    self.failures.append(f"HTTP {status}")

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(10)


def reports(runs: Path) -> list[Report]:
    """Every report saved under ``runs``, oldest first; each must parse (valid, whole)."""
    found = [report_from_json(p.read_text()) for p in runs.glob("*/report*.json")]
    return sorted(found, key=lambda r: r.window.start)


def findings(report: Report, kind: str) -> list[str]:
    return [f.detail for f in report.findings if f.kind == kind]


def subtasks(report: Report, vertex: str) -> list[int]:
    [shown] = [v for v in report.vertices if v.name == vertex]
    return [s.index for s in shown.subtasks]


def over(url: str) -> dict[str, Any] | None:
    """The watched job's summary (``GET /api/v1/jobs/{job}``) once its watch is over."""
    answer = httpx.get(f"{url}/api/v1/jobs/{JOB}", timeout=10)
    doc: dict[str, Any] = answer.json() if answer.status_code == 200 else {}
    return doc if doc.get("state", "running") != "running" else None


def test_a_watch_rides_out_a_failover_and_a_rescale_and_ends_when_cancelled(
    chaos_cluster: Cluster, bpmon_bin: Path, tmp_path: Path
) -> None:
    cluster, runs = chaos_cluster, tmp_path / "runs"
    job = cluster.submit("healthy", args=("2",))
    flags = ["--monitor-flink", cluster.url, "--flink-job", job, "--every", "2"]
    with bpmon_serve(bpmon_bin, *flags, "--runs-dir", str(runs), graceful=True) as server:
        health = Health(server.url)
        try:
            first = wait_for("first report", lambda: reports(runs) or None)[0]
            assert subtasks(first, "enrich") == [0, 1]

            killed_at = time.time()
            cluster.kill_task_manager()
            cluster.start_task_manager()
            recovered = wait_for(
                "report after the failover",
                lambda: next(
                    (r for r in reports(runs) if r.window.start.timestamp() > killed_at), None
                ),
            )
            assert findings(recovered, "gap"), recovered.findings  # the failover, said
            assert subtasks(recovered, "enrich") == [0, 1]
            assert recovered.levels_from == "samples" and recovered.window.samples > 0
            assert all(s.level is not None for v in recovered.vertices for s in v.subtasks)

            cluster.rescale(job, "enrich", 3)
            rescaled = wait_for(
                "report of the rescale",
                lambda: next((r for r in reports(runs) if findings(r, "rescaled")), None),
            )
            assert findings(rescaled, "rescaled") == ["enrich: parallelism 2 → 3"]
            assert subtasks(rescaled, "enrich") == [0, 1, 2]
            [enrich] = [v for v in rescaled.vertices if v.name == "enrich"]
            assert enrich.parallelism == 3

            cluster.cancel(job)
            ended = wait_for("end of the watch", lambda: over(server.url))
        finally:
            health.stop()
        assert ended["state"] == "ended", ended
        assert ended["error"] is None
        assert health.failures == [] and health.polls > 30, health.failures
    every = reports(runs)  # all of them valid, in one run
    assert len({r.run_id for r in every}) == 1 and len(every) >= 3
    assert not any("Traceback" in line for line in server.rest())
