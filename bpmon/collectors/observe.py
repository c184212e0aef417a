"""From a classified burst (plus optional metrics) to the :class:`~bpmon.model.values.Observation`.

Threads become subtasks of vertices in one of two ways:

- with a topology (a scenario or topology file), the threads matching an operator's ``threads``
  regex (default: the runtime's naming, ``"{vertex} ({i+1}/{n})"``) are its subtasks, and the
  operators' inputs are the edges. Threads matching no operator are left out; an operator whose
  regex matches no thread is a configuration error.
- without one, the profile's ``threads`` regex groups threads by its ``vertex`` group; a thread it
  does not match is a vertex of its own (parallelism 1). There are no edges.

Subtasks are ordered by the regex's ``index`` group when it has one (a number), then by name in
natural order (``w-2`` before ``w-10``), and numbered 0, 1, ... in that order.

A subtask is on the data path (``SubtaskWindow.data_path``) when a topology lists its thread, when
the profile's ``threads`` regex names it a stage, or when any sample showed it exchanging records
(:class:`~bpmon.collectors.sampler.ThreadCounts`). A stage busy with a slow call is rarely caught
inside its queue's get, so its name or the topology must vouch for it; a keeper thread (a main
thread sleeping or joining to keep the program alive) has neither and is never blamed.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import replace

from bpmon.collectors.profile import Profile
from bpmon.collectors.sampler import StackBurst, ThreadCounts
from bpmon.model.errors import ConfigError
from bpmon.model.signals import VIEWS
from bpmon.model.values import (
    NO_METRICS,
    Edge,
    Metrics,
    Observation,
    Source,
    SubtaskWindow,
    VertexObservation,
    Window,
)
from bpmon.scenario import OperatorSpec, Scenario, default_thread_pattern, thread_pattern

_SHOWN_THREADS = 8


MetricsByVertex = Mapping[str, Mapping[int, Metrics]]
"""Metrics per vertex name, then per subtask index (0-based)."""

PlacementByVertex = Mapping[str, Mapping[int, int]]
"""The task manager hosting each subtask, per vertex name, then per subtask index."""

_Readings = tuple[MetricsByVertex, PlacementByVertex]


def observation_from_burst(
    burst: StackBurst,
    topology: Scenario | None,
    profile: Profile,
    job: str,
    source: Source,
    *,
    metrics: MetricsByVertex | None = None,
    placement: PlacementByVertex | None = None,
) -> Observation:
    """The Observation of one burst: vertices, subtasks with their sample counts, and metrics.

    Args:
        burst: the classified stack samples.
        topology: the job's graph (scenario or topology file), or None to group by thread names.
        profile: the profile the burst was classified with (its ``threads`` regex groups threads
            when there is no topology).
        job: the job name.
        source: what was watched (``runtime``, ``pyspy`` or ``flink``).
        metrics: metric values per vertex and subtask index; missing ones stay None.
        placement: the task manager of each subtask, when the target knows it.

    Raises:
        ConfigError: an operator's thread regex matches none of the threads seen.
    """
    if topology is not None:
        vertices = _by_topology(burst.threads, topology, (metrics or {}, placement or {}))
    else:
        vertices = _by_thread_names(burst.threads, profile, (metrics or {}, placement or {}))
    window = Window(
        start=burst.start,
        end=burst.end,
        samples=burst.samples,
        interval_ms=burst.interval_ms,
        jitter_ms_p99=burst.jitter_ms_p99,
        planned_samples=burst.planned_samples,
        planned_interval_ms=burst.planned_interval_ms,
    )
    return Observation(
        job=job, source=source, window=window, vertices=tuple(vertices), signals=VIEWS[source]
    )


def _by_topology(
    threads: Sequence[ThreadCounts], topology: Scenario, readings: _Readings
) -> list[VertexObservation]:
    taken: set[int] = set()
    vertices = []
    for op in topology.operators:
        regex = _compile(op, topology)
        mine = [
            (found, i, t)
            for i, t in enumerate(threads)
            if i not in taken and (found := regex.search(t.name)) is not None
        ]
        if not mine:
            raise ConfigError(_no_match_message(op, topology, threads))
        taken.update(i for _, i, _ in mine)
        ordered = tuple(t for _, _, t in sorted(mine, key=lambda m: _order(m[0], m[2].name)))
        vertex = _vertex(op.name, ordered, readings, inputs=edges_of(op), kind=op.kind, listed=True)
        members = tuple(m.name for m in op.members)
        vertices.append(replace(vertex, operators=members, max_parallelism=op.max_parallelism))
    return vertices


def edges_of(op: OperatorSpec) -> tuple[Edge, ...]:
    """The model's edges of an operator's inputs."""
    return tuple(Edge(e.source, e.partitioner, e.exchange) for e in op.inputs)


def _by_thread_names(
    threads: Sequence[ThreadCounts], profile: Profile, readings: _Readings
) -> list[VertexObservation]:
    groups: dict[str, list[tuple[tuple[object, ...], ThreadCounts]]] = {}
    named: set[str] = set()
    for t in threads:
        found = profile.threads.search(t.name) if profile.threads is not None else None
        vertex = found.group("vertex") if found is not None else t.name
        groups.setdefault(vertex, []).append((_order(found, t.name), t))
        if found is not None:
            named.add(vertex)
    return [
        _vertex(
            vertex,
            tuple(t for _, t in sorted(members, key=lambda m: m[0])),
            readings,
            listed=vertex in named,
        )
        for vertex, members in sorted(groups.items(), key=lambda g: _natural(g[0]))
    ]


def _vertex(
    name: str,
    threads: tuple[ThreadCounts, ...],
    readings: _Readings,
    inputs: tuple[Edge, ...] = (),
    kind: str | None = None,
    *,
    listed: bool,
) -> VertexObservation:
    """One vertex of ``threads``; ``listed``: a topology or the profile's names make it a stage."""
    metrics, placement = readings[0].get(name, {}), readings[1].get(name, {})
    subtasks = tuple(
        _subtask(index, t, metrics.get(index), placement.get(index), listed or t.data_path)
        for index, t in enumerate(threads)
    )
    return VertexObservation(
        name=name, parallelism=len(subtasks), inputs=inputs, subtasks=subtasks, kind=kind
    )


def _subtask(
    index: int, counts: ThreadCounts, m: Metrics | None, task_manager: int | None, data_path: bool
) -> SubtaskWindow:
    return SubtaskWindow(
        index=index,
        thread=counts.name,
        samples=counts.total,
        backpressured=counts.backpressured,
        idle=counts.idle,
        busy=counts.busy,
        task_manager=task_manager,
        metrics=m if m is not None else NO_METRICS,
        data_path=data_path,
        chain_samples=counts.chain,
    )


def _compile(op: OperatorSpec, topology: Scenario) -> re.Pattern[str]:
    pattern = thread_pattern(op)
    try:
        return re.compile(pattern)
    except re.error as err:
        raise ConfigError(
            f"{topology.path or topology.name}: operator {op.name!r} threads = {pattern!r} is not "
            f"a valid regex ({err.msg}); fix it"
        ) from None


def _no_match_message(op: OperatorSpec, topology: Scenario, threads: Sequence[ThreadCounts]) -> str:
    pattern = thread_pattern(op)
    which = "threads" if op.threads is not None else "threads (default: the runtime's naming)"
    names = sorted({t.name for t in threads}, key=_natural)
    shown = ", ".join(repr(n) for n in names[:_SHOWN_THREADS])
    more = f" and {len(names) - _SHOWN_THREADS} more" if len(names) > _SHOWN_THREADS else ""
    seen = f"threads seen: {shown}{more}" if names else "no threads were seen"
    hint = (
        "set the operator's threads regex"
        if pattern == default_thread_pattern(op.name)
        else "fix the regex"
    )
    return (
        f"{topology.path or topology.name}: operator {op.name!r} {which} = {pattern!r} matches "
        f"no thread; {seen}; {hint}"
    )


def _order(found: re.Match[str] | None, name: str) -> tuple[object, ...]:
    index = found.groupdict().get("index") if found is not None else None
    if index is not None and index.isdigit():
        return (0, int(index), _natural(name))
    return (1, 0, _natural(name))


def _natural(name: str) -> list[object]:
    """Sort key that orders embedded numbers by value: ``w-2`` before ``w-10``."""
    parts: list[object] = re.split(r"(\d+)", name)
    parts[1::2] = [int(str(p)) for p in parts[1::2]]
    return parts
