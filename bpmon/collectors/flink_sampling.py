"""Which sampler takes a Flink window's stack samples, how it runs, and what it cost.

Two ways to sample a task thread's stack over REST:

- **Flink's own sampler** (:class:`FlameSampler`), when the cluster sets
  ``rest.flamegraph.enabled: true`` and is Flink 1.17 or newer (a flame graph per subtask). One
  request per vertex starts it: the JobManager asks each TaskManager for
  ``rest.flamegraph.num-samples`` samples of the vertex's task threads,
  ``delay-between-samples`` apart, taken inside the TaskManager's JVM (one thread's stack, not a
  dump of all threads). The answer comes from a cache: a graph that ended less than
  ``rest.flamegraph.refresh-interval`` ago is served as it is and nothing is sampled, so bpmon
  keeps the ``endTimestamp`` of its first answer and polls until a graph NEWER than that one
  arrives (never one taken before the window). Flink files the vertex's samples per subtask, and
  ``&subtaskindex=N`` then reads each subtask's share from that cache. Measured on a 1 ms-a-record
  job: 1.4-1.5% of its throughput per 100 x 50 ms burst (:file:`docs/flink.md`).
- **Thread dumps** of every TaskManager (:func:`dump_sample`) otherwise: a full ``jstack`` of the
  JVM per sample, which stops it at a safepoint, costs a CPU-bound job 40-48% of its throughput
  while it runs, and is often slower than the 50 ms grid (samples are skipped).

Flink's sampler falls back to thread dumps for a window when it cannot give a fresh graph in
time (a cached graph younger than its refresh interval allows, a sampler that answers disabled);
the ``sampling`` finding says which sampler ran, why, and what the window cost.
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Literal

from bpmon.collectors.flink_config import FlinkClusterConfig
from bpmon.collectors.flink_flame import FlameGraph, flame_graph
from bpmon.collectors.flink_placement import JobPlacement
from bpmon.collectors.flink_rest import Cost, FlinkRest
from bpmon.collectors.flink_threads import SubtaskKey, Tally, parse_dump
from bpmon.collectors.flink_window import DumpCost
from bpmon.collectors.sampler import StopSignal
from bpmon.model.values import Finding, Window

Method = Literal["flame-graph", "thread-dumps", "none"]

MAX_STALE_WAIT_S = 15.0
"""The longest a window waits for Flink's cached graph to age past its refresh interval (so a
request samples again) before it takes thread dumps instead."""
SLACK_S = 5.0
"""How long after its planned end a burst of Flink's sampler may still arrive (the samples of a
busy TaskManager come late; the graph is built on the JobManager)."""
POLL_S = 0.25
"""How often a graph that is not there yet is asked for again."""
MIN_VERSION = (1, 17)
"""The first Flink that gives a flame graph per subtask (``subtaskindex``)."""


@dataclass(frozen=True, slots=True)
class FlinkSampling:
    """How a window's samples were taken.

    Attributes:
        method: ``flame-graph`` (Flink's sampler), ``thread-dumps``, or ``none`` (no task
            runs).
        taken: samples taken, over every subtask sampled.
        planned: samples planned, over every subtask.
        subtasks: subtasks sampled.
        reason: why thread dumps were used (None: the flame graph ran, or was never enabled).
        dumps: the thread dumps' median cost (thread dumps only).
        span: what the window's rates and busy time were read over.
    """

    method: Method
    taken: int
    planned: int
    subtasks: int
    reason: str | None = None
    dumps: DumpCost | None = None
    span: str = ""


def version_tuple(version: str) -> tuple[int, ...]:
    """``"1.17.2"`` as ``(1, 17, 2)``; the leading numeric parts only."""
    parts = []
    for part in version.split("."):
        digits = "".join(c for c in part if c.isdigit())
        if not digits or digits != part[: len(digits)]:
            break
        parts.append(int(digits))
    return tuple(parts)


class FlameUnavailableError(Exception):
    """Flink's sampler cannot give this window fresh samples.

    Args:
        reason: why, as the ``sampling`` finding says it.
        lasting: it will not for any window of this watch (the cluster answers disabled).
    """

    def __init__(self, reason: str, lasting: bool = False) -> None:
        super().__init__(reason)
        self.reason, self.lasting = reason, lasting


@dataclass(frozen=True, slots=True)
class _Pending:
    """A vertex whose fresh graph is awaited: Flink's id, bpmon's name, the running subtasks,
    and the ``endTimestamp`` of the cached graph first served (None: none was)."""

    vertex_id: str
    name: str
    subtasks: tuple[int, ...]
    first_end: int | None


class FlameSampler:
    """Flink's flame-graph sampler for the job ``job_id`` (see the module).

    Args:
        rest: the cluster's client.
        config: the cluster's settings (``rest.flamegraph.*``).
        clock, sleep: monotonic seconds and a wait (tests inject them).
        wall: wall-clock seconds, to compare with Flink's ``endTimestamp``.
        slack_s: how long after its planned end a graph may still arrive (:data:`SLACK_S`).
    """

    def __init__(
        self,
        rest: FlinkRest,
        config: FlinkClusterConfig,
        job_id: str,
        clock: Callable[[], float] = time.monotonic,
        sleep: Callable[[float], None] = time.sleep,
        wall: Callable[[], float] = time.time,
        slack_s: float = SLACK_S,
    ) -> None:
        self.rest, self.config, self.job_id, self.slack_s = rest, config, job_id, slack_s
        self._clock, self._sleep, self._wall = clock, sleep, wall
        self._started = 0.0

    def _get(self, vertex_id: str, subtask: int | None = None) -> FlameGraph:
        path = f"/jobs/{self.job_id}/vertices/{vertex_id}/flamegraph"
        query = {"type": "full"}
        if subtask is not None:
            query["subtaskindex"] = str(subtask)
        return flame_graph(self.rest.get(path, query), f"GET {path}")

    def start(self, vertices: Sequence[tuple[str, str, tuple[int, ...]]]) -> list[_Pending]:
        """Ask for every vertex's graph (``(id, name, running subtasks)``), which starts Flink's
        sampling where its cache allows; the vertices to wait for.

        Raises:
            FlameUnavailableError: disabled, or a cached graph no request can refresh in time.
        """
        pending = []
        self._started = self._clock()
        for vertex_id, name, subtasks in vertices:
            graph = self._get(vertex_id)
            if graph.state == "disabled":
                raise FlameUnavailableError(
                    "Flink's flame graphs answer disabled (rest.flamegraph.enabled is not true)",
                    lasting=True,
                )
            if graph.state == "terminated":
                continue
            self._check_refresh(name, graph)
            pending.append(_Pending(vertex_id, name, subtasks, graph.end_ms))
        return pending

    def _check_refresh(self, name: str, graph: FlameGraph) -> None:
        """Raise when ``graph`` is a cached one that Flink will not sample again within
        :data:`MAX_STALE_WAIT_S` (its refresh interval has not passed since it ended)."""
        if graph.end_ms is None:
            return
        age_s = self._wall() - graph.end_ms / 1000
        wait_s = self.config.flame_refresh_s - age_s
        if wait_s > MAX_STALE_WAIT_S:
            refresh = self.config.flame_refresh_s
            raise FlameUnavailableError(
                f"Flink's cached flame graph of {name} ended {age_s:.0f} s ago and is served "
                f"until rest.flamegraph.refresh-interval ({refresh:g} s) has passed, "
                f"{wait_s:.0f} s from now; set rest.flamegraph.refresh-interval no longer than "
                "the time between bursts"
            )

    def collect(
        self,
        pending: list[_Pending],
        tally: Tally,
        stop: StopSignal | None = None,
    ) -> dict[SubtaskKey, int]:
        """Wait for each vertex's fresh graph, then count every subtask's samples in ``tally``;
        samples per subtask ``(vertex id, index)``.

        Raises:
            FlameUnavailableError: no fresh graph before the deadline.
        """
        wait = max((self._stale_wait(p) for p in pending), default=0.0)
        burst = self.config.flame_burst_s
        if wait > 0:  # a cached graph: ask again once it may be refreshed, which samples anew
            if not self._wait_until(self._started + wait + 0.05, stop):
                return {}
            for p in pending:
                if p.first_end is not None:
                    self._get(p.vertex_id)
        sampling_from = self._clock() if wait > 0 else self._started
        deadline = sampling_from + burst + self.slack_s
        if not self._wait_until(sampling_from + burst, stop):
            return {}
        taken: dict[SubtaskKey, int] = {}
        todo = list(pending)
        while todo:
            if stop is not None and stop.is_set():
                break
            todo = [p for p in todo if not self._read_vertex(p, tally, taken)]
            if not todo:
                break
            if self._clock() >= deadline:
                names = ", ".join(p.name for p in todo)
                raise FlameUnavailableError(
                    f"Flink's sampler gave no fresh flame graph of {names} within "
                    f"{wait + burst + self.slack_s:.0f} s"
                )
            self._sleep(POLL_S)
        return taken

    def _wait_until(self, until: float, stop: StopSignal | None) -> bool:
        """Sleep until ``until`` (monotonic); False when ``stop`` came first."""
        while (left := until - self._clock()) > 0:
            if stop is not None and stop.is_set():
                return False
            self._sleep(min(left, POLL_S * 4))
        return True

    def _stale_wait(self, p: _Pending) -> float:
        if p.first_end is None:
            return 0.0
        age_s = self._wall() - p.first_end / 1000
        return max(0.0, self.config.flame_refresh_s - age_s)

    def _read_vertex(self, p: _Pending, tally: Tally, taken: dict[SubtaskKey, int]) -> bool:
        """Count ``p``'s subtasks' samples when its fresh graph is there; whether it was."""
        graph = self._get(p.vertex_id)
        if not self._fresh(graph, p):
            return False
        if p.subtasks == (0,):  # one subtask: the vertex's graph is the subtask's
            self._count(p.vertex_id, 0, graph, tally, taken)
            return True
        for index in p.subtasks:
            sub = self._get(p.vertex_id, index)
            if sub.state == "graph" and sub.end_ms == graph.end_ms:
                self._count(p.vertex_id, index, sub, tally, taken)
        return True

    @staticmethod
    def _fresh(graph: FlameGraph, p: _Pending) -> bool:
        """A graph newer than the one first served (any graph when none was)."""
        if graph.state != "graph" or graph.end_ms is None:
            return False
        return p.first_end is None or graph.end_ms > p.first_end

    @staticmethod
    def _count(
        vertex_id: str,
        index: int,
        graph: FlameGraph,
        tally: Tally,
        taken: dict[SubtaskKey, int],
    ) -> None:
        for frames, count in graph.stacks:
            tally.add_stack((vertex_id, index), frames, count)
        taken[(vertex_id, index)] = graph.samples


def flame_window(
    began: datetime, seconds: float, taken: Mapping[SubtaskKey, int], config: FlinkClusterConfig
) -> Window:
    """The window Flink's sampler took: ``seconds`` from the first request to the last graph
    read; its samples the median per subtask, Flink's planned count and delay."""
    return Window(
        start=began,
        end=began + timedelta(seconds=seconds),
        samples=int(statistics.median(taken.values())) if taken else 0,
        interval_ms=config.flame_delay_ms,
        planned_samples=config.flame_samples,
        planned_interval_ms=config.flame_delay_ms,
    )


def dump_sample(rest: FlinkRest, placement: JobPlacement, tally: Tally) -> list[tuple[float, int]]:
    """One thread-dump sample: every task manager's dump at once, counted in ``tally``;
    returns (seconds, bytes) per dump."""
    managers = placement.task_managers

    def dump(tm: str) -> tuple[str, object, float, int]:
        before = rest.cost
        answer = rest.get(f"/taskmanagers/{tm}/thread-dump")
        spent = rest.cost - before
        return tm, answer, spent.seconds, spent.bytes

    if len(managers) == 1:
        results = [dump(managers[0])]
    else:
        with ThreadPoolExecutor(len(managers)) as pool:
            results = list(pool.map(dump, managers))
    for tm, answer, _, _ in results:
        tally.add(tm, parse_dump(answer if isinstance(answer, dict) else {}))
    return [(seconds, size) for _, _, seconds, size in results]


def sampling_note(
    job: str, window: Window, sampling: FlinkSampling, cost: Cost, managers: int, fresh: str
) -> Finding:
    """The ``sampling`` finding: the sampler used (and why), samples taken of those planned,
    what the window cost, what its rates span and how ``fresh`` they are."""
    if sampling.method == "none":
        how = "nothing sampled: no task of the job runs (every subtask waits to be deployed)"
    elif sampling.method == "flame-graph":
        how = (
            f"{sampling.taken} of {sampling.planned} samples taken by Flink's flame-graph "
            f"sampler ({sampling.subtasks} subtask(s) x {window.planned_samples} x "
            f"{window.planned_interval_ms:g} ms: rest.flamegraph.num-samples, "
            "delay-between-samples)"
        )
    else:
        dump = (
            f"one thread dump took {sampling.dumps.median_ms:.0f} ms and "
            f"{sampling.dumps.median_bytes / 1024:.0f} KB (median)"
            if sampling.dumps is not None
            else "no thread dump was taken"
        )
        why = f"{sampling.reason}; " if sampling.reason else ""
        planned = window.planned_samples or window.samples
        how = (
            f"{window.samples} of {planned} samples taken by thread dumps ({why}"
            f"{managers} task manager(s)); {dump}"
        )
    return Finding(
        "sampling",
        job,
        f"{how}; {window.seconds:.1f} s, {cost.requests} requests, "
        f"{cost.bytes / 1024:.0f} KB; rates and busy time {sampling.span}; {fresh}",
    )
