"""Scale: throughput, threads and memory of one job from 3 to 51 subtasks.

The job is a chain ``source -> map -> sink`` of parallelism p for p in 1, 2, 4, 8, 16 and 17 (3 to
51 subtasks), forward exchanges (p independent pipelines), 100-byte records, no service time, the
sources as fast as they can. It runs on three task managers: subtasks are placed round robin in
topological order, so with p not a multiple of 3 every exchange is remote (checked, and the channel
counts printed), which keeps the configurations comparable.

Two passes:

- throughput, ``--rounds`` interleaved rounds: after a ``--warmup`` the records reaching the sinks
  (the sum of the sink tasks' ``records_in`` totals) are counted over a ``--window``; threads alive
  and network segments (sum over the task managers' pools: segments the pools hold, and segments in
  use) are read at the end of the window. Medians are reported;
- memory, once per configuration, each in a fresh interpreter (so that memory freed by an earlier
  job cannot be reused and hide the growth) with ``tracemalloc`` on (it slows Python down, hence a
  pass apart): the peak of Python allocations while the job is built and runs for ``--mem-run``
  seconds, and the growth of the process's peak resident set (``VmHWM`` at the end minus ``VmRSS``
  before the build).

Segments are bookkeeping, not bytes bpmon allocates: the "Flink MiB" column is what they would be
at 32 KiB each. The last line is a JSON object of the figures.

    .venv/bin/python tests/benchmarks/bench_scale.py [--rounds 5] [--warmup 1] [--window 2]
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import threading
import time
import tracemalloc
from dataclasses import dataclass
from pathlib import Path

from bpmon.runtime.job import Job
from bpmon.scenario import parse_scenario

PARALLELISMS = (1, 2, 4, 8, 16, 17)
MIB = 1024 * 1024


def scenario_toml(parallelism: int, task_managers: int) -> str:
    """A forward chain ``source -> map -> sink`` of ``parallelism`` subtasks per vertex."""
    return f"""
name = "bench-scale-{parallelism}"
[network]
task_managers = {task_managers}
[[operators]]
name = "source"
kind = "source"
parallelism = {parallelism}
rate = 0
record_bytes = 100
[[operators]]
name = "map"
kind = "map"
parallelism = {parallelism}
inputs = [{{ from = "source" }}]
[[operators]]
name = "sink"
kind = "sink"
parallelism = {parallelism}
inputs = [{{ from = "map" }}]
"""


@dataclass(frozen=True)
class Sample:
    """One throughput run of one configuration."""

    records_per_s: float
    threads: int
    segments_held: int
    segments_in_use: int
    remote_channels: int
    local_channels: int


def _segments(job: Job) -> tuple[int, int]:
    """Segments the task managers' pools hold, and those in use, summed."""
    with job.env.lock:
        held = sum(pool.total_segments for pool in job.env.pools)
        free = sum(pool.available_segments for pool in job.env.pools)
    return held, held - free


def _channels(job: Job) -> tuple[int, int]:
    """Remote and local input channels of the job."""
    kinds = [type(c).__name__ for g in job.env.gates for c in g.channels]
    remote = kinds.count("RemoteInputChannel")
    return remote, len(kinds) - remote


def _sink_total(job: Job) -> float:
    return sum(task.records_in.total for task in job.tasks["sink"])


def _stop(job: Job) -> None:
    result = job.stop()
    if result.state != "cancelled" or result.leaks:
        raise SystemExit(f"{job.name} ended {result.state}: {result.error}; leaks {result.leaks}")


def run_throughput(toml: str, warmup: float, window: float) -> Sample:
    """Run the job once: sink records/s over the window, threads and segments at its end."""
    job = Job(parse_scenario(toml, "bench_scale"))
    remote, local = _channels(job)
    job.start()
    try:
        time.sleep(warmup)
        first, start = _sink_total(job), time.perf_counter()
        time.sleep(window)
        last, end = _sink_total(job), time.perf_counter()
        threads = threading.active_count()
        held, in_use = _segments(job)
    finally:
        _stop(job)
    return Sample((last - first) / (end - start), threads, held, in_use, remote, local)


def _status_bytes(key: str) -> int:
    """A ``/proc/self/status`` memory figure (``VmRSS``, ``VmHWM``) in bytes."""
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith(f"{key}:"):
            return int(line.split()[1]) * 1024
    raise SystemExit(f"no {key} in /proc/self/status")


def run_memory(toml: str, seconds: float) -> tuple[float, float, float]:
    """Python allocation peak (MiB), peak RSS growth (MiB) and build time (s) of one run.

    Meant for a fresh process: ``VmHWM`` is the peak of the whole process.
    """
    before = _status_bytes("VmRSS")
    tracemalloc.start()
    try:
        built = time.perf_counter()
        job = Job(parse_scenario(toml, "bench_scale"))
        built = time.perf_counter() - built
        job.start()
        try:
            time.sleep(seconds)
        finally:
            _stop(job)
        python_peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    return python_peak / MIB, (_status_bytes("VmHWM") - before) / MIB, built


def memory_in_subprocess(p: int, seconds: float, task_managers: int) -> tuple[float, float, float]:
    """:func:`run_memory` of parallelism ``p`` in a fresh interpreter (its last output line)."""
    command = [sys.executable, __file__, "--memory-of", str(p), "--mem-run", str(seconds)]
    command += ["--task-managers", str(task_managers)]
    done = subprocess.run(command, capture_output=True, text=True, check=False, timeout=120)
    if done.returncode != 0:
        raise SystemExit(f"memory run of p={p} failed: {done.stderr.strip()}")
    python_peak, rss, built = json.loads(done.stdout.splitlines()[-1])
    return float(python_peak), float(rss), float(built)


def main() -> None:
    """Run both passes and print the table, then a JSON line."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--warmup", type=float, default=1.0)
    parser.add_argument("--window", type=float, default=2.0)
    parser.add_argument("--mem-run", type=float, default=1.5)
    parser.add_argument("--task-managers", type=int, default=3)
    parser.add_argument("--memory-of", type=int, help="internal: the memory run of one p")
    args = parser.parse_args()
    if args.memory_of is not None:
        toml = scenario_toml(args.memory_of, args.task_managers)
        print(json.dumps(run_memory(toml, args.mem_run)))
        return
    configs = {p: scenario_toml(p, args.task_managers) for p in PARALLELISMS}
    samples: dict[int, list[Sample]] = {p: [] for p in PARALLELISMS}
    for round_no in range(args.rounds):
        for p, toml in configs.items():
            samples[p].append(run_throughput(toml, args.warmup, args.window))
        print(
            f"round {round_no + 1}/{args.rounds}: "
            + ", ".join(f"p={p} {s[-1].records_per_s:,.0f} rec/s" for p, s in samples.items()),
            flush=True,
        )
    memory = {p: memory_in_subprocess(p, args.mem_run, args.task_managers) for p in configs}
    rows = [_row(p, samples[p], memory[p]) for p in PARALLELISMS]
    _print_table(rows)
    print(json.dumps({"configurations": rows, "rounds": args.rounds}))


def _row(p: int, runs: list[Sample], memory: tuple[float, float, float]) -> dict[str, float | int]:
    """The reported figures of one configuration (medians over the rounds)."""
    rate = statistics.median(s.records_per_s for s in runs)
    in_use = statistics.median(s.segments_in_use for s in runs)
    return {
        "parallelism": p,
        "subtasks": 3 * p,
        "remote_channels": runs[0].remote_channels,
        "local_channels": runs[0].local_channels,
        "sink_records_per_s": round(rate),
        "records_per_s_per_pipeline": round(rate / p),
        "threads": max(s.threads for s in runs),
        "segments_held": runs[0].segments_held,
        "segments_in_use": round(in_use),
        "segments_flink_mib": round(runs[0].segments_held * 32768 / MIB, 1),
        "python_peak_mib": round(memory[0], 1),
        "rss_delta_mib": round(memory[1], 1),
        "build_s": round(memory[2], 3),
    }


def _print_table(rows: list[dict[str, float | int]]) -> None:
    columns = [
        ("subtasks", "subtasks", ""),
        ("remote_channels", "remote ch", ""),
        ("sink_records_per_s", "sink rec/s", ","),
        ("records_per_s_per_pipeline", "per chain", ","),
        ("threads", "threads", ""),
        ("segments_held", "segs held", ""),
        ("segments_in_use", "segs used", ""),
        ("segments_flink_mib", "Flink MiB", ".1f"),
        ("python_peak_mib", "py peak MiB", ".1f"),
        ("rss_delta_mib", "HWM +MiB", ".1f"),
        ("build_s", "build s", ".3f"),
    ]
    print("\n" + "".join(f"{title:>13}" for _, title, _ in columns))
    for row in rows:
        print("".join(f"{format(row[key], fmt):>13}" for key, _, fmt in columns))


if __name__ == "__main__":
    main()
