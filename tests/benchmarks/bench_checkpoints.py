"""Checkpoints behind backpressure and their remedies, and overdraft buffers (FLIP-227), measured.

**Remedies** (``--part remedies``): the shipped ``checkpoint-timeouts`` example (aligned
checkpoints every second behind enrich, a slow operator after a hash exchange; a 4 s timeout
they all miss) as written, with no timeout (the barriers' real wait), and with each remedy the
report names: bpmon's parallelism (``enrich.parallelism=5``), unaligned checkpoints, unaligned with
a 1 s aligned timeout, and buffer debloating (with no timeout, to see its duration). Each runs
``--remedy-duration`` seconds, interleaved, ``--rounds`` times; only checkpoints triggered after
the first 6 s count (the queues are full by then). Per configuration: completed and failed
checkpoints, the duration and the longest start delay (p50, p95), the in-flight data stored, and
the sink's records/s (debloating must keep the throughput). The ratios compare each remedy's
start delay with the barriers' real wait.

**Overdraft** (``--part overdraft``): unaligned checkpoints with and without overdraft buffers,
FLIP-227's test plan.

A ``source -> flatmap -> sink`` job (parallelism 1, two task managers, so both exchanges are
remote): the flatmap emits 8 records of 12,000 bytes per input record, so each input record needs
3 buffers of 32 KiB, into a slow sink (``--sink-cost-us``, 5,000 by default: 200 records/s).
Unaligned checkpoints every second. The flatmap is backpressured; without overdraft buffers
(``max_overdraft_buffers_per_gate = 0``) it blocks in the buffer request in the middle of a record
(hard backpressure), where it cannot take the barrier; with 5 overdraft buffers it finishes the
record and only waits between records (soft backpressure), where the barrier overtakes the data.

bpmon checks output availability once per chunk of input records, and the chunk is
``min(64, 2 ms / cost)`` records (256 without service time): ``flatmap cost 2000 us`` makes it one
record per check, as Flink checks per record, which is the case FLIP-227 is about. The second
variant, ``flatmap cost 0 us``, shows what chunked processing does to the same job (a chunk of 256
input records is 768 buffers: overdraft cannot cover it).

Each (variant, overdraft) runs ``--duration`` seconds, interleaved, ``--rounds`` times; the
checkpoints of all rounds are pooled for the percentiles; the flatmap's hard-backpressured ms/s is
the median of samples taken every 0.5 s after a 1 s warm-up. The last line is a JSON object.

    .venv/bin/python tests/benchmarks/bench_checkpoints.py [--part all|remedies|overdraft]
        [--rounds 3] [--duration 9] [--remedy-duration 20]
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from dataclasses import dataclass, field

from bpmon.runtime.job import Job
from bpmon.runtime.metrics import job_metrics
from bpmon.scenario import Scenario, load_example, parse_scenario
from bpmon.scenario.edits import changed, parse_change

OVERDRAFTS = (0, 5)
FLATMAP_COSTS_US = (2000, 0)
WARMUP_S = 1.0
SAMPLE_S = 0.5


def scenario_toml(overdraft: int, flatmap_cost_us: int, sink_cost_us: int) -> str:
    """The job: a fanout-8 flatmap of 12,000-byte records into a slow sink, unaligned."""
    return f"""
name = "bench-checkpoints"
[network]
segment_size = 32768
max_overdraft_buffers_per_gate = {overdraft}
task_managers = 2
[checkpoints]
interval_ms = 1000
mode = "unaligned"
[[operators]]
name = "source"
kind = "source"
rate = 0
record_bytes = 100
[[operators]]
name = "flatmap"
kind = "flatmap"
fanout = 8
record_bytes = 12000
cost_us = {flatmap_cost_us}
inputs = [{{ from = "source" }}]
[[operators]]
name = "sink"
kind = "sink"
cost_us = {sink_cost_us}
inputs = [{{ from = "flatmap" }}]
"""


@dataclass
class Figures:
    """What the runs of one (flatmap cost, overdraft) configuration measured, pooled."""

    durations_s: list[float] = field(default_factory=list)
    in_flight_bytes: list[int] = field(default_factory=list)
    hard_bp: list[float] = field(default_factory=list)
    soft_bp: list[float] = field(default_factory=list)
    sink_rate: list[float] = field(default_factory=list)
    max_overdraft_in_use: int = 0
    runs: int = 0


def run_once(figures: Figures, toml: str, duration: float) -> None:
    """Run the job for ``duration`` seconds, sampling the flatmap, and add to ``figures``."""
    job = Job(parse_scenario(toml, "bench_checkpoints"))
    job.start()
    try:
        end = time.monotonic() + duration
        time.sleep(WARMUP_S)
        while time.monotonic() < end:
            metrics = job_metrics(job.tasks)
            flatmap = metrics["flatmap"][0]
            figures.hard_bp.append(flatmap.hard_backpressured_ms_per_s)
            figures.soft_bp.append(flatmap.soft_backpressured_ms_per_s)
            figures.sink_rate.append(metrics["sink"][0].records_in_per_s)
            figures.max_overdraft_in_use = max(
                figures.max_overdraft_in_use, flatmap.overdraft_buffers
            )
            time.sleep(min(SAMPLE_S, max(0.0, end - time.monotonic())))
    finally:
        result = job.stop()
    if result.state != "cancelled" or result.leaks:
        raise SystemExit(f"job ended {result.state}: {result.error}; leaks {result.leaks}")
    figures.runs += 1
    figures.durations_s += [c.duration_s for c in result.checkpoints]
    figures.in_flight_bytes += [c.in_flight_bytes for c in result.checkpoints]


def percentile(values: list[float], pct: int) -> float | None:
    """The ``pct``-th percentile (inclusive interpolation), None without values."""
    if not values:
        return None
    if len(values) == 1:
        return values[0]
    return statistics.quantiles(values, n=100, method="inclusive")[pct - 1]


def summary(figures: Figures) -> dict[str, float | int | None]:
    """The reported figures of one configuration (times in ms)."""
    p50, p95 = percentile(figures.durations_s, 50), percentile(figures.durations_s, 95)
    in_flight = percentile([float(b) for b in figures.in_flight_bytes], 50)
    return {
        "checkpoints": len(figures.durations_s),
        "runs": figures.runs,
        "duration_p50_ms": None if p50 is None else round(p50 * 1000, 1),
        "duration_p95_ms": None if p95 is None else round(p95 * 1000, 1),
        "in_flight_bytes_p50": None if in_flight is None else round(in_flight),
        "flatmap_hard_bp_ms_per_s": round(statistics.median(figures.hard_bp), 1),
        "flatmap_soft_bp_ms_per_s": round(statistics.median(figures.soft_bp), 1),
        "flatmap_max_overdraft_in_use": figures.max_overdraft_in_use,
        "sink_records_per_s": round(statistics.median(figures.sink_rate), 1),
    }


def _show(value: float | int | None, fmt: str = ",.1f") -> str:
    return "-" if value is None else format(value, fmt)


def print_table(rows: dict[str, dict[str, float | int | None]]) -> None:
    """One line per configuration."""
    print(
        f"\n{'configuration':<30}{'ckpts':>6}{'p50 ms':>9}{'p95 ms':>9}{'in-flight p50 B':>17}"
        f"{'hard bp ms/s':>14}{'soft bp ms/s':>14}{'overdraft max':>15}{'sink rec/s':>12}"
    )
    for name, row in rows.items():
        print(
            f"{name:<30}{row['checkpoints']:>6}{_show(row['duration_p50_ms']):>9}"
            f"{_show(row['duration_p95_ms']):>9}{_show(row['in_flight_bytes_p50'], ',.0f'):>17}"
            f"{_show(row['flatmap_hard_bp_ms_per_s']):>14}"
            f"{_show(row['flatmap_soft_bp_ms_per_s']):>14}"
            f"{row['flatmap_max_overdraft_in_use']:>15}{_show(row['sink_records_per_s']):>12}"
        )


def ratio(rows: dict[str, dict[str, float | int | None]], cost: int, key: str) -> float | None:
    """``key`` without overdraft over ``key`` with 5 overdraft buffers, for one flatmap cost."""
    without = rows[f"flatmap {cost} us, overdraft 0"][key]
    with_ = rows[f"flatmap {cost} us, overdraft 5"][key]
    if without is None or with_ is None or with_ == 0:
        return None
    return round(without / with_, 2)


REMEDIES = {
    "as written (4 s timeout)": (),
    "no timeout": ("checkpoints.timeout_ms=600000",),
    "enrich.parallelism=5": ("enrich.parallelism=5",),
    "unaligned": ("checkpoints.mode=unaligned",),
    "unaligned, aligned timeout 1 s": (
        "checkpoints.mode=unaligned",
        "checkpoints.aligned_timeout_ms=1000",
    ),
    "debloat, no timeout": ("network.debloat=true", "checkpoints.timeout_ms=600000"),
}
"""The configurations of the remedies part: --set changes to the shipped example."""
REMEDY_FROM_S = 6.0
"""Checkpoints triggered before this are left out: the queues fill during the first seconds."""


@dataclass
class RemedyFigures:
    """What the runs of one remedy measured, pooled."""

    completed: int = 0
    failed: int = 0
    durations_ms: list[float] = field(default_factory=list)
    start_delays_ms: list[float] = field(default_factory=list)
    persisted: list[float] = field(default_factory=list)
    sink_rate: list[float] = field(default_factory=list)


def run_remedy(figures: RemedyFigures, scenario: Scenario, duration: float) -> None:
    """Run the job ``duration`` seconds and add its checkpoints after the first seconds."""
    job = Job(scenario)
    job.start()
    try:
        end = time.monotonic() + duration
        time.sleep(REMEDY_FROM_S)
        while time.monotonic() < end:
            sink = job_metrics(job.tasks)["sink"]
            figures.sink_rate.append(sum(m.records_in_per_s for m in sink))
            time.sleep(min(SAMPLE_S, max(0.0, end - time.monotonic())))
        started = job.coordinator.outcomes if job.coordinator is not None else ()
        first = min((o.triggered_at for o in started), default=0.0)
        outcomes = [o for o in started if o.triggered_at - first >= REMEDY_FROM_S - 1.5]
    finally:
        result = job.stop()
    if result.state != "cancelled" or result.leaks:
        raise SystemExit(f"job ended {result.state}: {result.error}; leaks {result.leaks}")
    for o in outcomes:
        if o.failure is not None:
            figures.failed += 1
            continue
        figures.completed += 1
        figures.durations_ms.append(o.duration_s * 1000)
        figures.start_delays_ms.append(max(a.start_delay_s for a in o.acked) * 1000)
        figures.persisted.append(float(o.in_flight_bytes))


def remedy_summary(f: RemedyFigures) -> dict[str, float | int | None]:
    """One remedy's row (times in ms)."""

    def pct(values: list[float], p: int) -> float | None:
        value = percentile(values, p)
        return None if value is None else round(value, 1)

    return {
        "completed": f.completed,
        "failed": f.failed,
        "duration_p50_ms": pct(f.durations_ms, 50),
        "duration_p95_ms": pct(f.durations_ms, 95),
        "start_delay_p50_ms": pct(f.start_delays_ms, 50),
        "start_delay_p95_ms": pct(f.start_delays_ms, 95),
        "persisted_bytes_p50": pct(f.persisted, 50),
        "sink_records_per_s": round(statistics.median(f.sink_rate), 1) if f.sink_rate else None,
    }


def remedies(rounds: int, duration: float) -> dict[str, object]:
    """The remedies part: run, print the table and the ratios, return the figures."""
    base = load_example("checkpoint-timeouts")
    scenarios = {
        name: changed(base, [parse_change(c) for c in sets]) if sets else base
        for name, sets in REMEDIES.items()
    }
    figures = {name: RemedyFigures() for name in scenarios}
    for round_no in range(rounds):
        for name, scenario in scenarios.items():
            run_remedy(figures[name], scenario, duration)
            print(f"round {round_no + 1}/{rounds}: {name}: {remedy_summary(figures[name])}")
    rows = {name: remedy_summary(f) for name, f in figures.items()}
    print(
        f"\n{'configuration':<32}{'done':>5}{'failed':>7}{'p50 ms':>9}{'p95 ms':>9}"
        f"{'start p50':>10}{'start p95':>10}{'in flight B':>12}{'sink rec/s':>11}"
    )
    for name, row in rows.items():
        print(
            f"{name:<32}{row['completed']:>5}{row['failed']:>7}{_show(row['duration_p50_ms']):>9}"
            f"{_show(row['duration_p95_ms']):>9}{_show(row['start_delay_p50_ms']):>10}"
            f"{_show(row['start_delay_p95_ms']):>10}{_show(row['persisted_bytes_p50'], ',.0f'):>12}"
            f"{_show(row['sink_records_per_s']):>11}"
        )
    wait = rows["no timeout"]["start_delay_p50_ms"]
    ratios: dict[str, float | None] = {}
    for name, row in rows.items():
        cut = row["start_delay_p50_ms"]
        if name != "no timeout" and wait and cut:
            ratios[f"start delay, no timeout / {name}"] = round(float(wait) / float(cut), 2)
    sink, debloated = (
        rows["no timeout"]["sink_records_per_s"],
        rows["debloat, no timeout"]["sink_records_per_s"],
    )
    if sink and debloated:
        ratios["sink rate, debloat / no timeout"] = round(float(debloated) / float(sink), 3)
    print()
    for name, value in ratios.items():
        print(f"{name} = {_show(value, '.2f')}x")
    return {"configurations": rows, "ratios": ratios, "duration_s": duration}


def overdraft(args: argparse.Namespace) -> dict[str, object]:
    """The overdraft part: run, print the table and the ratios, return the figures."""
    configs = {
        f"flatmap {cost} us, overdraft {od}": scenario_toml(od, cost, args.sink_cost_us)
        for cost in FLATMAP_COSTS_US
        for od in OVERDRAFTS
    }
    figures = {name: Figures() for name in configs}
    for round_no in range(args.rounds):
        for name, toml in configs.items():
            run_once(figures[name], toml, args.duration)
            print(f"round {round_no + 1}/{args.rounds}: {name}: {summary(figures[name])}")
    rows = {name: summary(f) for name, f in figures.items()}
    print_table(rows)
    ratios = {}
    for cost in FLATMAP_COSTS_US:
        for key in ("duration_p50_ms", "duration_p95_ms"):
            ratios[f"flatmap_{cost}us_{key}_ratio_od0_over_od5"] = ratio(rows, cost, key)
    print()
    for name, value in ratios.items():
        print(f"{name} = {_show(value, '.2f')}x")
    return {"configurations": rows, "ratios": ratios, "duration_s": args.duration}


def main() -> None:
    """Run the parts asked for and print their tables and ratios, then a JSON line."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--part", choices=("all", "remedies", "overdraft"), default="all")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--duration", type=float, default=9.0)
    parser.add_argument("--remedy-duration", type=float, default=20.0)
    parser.add_argument("--sink-cost-us", type=int, default=5000)
    args = parser.parse_args()
    out: dict[str, object] = {}
    if args.part in ("all", "remedies"):
        out["remedies"] = remedies(args.rounds, args.remedy_duration)
    if args.part in ("all", "overdraft"):
        out["overdraft"] = overdraft(args)
    print(json.dumps(out))


if __name__ == "__main__":
    main()
