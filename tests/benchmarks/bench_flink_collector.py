"""What watching a real Flink job costs, by thread dumps and by Flink's own sampler side by
side: one burst of ``bpmon monitor --flink``, the job's throughput with bpmon watching it against
without, and the capacity bpmon reports while it watches against the job's unobserved rate.

The cluster is a standalone Flink 2.3 on loopback with one TaskManager and Flink's sampler on
(``rest.flamegraph.enabled: true``, graphs cached 1 s; ``--url`` uses a running one started so);
the thread dumps are taken of the same cluster (``FlinkTarget(sampler="thread-dumps")``). The
jobs (``--jobs``) are the test suite's:

- ``slow-map``: a rate-limited source (4000/s) -> ``enrich``, 1 ms of SLEEP per record,
  2 subtasks -> sink;
- ``cpu-map``: a rate-limited source (2000/s) -> ``enrich``, 1 ms of CPU (spinning) per record,
  1 subtask -> sink.

Each runs 15 s first. Then, per sampler:

- **One burst**: :class:`FlinkTarget` ``observe(100, 50)`` (``--samples``, ``--interval-ms``;
  Flink's sampler takes ``rest.flamegraph.num-samples`` x ``delay-between-samples``, 100 x 50 ms
  here): requests, bytes received, wall time, samples taken of those planned.
- **Throughput**: ``enrich``'s records out per second over alternating windows, off, on, off, ...,
  off, where "on" runs bursts back to back (the heaviest watching there is). The rate is the
  change of the ``numRecordsOut`` counters between two reads, each dated by polling until Flink's
  metric store takes a new value, so the fetcher's staleness cancels out. Each "on" window is
  compared with the mean of the two "off" windows beside it: the cost is 1 - on/off. Bursts back
  to back still leave time unsampled (thread dumps: the quiet span their rates are read over;
  Flink's sampler: waiting for its cache), so the cost is also given per second sampled: divided
  by the share of the "on" windows the samples spanned (``duty``).
- **Capacity**: per burst of the "on" windows, the capacity bpmon reports for ``enrich`` (its root
  cause's records/s per subtask at 100% busy), against ``enrich``'s unobserved rate per subtask
  (the "off" windows' mean: it is the bottleneck, busy all the time).

``--idle`` also counts what the service's idle loop asks of the JobManager between bursts (10 s
of ``wait(0)`` every quarter second, with and without a live view's ``snapshot()``).

The last line is a JSON object of the figures.

    .venv/bin/python tests/benchmarks/bench_flink_collector.py [--jobs slow-map,cpu-map]
        [--samplers thread-dumps,flame-graph] [--bursts 2] [--pairs 3] [--window 10]
        [--samples 100 --interval-ms 50] [--idle] [--url http://127.0.0.1:8081]
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

from bpmon.collectors.flink.burst import Sampler  # noqa: E402
from bpmon.collectors.flink.target import FlinkTarget  # noqa: E402
from bpmon.model.values import Observation  # noqa: E402
from bpmon.rules.engine import diagnose  # noqa: E402

WARMUP_S = 15.0
VERTEX = "enrich"
SAMPLERS: dict[str, Sampler] = {"thread-dumps": "thread-dumps", "flame-graph": "auto"}
"""Each sampler compared, and how a target is asked for it (the cluster enables Flink's)."""


def target(url: str, job: str, sampler: str) -> FlinkTarget:
    """A started watch of ``job`` by ``sampler``."""
    watch = FlinkTarget(url, job, sampler=SAMPLERS[sampler])
    watch.start()
    return watch


def burst_costs(
    url: str, job: str, sampler: str, bursts: int, plan: tuple[int, float]
) -> list[dict[str, Any]]:
    """``bursts`` windows of ``plan`` (samples, interval ms), each with what it cost."""
    watch = target(url, job, sampler)
    rows = []
    for _ in range(bursts):
        before, began = watch.rest.cost, time.perf_counter()
        observation = watch.observe(*plan)
        spent, wall = watch.rest.cost - before, time.perf_counter() - began
        sampling = watch.last_sampling
        dump = watch.last_dump_cost
        rows.append(
            {
                "method": sampling.method if sampling else None,
                "requests": spent.requests,
                "kbytes": round(spent.bytes / 1024, 1),
                "wall_s": round(wall, 2),
                "samples": observation.window.samples,
                "taken": sampling.taken if sampling else None,
                "planned": sampling.planned if sampling else None,
                "dump_ms_median": round(dump.median_ms, 1) if dump else None,
            }
        )
    return rows


def capacity(observation: Observation) -> float | None:
    """The capacity per subtask bpmon reports for :data:`VERTEX` from one window."""
    report = diagnose(observation)
    for cause in report.root_causes or ():
        if cause.vertex == VERTEX and cause.capacity_per_subtask is not None:
            return float(cause.capacity_per_subtask)
    return None


IDLE_S = 10.0
IDLE_STEP_S = 0.25
"""The service's idle loop: a check of the target every quarter second (``LIVE_EVERY_S``)."""


def between_bursts(url: str, job: str, live: bool) -> dict[str, Any]:
    """Requests and bytes of :data:`IDLE_S` of the service's idle loop: ``wait(0)`` every
    :data:`IDLE_STEP_S`, and ``snapshot()`` too when ``live``."""
    watch = target(url, job, "thread-dumps")
    watch.observe(5, 50.0)  # as after a burst
    before, began = watch.rest.cost, time.monotonic()
    while time.monotonic() - began < IDLE_S:
        watch.wait(0)
        if live:
            watch.snapshot()
        time.sleep(IDLE_STEP_S)
    spent = watch.rest.cost - before
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
    cluster: Cluster, job: str, sampler: str, pairs: int, window_s: float, plan: tuple[int, float]
) -> dict[str, Any]:
    """Records/s of :data:`VERTEX` in alternating off/on windows, the on/off ratios, and the
    capacity bpmon reported in the on windows against the unobserved rate per subtask."""
    details = cluster.get(f"/jobs/{job}")
    enrich = next(v for v in details["vertices"] if v["name"] == VERTEX)
    rates: list[tuple[bool, float]] = []
    capacities: list[float] = []
    sampled: list[tuple[float, float]] = []
    sampled_s = 0.0
    for k in range(2 * pairs + 1):
        on = k % 2 == 1
        stop = threading.Event()
        watcher = None
        if on:
            watch = target(cluster.url, job, sampler)
            args = (watch, stop, plan, capacities, sampled)
            watcher = threading.Thread(target=_watch, args=args, daemon=True)
        n0, t0 = counter(cluster, job, enrich["id"], enrich["parallelism"])
        if watcher is not None:
            watcher.start()
        time.sleep(window_s)
        n1, t1 = counter(cluster, job, enrich["id"], enrich["parallelism"])
        stop.set()
        if watcher is not None:
            watcher.join()
        rates.append((on, (n1 - n0) / (t1 - t0)))
        if on:
            sampled_s += sum(max(0.0, min(b, t1) - max(a, t0)) for a, b in sampled)
            sampled.clear()
    ratios = [
        rates[k][1] / ((rates[k - 1][1] + rates[k + 1][1]) / 2) for k in range(1, len(rates), 2)
    ]
    alone = statistics.mean(r for on, r in rates if not on) / enrich["parallelism"]
    duty = min(1.0, sampled_s / (pairs * window_s))
    cost = 1 - statistics.median(ratios)
    reported = statistics.median(capacities) if capacities else None
    return {
        "rates": [{"watched": on, "records_per_s": round(r, 1)} for on, r in rates],
        "on_off_ratios": [round(r, 3) for r in ratios],
        "on_off_ratio_median": round(statistics.median(ratios), 3),
        "cost": round(cost, 3),
        "duty": round(duty, 3),
        "cost_per_sampled_s": round(cost / duty, 3) if duty > 0 else None,
        "unobserved_per_subtask": round(alone, 1),
        "capacities": [round(c, 1) for c in capacities],
        "capacity_ratio": round(reported / alone, 3) if reported else None,
    }


def _watch(
    watch: FlinkTarget,
    stop: threading.Event,
    plan: tuple[int, float],
    capacities: list[float],
    sampled: list[tuple[float, float]],
) -> None:
    """Bursts back to back until ``stop``: each one's capacity, and when it sampled (monotonic
    start and end: Flink's burst from the first request, the dumps' grid as taken)."""
    while not stop.is_set():
        began = time.monotonic()
        observation = watch.observe(*plan, stop=stop)
        method = watch.last_sampling.method if watch.last_sampling else None
        if method == "flame-graph":
            sampled.append((began, began + watch.config.flame_burst_s))
        else:  # the dumps end the window, the quiet span before them is not sampled
            dumps = observation.window.seconds
            sampled.append((time.monotonic() - dumps, time.monotonic()))
        found = capacity(observation) if not stop.is_set() else None
        if found is not None:
            capacities.append(found)


def measure(
    cluster: Cluster, topology: str, args: argparse.Namespace, plan: tuple[int, float]
) -> dict[str, Any]:
    """Every sampler's figures on one job."""
    job = cluster.submit(topology)
    try:
        time.sleep(WARMUP_S)
        figures: dict[str, Any] = {}
        for sampler in args.samplers.split(","):
            figures[sampler] = {
                "bursts": burst_costs(cluster.url, job, sampler, args.bursts, plan),
                "throughput": (
                    throughput(cluster, job, sampler, args.pairs, args.window, plan)
                    if args.pairs
                    else {}
                ),
            }
        if args.idle:
            figures["between_bursts"] = [
                between_bursts(cluster.url, job, live) for live in (False, True)
            ]
        return figures
    finally:
        cluster.cancel(job)


def show(topology: str, figures: dict[str, Any], plan: tuple[int, float]) -> None:
    """The figures of one job as lines of text."""
    for sampler, found in figures.items():
        if sampler == "between_bursts":
            for row in found:
                print(
                    f"{topology}, between bursts, "
                    f"{'a live view' if row['live'] else 'nobody watching'}: "
                    f"{row['requests']} requests, {row['kbytes']} KB in {IDLE_S:g} s"
                )
            continue
        for row in found["bursts"]:
            dump = f"; a dump {row['dump_ms_median']} ms" if row["dump_ms_median"] else ""
            print(
                f"{topology}, {sampler}: a burst of {plan[0]} x {plan[1]:g} ms by "
                f"{row['method']}: {row['taken']}/{row['planned']} samples, {row['requests']} "
                f"requests, {row['kbytes']} KB, {row['wall_s']} s{dump}"
            )
        flow = found["throughput"]
        if flow:
            print(
                f"{topology}, {sampler}: watched / alone {flow['on_off_ratios']} (cost "
                f"{flow['cost']:.1%}, sampling {flow['duty']:.0%} of the time: "
                f"{flow['cost_per_sampled_s']:.1%} while sampled); "
                f"capacity reported {flow['capacities']} against "
                f"{flow['unobserved_per_subtask']} records/s per subtask alone: "
                f"{flow['capacity_ratio']}x"
            )


def main() -> int:
    """Run the benchmark; print the figures as text, then as JSON."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--url", help="a running test cluster with Flink's sampler on")
    parser.add_argument("--jobs", default="slow-map,cpu-map")
    parser.add_argument("--samplers", default="thread-dumps,flame-graph")
    parser.add_argument("--bursts", type=int, default=2)
    parser.add_argument("--pairs", type=int, default=3)
    parser.add_argument("--window", type=float, default=10.0)
    parser.add_argument("--samples", type=int, default=100)
    parser.add_argument("--interval-ms", type=float, default=50.0)
    parser.add_argument("--idle", action="store_true", help="also count the between-burst loop")
    args = parser.parse_args()
    plan = (args.samples, args.interval_ms)
    results: dict[str, Any] = {}
    with tempfile.TemporaryDirectory() as tmp:
        cluster = Cluster(Path(tmp), flamegraph=True)
        if args.url:
            cluster.url = args.url.rstrip("/")
        else:
            cluster.start()
        try:
            for topology in args.jobs.split(","):
                results[topology] = measure(cluster, topology, args, plan)
                show(topology, results[topology], plan)
        finally:
            if not args.url:
                cluster.stop()
    plan_text = {"samples": args.samples, "interval_ms": args.interval_ms}
    print(json.dumps({"plan": plan_text, "window_s": args.window, "jobs": results}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
