"""Network stack throughput: bpmon's credit-based remote channel against queue.Queue hand-offs.

One producer thread sends 100-byte records to one consumer thread:

- ``bpmon``: through a result partition on task manager 0, a credit-based connection and a remote
  input channel on task manager 1 (Flink's defaults: 32 KiB buffers, 2 exclusive + 8 floating);
- ``queue-per-record``: a bounded ``queue.Queue`` (1,024 slots) carrying each record;
- ``queue-batched``: a bounded ``queue.Queue`` (16 slots) carrying lists of 256 records;
- ``bpmon-batched``: bpmon again, the producer handing lists of 256 records to ``write_all`` (the
  path the task loop takes for a whole input buffer), for a like-for-like view of ``queue-batched``.

The three run interleaved, ``--rounds`` times, and the median of each is reported, so a noisy
neighbour hurts all three alike. The last line is a JSON object of the figures.

    .venv/bin/python tests/benchmarks/bench_network.py [--records 2000000] [--rounds 5]
"""

from __future__ import annotations

import argparse
import json
import queue
import statistics
import threading
import time
from collections.abc import Callable

from bpmon.runtime.buffers import Buffer
from bpmon.runtime.network import NetworkEnvironment
from bpmon.scenario import NetworkConfig

RECORD_BYTES = 100
BATCH = 256


def _timed(producer: Callable[[], None], consumer: Callable[[], None]) -> float:
    threads = [threading.Thread(target=producer), threading.Thread(target=consumer)]
    start = time.perf_counter()
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return time.perf_counter() - start


def run_bpmon(records: int, batched: bool = False) -> float:
    """Records per second over a remote credit-based channel (``batched``: lists of 256)."""
    env = NetworkEnvironment(NetworkConfig(task_managers=2, flow_control="credit"))
    partition = env.create_partition(0, 1, "producer")
    gate = env.create_gate(1, [(partition, 0)], "consumer")
    received = 0

    def produce() -> None:
        emit = partition.channel_writer(RECORD_BYTES, 0)
        for i in range(records):
            emit(i)
        partition.finish()

    def produce_batches() -> None:
        write_all = partition.write_all
        batch: list[object] = []
        for i in range(records):
            batch.append(i)
            if len(batch) == BATCH:
                write_all(batch, RECORD_BYTES, 0)
                batch = []
        write_all(batch, RECORD_BYTES, 0)
        partition.finish()

    def consume() -> None:
        nonlocal received
        count, done = 0, None
        lock, condition = env.lock, gate.condition
        while True:
            with lock:
                if done is not None:
                    done.recycle()
                polled = gate.poll_next()
                while polled is None:
                    condition.wait()
                    polled = gate.poll_next()
            item = polled[0]
            if isinstance(item, Buffer):
                for _record in item.records:
                    count += 1
                done = item
            else:
                done = None
                if gate.is_finished:
                    break
        received = count

    elapsed = _timed(produce_batches if batched else produce, consume)
    env.shutdown()
    if received != records or env.leaks():
        raise SystemExit(f"bpmon lost records ({received}/{records}) or leaked: {env.leaks()}")
    return records / elapsed


def run_queue_per_record(records: int) -> float:
    """Records per second through a bounded queue.Queue, one record per item."""
    channel: queue.Queue[int | None] = queue.Queue(maxsize=1024)

    def produce() -> None:
        for i in range(records):
            channel.put(i)
        channel.put(None)

    def consume() -> None:
        count = 0
        while channel.get() is not None:
            count += 1

    return records / _timed(produce, consume)


def run_queue_batched(records: int) -> float:
    """Records per second through a bounded queue.Queue carrying lists of 256 records."""
    channel: queue.Queue[list[int] | None] = queue.Queue(maxsize=16)

    def produce() -> None:
        batch: list[int] = []
        for i in range(records):
            batch.append(i)
            if len(batch) == BATCH:
                channel.put(batch)
                batch = []
        channel.put(batch)
        channel.put(None)

    def consume() -> None:
        count = 0
        while (batch := channel.get()) is not None:
            for _record in batch:
                count += 1

    return records / _timed(produce, consume)


def main() -> None:
    """Run the three side by side and print the figures, then a JSON line."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--records", type=int, default=2_000_000)
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()
    results: dict[str, list[float]] = {
        "bpmon": [],
        "bpmon-batched": [],
        "queue-per-record": [],
        "queue-batched": [],
    }
    for round_no in range(args.rounds):
        results["queue-per-record"].append(run_queue_per_record(args.records // 6))
        results["bpmon"].append(run_bpmon(args.records))
        results["queue-batched"].append(run_queue_batched(args.records))
        results["bpmon-batched"].append(run_bpmon(args.records, batched=True))
        print(
            f"round {round_no + 1}/{args.rounds}: "
            + ", ".join(f"{k} {v[-1]:,.0f} rec/s" for k, v in results.items()),
            flush=True,
        )
    median = {name: statistics.median(values) for name, values in results.items()}
    vs_record = median["bpmon"] / median["queue-per-record"]
    vs_batched = median["bpmon"] / median["queue-batched"]
    batched_vs_batched = median["bpmon-batched"] / median["queue-batched"]
    print(f"\n{'pipeline':<18}{'records/s (median)':>20}")
    for name, value in median.items():
        print(f"{name:<18}{value:>20,.0f}")
    print(f"\nbpmon / queue-per-record = {vs_record:.2f}x (target >= 6x)")
    print(f"bpmon / queue-batched    = {vs_batched:.2f}x (target >= 0.5x)")
    print(f"bpmon-batched / queue-batched = {batched_vs_batched:.2f}x (both batch 256 records)")
    print(
        json.dumps(
            {
                "bpmon_records_per_s": round(median["bpmon"]),
                "queue_per_record_records_per_s": round(median["queue-per-record"]),
                "queue_batched_records_per_s": round(median["queue-batched"]),
                "ratio_vs_queue_per_record": round(vs_record, 2),
                "ratio_vs_queue_batched": round(vs_batched, 2),
                "bpmon_batched_records_per_s": round(median["bpmon-batched"]),
                "batched_ratio_vs_queue_batched": round(batched_vs_batched, 2),
            }
        )
    )


if __name__ == "__main__":
    main()
