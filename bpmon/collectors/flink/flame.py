"""Flink's own stack sampler: a window's flame graphs asked for, awaited and read as stacks.

``GET /jobs/{job}/vertices/{vertex}/flamegraph?type=full[&subtaskindex=N]`` (Flink 1.13+, one
subtask since 1.17) answers ``{"endTimestamp": ms, "data": node}``, where a node is
``{"name": "package.Class.method:line", "value": samples through it, "children": [...]}`` under a
root named ``root`` whose value is the number of samples. Frames go from the caller
(``java.lang.Thread.run``) to the innermost. A sample whose stack ends at a node counts in that
node's value and in none of its children's: a node's *own* count (its value less its children's)
is the number of samples whose whole stack is the path from the root to it. Those paths are the
stacks :func:`stacks_of` returns, innermost frame first as a thread dump writes them.

Flink answers with placeholders too: ``endTimestamp`` -1 when the vertex (or subtask) is no
longer running, -2 when ``rest.flamegraph.enabled`` is false, -3 while the first samples are being
taken. A graph's ``endTimestamp`` is the JobManager's wall-clock time (ms) when its samples ended;
Flink serves it from a cache until ``rest.flamegraph.refresh-interval`` after that
(:mod:`~bpmon.collectors.flink.config`), so the age of what is served is read from it.

Only the task's own thread is sampled: a legacy ``SourceFunction`` loops on a thread of its own,
which Flink's sampler does not see (its task thread waits for mail, a ``suspended`` sample).

:class:`FlameSampler` takes a window: one request per vertex starts Flink's sampling, where its
cache allows (a graph that ended less than the refresh interval ago is served as it is and nothing
is sampled), so it keeps the ``endTimestamp`` of its first answer and polls until a graph NEWER
than that one arrives (never one taken before the window). Flink files the vertex's samples per
subtask, and ``&subtaskindex=N`` then reads each subtask's share from that cache.
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any, Literal

from bpmon.collectors.flink.config import FlinkClusterConfig
from bpmon.collectors.flink.dumps import SubtaskKey, Tally
from bpmon.collectors.flink.rest import FlinkRest
from bpmon.collectors.sampler import StopSignal
from bpmon.model.errors import CollectorError
from bpmon.model.values import Window

TERMINATED, DISABLED, WAITING = -1, -2, -3
"""Flink's placeholder ``endTimestamp`` values (``VertexFlameGraph``)."""

FlameState = Literal["graph", "terminated", "disabled", "waiting"]

Stack = tuple[tuple[str, ...], int]
"""A stack (frames innermost first, ``package.Class.method``) and how many samples had it."""


@dataclass(frozen=True, slots=True)
class FlameGraph:
    """One flame graph answer.

    Attributes:
        state: ``graph``, or the placeholder Flink answered instead.
        end_ms: when the samples ended (JobManager wall clock, ms); None for a placeholder.
        stacks: every distinct stack and its sample count.
    """

    state: FlameState
    end_ms: int | None = None
    stacks: tuple[Stack, ...] = ()

    @property
    def samples(self) -> int:
        """How many samples the graph holds."""
        return sum(count for _, count in self.stacks)


_PLACEHOLDERS: dict[int, FlameState] = {
    TERMINATED: "terminated",
    DISABLED: "disabled",
    WAITING: "waiting",
}


def flame_graph(answer: Any, where: str) -> FlameGraph:
    """Parse a ``flamegraph`` answer; ``where`` (the request) names it in errors.

    Raises:
        CollectorError: not a flame graph (one line naming the request).
    """
    end = answer.get("endTimestamp") if isinstance(answer, dict) else None
    if not isinstance(end, int) or isinstance(end, bool):
        raise CollectorError(
            f"{where} answered without an integer endTimestamp; not a Flink flame graph "
            "(point --flink at the JobManager's REST address)"
        )
    if end < 0:
        state = _PLACEHOLDERS.get(end)
        if state is None:
            raise CollectorError(f"{where} answered endTimestamp {end}, which Flink never gives")
        return FlameGraph(state)
    root = answer.get("data")
    if root is None:
        return FlameGraph("graph", end)
    return FlameGraph("graph", end, stacks_of(root, where))


def frame_of(name: str) -> str:
    """``package.Class.method`` of a node's name (``package.Class.method:123``)."""
    head, sep, line = name.rpartition(":")
    return head if sep and line.lstrip("-").isdigit() else name


def stacks_of(root: Mapping[str, Any], where: str) -> tuple[Stack, ...]:
    """Every stack of the tree under ``root`` with its own count (see the module); the root
    itself is not a frame. Walked without recursion: a stack may be deep.

    Raises:
        CollectorError: a node without a name, a count that is not a non-negative integer, or
            children counting more samples than their parent.
    """
    stacks: list[Stack] = []
    todo: list[tuple[Mapping[str, Any], tuple[str, ...]]] = [(root, ())]
    while todo:
        node, path = todo.pop()
        children = _children(node, where)
        own = _value(node, where) - sum(_value(c, where) for c in children)
        if own < 0:
            raise CollectorError(
                f"{where}: the children of {path[-1] if path else 'root'!r} count more samples "
                "than it does; not a Flink flame graph"
            )
        if own and path:
            stacks.append((tuple(reversed(path)), own))
        for child in children:
            name = child.get("name")
            if not isinstance(name, str):
                raise CollectorError(f"{where}: a flame graph node has no name")
            todo.append((child, (*path, frame_of(name))))
    return tuple(stacks)


def _children(node: Mapping[str, Any], where: str) -> list[Mapping[str, Any]]:
    children = node.get("children") or []
    if not isinstance(children, list) or not all(isinstance(c, dict) for c in children):
        raise CollectorError(f"{where}: a flame graph node's children are not a list of nodes")
    return children


def _value(node: Mapping[str, Any], where: str) -> int:
    value = node.get("value")
    if not isinstance(value, int) or isinstance(value, bool) or value < 0:
        raise CollectorError(f"{where}: a flame graph node's value {value!r} is not a count")
    return value


MAX_STALE_WAIT_S = 15.0
"""The longest a window waits for Flink's cached graph to age past its refresh interval (so a
request samples again) before it takes thread dumps instead."""
SLACK_S = 5.0
"""How long after its planned end a burst of Flink's sampler may still arrive (the samples of a
busy TaskManager come late; the graph is built on the JobManager)."""
POLL_S = 0.25
"""How often a graph that is not there yet is asked for again."""


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
            left = []
            for p in todo:
                began = self._clock()
                if self._read_vertex(p, tally, taken):
                    # reading a fresh graph's subtasks is bpmon's time, not Flink's lateness: a
                    # vertex of 128 subtasks takes 128 requests, which the slack must not pay
                    deadline += self._clock() - began
                else:
                    left.append(p)
            todo = left
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
