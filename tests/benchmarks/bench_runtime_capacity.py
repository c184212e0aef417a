"""The runtime's capacity: records per second of zero-cost work it can move, and what it costs.

A ``source -> map -> sink`` job, 100-byte records, ``cost_us = 0`` everywhere, an unlimited source,
Flink's network defaults on two task managers, at parallelism 1 and 2. Above these rates a
scenario measures the Python interpreter, not the job it describes: ``job.load()`` then reports
the runtime saturated (``bpmon/runtime/load.py``), and this is the figure the README states.

Each job warms up (``--warmup`` s), then over ``--window`` s the records reaching the sinks are
counted (from ``counters()`` at both ends) and ``job.load()`` reads the CPU the task threads used,
how long they waited for a core, and whether it calls the runtime saturated (it must: the source
asks for as much as it can get). ``--rounds`` rounds, the median reported. The last line is a JSON
object of the figures.

    .venv/bin/python tests/benchmarks/bench_runtime_capacity.py [--rounds 3] [--window 3]
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from typing import Any

from bpmon.runtime.job import Job
from bpmon.runtime.metrics import counters
from bpmon.scenario import parse_scenario

SCENARIO = """
name = "capacity-p{p}"
[network]
task_managers = 2
[[operators]]
name = "source"
kind = "source"
parallelism = {p}
rate = 0
[[operators]]
name = "map"
kind = "map"
parallelism = {p}
inputs = [{{ from = "source" }}]
[[operators]]
name = "sink"
kind = "sink"
parallelism = {p}
inputs = [{{ from = "map" }}]
"""


def measure(p: int, warmup: float, window: float) -> dict[str, Any]:
    """One run at parallelism ``p``: sink records/s, cores used and waited, saturation."""
    job = Job(parse_scenario(SCENARIO.format(p=p), f"capacity-p{p}"))
    job.start()
    try:
        time.sleep(warmup)
        start, since = counters(job.tasks), job.load_snapshot()
        time.sleep(window)
        end, load = counters(job.tasks), job.load(since)
    finally:
        result = job.stop()
    if result.state != "cancelled" or result.leaks:
        raise SystemExit(f"job ended {result.state}: {result.error}; leaks {result.leaks}")
    received = sum(c.records_in for c in end.tasks["sink"]) - sum(
        c.records_in for c in start.tasks["sink"]
    )
    return {
        "records_per_s": received / (end.at - start.at),
        "cpu_cores": load.cpu_cores_used,
        "wait_cores": load.cpu_wait_cores,
        "saturated": load.saturated,
    }


def main() -> None:
    """Measure parallelism 1 and 2, print each round and the medians, then a JSON line."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--warmup", type=float, default=1.0)
    parser.add_argument("--window", type=float, default=3.0)
    args = parser.parse_args()
    runs: dict[int, list[dict[str, Any]]] = {1: [], 2: []}
    for round_no in range(args.rounds):
        for p, results in runs.items():
            run = measure(p, args.warmup, args.window)
            results.append(run)
            print(
                f"round {round_no + 1}/{args.rounds} p={p}: {run['records_per_s']:,.0f} records/s, "
                f"{run['cpu_cores']:.2f} cores used, {run['wait_cores']:.2f} waited, "
                f"saturated {run['saturated']}",
                flush=True,
            )
    figures = {}
    for p, results in runs.items():
        figures[f"p{p}"] = {
            "records_per_s": statistics.median(r["records_per_s"] for r in results),
            "cpu_cores": statistics.median(r["cpu_cores"] for r in results),
            "saturated_every_round": all(r["saturated"] for r in results),
        }
        f = figures[f"p{p}"]
        print(
            f"parallelism {p}: {f['records_per_s']:,.0f} records/s (median), "
            f"{f['cpu_cores']:.2f} cores, saturated in every round: {f['saturated_every_round']}"
        )
    print(json.dumps(figures))


if __name__ == "__main__":
    main()
