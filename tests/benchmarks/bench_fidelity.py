"""Fidelity figures: how close the runtime comes to what Flink shows and what a scenario asks.

The tests assert the mechanisms, which a loaded machine cannot bend (``tests/runtime/
test_fidelity.py``, ``test_task.py``, ``test_pacing.py``, ``test_connection.py``); the figures
they once asserted are measured here, each against its target, on a machine as quiet as you can
make it:

- ``patterns``: every shipped example with an ``[expect]`` table, all at once (as the fidelity test
  runs them), after a warm-up, over one window: the root cause's ``busyTimeMsPerSecond`` (target
  >= 800; Flink shows 1,000), the lowest ``backPressuredTimeMsPerSecond`` upstream of it (>= 500,
  Flink's HIGH; Flink shows ~980) and the lowest idle time downstream of it (>= 700); in a healthy
  job, the highest backpressured time (< 100, Flink's OK);
- ``rates``: a source at 1,000 records/s; 700 per subtask (two subtasks); a filter passing 0.25 of
  1,000; a flatmap emitting 3 x 500; ``cost_us = 500`` behind an unlimited source (2,000/s); a
  subtask three times slower (667/s): each within 10 %;
- ``service``: 400 records x 500 us on the real clock alone (0.2 s; target <= 0.5 s) and in 20
  threads at once (target: wall <= 0.8 s);
- ``link``: records through a 2 MB/s remote link (target within 20 %).

The last line is a JSON object of every figure with its target and whether it was met.

    .venv/bin/python tests/benchmarks/bench_fidelity.py [--warmup 5] [--window 3]
"""

from __future__ import annotations

import argparse
import json
import threading
import time
from collections.abc import Callable
from typing import Any

from bpmon.runtime.buffers import Buffer
from bpmon.runtime.job import Job
from bpmon.runtime.metrics import TaskMetrics, counters, window_metrics
from bpmon.runtime.network import NetworkEnvironment
from bpmon.runtime.pacing import ServiceTime
from bpmon.scenario import (
    NetworkConfig,
    Scenario,
    example_names,
    example_path,
    load_expectation,
    load_scenario,
    parse_scenario,
)

Figures = dict[str, dict[str, Any]]


def figure(value: float, target: str, met: bool) -> dict[str, Any]:
    """One measured figure, its target as text, and whether it was met."""
    return {"value": round(value, 3), "target": target, "met": met}


def run_window(scenarios: dict[str, Scenario], warmup: float, window: float) -> dict[str, Any]:
    """Start every scenario at once; their metrics over ``window`` after ``warmup``."""
    jobs = {name: Job(s) for name, s in scenarios.items()}
    for job in jobs.values():
        job.start()
    try:
        time.sleep(warmup)
        start = {name: counters(job.tasks) for name, job in jobs.items()}
        time.sleep(window)
        return {name: window_metrics(start[name], counters(j.tasks)) for name, j in jobs.items()}
    finally:
        for job in jobs.values():
            job.stop()


def _relatives(scenario: Scenario, name: str, step: Callable[[str], tuple[Any, ...]]) -> set[str]:
    found: set[str] = set()
    todo = [name]
    while todo:
        for op in step(todo.pop()):
            if op.name not in found:
                found.add(op.name)
                todo.append(op.name)
    return found


def patterns(warmup: float, window: float) -> Figures:
    """The Flink figures of every shipped example's pattern."""
    scenarios, expects = {}, {}
    for stem in example_names():
        expect = load_expectation(example_path(stem))
        if expect is not None:
            scenarios[stem] = load_scenario(example_path(stem))
            expects[stem] = expect
    measured = run_window(scenarios, warmup, window)
    figures: Figures = {}
    for stem, metrics in measured.items():
        scenario, root = scenarios[stem], expects[stem].root_cause
        every: list[TaskMetrics] = [m for ms in metrics.values() for m in ms]
        if not root:
            worst = max(m.backpressured_ms_per_s for m in every)
            figures[f"{stem}: highest backpressured"] = figure(worst, "< 100", worst < 100)
            continue
        busy = max(m.busy_ms_per_s for m in metrics[root])
        figures[f"{stem}: {root} busy"] = figure(busy, ">= 800", busy >= 800)
        if expects[stem].subtasks:  # a hot or slow subtask: only its channels fill up
            producers = [m for op in scenario.upstream(root) for m in metrics[op.name]]
            bp = max(m.backpressured_ms_per_s for m in producers)
            figures[f"{stem}: most backpressured producer"] = figure(bp, ">= 500", bp >= 500)
        up = _relatives(scenario, root, scenario.upstream)
        if up and not expects[stem].subtasks:
            bp = min(m.backpressured_ms_per_s for v in up for m in metrics[v])
            figures[f"{stem}: lowest backpressured upstream"] = figure(bp, ">= 500", bp >= 500)
        down = _relatives(scenario, root, scenario.downstream)
        if down:
            idle = min(m.idle_ms_per_s for v in down for m in metrics[v])
            figures[f"{stem}: lowest idle downstream"] = figure(idle, ">= 700", idle >= 700)
    return figures


CHAIN = """
name = "{name}"
[[operators]]
name = "source"
kind = "source"
parallelism = {p}
rate = {rate}
[[operators]]
name = "op"
kind = "{kind}"
parallelism = {p}
cost_us = {cost}
{extra}
inputs = [{{ from = "source" }}]
[[operators]]
name = "sink"
kind = "sink"
inputs = [{{ from = "op", partitioner = "rebalance" }}]
"""

RATES: dict[str, tuple[dict[str, Any], str, str, int | None, float]] = {
    # name: (chain settings, vertex, "in"/"out", subtask (None: all), expected records/s)
    "source 1,000/s": ({"rate": 1000}, "source", "out", 0, 1000),
    "700/s per subtask, into the sink": ({"rate": 700, "p": 2}, "sink", "in", None, 1400),
    "filter 0.25 of 1,000/s": (
        {"rate": 1000, "kind": "filter", "extra": "selectivity = 0.25"},
        "sink",
        "in",
        None,
        250,
    ),
    "flatmap 3 x 500/s": (
        {"rate": 500, "kind": "flatmap", "extra": "fanout = 3"},
        "op",
        "out",
        0,
        1500,
    ),
    "cost_us 500": ({"rate": 0, "cost": 500}, "op", "in", 0, 2000),
    "slow subtask x3": (
        {"rate": 0, "p": 2, "cost": 500, "extra": "slow_subtasks = { 1 = 3.0 }"},
        "op",
        "in",
        1,
        2000 / 3,
    ),
}


def rates(warmup: float, window: float) -> Figures:
    """Records per second against what each scenario asks, all jobs at once."""
    scenarios = {}
    for name, (settings, *_rest) in RATES.items():
        values = {"p": 1, "kind": "map", "cost": 0, "extra": "", **settings}
        scenarios[name] = parse_scenario(CHAIN.format(name="bench", **values), name)
    measured = run_window(scenarios, warmup, window)
    figures: Figures = {}
    for name, (_settings, vertex, side, index, expected) in RATES.items():
        group = measured[name][vertex]
        chosen = group if index is None else [group[index]]
        attr = "records_in_per_s" if side == "in" else "records_out_per_s"
        value = sum(getattr(m, attr) for m in chosen)
        met = abs(value - expected) <= 0.1 * expected
        figures[f"rate: {name}"] = figure(value, f"{expected:,.0f} +- 10 %", met)
    return figures


def _serve_400() -> float:
    service = ServiceTime(500)
    start = time.monotonic()
    for _ in range(400):
        service.charge(1)
    service.settle()
    return time.monotonic() - start


def service() -> Figures:
    """400 x 500 us of service time alone, then in 20 threads at once."""
    alone = _serve_400()
    threads = [threading.Thread(target=_serve_400) for _ in range(20)]
    start = time.monotonic()
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    wall = time.monotonic() - start
    return {
        "service: 400 x 500 us alone (s)": figure(alone, "<= 0.5", alone <= 0.5),
        "service: the same in 20 threads, wall (s)": figure(wall, "<= 0.8", wall <= 0.8),
    }


def link(window: float) -> Figures:
    """MB/s of 100-byte records through a remote link capped at 2 MB/s."""
    env = NetworkEnvironment(
        NetworkConfig(task_managers=2, link_bandwidth_mb_s=2.0, buffer_timeout_ms=0)
    )
    partition = env.create_partition(0, 1, "src")
    gate = env.create_gate(1, [(partition, 0)], "sink")
    stop, got = threading.Event(), [0]

    def produce() -> None:
        emit = partition.channel_writer(100, 0)
        i = 0
        try:
            while not stop.is_set():
                emit(i)
                i += 1
        except RuntimeError:
            pass  # the environment shut down while the producer waited

    def consume() -> None:
        with env.lock:
            while not stop.is_set():
                polled = gate.poll_next()
                if polled is None:
                    gate.condition.wait(0.05)
                elif isinstance(polled[0], Buffer):
                    got[0] += len(polled[0].records)
                    polled[0].recycle()

    threads = [threading.Thread(target=t, daemon=True) for t in (produce, consume)]
    for thread in threads:
        thread.start()
    time.sleep(0.3)
    first, began = got[0], time.monotonic()
    time.sleep(window)
    mb_s = (got[0] - first) * 100 / (time.monotonic() - began) / 1e6
    stop.set()
    env.shutdown()
    for thread in threads:
        thread.join(timeout=2)
    return {"link: 2 MB/s cap (MB/s)": figure(mb_s, "2.0 +- 20 %", 1.6 <= mb_s <= 2.4)}


def main() -> None:
    """Measure every group and print the figures, then a JSON line."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--warmup", type=float, default=5.0)
    parser.add_argument("--window", type=float, default=3.0)
    args = parser.parse_args()
    figures: Figures = {}
    groups: list[Callable[[], Figures]] = [
        lambda: patterns(args.warmup, args.window),
        lambda: rates(1.0, args.window),
        service,
        lambda: link(args.window),
    ]
    for group in groups:
        measured = group()
        for name, f in measured.items():
            mark = "ok  " if f["met"] else "MISS"
            print(f"{mark} {name}: {f['value']:,.3f} (target {f['target']})", flush=True)
        figures.update(measured)
    met = sum(f["met"] for f in figures.values())
    print(f"\n{met}/{len(figures)} figures met their targets")
    print(json.dumps({"figures": figures, "met": met, "total": len(figures)}))


if __name__ == "__main__":
    main()
