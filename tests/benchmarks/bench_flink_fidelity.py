"""bpmon's runtime beside a real Flink 2.3, on the same five topologies, vertex by vertex.

Each topology of the Flink test jobs (``tests/collectors/flink/jobs/BpmonFlinkJobs.java``: slow
map, slow sink behind a light map, hot key, fan-in, healthy, a flatmap of big records that needs
overdraft buffers, and the slow map read from a legacy source) runs on a real cluster with one
TaskManager (local channels only; ``--task-managers 2``: subtasks spread over two, remote
channels; 4 KB network buffers, as the test cluster is configured) and,
as the same scenario (same rates, per-record costs, parallelism, record sizes and buffer size),
on bpmon's runtime. Both are watched the same way after ``--run`` seconds: one burst of 40
samples at 50 ms (``FlinkTarget`` / ``RuntimeTarget``). Each job runs ``--flink-runs`` times on
Flink (default 2), so that Flink's own spread from one run to the next is measured beside bpmon's
gap to it. Per vertex, Flink beside bpmon: level,
ratio, busy, idle, out/in pool usage, records in per second; per job, the time from the job's
first record out of its first vertex until that vertex's output pool is 90% used (backpressure
built up), polled every 0.1 s on both (the Flink cluster's metric fetcher refreshes every 0.1 s
here); from the first record, because Flink deploys tasks and its sources wait for their splits,
which bpmon's runtime does not model.

Flink's own figures are its 60 s averages (busy, idle, record meters), bpmon's those of the window;
a job younger than a minute has its Flink record rates scaled by the collector.

    .venv/bin/python tests/benchmarks/bench_flink_fidelity.py [--run 20] [--task-managers 2]
        [--flink-runs 2] [--url http://...]

The last line is a JSON object of every figure.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "tests" / "collectors" / "flink"))

from cluster import Cluster  # type: ignore[import-not-found]  # noqa: E402

from bpmon.collectors.flink.target import FlinkTarget  # noqa: E402
from bpmon.collectors.inprocess import RuntimeTarget  # noqa: E402
from bpmon.model.values import Observation  # noqa: E402
from bpmon.rules.config import load_rules  # noqa: E402
from bpmon.rules.levels import max_known, vertex_status  # noqa: E402
from bpmon.scenario import parse_scenario  # noqa: E402

LONG = 21
"""Bytes a Long record takes in a Flink buffer: a 4-byte length, the record tag, the timestamp a
FLIP-27 source always sets (``Long.MIN_VALUE`` with no watermarks) and the 8-byte value. Measured:
``numBytesOut / numRecordsOut`` of the test jobs' sources is 4096 per 195 records."""
ARRAY = 17
"""Bytes a ``byte[]`` record takes beyond its payload: length, tag, timestamp and the array's own
4-byte length (``explode``'s 2,000-byte records: 2,017 bytes each, measured the same way)."""
NETWORK = "[network]\ntask_managers = TMS\nsegment_size = 4096\n[monitor]\nwarmup_s = 0\n"
"""The runtime's defaults (Flink's flushing among them: ``output_flush = "publish"``), with the test
cluster's 4 KB buffers."""

SCENARIOS = {
    "slow-map": (
        ["source", "enrich", "sink"],
        f"""
name = "slow-map"
{NETWORK}
[[operators]]
name = "source"
kind = "source"
rate = 4000
record_bytes = {LONG}
[[operators]]
name = "enrich"
kind = "map"
parallelism = 2
cost_us = 1000
record_bytes = {LONG}
inputs = [{{ from = "source", partitioner = "rebalance" }}]
[[operators]]
name = "sink"
kind = "sink"
inputs = [{{ from = "enrich", partitioner = "rebalance" }}]
""",
    ),
    "slow-sink": (
        ["source", "light", "store"],
        f"""
name = "slow-sink"
{NETWORK}
[[operators]]
name = "source"
kind = "source"
rate = 1000
record_bytes = {LONG}
[[operators]]
name = "light"
kind = "map"
record_bytes = {40000 + ARRAY}
inputs = [{{ from = "source" }}]
[[operators]]
name = "store"
kind = "sink"
cost_us = 2000
inputs = [{{ from = "light" }}]
""",
    ),
    "hot-key": (
        ["source", "count", "sink"],
        f"""
name = "hot-key"
{NETWORK}
[[operators]]
name = "source"
kind = "source"
rate = 3000
record_bytes = {LONG}
[[operators]]
name = "count"
kind = "map"
parallelism = 2
cost_us = 1500
record_bytes = {LONG}
inputs = [{{ from = "source", partitioner = "hash", skew = 0.6 }}]
[[operators]]
name = "sink"
kind = "sink"
inputs = [{{ from = "count", partitioner = "rebalance" }}]
""",
    ),
    "fan-in": (
        ["left", "right", "merge", "sink"],
        f"""
name = "fan-in"
{NETWORK}
[[operators]]
name = "left"
kind = "source"
rate = 1500
record_bytes = {LONG}
[[operators]]
name = "right"
kind = "source"
rate = 1500
record_bytes = {LONG}
[[operators]]
name = "merge"
kind = "map"
cost_us = 500
record_bytes = {LONG}
inputs = [{{ from = "left" }}, {{ from = "right" }}]
[[operators]]
name = "sink"
kind = "sink"
inputs = [{{ from = "merge" }}]
""",
    ),
    "healthy": (
        ["source", "enrich", "sink"],
        f"""
name = "healthy"
{NETWORK}
[[operators]]
name = "source"
kind = "source"
rate = 200
record_bytes = {LONG}
[[operators]]
name = "enrich"
kind = "map"
parallelism = 2
cost_us = 200
record_bytes = {LONG}
inputs = [{{ from = "source", partitioner = "rebalance" }}]
[[operators]]
name = "sink"
kind = "sink"
inputs = [{{ from = "enrich", partitioner = "rebalance" }}]
""",
    ),
    "flatmap": (
        ["source", "explode", "store"],
        f"""
name = "flatmap"
{NETWORK}
[[operators]]
name = "source"
kind = "source"
rate = 300
record_bytes = {LONG}
[[operators]]
name = "explode"
kind = "flatmap"
fanout = 10
record_bytes = {2000 + ARRAY}
inputs = [{{ from = "source" }}]
[[operators]]
name = "store"
kind = "sink"
cost_us = 1000
inputs = [{{ from = "explode" }}]
""",
    ),
}
"""Per topology: the vertex names in Flink's order, and the same job as a bpmon scenario.

``hot-key``: Flink's key function sends 2/3 of the records to one key and spreads the rest over
334 keys, 51% of them on subtask 0: 2/3 + 1/3 x 0.51 = 84% of the records on subtask 0, where
``skew = 0.6`` sends 0.6 + 0.4 / 2 = 80%. The job's hot key is one that Flink's key groups route
to subtask 0, where bpmon's ``skew`` puts it, so the hot subtask is the same one in both, and its
channel from the source is local in both."""
SCENARIOS["legacy-slow-map"] = (
    SCENARIOS["slow-map"][0],
    SCENARIOS["slow-map"][1]
    .replace('name = "slow-map"', 'name = "legacy-slow-map"')
    .replace('kind = "source"\n', 'kind = "source"\nsource_api = "legacy"\n'),
)
"""The slow map read from a legacy ``SourceFunction`` (its own thread, hard backpressure)."""


def pool_means(snapshot: Any, readings: int = 6, every_s: float = 1.05) -> list[tuple[Any, Any]]:
    """Per vertex, its out and in pool usage averaged over ``readings`` taken ``every_s`` apart
    (a vertex's usage is its fullest subtask's, as in a report).

    Pool usage is a gauge read at one instant, on Flink as on bpmon; a flatmap that borrows and
    returns overdraft buffers swings between 1.0 and 1.4 from one instant to the next, so one
    reading on each side compares two draws, not the two systems. A second apart: the Flink
    collector reads a snapshot at most once a second.
    """
    seen: list[list[tuple[float | None, float | None]]] = []
    for _ in range(readings):
        observation = snapshot()
        if observation is not None:
            seen.append(
                [
                    (
                        max_known(s.metrics.out_pool_usage for s in v.subtasks),
                        max_known(s.metrics.in_pool_usage for s in v.subtasks),
                    )
                    for v in observation.vertices
                ]
            )
        time.sleep(every_s)

    def mean(values: list[float | None]) -> float | None:
        known = [v for v in values if v is not None]
        return sum(known) / len(known) if known else None

    return [
        (mean([r[i][0] for r in seen]), mean([r[i][1] for r in seen]))
        for i in range(len(seen[0]) if seen else 0)
    ]


def rows(
    observation: Observation, names: list[str], pools: list[tuple[Any, Any]]
) -> list[dict[str, Any]]:
    """Per vertex (in ``names``' order): the figures compared; pool usage from ``pools``."""
    levels = load_rules(None).levels
    out = []
    for i, (vertex, name) in enumerate(zip(observation.vertices, names, strict=True)):
        s = vertex_status(vertex, levels)
        m = s.metrics
        out_pool, in_pool = pools[i] if i < len(pools) else (None, None)
        out.append(
            {
                "vertex": name,
                "level": s.level,
                "ratio": _r(s.ratio),
                "busy": _r(m.busy_ratio),
                "idle": _r(m.idle_ratio),
                "out_pool": _r(out_pool),
                "in_pool": _r(in_pool),
                "records_in_per_s": _r(m.records_in_per_s, 0),
                # paired by rank, not index: Flink's key hashing may put the hot key on subtask 1
                "subtask_levels": sorted(
                    (t.level or "-" for t in s.subtasks), key=lambda level: LEVEL_ORDER[level]
                ),
            }
        )
    return out


LEVEL_ORDER = {"-": 0, "OK": 1, "LOW": 2, "HIGH": 3}


def _r(value: float | None, digits: int = 2) -> float | None:
    return None if value is None else round(value, digits)


OUT_POOL = "Shuffle.Netty.Output.Buffers.outPoolUsage"


def flink_build_up_s(cluster: Cluster, job: str, limit_s: float) -> float | None:
    """Seconds from the first vertex's first record out until one of its out pools is 90% used.

    Polled every 0.1 s from the moment the job is submitted (the cluster's metric fetcher
    refreshes every 0.1 s here). Counted from the first record, not from the job's start: Flink
    deploys its tasks and its sources wait for their splits, and bpmon's runtime does neither.
    """
    deadline = time.monotonic() + limit_s
    first_at: float | None = None
    vertices: list[dict[str, Any]] = []
    while time.monotonic() < deadline:
        # the job's details are cached by the REST server (a vertex reads CREATED for seconds
        # after it started): only its vertex ids are read from them, the metrics are fresh
        vertices = vertices or cluster.get(f"/jobs/{job}").get("vertices") or []
        if vertices:
            answer = cluster.get(
                f"/jobs/{job}/vertices/{vertices[0]['id']}/subtasks/metrics"
                f"?get=numRecordsOut,{OUT_POOL}&agg=max"
            )
            got = {m["id"]: m.get("max", 0) for m in answer}
            now = time.monotonic()
            if first_at is None and got.get("numRecordsOut", 0) > 0:
                first_at = now
            if first_at is not None and got.get(OUT_POOL, 0) >= 0.9:
                return round(now - first_at, 1)
        time.sleep(0.1)
    return None


def runtime_build_up_s(target: RuntimeTarget, limit_s: float) -> float | None:
    """The same on bpmon's runtime: first record out of the first vertex to a 90% out pool."""
    deadline = time.monotonic() + limit_s
    first_at: float | None = None
    while time.monotonic() < deadline:
        observation = target.snapshot()
        first = observation.vertices[0].subtasks if observation else ()
        now = time.monotonic()
        if first_at is None and any((s.metrics.records_out_per_s or 0) > 0 for s in first):
            first_at = now
        if first_at is not None and any((s.metrics.out_pool_usage or 0) >= 0.9 for s in first):
            return round(now - first_at, 1)
        time.sleep(0.1)
    return None


def on_flink(cluster: Cluster, topology: str, run_s: float) -> dict[str, Any]:
    """The topology on Flink: build-up time, then one burst after ``run_s``."""
    job = cluster.submit(topology, wait=False)
    try:
        began = time.monotonic()
        built = flink_build_up_s(cluster, job, run_s)
        cluster.wait_running(job)
        target = FlinkTarget(cluster.url, job)
        target.start()
        time.sleep(max(0.0, run_s - (time.monotonic() - began)))
        observation = target.observe(40, 50.0)
        return {
            "build_up_s": built,
            "task_managers_used": observation.settings.task_managers,
            "vertices": rows(observation, SCENARIOS[topology][0], pool_means(target.snapshot)),
        }
    finally:
        cluster.cancel(job)


def on_bpmon(topology: str, run_s: float, task_managers: int) -> dict[str, Any]:
    """The same job on bpmon's runtime, watched the same way."""
    names, text = SCENARIOS[topology]
    text = text.replace("task_managers = TMS", f"task_managers = {task_managers}")
    target = RuntimeTarget(parse_scenario(text))
    target.start()
    try:
        began = time.monotonic()
        built = runtime_build_up_s(target, run_s)
        time.sleep(max(0.0, run_s - (time.monotonic() - began)))
        observation = target.observe(40, 50.0)
        return {
            "build_up_s": built,
            "vertices": rows(observation, names, pool_means(target.snapshot)),
        }
    finally:
        target.stop()


def main() -> int:
    """Every topology on both; a table per topology, then the JSON."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--url", help="a running test cluster (scripts/flink-cluster start)")
    parser.add_argument("--run", type=float, default=20.0, help="seconds before the burst")
    parser.add_argument("--only", nargs="*", default=list(SCENARIOS))
    parser.add_argument("--task-managers", type=int, default=1)
    parser.add_argument(
        "--flink-runs", type=int, default=2, help="runs of each job on Flink (its own spread)"
    )
    args = parser.parse_args()
    results: dict[str, Any] = {}
    with tempfile.TemporaryDirectory() as tmp:
        # one slot per task manager when there are several: Flink 2.3 fills one task manager
        # first (even with cluster.evenly-spread-out-slots), so subtask 1 must go to the second
        slots = 1 if args.task_managers > 1 else 4
        cluster = Cluster(
            Path(tmp), task_managers=args.task_managers, slots=slots, fetch_interval_ms=100
        )
        if args.url:
            cluster.url = args.url.rstrip("/")
        else:
            cluster.start()
        try:
            for topology in args.only:
                flink = [on_flink(cluster, topology, args.run) for _ in range(args.flink_runs)]
                results[topology] = {
                    "flink": flink[0],
                    "flink_again": flink[1:],
                    "bpmon": on_bpmon(topology, args.run, args.task_managers),
                }
                show(topology, results[topology])
        finally:
            if not args.url:
                cluster.stop()
    summary = summarise(results)
    print("\n" + "\n".join(f"{k}: {v}" for k, v in summary.items()))
    print(
        json.dumps(
            {
                "run_s": args.run,
                "task_managers": args.task_managers,
                "summary": summary,
                "results": results,
            }
        )
    )
    return 0


def summarise(results: dict[str, Any]) -> dict[str, Any]:
    """The goals' figures over every topology: levels, busy/idle, pool usage, build-up."""
    pairs = [
        (f, b)
        for r in results.values()
        for f, b in zip(r["flink"]["vertices"], r["bpmon"]["vertices"], strict=True)
    ]
    subtasks = [
        (fl, bl)
        for f, b in pairs
        for fl, bl in zip(f["subtask_levels"], b["subtask_levels"], strict=False)
    ]

    def worst(key: str) -> float:
        gaps = [abs(f[key] - b[key]) for f, b in pairs if f[key] is not None and b[key] is not None]
        return round(max(gaps, default=0.0), 2)

    # Flink's other runs of the same job, vertex by vertex: how far Flink is from itself, and how
    # far bpmon is from the nearest of Flink's runs
    runs = [
        [r["flink"]["vertices"][i], *(a["vertices"][i] for a in r.get("flink_again", []))]
        for r in results.values()
        for i in range(len(r["flink"]["vertices"]))
    ]
    bpmons = [b for r in results.values() for b in r["bpmon"]["vertices"]]

    def spread(key: str) -> float:
        gaps = [
            max(known) - min(known)
            for vertex in runs
            if len(known := [v[key] for v in vertex if v[key] is not None]) > 1
        ]
        return round(max(gaps, default=0.0), 2)

    def nearest(key: str) -> float:
        gaps = [
            min(abs(v[key] - b[key]) for v in vertex if v[key] is not None)
            for vertex, b in zip(runs, bpmons, strict=True)
            if b[key] is not None and any(v[key] is not None for v in vertex)
        ]
        return round(max(gaps, default=0.0), 2)

    built = [
        (r["flink"]["build_up_s"], r["bpmon"]["build_up_s"])
        for r in results.values()
        if r["flink"]["build_up_s"] or r["bpmon"]["build_up_s"]
    ]
    within = sum(1 for f, b in built if f and b and 0.5 <= b / f <= 2.0)
    return {
        "vertex levels equal": f"{sum(f['level'] == b['level'] for f, b in pairs)}/{len(pairs)}",
        "subtask levels equal": f"{sum(f == b for f, b in subtasks)}/{len(subtasks)}",
        "worst busy gap": worst("busy"),
        "worst idle gap": worst("idle"),
        "worst out pool gap": worst("out_pool"),
        "worst in pool gap": worst("in_pool"),
        "build-up within 2x": f"{within}/{len(built)}",
        **(
            {
                f"Flink runs: {len(runs[0])}": "; figures below compare bpmon with the nearest run",
                **{f"Flink's own spread, {k}": spread(k) for k in POOLS_AND_TIMES},
                **{f"worst {k} gap to the nearest Flink run": nearest(k) for k in POOLS_AND_TIMES},
            }
            if runs and len(runs[0]) > 1
            else {}
        ),
    }


POOLS_AND_TIMES = ("busy", "idle", "out_pool", "in_pool")


def show(topology: str, result: dict[str, Any]) -> None:
    """One Markdown table: per vertex, Flink (each run) / bpmon."""
    flink, bpmon = result["flink"], result["bpmon"]
    again = "".join(f", {a['build_up_s']} s" for a in result.get("flink_again", []))
    print(
        f"\n{topology}: backpressure built in {flink['build_up_s']} s{again} (Flink) / "
        f"{bpmon['build_up_s']} s (bpmon)"
    )
    keys = ["level", "subtask_levels", "ratio", "busy", "idle", "out_pool", "in_pool"]
    keys.append("records_in_per_s")
    print("| vertex | " + " | ".join(keys) + " |")
    print("|---" * (len(keys) + 1) + "|")
    others = [a["vertices"] for a in result.get("flink_again", [])]
    for i, (f, b) in enumerate(zip(flink["vertices"], bpmon["vertices"], strict=True)):
        cells = [
            ", ".join(_cell(v[k]) for v in [f, *(o[i] for o in others)]) + f" / {_cell(b[k])}"
            for k in keys
        ]
        print(f"| {f['vertex']} | " + " | ".join(cells) + " |")


def _cell(value: Any) -> str:
    return ",".join(value) if isinstance(value, list) else str(value)


if __name__ == "__main__":
    sys.exit(main())
