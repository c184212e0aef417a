"""Causes no stack sample shows: a region that waits for slots, and a partition that spills.

Both come from the metrics of bpmon's runtime (``docs/scenario.md``, Scheduling), which a thread
sample cannot give: a task that has no slot has no thread to sample, and a producer whose hybrid
partition spills is not backpressured at all, it writes to disk instead.

- ``resource-starved``: every subtask of a region is SCHEDULED (Flink's state ordinal 1,
  ``bpmon_taskState``): its bulk of slots waits (``bpmon_slotsMissing`` of ``bpmon_regionSlots``
  lacking, for ``bpmon_slotWaitSeconds``). The cause is named on the region's vertex of the largest
  parallelism, the one whose slots the region needs most.
- ``spilling``: a producer writing a hybrid exchange spills more than ``SPILL_MIN_BYTES_PER_S``
  (``bpmon_spilledBytesPerSecond``). Blocking exchanges write everything to disk by design and are
  not a cause.

Each cause carries its evidence with numbers and a recommendation, like every other kind.
"""

from __future__ import annotations

from collections.abc import Sequence

from bpmon.model import Observation, RootCause, VertexObservation

SCHEDULED = 1.0
"""Flink's ``ExecutionState.SCHEDULED`` ordinal, as ``bpmon_taskState`` gives it."""
SPILL_MIN_BYTES_PER_S = 64 * 1024
"""Below this, a partition's spilling is too little to name as a cause."""
STARVED_CONFIDENCE = 0.9
"""The task states say it directly: high, though not full (a bulk may be about to be served)."""
SPILLING_CONFIDENCE = 0.7
"""Spilling slows a job by its disk time, which bpmon measures but does not weigh against CPU."""


def scheduling_causes(observation: Observation) -> list[RootCause]:
    """The ``resource-starved`` and ``spilling`` causes of one window, starved regions first."""
    return [*_starved(observation), *_spilling(observation)]


def _extra(vertex: VertexObservation, name: str) -> list[float]:
    return [s.metrics.extra[name] for s in vertex.subtasks if name in s.metrics.extra]


def _starved(observation: Observation) -> list[RootCause]:
    regions: dict[int, list[VertexObservation]] = {}
    for vertex in observation.vertices:
        states = _extra(vertex, "bpmon_taskState")
        regions_of = _extra(vertex, "bpmon_region")
        waiting = (
            bool(states) and len(states) == len(vertex.subtasks) and set(states) == {SCHEDULED}
        )
        if waiting and regions_of:
            regions.setdefault(int(regions_of[0]), []).append(vertex)
    return [_starved_cause(index, vertices) for index, vertices in sorted(regions.items())]


def _starved_cause(region: int, vertices: Sequence[VertexObservation]) -> RootCause:
    widest = max(vertices, key=lambda v: v.parallelism)
    first = widest.subtasks[0].metrics.extra
    missing = int(max(max(_extra(v, "bpmon_slotsMissing"), default=0) for v in vertices))
    needed = int(first.get("bpmon_regionSlots", widest.parallelism))
    total = int(first.get("bpmon_clusterSlots", 0))
    waited = max(max(_extra(v, "bpmon_slotWaitSeconds"), default=0.0) for v in vertices)
    names = ", ".join(v.name for v in vertices)
    subtasks = sum(len(v.subtasks) for v in vertices)
    lower = max(1, widest.parallelism - missing)
    return RootCause(
        vertex=widest.name,
        kind="resource-starved",
        subtasks=tuple(s.index for s in widest.subtasks),
        confidence=STARVED_CONFIDENCE,
        evidence=(
            f"region {region} ({names}) is not running: its {subtasks} subtasks are SCHEDULED, "
            f"waiting {waited:.1f} s for a bulk of {needed} slots",
            f"{missing} of the {needed} slots it needs {'is' if missing == 1 else 'are'} not free "
            f"({total} slots in the cluster, the others held by regions that run)",
            f"{widest.name} needs {widest.parallelism} slots (its parallelism), the most in the "
            "region; records cannot reach a region that has not started",
        ),
        recommendation=(
            f"add {missing} slot{'s' if missing != 1 else ''} ([cluster] "
            f"slots_per_task_manager or [network] task_managers), or lower the parallelism of "
            f"{widest.name} to {lower}; a batch job can instead use blocking or hybrid exchanges, "
            "which let regions run one after another in fewer slots"
        ),
    )


def _spilling(observation: Observation) -> list[RootCause]:
    causes = []
    for vertex in observation.vertices:
        outgoing = [
            (v, e)
            for v in observation.vertices
            for e in v.inputs
            if e.source == vertex.name and e.exchange.startswith("hybrid")
        ]
        spilled = sum(_extra(vertex, "bpmon_spilledBytesPerSecond"))
        if outgoing and spilled >= SPILL_MIN_BYTES_PER_S:
            causes.append(_spilling_cause(vertex, outgoing, spilled))
    return causes


def _spilling_cause(
    vertex: VertexObservation,
    outgoing: Sequence[tuple[VertexObservation, object]],
    spilled: float,
) -> RootCause:
    read = sum(_extra(vertex, "bpmon_spillReadBytesPerSecond"))
    disk_ms = max(_extra(vertex, "bpmon_spillDiskTimeMsPerSecond"), default=0.0)
    exchanges = sorted({getattr(e, "exchange", "") for _, e in outgoing})
    consumers = [v for v, _ in outgoing]
    busy = [
        (v.name, max((s.metrics.busy_ratio or 0.0 for s in v.subtasks), default=0.0))
        for v in consumers
    ]
    slowest, slowest_busy = max(busy, key=lambda b: b[1])
    full = exchanges == ["hybrid-full"]
    to = ", ".join(v.name for v in consumers)
    evidence = (
        f"{vertex.name}'s {'/'.join(exchanges)} partitions to {to} "
        f"spill {spilled / 1e6:.2f} MB/s to disk and read back {read / 1e6:.2f} MB/s",
        f"its busiest subtask spends {disk_ms:.0f} ms/s on the disk",
        f"{slowest} is busy {slowest_busy:.0%}: "
        + ("it does not consume in time" if slowest_busy >= 0.5 else "it could consume more"),
    )
    if full:
        advice = (
            'hybrid-full writes every buffer to disk by design: exchange = "hybrid-selective" '
            "spills only what is not consumed in time; or give the partitions more network "
            "memory ([network] buffers_per_channel, floating_buffers_per_gate)"
        )
    else:
        advice = (
            f"let {slowest} consume in time (more parallelism, or less work per record) or give "
            "the partitions more network memory ([network] buffers_per_channel, "
            "floating_buffers_per_gate), so fewer buffers reach the spill threshold"
        )
    return RootCause(
        vertex=vertex.name,
        kind="spilling",
        subtasks=tuple(s.index for s in vertex.subtasks),
        confidence=SPILLING_CONFIDENCE,
        evidence=evidence,
        recommendation=advice,
    )
