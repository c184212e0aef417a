"""What watching a large Flink job costs, side by side with a small one: a job of 500 subtasks
(6 vertices, parallelism up to 128) and one of 19, the same shape (``wide P`` in
``tests/collectors/flink/jobs/BpmonFlinkJobs.java``, P = 128 and 5), on one real Flink cluster.

The cluster is a standalone Flink on loopback (``$BPMON_FLINK_VERSION``, 2.3.0 by default), one
TaskManager of 128 slots (3 GB), Flink's sampler on (``rest.flamegraph.enabled``, graphs cached
1 s); the operators sleep, so two cores carry 500 subtasks. Each job runs alone, 20 s before it
is measured. Per job:

- **A burst**, per sampler (Flink's sampler, thread dumps): :class:`FlinkTarget`
  ``observe(100, 50)``, ``--bursts`` times: REST requests, bytes received and wall time (median),
  and the samples taken of those planned.
- **bpmon's memory**: the Python heap's peak over one burst by Flink's sampler (``tracemalloc``,
  in a burst of its own: tracing slows Python).
- **The JobManager's extra CPU**: its process's CPU time (``/proc/PID/stat``) over ``--span``
  seconds with no watch, then over as long with bursts by Flink's sampler back to back: the
  difference, as a share of one core.
- **The dashboard and Prometheus**: ``bpmon serve --monitor-flink URL --flink-job JOB --every 5``
  (the real command), once its first report is in: ``GET /job/{job}`` and ``GET /metrics``,
  ``--rounds`` times each, median wall time and bytes.

The README's bound (goal): a burst at 500 subtasks no more than 3x the wall time of one at 20,
REST requests growing with vertices rather than subtasks where Flink allows it, the scrape under
1 s. The last line is a JSON object of the figures.

    .venv/bin/python tests/benchmarks/bench_large_job.py [--sizes 5,128] [--bursts 3]
        [--span 20] [--rounds 5]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
import tracemalloc
from pathlib import Path
from typing import Any

import httpx

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "tests" / "collectors" / "flink"))
sys.path.insert(0, str(REPO))

from cluster import Cluster  # type: ignore[import-not-found]  # noqa: E402

from bpmon.collectors.flink.burst import Sampler  # noqa: E402
from bpmon.collectors.flink.target import FlinkTarget  # noqa: E402
from tests.web.serve_process import bpmon_serve  # noqa: E402

WARMUP_S = 20.0
TICKS = os.sysconf("SC_CLK_TCK")


def subtasks(p: int) -> int:
    """The ``wide P`` job's subtasks: source P/32, three vertices of P, P/2, 3P/8."""
    return max(1, p // 32) + 3 * p + max(1, p // 2) + max(1, 3 * p // 8)


def burst(url: str, job: str, sampler: Sampler, bursts: int) -> dict[str, Any]:
    """``bursts`` windows of 100 x 50 ms: median wall time, requests, bytes; samples taken."""
    target = FlinkTarget(url, job, sampler=sampler)
    target.start()
    walls, requests, sizes, taken, planned, method = [], [], [], 0, 0, ""
    try:
        for _ in range(bursts):
            before, began = target.rest.cost, time.monotonic()
            target.observe(100, 50.0)
            walls.append(time.monotonic() - began)
            spent = target.rest.cost - before
            requests.append(spent.requests)
            sizes.append(spent.bytes)
            assert target.last_sampling is not None
            taken, planned = target.last_sampling.taken, target.last_sampling.planned
            method = target.last_sampling.method
    finally:
        target.stop()
    return {
        "method": method,
        "wall_s": round(statistics.median(walls), 2),
        "requests": int(statistics.median(requests)),
        "kb": round(statistics.median(sizes) / 1024),
        "samples": f"{taken}/{planned}",
    }


def heap_peak_mb(url: str, job: str) -> float:
    """The Python heap's peak over one burst by Flink's sampler, its start included."""
    tracemalloc.start()
    try:
        target = FlinkTarget(url, job)
        target.start()
        target.observe(100, 50.0)
        target.stop()
        return round(tracemalloc.get_traced_memory()[1] / 2**20, 1)
    finally:
        tracemalloc.stop()


def cpu_s(pid: int) -> float:
    """A process's CPU time so far (user + system), in seconds."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / TICKS


def jobmanager_pid(cluster: Cluster) -> int:
    pid_file = next((cluster.workdir / "pid").glob("*standalonesession*.pid"))
    return int(pid_file.read_text().split()[0])


def jobmanager_extra_cpu(cluster: Cluster, job: str, span_s: float) -> dict[str, float]:
    """The JobManager's CPU, a share of one core, without a watch and with bursts back to back."""
    pid = jobmanager_pid(cluster)
    start = cpu_s(pid)
    time.sleep(span_s)
    quiet = (cpu_s(pid) - start) / span_s
    target = FlinkTarget(cluster.url, job)
    target.start()
    start, began = cpu_s(pid), time.monotonic()
    try:
        while time.monotonic() - began < span_s:
            target.observe(100, 50.0)
    finally:
        target.stop()
    watched = (cpu_s(pid) - start) / (time.monotonic() - began)
    return {
        "quiet": round(quiet, 3),
        "watched": round(watched, 3),
        "extra": round(watched - quiet, 3),
    }


def served(url: str, name: str) -> bool:
    """Whether the server has a report of job ``name`` (``GET /api/v1/jobs``): the file on
    disk comes a moment before the watch records it."""
    jobs = httpx.get(f"{url}/api/v1/jobs", timeout=30).json()["jobs"]
    return any(j["job"] == name and j["updated"] is not None for j in jobs)


def surfaces(cluster: Cluster, job_id: str, name: str, rounds: int) -> dict[str, Any]:
    """The dashboard's job page and the Prometheus scrape of a served watch of the job."""
    bpmon = REPO / ".venv" / "bin" / "bpmon"
    with tempfile.TemporaryDirectory() as runs:
        flags = ["--monitor-flink", cluster.url, "--flink-job", job_id, "--every", "5"]
        with bpmon_serve(bpmon, *flags, "--runs-dir", runs, graceful=True) as server:
            deadline = time.monotonic() + 180
            while not served(server.url, name):  # the server holds its first report
                if time.monotonic() > deadline:
                    raise RuntimeError("no report from bpmon serve in 180 s")
                time.sleep(1)
            first = json.loads(next(Path(runs).glob("*/report*.json")).read_text())
            figures: dict[str, Any] = {
                "served": {
                    "vertices": len(first["vertices"]),
                    "subtasks": sum(len(v.get("subtasks") or ()) for v in first["vertices"]),
                    "findings": sorted({f["kind"] for f in first["findings"]}),
                }
            }
            with httpx.Client(timeout=60) as client:
                for label, path in (("page", f"/job/{name}"), ("scrape", "/metrics")):
                    times, size = [], 0
                    for _ in range(rounds):
                        began = time.monotonic()
                        answer = client.get(server.url + path)
                        times.append(time.monotonic() - began)
                        answer.raise_for_status()
                        size = len(answer.content)
                    figures[label] = {
                        "ms": round(statistics.median(times) * 1000),
                        "kb": round(size / 1024),
                    }
    return figures


def measure(cluster: Cluster, p: int, args: argparse.Namespace) -> dict[str, Any]:
    job = cluster.submit("wide", timeout_s=300, args=(str(p),))
    try:
        time.sleep(WARMUP_S)
        name = "bpmon-wide"
        figures: dict[str, Any] = {"subtasks": subtasks(p), "vertices": 6}
        for sampler in ("auto", "thread-dumps"):
            key = "flame" if sampler == "auto" else "dumps"
            figures[key] = burst(cluster.url, job, sampler, args.bursts)
            print(f"  P={p}: {key} {figures[key]}", file=sys.stderr)
        figures["heap_mb"] = heap_peak_mb(cluster.url, job)
        figures["jobmanager_cpu"] = jobmanager_extra_cpu(cluster, job, args.span)
        figures |= surfaces(cluster, job, name, args.rounds)
        return figures
    finally:
        cluster.cancel(job, timeout_s=120)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--sizes", default="5,128", help="the jobs' P (subtasks: 19 and 500)")
    parser.add_argument("--bursts", type=int, default=3)
    parser.add_argument("--span", type=float, default=20.0)
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args(argv)
    sizes = [int(s) for s in args.sizes.split(",")]
    results: dict[int, dict[str, Any]] = {}
    with tempfile.TemporaryDirectory() as work:
        cluster = Cluster(Path(work), slots=max(sizes), flamegraph=True, task_manager_memory="3g")
        cluster.start(timeout_s=180)
        try:
            cluster.upload()
            for p in sizes:
                print(f"wide P={p} ({subtasks(p)} subtasks) ...", file=sys.stderr)
                results[p] = measure(cluster, p, args)
        finally:
            cluster.stop()
    small, large = results[sizes[0]], results[sizes[-1]]
    print(f"{'':34}{small['subtasks']:>10}{large['subtasks']:>10}   ratio")
    rows = [
        ("burst, Flink's sampler: wall s", ("flame", "wall_s")),
        ("burst, Flink's sampler: requests", ("flame", "requests")),
        ("burst, Flink's sampler: KB", ("flame", "kb")),
        ("burst, thread dumps: wall s", ("dumps", "wall_s")),
        ("burst, thread dumps: requests", ("dumps", "requests")),
        ("burst, thread dumps: KB", ("dumps", "kb")),
        ("bpmon heap peak, MB", ("heap_mb",)),
        ("JobManager extra CPU, cores", ("jobmanager_cpu", "extra")),
        ("dashboard job page, ms", ("page", "ms")),
        ("dashboard job page, KB", ("page", "kb")),
        ("Prometheus scrape, ms", ("scrape", "ms")),
        ("Prometheus scrape, KB", ("scrape", "kb")),
    ]
    for label, path in rows:
        a, b = small, large
        for key in path:
            a, b = a[key], b[key]
        ratio = f"{b / a:.1f}x" if isinstance(a, int | float) and a else "-"
        print(f"{label:34}{a:>10}{b:>10}   {ratio}")
    print(json.dumps({str(p): r for p, r in results.items()}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
