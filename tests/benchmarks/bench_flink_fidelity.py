"""bpmon's runtime beside a real Flink 2.3, on the same five topologies, vertex by vertex.

Each topology of the Flink test jobs (``tests/collectors/flink/jobs/BpmonFlinkJobs.java``: slow
map, slow sink behind a light map, hot key, fan-in, healthy) runs on a real cluster with one
TaskManager (local channels only; ``--task-managers 2``: subtasks spread over two, remote
channels; 4 KB network buffers, as the test cluster is configured) and,
as the same scenario (same rates, per-record costs, parallelism, record sizes and buffer size),
on bpmon's runtime. Both are watched the same way after ``--run`` seconds: one burst of 40
samples at 50 ms (``FlinkTarget`` / ``RuntimeTarget``). Per vertex, Flink beside bpmon: level,
ratio, busy, idle, out/in pool usage, records in per second; per job, the time from the job's
start until its first vertex's output pool is 90% used (backpressure built up), polled every
0.1 s (bpmon) or as Flink's metric fetcher refreshes (1 s).

Flink's own figures are its 60 s averages (busy, idle, record meters), bpmon's those of the window;
a job younger than a minute has its Flink record rates scaled by the collector.

    .venv/bin/python tests/benchmarks/bench_flink_fidelity.py [--run 20] [--task-managers 2]
        [--url http://...]

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

from bpmon.collectors.flink import FlinkTarget  # noqa: E402
from bpmon.collectors.runtime import RuntimeTarget  # noqa: E402
from bpmon.model import Observation  # noqa: E402
from bpmon.rules.config import load_rules  # noqa: E402
from bpmon.rules.levels import vertex_status  # noqa: E402
from bpmon.scenario import parse_scenario  # noqa: E402

LONG = 13  # bytes of a serialized Long record in a Flink buffer (8 + length header and tag)
NETWORK = (
    '[network]\ntask_managers = TMS\nsegment_size = 4096\noutput_flush = "publish"\n'
    "[monitor]\nwarmup_s = 0\n"
)
"""Flink's flushing (a flush publishes a slice; the writer keeps filling the buffer): what the
README's fidelity table compares, not the runtime's default (``"finish"``)."""

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
record_bytes = 40005
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
}
"""Per topology: the vertex names in Flink's order, and the same job as a bpmon scenario.

``hot-key``: Flink's key function sends 2/3 of the records to one key and spreads the rest over
34 keys: ``skew = 0.6`` sends 0.6 + 0.4 / 2 = 80% to one subtask, about what Flink's hashing of
the other keys adds."""


def rows(observation: Observation, names: list[str]) -> list[dict[str, Any]]:
    """Per vertex (in ``names``' order): the figures compared."""
    levels = load_rules(None).levels
    out = []
    for vertex, name in zip(observation.vertices, names, strict=True):
        s = vertex_status(vertex, levels)
        m = s.metrics
        out.append(
            {
                "vertex": name,
                "level": s.level,
                "ratio": _r(s.ratio),
                "busy": _r(m.busy_ratio),
                "idle": _r(m.idle_ratio),
                "out_pool": _r(m.out_pool_usage),
                "in_pool": _r(m.in_pool_usage),
                "records_in_per_s": _r(m.records_in_per_s, 0),
            }
        )
    return out


def _r(value: float | None, digits: int = 2) -> float | None:
    return None if value is None else round(value, digits)


def first_full_s(snapshot: Any, began: float, limit_s: float, every_s: float) -> float | None:
    """Seconds from ``began`` until the first vertex's out pool is 90% used (None: never)."""
    while time.monotonic() - began < limit_s:
        observation = snapshot()
        first = observation.vertices[0].subtasks if observation else ()
        if any((s.metrics.out_pool_usage or 0) >= 0.9 for s in first):
            return round(time.monotonic() - began, 1)
        time.sleep(every_s)
    return None


def on_flink(cluster: Cluster, topology: str, run_s: float) -> dict[str, Any]:
    """The topology on Flink: build-up time, then one burst after ``run_s``."""
    job = cluster.submit(topology)
    try:
        details = cluster.get(f"/jobs/{job}")
        began = time.monotonic() - (details["now"] - details["start-time"]) / 1000
        target = FlinkTarget(cluster.url, job)
        target.start()
        built = first_full_s(target.snapshot, began, run_s, 0.2)
        time.sleep(max(0.0, run_s - (time.monotonic() - began)))
        observation = target.observe(40, 50.0)
        return {
            "build_up_s": built,
            "task_managers_used": observation.settings.task_managers,
            "vertices": rows(observation, SCENARIOS[topology][0]),
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
        built = first_full_s(target.snapshot, began, run_s, 0.1)
        time.sleep(max(0.0, run_s - (time.monotonic() - began)))
        observation = target.observe(40, 50.0)
        return {"build_up_s": built, "vertices": rows(observation, names)}
    finally:
        target.stop()


def main() -> int:
    """Every topology on both; a table per topology, then the JSON."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--url", help="a running test cluster (scripts/flink-cluster start)")
    parser.add_argument("--run", type=float, default=20.0, help="seconds before the burst")
    parser.add_argument("--only", nargs="*", default=list(SCENARIOS))
    parser.add_argument("--task-managers", type=int, default=1)
    args = parser.parse_args()
    results: dict[str, Any] = {}
    with tempfile.TemporaryDirectory() as tmp:
        # one slot per task manager when there are several: Flink 2.3 fills one task manager
        # first (even with cluster.evenly-spread-out-slots), so subtask 1 must go to the second
        slots = 1 if args.task_managers > 1 else 4
        cluster = Cluster(Path(tmp), task_managers=args.task_managers, slots=slots)
        if args.url:
            cluster.url = args.url.rstrip("/")
        else:
            cluster.start()
        try:
            for topology in args.only:
                results[topology] = {
                    "flink": on_flink(cluster, topology, args.run),
                    "bpmon": on_bpmon(topology, args.run, args.task_managers),
                }
                show(topology, results[topology])
        finally:
            if not args.url:
                cluster.stop()
    print(json.dumps({"run_s": args.run, "task_managers": args.task_managers, "results": results}))
    return 0


def show(topology: str, result: dict[str, Any]) -> None:
    """One Markdown table: per vertex, Flink / bpmon."""
    flink, bpmon = result["flink"], result["bpmon"]
    print(
        f"\n{topology}: backpressure built in {flink['build_up_s']} s (Flink) / "
        f"{bpmon['build_up_s']} s (bpmon)"
    )
    keys = ["level", "ratio", "busy", "idle", "out_pool", "in_pool", "records_in_per_s"]
    print("| vertex | " + " | ".join(keys) + " |")
    print("|---" * (len(keys) + 1) + "|")
    for f, b in zip(flink["vertices"], bpmon["vertices"], strict=True):
        cells = [f"{f[k]} / {b[k]}" for k in keys]
        print(f"| {f['vertex']} | " + " | ".join(cells) + " |")


if __name__ == "__main__":
    sys.exit(main())
