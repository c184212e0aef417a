"""Why in-process sampling is late: a sleep-until-deadline loop beside busy Python threads.

A thread that sleeps until an absolute deadline (as bpmon's sampler does, 100 deadlines 50 ms
apart) must take the interpreter lock back when it wakes. Beside threads that run pure Python,
CPython hands the lock over every ``sys.getswitchinterval()`` (5 ms by default) to whichever
thread waits, not to the one whose deadline is due. The loop's lateness (p99 and median, each
against the earliest) beside 0, 1 and 6 busy threads, at the default switch interval and at
0.5 ms, side by side in one run. The last line is a JSON object of the figures.

    .venv/bin/python tests/benchmarks/bench_gil_lateness.py [--deadlines 100]
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import threading
import time

INTERVAL_S = 0.05
SWITCH_INTERVALS_S = (0.005, 0.0005)
BUSY_THREADS = (0, 1, 6)


def busy(stop: threading.Event) -> None:
    count = 0
    while not stop.is_set():
        count += 1


def lateness_ms(deadlines: int) -> tuple[float, float]:
    """p99 and median lateness of ``deadlines`` absolute deadlines, in ms."""
    late = []
    start = time.monotonic()
    for k in range(deadlines):
        deadline = start + k * INTERVAL_S
        remaining = deadline - time.monotonic()
        while remaining > 0:
            time.sleep(remaining)
            remaining = deadline - time.monotonic()
        late.append(time.monotonic() - deadline)
    base = min(late)
    ordered = sorted(x - base for x in late)
    return ordered[max(0, round(0.99 * len(ordered)) - 1)] * 1000, statistics.median(ordered) * 1000


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--deadlines", type=int, default=100)
    args = parser.parse_args()
    saved = sys.getswitchinterval()
    figures: dict[str, float] = {}
    try:
        for threads in BUSY_THREADS:
            for switch in SWITCH_INTERVALS_S:
                sys.setswitchinterval(switch)
                stop = threading.Event()
                workers = [threading.Thread(target=busy, args=(stop,)) for _ in range(threads)]
                for w in workers:
                    w.start()
                try:
                    p99, p50 = lateness_ms(args.deadlines)
                finally:
                    stop.set()
                    for w in workers:
                        w.join()
                key = f"busy_{threads}_switch_{switch * 1000:g}ms"
                figures[f"{key}_p99_ms"], figures[f"{key}_p50_ms"] = round(p99, 2), round(p50, 2)
                print(
                    f"{threads} busy thread(s), switch interval {switch * 1000:g} ms: lateness "
                    f"p99 {p99:.2f} ms, median {p50:.2f} ms",
                    flush=True,
                )
    finally:
        sys.setswitchinterval(saved)
    print(json.dumps(figures))


if __name__ == "__main__":
    main()
