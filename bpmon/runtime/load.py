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
compares two snapshots. Two limits are told apart, because only the first is the simulator's:

- **the interpreter's own limit** (:attr:`WindowLoad.saturated`): the process ran most of the
  interpreter's one core (its CPU time, every thread's, reached :data:`SATURATED_CORES` = 0.8
  cores over the window, or :data:`BUSY_HOST_CORES` = 0.7 while its threads ran and waited for a
  core 0.8 or more, running more than waiting: other processes took the rest) and the sources
  wanted more than they got: a source has no rate limit (it emits as fast as the runtime lets
  it), or a rate-limited source ended the window more than
  :data:`BEHIND_MS` behind its schedule (p99 over the source subtasks), or the rate-limited
  sources released less than :data:`DELIVERED` of the records their schedules called for. The
  figures then describe the Python process, and no cause is named.
- **a busy host** (:attr:`WindowLoad.host_busy`): the job's threads ran less than that, but
  were runnable and waiting for a core long enough that running and waiting together reach
  0.8 cores. A thread blocked on the interpreter lock sleeps; the run-queue wait counts only
  time a thread was ready to run and no core was free, so on a machine of two or more cores the
  wait is time other processes held the cores (the machine's load over the window, from
  ``/proc/stat``, is in the reason). When the threads waited longer than they ran and the
  sources wanted more than they got, the figures describe the machine: the window counts as
  saturated and the reason says the machine was too busy. When they ran longer than they
  waited, or the sources kept their schedules however long the threads waited, the job's
  figures hold (a subtask's service is
  paced on an absolute schedule, so a late wake-up counts as service already given): the
  window is diagnosed and the report carries a ``host-busy`` finding (unless a source has no
  rate limit: it asks for all it can get, so its threads' demand is the interpreter's limit).

Until this split, the wait counted toward the interpreter's limit, and on a loaded 2-core
machine 7 of 42 jobs whose threads used 0.14-0.60 of a core came back saturated, with no cause.

A rate-limited source held back by a slow operator fails the first condition (the slow operator
sleeps); a fast job that keeps up fails the second. When saturated, what the sources emitted over
the window is the runtime's capacity for this job: figures above it describe the interpreter.
"""

from __future__ import annotations

import math
import os
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from bpmon.runtime.pacing import Schedule
from bpmon.runtime.task import Task

SATURATED_CORES = 0.8
"""CPU the process used, in cores, at which the interpreter counts as saturated: most of the one
core Python can run on at a time. Its threads' CPU plus their wait for a core reaching it on a
busy host (:attr:`WindowLoad.host_busy`)."""
BUSY_HOST_CORES = 0.7
"""CPU the process used, in cores, at which the interpreter counts as saturated on a busy host
(its threads' running and waiting reach :data:`SATURATED_CORES`): the other processes take cores
it would have run on, so it falls short of 0.8 while its threads want more than a core. Seen in
CI: 0.79 cores used and 0.49 waited while the sources released 10% of their schedules. The busy
hosts' slow jobs, whose threads sleep their service times, used at most 0.60."""
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
    """The runtime's load counters at one instant; two make a :class:`WindowLoad`."""

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
    machine_busy_s: float | None = None
    """CPU seconds every process on the machine used so far (``/proc/stat``); None elsewhere."""


@dataclass(frozen=True, slots=True)
class WindowLoad:
    """How loaded the runtime was over one window, and whether it could keep up."""

    window_s: float
    cpu_cores_used: float
    """CPU the job's task threads used, in cores (process CPU when not per thread)."""
    cpu_wait_cores: float
    """Time the job's task threads were runnable but waiting for a core, in cores (0: unknown)."""
    process_cores: float
    """CPU the whole process (every thread: the interpreter) used, in cores."""
    other_cores: float | None
    """CPU other processes used over the window, in cores; None when unknown."""
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
    """Other processes held the cores the job's threads wanted: they ran less than
    :data:`SATURATED_CORES` but ran and waited for a core at least that much. Saturated too
    when they waited longer than they ran."""
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


def _machine_busy_s() -> float | None:
    """CPU seconds all processes used since boot (``/proc/stat``: user to steal, no idle or
    iowait); None if unreadable."""
    try:
        with open("/proc/stat", encoding="ascii") as stat:
            fields = stat.readline().split()
        ticks = sum(int(fields[i]) for i in (1, 2, 3, 6, 7, 8))
        return ticks / os.sysconf("SC_CLK_TCK")
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
        machine_busy_s=_machine_busy_s(),
        at=time.monotonic(),
        per_thread=bool(threads) or not alive,
        process_cpu_s=time.process_time(),
        threads=threads,
        schedules=schedules,
        unlimited_sources=len(sources) - len(schedules),
        emitted=sum(task.records_out.total for task in sources),
    )


def runtime_load(start: LoadSnapshot, end: LoadSnapshot) -> WindowLoad:
    """The runtime's load between two snapshots of the same job, and whether it was saturated.

    Raises:
        ValueError: ``end`` is not later than ``start``.
    """
    window = end.at - start.at
    if window <= 0:
        raise ValueError(f"runtime_load: end ({end.at}) must be later than start ({start.at})")
    cpu, wait = _cpu(start, end)
    cpu_cores, wait_cores = cpu / window, wait / window
    process = max(cpu_cores, max(0.0, end.process_cpu_s - start.process_cpu_s) / window)
    others = None
    if start.machine_busy_s is not None and end.machine_busy_s is not None:
        others = max(0.0, (end.machine_busy_s - start.machine_busy_s) / window - process)
    lags = sorted(1000.0 * s.lag_s for s in end.schedules.values())
    lag = _p99(lags) if lags else None
    delivered = _delivered(start, end)
    rate = max(0.0, end.emitted - start.emitted) / window
    unlimited = end.unlimited_sources > 0
    wanting = unlimited or (lag is not None and lag > BEHIND_MS)
    wanting = wanting or (delivered is not None and delivered < DELIVERED)
    demand = cpu_cores + wait_cores
    interpreter = process >= SATURATED_CORES or (
        process >= BUSY_HOST_CORES and demand >= SATURATED_CORES and cpu_cores >= wait_cores
    )
    host_busy = not interpreter and demand >= SATURATED_CORES
    starved = host_busy and wait_cores > cpu_cores  # waited for a core more than it ran
    # a source without a rate limit wants all it can get: its threads' demand is the limit
    saturated = wanting and (interpreter or starved or (unlimited and host_busy))
    limit = "machine" if starved else "interpreter" if interpreter or unlimited else None
    usage = Usage(cpu_cores, wait_cores, process, others)
    return WindowLoad(
        host_busy=host_busy,
        window_s=window,
        cpu_cores_used=cpu_cores,
        cpu_wait_cores=wait_cores,
        process_cores=process,
        other_cores=others,
        lag_ms_p99=lag,
        delivered=delivered,
        unlimited_sources=unlimited,
        source_records_per_s=rate,
        saturated=saturated,
        capacity_records_per_s=rate if saturated else None,
        reason=_reason(
            usage, limit if saturated else None, host_busy, _asked(unlimited, lag, delivered), rate
        ),
    )


@dataclass(frozen=True, slots=True)
class Usage:
    """Where the window's CPU went, in cores: the job's task threads (running, waiting for a
    core), the whole process, and other processes (None: unknown)."""

    cpu: float
    wait: float
    process: float
    others: float | None

    def line(self) -> str:
        text = (
            f"the job's threads used {self.cpu:.2f} cores and waited {self.wait:.2f} for one "
            f"(the process used {self.process:.2f}"
        )
        if self.others is not None:
            text += f", other processes {self.others:.2f} of {os.cpu_count() or 1}"
        return text + ")"


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


def _asked(unlimited: bool, lag: float | None, delivered: float | None) -> str:
    """What the sources asked for over the window."""
    if unlimited:
        return "a source without a rate limit asks for as much as it can get"
    if lag is None:
        return "no source has a schedule"
    share = "" if delivered is None else f", released {delivered:.0%} of their schedules"
    return f"the sources ended up to {lag:.0f} ms behind their schedules{share}"


def _reason(usage: Usage, limit: str | None, host_busy: bool, asked: str, rate: float) -> str:
    """One line saying which limit the window met, if any: the ``"interpreter"``'s (Python
    runs on one core at a time) or the ``"machine"``'s (other processes held the cores)."""
    used = usage.line()
    above = f"figures are not meaningful above {rate:,.0f} records/s"
    if limit == "interpreter":
        return (
            f"the runtime could not keep up: {used}, Python runs on one core at a time, "
            f"and {asked}; {above}"
        )
    if limit == "machine":
        return (
            f"the machine was too busy for the runtime: {used}, more waiting than running "
            f"(other processes held the cores), and {asked}; {above} "
            "(run it again on a quieter machine)"
        )
    if host_busy:
        why = (
            "the job's threads ran more than they waited"
            if usage.cpu >= usage.wait
            else "the job's threads waited for a core more than they ran, but the sources kept "
            "their schedules"
        )
        kept = f"the machine was busy but the runtime kept up: {used}"
        return f"{kept}; {why}, so its figures hold ({asked})"
    if usage.process < SATURATED_CORES:
        return f"the runtime kept up: {used}, below {SATURATED_CORES} ({asked})"
    return f"the runtime kept up: {asked}, though {used}"
