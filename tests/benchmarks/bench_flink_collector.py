"""What watching a real Flink job costs: one burst of ``bpmon monitor --flink``, and the job's
throughput with bpmon watching it against without.

The cluster is a standalone Flink 2.3 on loopback with one TaskManager (``--url`` uses a running
one, ``scripts/flink-cluster start``), the job the test suite's ``slow-map`` (a rate-limited
source -> ``enrich``, 1 ms of sleep per record, 2 subtasks -> sink), which runs 15 s first.

- **One burst**: :class:`FlinkTarget` ``observe(100, 50)`` (``--samples``, ``--interval-ms``):
  thread dumps of the TaskManager at a 50 ms grid (a sample whose slot a slow dump overran is
  skipped), then one metrics and one
  backpressure request per vertex. Per burst: requests, bytes received, wall time, samples
  taken of the 100 planned, and one thread dump's median time and size.
- **Between bursts**: what the service's idle loop asks of the JobManager in 10 s: it calls
  ``wait(0)`` about every quarter second, and ``snapshot()`` as often only while someone watches
  live. Counted both ways (nobody watching, a live view). The same script run with an older
  bpmon first on ``PYTHONPATH`` measures that one (its service took a snapshot every time).
- **Throughput**: ``enrich``'s records out per second over alternating windows, off, on, off, ...,
  off, where "on" runs bursts back to back (the heaviest watching there is). The rate is the
  change of the ``numRecordsOut`` counters between two reads, each dated by polling until Flink's
  metric store takes a new value, so the fetcher's staleness cancels out. Each "on" window is
  compared with the mean of the two "off" windows beside it.

The last line is a JSON object of the figures.

    .venv/bin/python tests/benchmarks/bench_flink_collector.py [--bursts 3] [--pairs 3]
        [--window 10] [--samples 100 --interval-ms 50] [--url http://127.0.0.1:8081]
        (``--pairs 0``: no throughput windows)
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "tests" / "collectors" / "flink"))

from cluster import Cluster  # type: ignore[import-not-found]  # noqa: E402

from bpmon.collectors.flink import FlinkTarget  # noqa: E402

WARMUP_S = 15.0


def burst_costs(url: str, bursts: int, plan: tuple[int, float]) -> list[dict[str, Any]]:
    """``bursts`` windows of ``plan`` (samples, interval ms), each with what it cost."""
    target = FlinkTarget(url)
    target.start()
    rows = []
    for _ in range(bursts):
        before, began = target.rest.cost, time.perf_counter()
        observation = target.observe(*plan)
        spent, wall = target.rest.cost - before, time.perf_counter() - began
        dump = target.last_dump_cost
        rows.append(
            {
                "requests": spent.requests,
                "kbytes": round(spent.bytes / 1024, 1),
                "wall_s": round(wall, 2),
                "samples": observation.window.samples,
                "dump_ms_median": round(dump.median_ms, 1) if dump else None,
                "dump_kbytes_median": round(dump.median_bytes / 1024, 1) if dump else None,
            }
        )
    return rows


IDLE_S = 10.0
IDLE_STEP_S = 0.25
"""The service's idle loop: a check of the target every quarter second (``LIVE_EVERY_S``)."""


def between_bursts(url: str, job: str, live: bool) -> dict[str, Any]:
    """Requests and bytes of :data:`IDLE_S` of the service's idle loop: ``wait(0)`` every
    :data:`IDLE_STEP_S`, and ``snapshot()`` too when ``live``."""
    target = FlinkTarget(url, job)
    target.start()
    target.observe(5, 50.0)  # as after a burst
    before, began = target.rest.cost, time.monotonic()
    while time.monotonic() - began < IDLE_S:
        target.wait(0)
        if live:
            target.snapshot()
        time.sleep(IDLE_STEP_S)
    spent = target.rest.cost - before
    return {"live": live, "requests": spent.requests, "kbytes": round(spent.bytes / 1024, 1)}


def counter(cluster: Cluster, job: str, vertex: str, parallelism: int) -> tuple[float, float]:
    """(records out of ``vertex``, monotonic time) at the moment Flink's store took a new value.

    Flink's REST metric store changes only when its fetcher gets a fresh value from the task
    manager (every ``metrics.fetcher.update-interval``, 1 s in the test cluster, sometimes longer);
    polling until the total changes dates the value within the 50 ms poll.
    """
    ids = ",".join(f"{i}.numRecordsOut" for i in range(parallelism))

    def total() -> float:
        values = cluster.get(f"/jobs/{job}/vertices/{vertex}/metrics?get={ids}")
        return sum(float(v["value"]) for v in values)

    first = total()
    while (now := total()) == first:
        time.sleep(0.05)
    return now, time.monotonic()


def throughput(
    cluster: Cluster, job: str, pairs: int, window_s: float, plan: tuple[int, float]
) -> dict[str, Any]:
    """Records/s of ``enrich`` in alternating off/on windows, and the on/off ratios."""
    details = cluster.get(f"/jobs/{job}")
    enrich = next(v for v in details["vertices"] if v["name"] == "enrich")
    rates: list[tuple[str, float]] = []
    for k in range(2 * pairs + 1):
        on = k % 2 == 1
        stop = threading.Event()
        watcher = None
        if on:
            target = FlinkTarget(cluster.url, job)
            target.start()
            watcher = threading.Thread(target=_watch, args=(target, stop, plan), daemon=True)
        n0, t0 = counter(cluster, job, enrich["id"], enrich["parallelism"])
        if watcher is not None:
            watcher.start()
        time.sleep(window_s)
        n1, t1 = counter(cluster, job, enrich["id"], enrich["parallelism"])
        stop.set()
        if watcher is not None:
            watcher.join()
        rates.append(("on" if on else "off", (n1 - n0) / (t1 - t0)))
    ratios = [
        rates[k][1] / ((rates[k - 1][1] + rates[k + 1][1]) / 2) for k in range(1, len(rates), 2)
    ]
    return {
        "rates": [{"watched": w == "on", "records_per_s": round(r, 1)} for w, r in rates],
        "on_off_ratios": [round(r, 3) for r in ratios],
        "on_off_ratio_median": round(statistics.median(ratios), 3),
    }


def _watch(target: FlinkTarget, stop: threading.Event, plan: tuple[int, float]) -> None:
    while not stop.is_set():
        target.observe(*plan, stop=stop)


def main() -> int:
    """Run the benchmark; print a table, then the figures as JSON."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--url", help="a running test cluster (scripts/flink-cluster start)")
    parser.add_argument("--bursts", type=int, default=3)
    parser.add_argument("--pairs", type=int, default=3)
    parser.add_argument("--window", type=float, default=10.0)
    parser.add_argument("--samples", type=int, default=100)
    parser.add_argument("--interval-ms", type=float, default=50.0)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        cluster = Cluster(Path(tmp))
        if args.url:
            cluster.url = args.url.rstrip("/")
        else:
            cluster.start()
        try:
            job = cluster.submit("slow-map")
            time.sleep(WARMUP_S)
            plan = (args.samples, args.interval_ms)
            bursts = burst_costs(cluster.url, args.bursts, plan)
            idle = [between_bursts(cluster.url, job, live) for live in (False, True)]
            flow = throughput(cluster, job, args.pairs, args.window, plan) if args.pairs else {}
            cluster.cancel(job)
        finally:
            if not args.url:
                cluster.stop()
    for row in bursts:
        print(
            f"burst: {row['samples']}/{args.samples} samples, {row['requests']} requests, "
            f"{row['kbytes']} KB, {row['wall_s']} s; a dump {row['dump_ms_median']} ms, "
            f"{row['dump_kbytes_median']} KB"
        )
    for row in idle:
        print(
            f"between bursts, {'a live view' if row['live'] else 'nobody watching'}: "
            f"{row['requests']} requests, {row['kbytes']} KB in {IDLE_S:g} s"
        )
    for row in flow.get("rates", []):
        print(f"{'watched' if row['watched'] else 'alone  '}: {row['records_per_s']} records/s")
    if flow:
        print(f"watched / alone: {flow['on_off_ratios']} (median {flow['on_off_ratio_median']})")
    plan_text = {"samples": args.samples, "interval_ms": args.interval_ms}
    figures = {"plan": plan_text, "bursts": bursts, "between_bursts": idle, "throughput": flow}
    print(json.dumps({**figures, "window_s": args.window}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
