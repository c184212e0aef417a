"""Sampling overhead: a busy bpmon job's throughput under continuous stack sampling against none.

The job: ``source`` (as fast as it can) -> ``map`` (no service time) -> ``sink``, parallelism 2 on
two task managers: six task threads that keep the interpreter busy. The samplers, each against no
sampling, and a control:

- ``in-process``: a thread in the job's process runs :class:`StackSampler` bursts (100 samples,
  50 ms apart) back to back, with the ``bpmon-runtime`` profile: the stacks alone;
- ``runtime``: the same thread runs :meth:`RuntimeTarget.observe` windows back to back, as
  ``bpmon run`` and ``bpmon serve`` do: the stacks, the channel readings after one sample in
  five (20 a burst), the window's metrics;
- ``runtime-every``: the same with a channel reading after every sample, as bpmon did before
  (the alternative, side by side);
- ``py-spy``: the job runs in a child process (``python -c``) and :class:`PySpySampler` samples it
  from outside (one ``py-spy dump --nonblocking`` per sample, 50 ms apart), as ``bpmon monitor``
  does;
- ``control``: the same job and windows with no sampler at all (an A/A test): the spread of its
  ratios is the noise floor of this measurement on this machine.

Throughput is the sink's records per second over alternating windows of one job: off, on, off,
..., off. The windows are short (0.5 s), so the neighbours of a window share its machine load;
py-spy gets 2.5 s windows, as each of its bursts starts with a warm-up dump. Each "on" window is
compared with the mean of the "off" windows on either side (which cancels a slow drift);
``--rounds`` fresh jobs of each kind run interleaved, and the median of all ratios is reported
with its interquartile range. On a shared two-core machine the noise is several percent (see the
control), so the sampler's own cost is also measured directly: its CPU time (the sampler
thread's; for py-spy, plus the dump processes') per sample and as a share of one core over the
sampled windows. In a GIL-bound job, the in-process share is about the throughput it takes.
The in-process kinds' CPU per sample is the sampling thread's CPU time from each burst's first
sample to its last, over the samples in between: a sample with whatever follows it (the channel
readings), without what a window does once (the runtime's window metrics; their cost shows in
the CPU share, which the 0.5 s windows, a tenth of a burst, overstate tenfold for ``runtime``).
Also reported: samples achieved per second (20 planned) and each burst's jitter p99 (how late
samples were against their 50 ms grid; median and worst burst). Each round runs every kind once,
in turn, so the kinds share the machine's load; ``--kinds`` picks some. ``--beside N`` runs N
more copies of the job in the same process, never sampled, as ``bpmon serve`` runs every watched
job in one process. The last line is a JSON object of the figures.

    .venv/bin/python tests/benchmarks/bench_sampling.py [--rounds 3] [--pairs 20] [--window 0.5]
        [--kinds in-process,runtime,runtime-every,py-spy,control] [--beside 0]
"""

from __future__ import annotations

import argparse
import json
import resource
import statistics
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import NamedTuple

from bpmon.collectors.inprocess import RuntimeTarget
from bpmon.collectors.profile import load_profile
from bpmon.collectors.pyspy.dumps import PySpySampler
from bpmon.collectors.sampler import Progress, StackSampler
from bpmon.model.errors import CollectorError
from bpmon.runtime.job import Job
from bpmon.scenario import parse_scenario

SAMPLES = 100
INTERVAL_MS = 50.0

SCENARIO = """
name = "bench-sampling"
[network]
task_managers = 2
[[operators]]
name = "source"
kind = "source"
parallelism = 2
rate = 0
[[operators]]
name = "map"
kind = "map"
parallelism = 2
cost_us = 0
inputs = [{ from = "source" }]
[[operators]]
name = "sink"
kind = "sink"
parallelism = 2
cost_us = 0
inputs = [{ from = "map" }]
"""

CHILD = """
import sys, time
from bpmon.runtime.job import Job
from bpmon.scenario import parse_scenario
job = Job(parse_scenario(sys.argv[1], "bench_sampling"))
sinks = job.tasks["sink"]
job.start()
try:
    print("ready", flush=True)
    for line in sys.stdin:
        if line.strip() != "mark":
            break
        print(time.perf_counter(), sum(t.records_in.total for t in sinks), flush=True)
finally:
    job.stop()
"""
"""The job in a child process: one line ``seconds records`` (the sink's total) per ``mark``."""

Count = Callable[[], tuple[float, float]]
"""Returns (seconds, records that reached the sink so far)."""


class Taken(NamedTuple):
    """What one burst took: its samples, and their jitter p99 (ms; None when it took none)."""

    samples: int
    jitter_ms_p99: float | None


BurstFn = Callable[[threading.Event, Progress], Taken]
"""Takes one burst, calling back after each sample, ending early once the event is set."""

Round = Callable[["Tally", int, float, "Setup"], list[float]]
"""One fresh job: (tally, pairs, window seconds, setup) -> its unsampled rates."""


@dataclass(frozen=True)
class Setup:
    """How each job runs: ``warmup`` seconds before the first window; ``beside`` more copies of
    the job in the same process, never sampled (``bpmon serve --run`` with several jobs)."""

    warmup: float = 1.0
    beside: int = 0


@dataclass
class Tally:
    """What one sampler did over all its "on" windows."""

    ratios: list[float] = field(default_factory=list)
    jitters_ms: list[float] = field(default_factory=list)
    samples: int = 0
    cpu_s: float = 0.0
    on_s: float = 0.0
    failed_bursts: int = 0
    between_cpu_s: float = 0.0  # the sampling thread's, from each burst's first sample to its last
    between: int = 0  # samples taken in those spans


class SampleSpan:
    """A burst's progress callback: the sampling thread's CPU time from its first sample to its
    last, so a sample's cost (with whatever follows it, such as channel readings) is measured
    apart from what a burst does once, before and after."""

    def __init__(self) -> None:
        self.first = self.last = 0.0
        self.calls = 0

    def __call__(self, done: int, planned: int) -> None:
        self.last = time.thread_time()
        if not self.calls:
            self.first = self.last
        self.calls += 1


class BackToBack:
    """Runs bursts back to back in a thread until stopped (the continuous sampling of a monitor)."""

    def __init__(self, burst: BurstFn, tally: Tally) -> None:
        self._burst = burst
        self._tally = tally
        self._stop = threading.Event()
        self._error: Exception | None = None
        self._thread = threading.Thread(target=self._run, name="bench-sampler", daemon=True)

    def __enter__(self) -> BackToBack:
        self._thread.start()
        return self

    def __exit__(self, *_: object) -> None:
        self._stop.set()
        self._thread.join(timeout=30)
        if self._thread.is_alive():
            raise SystemExit("the sampler thread did not stop")
        if self._error is not None:
            raise SystemExit(f"the sampler failed: {self._error}")

    def _run(self) -> None:
        started = time.thread_time()
        try:
            while not self._stop.is_set():
                span = SampleSpan()
                try:
                    burst = self._burst(self._stop, span)
                except CollectorError:  # a torn read of a busy target: the next burst retries
                    self._tally.failed_bursts += 1
                    continue
                if span.calls >= 2:
                    self._tally.between_cpu_s += span.last - span.first
                    self._tally.between += span.calls - 1
                self._tally.samples += burst.samples
                if burst.jitter_ms_p99 is not None and burst.samples >= 10:
                    self._tally.jitters_ms.append(burst.jitter_ms_p99)
        except Exception as err:  # reported by __exit__: a window without sampling is no result
            self._error = err
        finally:
            self._tally.cpu_s += time.thread_time() - started


def rate_over(count: Count, window: float) -> float:
    """Records per second reaching the sink over ``window`` seconds."""
    t0, c0 = count()
    time.sleep(window)
    t1, c1 = count()
    return (c1 - c0) / (t1 - t0)


def alternate(count: Count, burst: BurstFn, tally: Tally, pairs: int, window: float) -> list[float]:
    """Off, on, off, ... windows; each on window's rate over the mean of its two neighbours.

    Returns the rates of the "off" windows (the job's unsampled throughput).
    """
    rates = []
    for i in range(2 * pairs + 1):
        if i % 2:
            started = time.perf_counter()
            with BackToBack(burst, tally):
                rates.append(rate_over(count, window))
            tally.on_s += time.perf_counter() - started
        else:
            rates.append(rate_over(count, window))
    tally.ratios += [
        rates[i] / ((rates[i - 1] + rates[i + 1]) / 2) for i in range(1, len(rates), 2)
    ]
    return rates[::2]


def idle_burst(stop: threading.Event, _: Progress) -> Taken:
    """No sampling at all: wait for the window's end (the "on" windows of the control)."""
    stop.wait()
    return Taken(0, None)


def in_process_round(tally: Tally, pairs: int, window: float, setup: Setup) -> list[float]:
    """One fresh job in this process, sampled by a StackSampler thread; its unsampled rates."""
    sampler = StackSampler(load_profile("bpmon-runtime"))

    def burst(stop: threading.Event, progress: Progress) -> Taken:
        taken = sampler.burst(SAMPLES, INTERVAL_MS, progress, stop)
        return Taken(taken.samples, taken.jitter_ms_p99)

    return _local_job(lambda _: burst, tally, pairs, window, setup)


def runtime_round(tally: Tally, pairs: int, window: float, setup: Setup) -> list[float]:
    """One fresh job watched by a RuntimeTarget (channel readings after one sample in five)."""
    return _local_job(_observing, tally, pairs, window, setup)


def runtime_every_round(tally: Tally, pairs: int, window: float, setup: Setup) -> list[float]:
    """The same, with a channel reading after every sample (as bpmon did before)."""

    def observing(job: Job) -> BurstFn:
        return _observing(job, readings_per_burst=SAMPLES)

    return _local_job(observing, tally, pairs, window, setup)


def _observing(job: Job, readings_per_burst: int | None = None) -> BurstFn:
    """Windows of ``job`` as ``bpmon run`` takes them: ``RuntimeTarget.observe`` (its channel
    readings as shipped, or ``readings_per_burst`` of them)."""
    if readings_per_burst is None:
        target = RuntimeTarget(job.scenario, job=job)
    else:
        target = RuntimeTarget(job.scenario, job=job, readings_per_burst=readings_per_burst)

    def burst(stop: threading.Event, progress: Progress) -> Taken:
        observed = target.observe(SAMPLES, INTERVAL_MS, progress, stop).window
        return Taken(observed.samples, observed.jitter_ms_p99)

    return burst


def control_round(tally: Tally, pairs: int, window: float, setup: Setup) -> list[float]:
    """One fresh job in this process, never sampled: the noise floor of the ratio (A/A)."""
    return _local_job(lambda _: idle_burst, tally, pairs, window, setup)


def _local_job(
    sampling: Callable[[Job], BurstFn], tally: Tally, pairs: int, window: float, setup: Setup
) -> list[float]:
    jobs = [Job(parse_scenario(SCENARIO, "bench_sampling")) for _ in range(1 + setup.beside)]
    job, sinks = jobs[0], jobs[0].tasks["sink"]

    def count() -> tuple[float, float]:
        return time.perf_counter(), float(sum(t.records_in.total for t in sinks))

    burst = sampling(job)
    for each in jobs:
        each.start()
    try:
        time.sleep(setup.warmup)
        rates = alternate(count, burst, tally, pairs, window)
    finally:
        results = [each.stop() for each in jobs]
    for result in results:
        if result.state != "cancelled" or result.leaks:
            raise SystemExit(f"a job ended {result.state}: {result.error}; leaks {result.leaks}")
    return rates


def children_cpu_s() -> float:
    """CPU seconds of this process's finished children (the py-spy dumps)."""
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def pyspy_round(tally: Tally, pairs: int, window: float, setup: Setup) -> list[float]:
    """One fresh job in a child process, sampled by py-spy from here; its unsampled rates."""
    child = subprocess.Popen(
        [sys.executable, "-c", CHILD, SCENARIO],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    assert child.stdin is not None and child.stdout is not None
    stdin, stdout = child.stdin, child.stdout

    def count() -> tuple[float, float]:
        stdin.write("mark\n")
        stdin.flush()
        seconds, records = stdout.readline().split()
        return float(seconds), float(records)

    sampler = PySpySampler(child.pid, load_profile("bpmon-runtime"))

    def burst(stop: threading.Event, _: Progress) -> Taken:
        taken = sampler.burst(SAMPLES, INTERVAL_MS, stop=stop)
        return Taken(taken.samples, taken.jitter_ms_p99)

    try:
        if stdout.readline().strip() != "ready":
            raise SystemExit("the child job did not start")
        time.sleep(setup.warmup)
        before = children_cpu_s()
        rates = alternate(count, burst, tally, pairs, window)
        tally.cpu_s += children_cpu_s() - before
    finally:
        _end(child)
    return rates


def _end(child: subprocess.Popen[str]) -> None:
    """Tell the child job to stop; kill it if it does not within 10 s."""
    try:
        if child.stdin is not None:
            child.stdin.write("stop\n")
            child.stdin.close()
        child.wait(timeout=10)
    except (OSError, subprocess.TimeoutExpired):
        child.kill()
        child.wait()


@dataclass(frozen=True, slots=True)
class Figures:
    """One sampler's results."""

    rate: float  # the job's unsampled records/s (median of the "off" windows)
    ratio: float  # median sampled / unsampled throughput
    ratio_q1: float
    ratio_q3: float
    ratios: int
    overhead_pct: float
    cpu_us_per_sample: float
    samples_per_s: float  # achieved, against 1000 / INTERVAL_MS planned
    cpu_share_pct: float  # the sampler's CPU time over the sampled windows' wall time
    failed_bursts: int
    jitter_p99_ms: float | None  # median over bursts of each burst's p99
    jitter_p99_worst_ms: float | None
    samples: int


def figures(tally: Tally, rates: list[float]) -> Figures:
    """Summarise one sampler's tally."""
    ratio = statistics.median(tally.ratios)
    q1, _, q3 = statistics.quantiles(tally.ratios, n=4) if len(tally.ratios) > 1 else (ratio,) * 3
    jitters = tally.jitters_ms
    return Figures(
        rate=statistics.median(rates),
        ratio=ratio,
        ratio_q1=q1,
        ratio_q3=q3,
        ratios=len(tally.ratios),
        overhead_pct=(1 - ratio) * 100,
        cpu_us_per_sample=_per_sample_us(tally),
        samples_per_s=tally.samples / tally.on_s if tally.on_s else 0.0,
        cpu_share_pct=tally.cpu_s / tally.on_s * 100 if tally.on_s else 0.0,
        failed_bursts=tally.failed_bursts,
        jitter_p99_ms=statistics.median(jitters) if jitters else None,
        jitter_p99_worst_ms=max(jitters) if jitters else None,
        samples=tally.samples,
    )


def _ms(value: float | None) -> str:
    return "-" if value is None else f"{value:.2f}"


def print_table(results: dict[str, Figures]) -> None:
    """Two tables (throughput; the sampler's own cost and timing) and the goals."""
    print(
        f"\n{'sampler':<15}{'job rec/s':>12}{'sampled/none':>14}{'IQR':>16}{'overhead':>10}"
        f"{'ratios':>8}"
    )
    for name, f in results.items():
        iqr = f"{f.ratio_q1:.3f}-{f.ratio_q3:.3f}"
        print(
            f"{name:<15}{f.rate:>12,.0f}{f.ratio:>14.4f}{iqr:>16}{f.overhead_pct:>9.2f}%"
            f"{f.ratios:>8}"
        )
    print(
        f"\n{'sampler':<15}{'CPU share':>10}{'CPU/sample':>12}{'samples/s':>11}"
        f"{'jitter p99':>12}{'worst p99':>11}{'failed bursts':>15}"
    )
    for name, f in results.items():
        if name == "control":
            continue
        print(
            f"{name:<15}{f.cpu_share_pct:>9.2f}%{f.cpu_us_per_sample:>10.0f}us"
            f"{f.samples_per_s:>11.1f}{_ms(f.jitter_p99_ms):>10}ms{_ms(f.jitter_p99_worst_ms):>9}ms"
            f"{f.failed_bursts:>15}"
        )
    print()
    for name in ("in-process", "runtime", "runtime-every"):
        if name in results:
            f = results[name]
            print(
                f"{name}: overhead {f.overhead_pct:.2f}% measured, {f.cpu_share_pct:.2f}% of a "
                f"core taken by the sampler (goal < 1%), {f.cpu_us_per_sample:.0f} us per sample; "
                f"jitter p99 {_ms(f.jitter_p99_ms)} ms (goal < 2 ms)"
            )


KINDS = ("in-process", "runtime", "runtime-every", "py-spy", "control")


def main() -> None:
    """Run the rounds interleaved, print the tables, then a JSON line."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3, help="fresh jobs per sampler")
    parser.add_argument("--pairs", type=int, default=20, help="sampled windows per job")
    parser.add_argument("--window", type=float, default=0.5, help="seconds per window")
    parser.add_argument("--pyspy-pairs", type=int, default=4, help="py-spy: sampled windows")
    parser.add_argument("--pyspy-window", type=float, default=2.5, help="py-spy: seconds")
    parser.add_argument("--warmup", type=float, default=1.0)
    parser.add_argument(
        "--beside", type=int, default=0, help="more copies of the job in the process, unsampled"
    )
    parser.add_argument("--kinds", default=",".join(KINDS), help="comma-separated, run in turn")
    parser.add_argument("--skip-pyspy", action="store_true", help="leave py-spy out")
    args = parser.parse_args()
    kinds = [k for k in args.kinds.split(",") if not (args.skip_pyspy and k == "py-spy")]
    unknown = sorted(set(kinds) - set(KINDS))
    if unknown:
        parser.error(f"--kinds: unknown {', '.join(unknown)}; pick from {', '.join(KINDS)}")
    runs = {k: _run_of(k, args) for k in kinds}
    setup = Setup(args.warmup, args.beside)
    tallies = {name: Tally() for name in runs}
    rates: dict[str, list[float]] = {name: [] for name in runs}
    for round_no in range(args.rounds):
        for name, (run, pairs, window) in runs.items():
            tally = tallies[name]
            before = replace(tally, jitters_ms=list(tally.jitters_ms))
            rates[name] += run(tally, pairs, window, setup)
            print(
                f"round {round_no + 1}/{args.rounds} {name}: job {rates[name][-1]:,.0f} rec/s, "
                f"median sampled/none {statistics.median(tally.ratios[-pairs:]):.4f}"
                f"{_round_cost(tally, before)}",
                flush=True,
            )
    results = {name: figures(tallies[name], rates[name]) for name in runs}
    print_table(results)
    print(json.dumps({_key(n, k): _round(v) for n, f in results.items() for k, v in _fields(n, f)}))


def _run_of(kind: str, args: argparse.Namespace) -> tuple[Round, int, float]:
    """The round function of ``kind``, with its windows per job and seconds per window."""
    if kind == "py-spy":
        return pyspy_round, args.pyspy_pairs, args.pyspy_window
    rounds: dict[str, Round] = {
        "in-process": in_process_round,
        "runtime": runtime_round,
        "runtime-every": runtime_every_round,
        "control": control_round,
    }
    return rounds[kind], args.pairs, args.window


def _per_sample_us(tally: Tally) -> float:
    """CPU per sample: within bursts where measured (in-process), else per sample taken (py-spy:
    its dump processes' CPU)."""
    if tally.between:
        return tally.between_cpu_s / tally.between * 1e6
    return tally.cpu_s / max(1, tally.samples) * 1e6


def _round_cost(tally: Tally, before: Tally) -> str:
    """This round's CPU per sample and median burst jitter p99 (nothing for the control)."""
    if tally.samples == before.samples:
        return ""
    this_round = Tally(
        samples=tally.samples - before.samples,
        cpu_s=tally.cpu_s - before.cpu_s,
        between_cpu_s=tally.between_cpu_s - before.between_cpu_s,
        between=tally.between - before.between,
    )
    jitters = tally.jitters_ms[len(before.jitters_ms) :]
    jitter = _ms(statistics.median(jitters)) if jitters else "-"
    return f", {_per_sample_us(this_round):.0f} us per sample, jitter p99 {jitter} ms"


def _fields(name: str, f: Figures) -> list[tuple[str, float | int | None]]:
    throughput: list[tuple[str, float | int | None]] = [
        ("records_per_s", f.rate),
        ("ratio", f.ratio),
        ("ratio_q1", f.ratio_q1),
        ("ratio_q3", f.ratio_q3),
    ]
    if name == "control":  # nothing sampled: only the noise floor
        return throughput
    return [
        *throughput,
        ("overhead_pct", f.overhead_pct),
        ("cpu_us_per_sample", f.cpu_us_per_sample),
        ("samples_per_s", f.samples_per_s),
        ("cpu_share_pct", f.cpu_share_pct),
        ("failed_bursts", f.failed_bursts),
        ("jitter_p99_ms", f.jitter_p99_ms),
        ("jitter_p99_worst_ms", f.jitter_p99_worst_ms),
        ("samples", f.samples),
    ]


def _key(sampler: str, name: str) -> str:
    return f"{sampler.replace('-', '_')}_{name}"


def _round(value: float | int | None) -> float | int | None:
    if value is None or isinstance(value, int):
        return value
    return round(value, 4 if abs(value) < 10 else 1)


if __name__ == "__main__":
    main()
