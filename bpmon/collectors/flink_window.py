"""One Flink window apart from the REST calls: the grid its samples are taken on, how the
sampling went and what it cost, where Flink's own levels differ from bpmon's, and each
subtask's metrics over it.

Functions of what :class:`~bpmon.collectors.flink.FlinkTarget` measured (the grid is given its
clock, its sleep and the sampling to do), so they are tested without a cluster.
"""

from __future__ import annotations

import statistics
from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace
from datetime import timedelta

from bpmon.collectors.flink_metrics import MetricNames, pool_means, window_accounting, young_rate
from bpmon.collectors.flink_plan import SubtaskPlacement
from bpmon.collectors.flink_rest import Cost
from bpmon.collectors.sampler import Progress, StopSignal, ThreadCounts
from bpmon.model.clock import utc_now
from bpmon.model.values import (
    Finding,
    Metrics,
    SubtaskWindow,
    VertexObservation,
    Window,
    level_by_flink,
)


@dataclass(frozen=True, slots=True)
class DumpCost:
    """What the thread dumps of one burst cost: how many, their median time and size."""

    dumps: int
    median_ms: float
    median_bytes: int


def young(m: Metrics, place: SubtaskPlacement | None) -> Metrics:
    """Record rates corrected for a task younger than Flink's 60 s meters."""
    running = place.running_s if place is not None else None
    return replace(
        m,
        records_in_per_s=young_rate(m.records_in_per_s, running),
        records_out_per_s=young_rate(m.records_out_per_s, running),
    )


def over_window(
    m: Metrics,
    before: Mapping[str, float],
    after: Mapping[str, float],
    names: MetricNames,
    index: int,
) -> Metrics:
    """Flink's gauges, replaced by the accounting between two readings where there is one;
    pool usages as the mean of the two readings."""
    out_pool, in_pool = pool_means(before, after, names, index)
    m = replace(m, out_pool_usage=out_pool, in_pool_usage=in_pool)
    exact = window_accounting(before, after, names, index)
    if exact is None:
        return m
    return replace(
        m,
        busy_ratio=exact.busy_ratio,
        idle_ratio=exact.idle_ratio,
        backpressured_time_ratio=exact.backpressured_time_ratio,
        records_in_per_s=exact.records_in_per_s,
        records_out_per_s=exact.records_out_per_s,
        accounting_span_ms=exact.accounting_span_ms,
        backlog=exact.backlog if exact.backlog is not None else m.backlog,
    )


def subtask_window(
    index: int,
    counts: ThreadCounts | None,
    thread: str,
    task_manager: int | None,
    metrics: Metrics,
) -> SubtaskWindow:
    """One subtask of a window: its samples (none without ``counts``: a live snapshot, or a
    thread that could not be told apart), its thread's name as a dump showed it (else
    ``thread``), its task manager's number and its metrics."""
    return SubtaskWindow(
        index=index,
        thread=(counts.name if counts else "") or thread,
        samples=counts.total if counts else 0,
        backpressured=counts.backpressured if counts else 0,
        idle=counts.idle if counts else 0,
        busy=counts.busy if counts else 0,
        task_manager=task_manager,
        metrics=metrics,
        chain_samples=counts.chain if counts else (),
    )


def chain_operators(task_name: str) -> tuple[str, ...]:
    """The operators of a chained vertex in chain order, from Flink's name of it: Flink joins
    a chain's operator names with ``" -> "`` (``"Source: numbers -> parse"``). A split inside
    parentheses (an operator chained to several, ``"a -> (b, c)"``) is not a hop: it stays
    one name. One operator (no chain): empty."""
    names, depth, start = [], 0, 0
    for i, char in enumerate(task_name):
        depth += {"(": 1, ")": -1}.get(char, 0)
        if depth == 0 and task_name.startswith(" -> ", i):
            names.append(task_name[start:i])
            start = i + 4
    names.append(task_name[start:])
    return tuple(names) if len(names) > 1 else ()


def disagreements(
    vertices: tuple[VertexObservation, ...], levels: Mapping[str, tuple[str | None, float | None]]
) -> list[Finding]:
    """A ``flink-disagrees`` finding per vertex whose sampled level differs from Flink's.

    The samples' worst ratio is classified by Flink's own thresholds, not by ``[levels]``: the
    finding is about what was measured, not about a threshold the user moved.
    """
    found = []
    for v in vertices:
        flink, flink_ratio = levels.get(v.name, (None, None))
        ratios = [s.backpressured / s.samples for s in v.subtasks if s.samples > 0]
        if flink is None or flink_ratio is None or not ratios:
            continue
        mine = max(ratios)
        sampled = level_by_flink(mine)
        if sampled != flink:
            found.append(
                Finding(
                    "flink-disagrees",
                    v.name,
                    f"Flink's backpressure endpoint says {flink} ({flink_ratio:.2f}, its 60 s "
                    f"average); bpmon's samples of this window say {sampled} ({mine:.2f})",
                )
            )
    return found


def ambiguous_note(job: str, vertices: list[str]) -> Finding:
    """The ``ambiguous-threads`` finding: vertices of one name whose threads look the same."""
    shown = ", ".join(vertices)
    return Finding(
        "ambiguous-threads",
        job,
        f"{shown}: Flink names their task threads alike (same name, subtask, parallelism, "
        "attempt and task manager), so a stack sample cannot tell them apart; their samples are "
        "left out and their levels come from Flink's time accounting (give the operators "
        "distinct names with .name(...) to sample them)",
    )


def sampling_note(
    job: str, window: Window, dumps: DumpCost | None, cost: Cost, managers: int
) -> Finding:
    """The ``sampling`` finding: samples taken of those planned, and what they cost."""
    planned = window.planned_samples or window.samples
    dump = (
        f"one thread dump took {dumps.median_ms:.0f} ms and {dumps.median_bytes / 1024:.0f} KB "
        "(median)"
        if dumps is not None
        else "no thread dump was taken"
    )
    return Finding(
        "sampling",
        job,
        f"{window.samples} of {planned} samples taken in {window.seconds:.1f} s "
        f"({managers} task manager(s)); {dump}; the window cost {cost.requests} requests, "
        f"{cost.bytes / 1024:.0f} KB",
    )


@dataclass(frozen=True, slots=True)
class SampleGrid:
    """The planned instants of a window's samples: ``samples``, ``interval_ms`` apart.

    A thread dump takes longer than 50 ms on a busy task manager, so a sample whose slot passed
    while the previous one was still being fetched is skipped, not taken late: the window keeps
    its planned length, and says how many samples were taken.
    """

    clock: Callable[[], float]
    sleep: Callable[[float], None]
    samples: int
    interval_ms: float

    def run(
        self,
        sample: Callable[[], list[tuple[float, int]]],
        progress: Progress | None = None,
        stop: StopSignal | None = None,
    ) -> tuple[Window, list[tuple[float, int]]]:
        """Call ``sample`` at each instant of the grid (it returns each dump's seconds and
        bytes); the window as taken, and every dump's cost."""
        began_wall, taken, lateness, costs = utc_now(), [], [], []
        t0, interval_s = self.clock(), self.interval_ms / 1000
        for k in range(self.samples):
            if stop is not None and stop.is_set():
                break
            deadline = t0 + k * interval_s
            if self.clock() > deadline + interval_s:
                continue  # the previous dump overran this sample's slot: skipped, not late
            while (left := deadline - self.clock()) > 0:
                self.sleep(left)
            at = self.clock()
            costs.extend(sample())
            taken.append(at)
            lateness.append(at - deadline)
            if progress is not None:
                progress(k + 1, self.samples)
        end = t0 + self.samples * interval_s
        while not (stop is not None and stop.is_set()) and (left := end - self.clock()) > 0:
            self.sleep(left)
        window = Window(
            start=began_wall,
            end=began_wall + timedelta(seconds=self.clock() - t0),
            samples=len(taken),
            interval_ms=achieved_ms(taken, self.interval_ms),
            jitter_ms_p99=p99_ms(lateness),
            planned_samples=self.samples,
            planned_interval_ms=float(self.interval_ms),
        )
        return window, costs


def dump_cost(costs: list[tuple[float, int]]) -> DumpCost | None:
    """The median of the dumps' (seconds, bytes); None without a dump."""
    if not costs:
        return None
    return DumpCost(
        dumps=len(costs),
        median_ms=statistics.median(c[0] for c in costs) * 1000,
        median_bytes=int(statistics.median(c[1] for c in costs)),
    )


def achieved_ms(taken: list[float], planned_ms: float) -> float:
    """The mean gap between the first and the last sample taken (the plan's with fewer than 2)."""
    if len(taken) < 2:
        return float(planned_ms)
    return round((taken[-1] - taken[0]) / (len(taken) - 1) * 1000, 3)


def p99_ms(lateness: list[float]) -> float | None:
    """The 99th percentile of how late the samples were, relative to the earliest."""
    if not lateness:
        return None
    base = min(lateness)
    ordered = sorted(x - base for x in lateness)
    return round(ordered[max(0, -(-99 * len(ordered) // 100) - 1)] * 1000, 3)
