"""Job throughput: a bpmon ``source -> map -> sink`` job against the same pipeline on queue.Queue.

Three stages, one thread each, 100-byte records, no service time, the source as fast as it can:

- ``bpmon``: a scenario job of parallelism 1 on two task managers; subtasks are placed round robin
  (source on 0, map on 1, sink on 0), so both exchanges go through credit-based remote channels
  (checked on the job's gates and printed). Flink's network defaults (32 KiB buffers, 100 ms
  buffer timeout);
- ``queue-per-record``: source, map and sink threads joined by bounded ``queue.Queue`` s (1,024
  slots) carrying one record per item;
- ``queue-batched``: the same with bounded queues (16 slots) carrying lists of 256 records.

The map stage of the queue pipelines takes what it gets and passes it on (a record, or a whole
list), as bpmon's map forwards its input records unchanged.

Each pipeline warms up (``--warmup`` s), then the records reaching the sink are counted over a
steady window (``--window`` s): for bpmon, the sink task's ``records_in`` meter total. The three run
interleaved, ``--rounds`` times, and the median of each is reported, so a noisy neighbour hurts all
alike. The last line is a JSON object of the figures.

    .venv/bin/python tests/benchmarks/bench_job.py [--rounds 5] [--warmup 1] [--window 3]
"""

from __future__ import annotations

import argparse
import json
import queue
import statistics
import threading
import time
from collections.abc import Callable

from bpmon.runtime.job import Job
from bpmon.scenario import parse_scenario

BATCH = 256
PUBLISH_EVERY = 1024
"""The per-record sink publishes its count every this many records (bpmon's meter: per buffer)."""

SCENARIO = """
name = "bench-job"
[network]
task_managers = 2
[[operators]]
name = "source"
kind = "source"
rate = 0
record_bytes = 100
slot_sharing_group = "ends"
[[operators]]
name = "map"
kind = "map"
record_bytes = 100
cost_us = 0
slot_sharing_group = "middle"
inputs = [{ from = "source" }]
[[operators]]
name = "sink"
kind = "sink"
cost_us = 0
slot_sharing_group = "ends"
inputs = [{ from = "map" }]
"""
"""Source and sink share a slot sharing group, the map has its own: the groups take slots 0 and
1, on task managers 0 and 1, so both exchanges cross task managers (in one group all three
would share slot 0 and every channel would be local)."""


def channel_kinds(job: Job) -> dict[str, list[str]]:
    """The class name of every input channel, by task name (the exchanges must be remote)."""
    return {
        task.name: [type(channel).__name__ for gate in task.gates for channel in gate.channels]
        for task in job.all_tasks()
        if task.gates
    }


def _steady_rate(count: Callable[[], float], warmup: float, window: float) -> float:
    """Records per second counted by ``count`` over ``window`` seconds after ``warmup``."""
    time.sleep(warmup)
    first, start = count(), time.perf_counter()
    time.sleep(window)
    last, end = count(), time.perf_counter()
    return (last - first) / (end - start)


def run_bpmon(warmup: float, window: float) -> tuple[float, dict[str, list[str]]]:
    """Sink records per second of the bpmon job, and its channel kinds."""
    job = Job(parse_scenario(SCENARIO, "bench_job"))
    kinds = channel_kinds(job)
    sink = job.tasks["sink"][0]
    job.start()
    try:
        rate = _steady_rate(lambda: sink.records_in.total, warmup, window)
    finally:
        result = job.stop()
    if result.state != "cancelled" or result.leaks:
        raise SystemExit(f"bpmon job ended {result.state}: {result.error}; leaks {result.leaks}")
    return rate, kinds


def _run_stages(
    stages: list[Callable[[], None]],
    stop: threading.Event,
    seen: list[int],
    warmup: float,
    window: float,
) -> float:
    """Run the stage threads, measure the steady rate of ``seen[0]``, stop and join them."""
    threads = [threading.Thread(target=stage, daemon=True) for stage in stages]
    for thread in threads:
        thread.start()
    try:
        rate = _steady_rate(lambda: seen[0], warmup, window)
    finally:
        stop.set()
        for thread in threads:
            thread.join(timeout=10)
    if any(thread.is_alive() for thread in threads):
        raise SystemExit("a queue pipeline thread did not stop")
    return rate


def run_queue_per_record(warmup: float, window: float) -> float:
    """Sink records per second of three threads joined by queues of one record per item."""
    first: queue.Queue[int | None] = queue.Queue(maxsize=1024)
    second: queue.Queue[int | None] = queue.Queue(maxsize=1024)
    stop, seen = threading.Event(), [0]

    def source() -> None:
        i = 0
        while not stop.is_set():
            for _ in range(PUBLISH_EVERY):
                first.put(i)
                i += 1
        first.put(None)

    def mapper() -> None:
        while (record := first.get()) is not None:
            second.put(record)
        second.put(None)

    def sink() -> None:
        count = 0
        while second.get() is not None:
            count += 1
            if count % PUBLISH_EVERY == 0:
                seen[0] = count

    return _run_stages([source, mapper, sink], stop, seen, warmup, window)


def run_queue_batched(warmup: float, window: float) -> float:
    """Sink records per second of three threads joined by queues of 256-record lists."""
    first: queue.Queue[list[int] | None] = queue.Queue(maxsize=16)
    second: queue.Queue[list[int] | None] = queue.Queue(maxsize=16)
    stop, seen = threading.Event(), [0]

    def source() -> None:
        i = 0
        while not stop.is_set():
            batch: list[int] = []
            for _ in range(BATCH):
                batch.append(i)
                i += 1
            first.put(batch)
        first.put(None)

    def mapper() -> None:
        while (batch := first.get()) is not None:
            second.put(batch)
        second.put(None)

    def sink() -> None:
        count = 0
        while (batch := second.get()) is not None:
            for _record in batch:
                count += 1
            seen[0] = count

    return _run_stages([source, mapper, sink], stop, seen, warmup, window)


def main() -> None:
    """Run the three side by side and print the figures, then a JSON line."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--warmup", type=float, default=1.0)
    parser.add_argument("--window", type=float, default=3.0)
    args = parser.parse_args()
    results: dict[str, list[float]] = {"bpmon": [], "queue-per-record": [], "queue-batched": []}
    kinds: dict[str, list[str]] = {}
    for round_no in range(args.rounds):
        rate, kinds = run_bpmon(args.warmup, args.window)
        results["bpmon"].append(rate)
        results["queue-per-record"].append(run_queue_per_record(args.warmup, args.window))
        results["queue-batched"].append(run_queue_batched(args.warmup, args.window))
        print(
            f"round {round_no + 1}/{args.rounds}: "
            + ", ".join(f"{k} {v[-1]:,.0f} rec/s" for k, v in results.items()),
            flush=True,
        )
    remote = all(k == "RemoteInputChannel" for channels in kinds.values() for k in channels)
    print("\nbpmon input channels: " + "; ".join(f"{t}: {', '.join(c)}" for t, c in kinds.items()))
    print(f"every exchange remote: {remote}")
    median = {name: statistics.median(values) for name, values in results.items()}
    vs_record = median["bpmon"] / median["queue-per-record"]
    vs_batched = median["bpmon"] / median["queue-batched"]
    per_round = {
        name: statistics.median(b / q for b, q in zip(results["bpmon"], results[name], strict=True))
        for name in ("queue-per-record", "queue-batched")
    }
    print(f"\n{'pipeline':<18}{'sink records/s (median)':>25}{'min':>13}{'max':>13}")
    for name, values in results.items():
        print(f"{name:<18}{median[name]:>25,.0f}{min(values):>13,.0f}{max(values):>13,.0f}")
    print(f"\nbpmon / queue-per-record = {vs_record:.2f}x (target >= 5x): ", end="")
    print("met" if vs_record >= 5 else "NOT met")
    print(f"bpmon / queue-batched    = {vs_batched:.2f}x (target >= 0.4x): ", end="")
    print("met" if vs_batched >= 0.4 else "NOT met")
    by_record, by_batch = per_round["queue-per-record"], per_round["queue-batched"]
    print(f"median of the per-round ratios: {by_record:.2f}x per-record, {by_batch:.2f}x batched")
    print(
        json.dumps(
            {
                "bpmon_records_per_s": round(median["bpmon"]),
                "queue_per_record_records_per_s": round(median["queue-per-record"]),
                "queue_batched_records_per_s": round(median["queue-batched"]),
                "ratio_vs_queue_per_record": round(vs_record, 2),
                "ratio_vs_queue_batched": round(vs_batched, 2),
                "per_round_ratio_vs_queue_per_record": round(by_record, 2),
                "per_round_ratio_vs_queue_batched": round(by_batch, 2),
                "exchanges_remote": remote,
                "rounds": args.rounds,
            }
        )
    )


if __name__ == "__main__":
    main()
