"""``bpmon monitor --flink`` on a real Flink cluster: each job's bottleneck, named right.

The cluster runs ``$BPMON_FLINK_VERSION`` (2.3.0 by default); CI runs the ``every_flink`` tests
once more on the 1.20 LTS line.

One cluster per session (conftest), one short job per test, the real command as a user runs it.
A job runs 12 s before it is watched: its backpressure has built up, and Flink's time gauges
(averages over the 5 s slots filled so far, updated every 5 s) no longer show only the start-up
slot, in which a cold subtask of the hot-key job still reads busy 0.
"""

from __future__ import annotations

import json
import subprocess
import time
from pathlib import Path
from typing import Any

import pytest

from bpmon.collectors.flink.target import FlinkTarget
from bpmon.service import facade
from bpmon.service.watching import Watches
from tests.waiting import wait_until

from .cluster import Cluster
from .conftest import RunJob

pytestmark = pytest.mark.slow

WARMUP_S = 12.0
"""A sleep, not a wait: Flink's busy time averages 5 s slots updated every 5 s, so a job's
start-up slot is gone only by then, and no state of the job says so (as corpus.WARMUP_S)."""


def monitor(bpmon_bin: Path, cluster: Cluster, job: str, tmp_path: Path) -> dict[str, Any]:
    """The JSON report of one ``bpmon monitor --flink`` burst (40 samples, 50 ms apart)."""
    flags = ["--flink", cluster.url, "--job", job, "--samples", "40", "--json"]
    done = subprocess.run(
        [str(bpmon_bin), "monitor", *flags, "--runs-dir", str(tmp_path)],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    reports = json.loads(done.stdout)
    report: dict[str, Any] = reports[0] if isinstance(reports, list) else reports
    return report


def watched(topology: str, flink_job: RunJob) -> str:
    job = flink_job(topology)
    time.sleep(WARMUP_S)
    return job


def vertex(report: dict[str, Any], name: str) -> dict[str, Any]:
    found: dict[str, Any] = next(v for v in report["vertices"] if v["name"] == name)
    return found


@pytest.mark.every_flink
def test_slow_map_is_a_slow_operator(
    flink_cluster: Cluster, flink_job: RunJob, bpmon_bin: Path, tmp_path: Path
) -> None:
    report = monitor(bpmon_bin, flink_cluster, watched("slow-map", flink_job), tmp_path)
    assert report["source"] == "flink"
    assert [v["name"] for v in report["vertices"]] == [
        "Source: numbers -> parse",
        "enrich",
        "sink: Writer",
    ]
    assert vertex(report, "enrich")["inputs"] == [
        {"from": "Source: numbers -> parse", "partitioner": "rebalance", "exchange": "pipelined"}
    ]
    assert vertex(report, "Source: numbers -> parse")["level"] == "HIGH"
    cause = report["root_causes"][0]
    assert (cause["vertex"], cause["kind"]) == ("enrich", "slow-operator")
    [sampling] = [f for f in report["findings"] if f["kind"] == "sampling"]
    assert "samples taken by thread dumps" in sampling["detail"], sampling
    assert "rest.flamegraph.enabled: true" in sampling["detail"]  # this cluster leaves it off


@pytest.mark.every_flink
def test_hot_key_is_data_skew(
    flink_cluster: Cluster, flink_job: RunJob, bpmon_bin: Path, tmp_path: Path
) -> None:
    job = watched("hot-key", flink_job)
    report = monitor(bpmon_bin, flink_cluster, job, tmp_path)
    assert vertex(report, "count")["inputs"][0]["partitioner"] == "hash"
    cause = report["root_causes"][0]
    assert (cause["vertex"], cause["kind"]) == ("count", "data-skew"), (
        cause,
        vertex(report, "count"),
    )
    assert cause["subtasks"] == [0]  # the job's hot key goes to subtask 0, as in bpmon
    # the key groups the autoscaler's decision aligns count to: Flink's default max parallelism
    # (128 below 86 subtasks), read from GET /jobs/{id} into the observation
    target = FlinkTarget(flink_cluster.url, job)
    target.start()
    try:
        observed = target.observe(samples=2, interval_ms=20)
    finally:
        target.stop()
    assert observed.vertex("count").max_parallelism == 128


@pytest.mark.every_flink
def test_slow_sink_is_a_slow_sink(
    flink_cluster: Cluster, flink_job: RunJob, bpmon_bin: Path, tmp_path: Path
) -> None:
    report = monitor(bpmon_bin, flink_cluster, watched("slow-sink", flink_job), tmp_path)
    assert vertex(report, "light")["level"] == "HIGH"
    cause = report["root_causes"][0]
    assert (cause["vertex"], cause["kind"]) == ("store: Writer", "slow-sink")


@pytest.mark.every_flink
def test_a_legacy_source_is_sampled_on_its_own_thread(
    flink_cluster: Cluster, flink_job: RunJob, bpmon_bin: Path, tmp_path: Path
) -> None:
    """A SourceFunction blocks on its own thread; its task thread only waits for mail."""
    report = monitor(bpmon_bin, flink_cluster, watched("legacy-slow-map", flink_job), tmp_path)
    source = vertex(report, "Source: numbers -> parse")
    assert source["level"] == "HIGH" and source["ratio"] >= 0.9, source
    cause = report["root_causes"][0]
    assert (cause["vertex"], cause["kind"]) == ("enrich", "slow-operator")


def test_a_flatmap_of_big_records_borrows_overdraft_buffers(
    flink_cluster: Cluster, flink_job: RunJob, bpmon_bin: Path, tmp_path: Path
) -> None:
    """Ten 2 KB records per record in, behind a slow sink: the output pool is full or over it
    (the writer finishes a record on overdraft buffers: the fidelity benchmark's mean of six
    readings is 1.28; the mean of a window's two readings is 1.0 when neither fetch caught a
    record half written), and the sink is named."""
    report = monitor(bpmon_bin, flink_cluster, watched("flatmap", flink_job), tmp_path)
    explode = vertex(report, "explode")
    assert explode["level"] == "HIGH"
    assert explode["out_pool_usage"] >= 1.0, explode
    cause = report["root_causes"][0]
    assert (cause["vertex"], cause["kind"]) == ("store: Writer", "slow-sink")


def test_two_vertices_of_one_name_are_two_and_the_slow_one_is_named(
    flink_cluster: Cluster, flink_job: RunJob, bpmon_bin: Path, tmp_path: Path
) -> None:
    """Two operators named ``work`` (the first sleeps 1 ms a record): ``work`` and ``work#2``,
    an edge between them, and the first is the bottleneck. Their threads are named alike on the
    one TaskManager, so their levels come from Flink's time accounting (a finding says so)."""
    report = monitor(bpmon_bin, flink_cluster, watched("same-names", flink_job), tmp_path)
    assert [v["name"] for v in report["vertices"]] == [
        "Source: numbers -> parse",
        "work",
        "work#2",
        "sink: Writer",
    ]
    assert [e["from"] for e in vertex(report, "work#2")["inputs"]] == ["work"]
    assert vertex(report, "Source: numbers -> parse")["level"] == "HIGH"
    cause = report["root_causes"][0]
    assert (cause["vertex"], cause["kind"]) == ("work", "slow-operator")
    assert "ambiguous-threads" in {f["kind"] for f in report["findings"]}


def test_a_job_with_a_finished_source_is_watched_without_it(
    flink_cluster: Cluster, flink_job: RunJob, bpmon_bin: Path, tmp_path: Path
) -> None:
    """The ``left`` source reads 1000 records and FINISHES; the job runs on."""
    report = monitor(bpmon_bin, flink_cluster, watched("partly-bounded", flink_job), tmp_path)
    assert [v["name"] for v in report["vertices"]] == [
        "Source: right -> parse",
        "merge",
        "sink: Writer",
    ]
    [finished] = [f for f in report["findings"] if f["kind"] == "finished"]
    assert finished["vertex"] == "Source: left -> parse"
    assert {v["level"] for v in report["vertices"]} == {"OK"}


@pytest.mark.every_flink
def test_healthy_job_has_no_root_cause(
    flink_cluster: Cluster, flink_job: RunJob, bpmon_bin: Path, tmp_path: Path
) -> None:
    report = monitor(bpmon_bin, flink_cluster, watched("healthy", flink_job), tmp_path)
    assert {v["level"] for v in report["vertices"]} == {"OK"}
    assert report["root_causes"] == []


def test_a_cancelled_job_is_one_line_naming_the_fix(
    flink_cluster: Cluster, bpmon_bin: Path, tmp_path: Path
) -> None:
    job = flink_cluster.submit("healthy")
    flink_cluster.cancel(job)
    done = subprocess.run(
        [
            str(bpmon_bin),
            "monitor",
            "--flink",
            flink_cluster.url,
            "--job",
            job,
            "--runs-dir",
            str(tmp_path),
        ],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 5
    [line] = done.stderr.strip().splitlines()
    assert f"job 'bpmon-healthy' ({job}) on {flink_cluster.url} is CANCELED, not RUNNING" in line
    assert "pass --job with a running one" in line


def test_serve_watches_a_flink_job_burst_after_burst(
    flink_cluster: Cluster, flink_job: RunJob, tmp_path: Path
) -> None:
    """What ``bpmon serve --monitor-flink URL --flink-job ID`` starts: a watch of the job."""
    job = watched("slow-map", flink_job)
    watches = Watches(facade.Settings(runs_dir=tmp_path), every_s=0.5)
    try:
        name = watches.start_flink(flink_cluster.url, job=job, every_s=0.5)
        view = wait_until(
            lambda: watches.job(name),
            "two bursts of the Flink job",
            120,
            poll_s=0.2,
            until=lambda v: v is not None and len(v.recent_bursts) >= 2,
        )
        assert view is not None and view.state == "running" and len(view.recent_bursts) >= 2
        assert view.latest is not None and view.latest.source == "flink"
        causes = view.latest.root_causes or ()
        assert causes and (causes[0].vertex, causes[0].kind) == ("enrich", "slow-operator")
    finally:
        leaks = watches.stop_all()
    assert leaks == ()
    assert len(facade.stored_runs(facade.Settings(runs_dir=tmp_path))) == 1  # saved as it went
