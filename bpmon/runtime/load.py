"""The runtime's own load: could the Python process keep up with what the scenario asks?

bpmon's runtime is one Python process, and Python runs on one core at a time (the interpreter
lock). A scenario that offers millions of records per second of zero-cost work saturates it: every
task thread then waits for the interpreter, the consumers fall behind, the source's output pools
fill and it shows HIGH backpressure with nothing slow in the job. A slow operator looks the same
from the source, so the source's state cannot tell the two apart; where the time goes can. A slow
operator serves its ``cost_us`` asleep, and its threads use almost no CPU; a saturated runtime
spends the time running Python.

:func:`load_snapshot` reads, at one instant, the CPU time of every task thread (and how long each
was runnable but waiting for a core, from ``/proc/self/task/<tid>/schedstat`` on Linux; elsewhere
the process CPU time stands in and the wait is unknown), where every rate-limited source stands
against its schedule (``pacing.Schedule``) and what every source emitted. :func:`runtime_load`
compares two snapshots. The rule for :attr:`RuntimeLoad.saturated`:

- the job's threads used or wanted the interpreter's one core: CPU used plus time waiting for a
  core reached :data:`SATURATED_CORES` (0.8) cores over the window, and
- the sources wanted more than they got: a source has no rate limit (it emits as fast as the
  runtime lets it), or a rate-limited source ended the window more than :data:`BEHIND_MS` behind
  its schedule (p99 over the source subtasks), or the rate-limited sources released less than
  :data:`DELIVERED` of the records their schedules called for.

A thread blocked on the interpreter lock sleeps; the run-queue wait counts only time a thread was
ready to run and no core was free. So when the job's threads waited for a core longer than they
ran, other processes held the machine (the interpreter alone cannot make a thread wait for a core
on a machine of two or more): the reason says the machine was too busy, not that the runtime could
not keep up. Either way the figures describe the machine, not the job, and no cause is named.

A rate-limited source held back by a slow operator fails the first condition (the slow operator
sleeps); a fast job that keeps up fails the second. When saturated, what the sources emitted over
the window is the runtime's capacity for this job: figures above it describe the interpreter.
"""

from __future__ import annotations

import math
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from bpmon.runtime.pacing import Schedule
from bpmon.runtime.task import Task

SATURATED_CORES = 0.8
"""CPU used plus time waiting for a core, in cores, at which the interpreter counts as saturated:
most of the one core Python can run on at a time."""
BEHIND_MS = 100.0
"""How far behind its schedule a rate-limited source may end a window before it counts as wanting
more than it got."""
DELIVERED = 0.95
"""The share of their schedules below which the rate-limited sources count as held back."""


@dataclass(frozen=True, slots=True)
class ThreadTimes:
    """One task thread's cumulative CPU time and run-queue wait, in seconds."""

    cpu_s: float
    wait_s: float


@dataclass(frozen=True, slots=True)
class LoadSnapshot:
    """The runtime's load counters at one instant; two make a :class:`RuntimeLoad`."""

    at: float
    """Monotonic seconds."""
    per_thread: bool
    """True when the CPU times are per task thread; False when the process CPU time stands in
    (then ``threads`` is empty and the wait unknown)."""
    process_cpu_s: float
    threads: Mapping[str, ThreadTimes]
    """By task name; a thread not started (or already gone) is absent."""
    schedules: Mapping[str, Schedule]
    """By task name, every rate-limited source subtask."""
    unlimited_sources: int
    """Source subtasks without a rate limit."""
    emitted: float
    """Records every source subtask emitted so far, in all."""


@dataclass(frozen=True, slots=True)
class RuntimeLoad:
    """How loaded the runtime was over one window, and whether it could keep up."""

    window_s: float
    cpu_cores_used: float
    """CPU the job's task threads used, in cores (process CPU when not per thread)."""
    cpu_wait_cores: float
    """Time the job's task threads were runnable but waiting for a core, in cores (0: unknown)."""
    lag_ms_p99: float | None
    """How far behind its schedule a rate-limited source subtask ended the window, p99 over
    them; None without rate-limited sources."""
    delivered: float | None
    """Records the rate-limited sources released ÷ records their schedules called for over the
    window; None without rate-limited sources."""
    unlimited_sources: bool
    source_records_per_s: float
    """What all sources emitted over the window."""
    host_busy: bool
    """Saturated because other processes held the cores (its threads waited for one longer
    than they ran), not because the interpreter was busy with the job."""
    saturated: bool
    capacity_records_per_s: float | None
    """When saturated: the source records per second the runtime managed, its capacity for this
    job; None otherwise."""
    reason: str
    """One line: why the runtime is or is not saturated, with the figures."""


def _schedstat(native_id: int | None) -> ThreadTimes | None:
    """A thread's CPU time and run-queue wait from Linux's schedstat; None if unreadable."""
    if native_id is None:
        return None
    try:
        fields = Path(f"/proc/self/task/{native_id}/schedstat").read_text().split()
        return ThreadTimes(int(fields[0]) / 1e9, int(fields[1]) / 1e9)
    except (OSError, ValueError, IndexError):
        return None


def load_snapshot(tasks: Mapping[str, Sequence[Task]]) -> LoadSnapshot:
    """The job's load counters now (any thread)."""
    every = [task for group in tasks.values() for task in group]
    threads = {}
    for task in every:
        if task.thread.is_alive():
            times = _schedstat(task.thread.native_id)
            if times is not None:
                threads[task.name] = times
    alive = any(task.thread.is_alive() for task in every)
    sources = [task for task in every if task.spec.kind == "source"]
    schedules = {}
    for task in sources:
        reading = task.limiter.schedule() if task.limiter is not None else None
        if reading is not None:
            schedules[task.name] = reading
    return LoadSnapshot(
        at=time.monotonic(),
        per_thread=bool(threads) or not alive,
        process_cpu_s=time.process_time(),
        threads=threads,
        schedules=schedules,
        unlimited_sources=len(sources) - len(schedules),
        emitted=sum(task.records_out.total for task in sources),
    )


def runtime_load(start: LoadSnapshot, end: LoadSnapshot) -> RuntimeLoad:
    """The runtime's load between two snapshots of the same job, and whether it was saturated.

    Raises:
        ValueError: ``end`` is not later than ``start``.
    """
    window = end.at - start.at
    if window <= 0:
        raise ValueError(f"runtime_load: end ({end.at}) must be later than start ({start.at})")
    cpu, wait = _cpu(start, end)
    cpu_cores, wait_cores = cpu / window, wait / window
    lags = sorted(1000.0 * s.lag_s for s in end.schedules.values())
    lag = _p99(lags) if lags else None
    delivered = _delivered(start, end)
    rate = max(0.0, end.emitted - start.emitted) / window
    unlimited = end.unlimited_sources > 0
    demand = cpu_cores + wait_cores
    busy = demand >= SATURATED_CORES
    wanting = unlimited or (lag is not None and lag > BEHIND_MS)
    wanting = wanting or (delivered is not None and delivered < DELIVERED)
    saturated = busy and wanting
    return RuntimeLoad(
        host_busy=saturated and wait_cores > cpu_cores,
        window_s=window,
        cpu_cores_used=cpu_cores,
        cpu_wait_cores=wait_cores,
        lag_ms_p99=lag,
        delivered=delivered,
        unlimited_sources=unlimited,
        source_records_per_s=rate,
        saturated=saturated,
        capacity_records_per_s=rate if saturated else None,
        reason=_reason(cpu_cores, wait_cores, busy, wanting, unlimited, lag, delivered, rate),
    )


def _cpu(start: LoadSnapshot, end: LoadSnapshot) -> tuple[float, float]:
    """CPU and run-queue wait seconds of the job's threads between the snapshots."""
    if not (start.per_thread and end.per_thread):
        return max(0.0, end.process_cpu_s - start.process_cpu_s), 0.0
    cpu = wait = 0.0
    for name, last in end.threads.items():
        first = start.threads.get(name, ThreadTimes(0.0, 0.0))  # started during the window
        cpu += max(0.0, last.cpu_s - first.cpu_s)
        wait += max(0.0, last.wait_s - first.wait_s)
    return cpu, wait


def _delivered(start: LoadSnapshot, end: LoadSnapshot) -> float | None:
    due = released = 0
    for name, last in end.schedules.items():
        first = start.schedules.get(name)
        if first is not None:
            due += last.due - first.due
            released += last.released - first.released
    return min(1.0, released / due) if due > 0 else None


def _p99(values: Sequence[float]) -> float:
    """The 99th percentile of sorted ``values`` (nearest rank)."""
    return values[max(0, math.ceil(0.99 * len(values)) - 1)]


def _reason(
    cpu: float,
    wait: float,
    busy: bool,
    wanting: bool,
    unlimited: bool,
    lag: float | None,
    delivered: float | None,
    rate: float,
) -> str:
    """One line saying why the runtime is or is not saturated."""
    used = f"the job's threads used {cpu:.2f} cores and waited {wait:.2f} for one"
    if unlimited:
        asked = "a source without a rate limit asks for as much as it can get"
    elif lag is None:
        asked = "no source has a schedule"
    else:
        share = "" if delivered is None else f", released {delivered:.0%} of their schedules"
        asked = f"the sources ended up to {lag:.0f} ms behind their schedules{share}"
    if busy and wanting and wait > cpu:
        # waiting for a core more than running: other processes held the machine's cores
        return (
            f"the machine was too busy for the runtime: {used}, more waiting than running "
            f"(other processes held the cores), and {asked}; figures are not meaningful above "
            f"{rate:,.0f} records/s (run it again on a quieter machine)"
        )
    if busy and wanting:
        return (
            f"the runtime could not keep up: {used} (Python runs on one at a time) and {asked}; "
            f"figures are not meaningful above {rate:,.0f} records/s"
        )
    if not busy:
        return f"the runtime kept up: {used}, below {SATURATED_CORES} ({asked})"
    return f"the runtime kept up: {asked}, though {used}"
