"""``bpmon monitor --flink URL --verify`` on a real Flink 2.3 with the adaptive scheduler.

slow-map offers 4,000 records/s to ``enrich`` (1 ms a record, 2 subtasks: ~2,000 records/s). Its
DataGen source reports no ``pendingRecords``, so bpmon estimates the offered rate from what the
source emits and how long it is held back, recommends a parallelism for ``enrich``, asks Flink's
adaptive scheduler for it (``PUT /jobs/{id}/resource-requirements``), waits until the job runs
at it, diagnoses it again and says whether the backpressure is gone. The real command, as a child
process; the rescale is read back from Flink itself.
"""

from __future__ import annotations

import json
import subprocess
import time
from pathlib import Path

import pytest

from .cluster import Cluster

pytestmark = pytest.mark.slow

WARMUP_S = 12.0


def test_verify_rescales_the_bottleneck_and_the_backpressure_is_gone(
    adaptive_cluster: Cluster, bpmon_bin: Path, tmp_path: Path
) -> None:
    job = adaptive_cluster.submit("slow-map")
    try:
        time.sleep(WARMUP_S)
        flags = ["--flink", adaptive_cluster.url, "--job", job, "--samples", "40", "--verify"]
        done = subprocess.run(
            [str(bpmon_bin), "monitor", *flags, "--json", "--runs-dir", str(tmp_path)],
            capture_output=True,
            text=True,
            timeout=400,
            check=False,
        )
        assert done.returncode == 0, done.stderr
        doc = json.loads(done.stdout)
        [cause, *_] = doc["before"]["root_causes"]
        assert (cause["vertex"], cause["kind"]) == ("enrich", "slow-operator")
        wanted = cause["recommended_parallelism"]
        assert wanted is not None and 3 <= wanted <= 8  # 4,000/s over ~1,000/s a subtask
        assert f"enrich.parallelism={wanted}" in doc["changes"]
        assert "adaptive scheduler" in done.stderr
        running = {
            v["name"]: v["parallelism"] for v in adaptive_cluster.get(f"/jobs/{job}")["vertices"]
        }
        assert running["enrich"] == wanted  # Flink itself runs it so, in place (same job id)
        [after] = [v for v in doc["after"]["vertices"] if v["name"] == "enrich"]
        assert after["parallelism"] == wanted and len(after["subtasks"]) == wanted
        if doc["backpressure_removed"] is not True:
            # DataGen reports no pendingRecords: the offered rate is estimated from the source's
            # backpressured share, a lower bound (the evidence says so, and calls the
            # recommendation a step). On a loaded machine the source's share can read under half
            # and the step fall short (4 of the 5 needed, seen in CI); then the re-run must name
            # enrich again and ask for more, the next step of the same estimate
            assert any("estimated" in line for line in cause["evidence"]), cause
            [again] = [c for c in doc["after"]["root_causes"] if c["vertex"] == "enrich"]
            assert (again["recommended_parallelism"] or 0) > wanted, again
    finally:
        adaptive_cluster.cancel(job)


def test_verify_is_for_flink_only(bpmon_bin: Path) -> None:
    done = subprocess.run(
        [str(bpmon_bin), "monitor", "--pid", "1", "--verify"],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 2
    assert "--verify is for --flink" in done.stderr
