"""Causes no stack sample shows: a region that waits for slots, and a partition that spills.

Both come from typed parts of the metrics (:mod:`bpmon.model.signals`) which a thread sample cannot
give: a task that has no slot has no thread to sample, and a producer whose hybrid partition
spills is not backpressured at all, it writes to disk instead.

- ``resource-starved``: every subtask of a vertex waits to be deployed (CREATED, SCHEDULED or
  DEPLOYING: its ``scheduling``) and the cluster has no slot free for it. bpmon's runtime says
  which pipelined region waits and how many slots it lacks; a Flink cluster says the states and
  its free slots (``/overview``), which is what the rule needs. The cause is named on the waiting
  vertex of the largest parallelism (per region where known), the one whose slots are needed most.
- ``spilling``: a producer writing a hybrid exchange spills more than ``SPILL_MIN_BYTES_PER_S``
  (its metrics' ``spill``; bpmon's runtime only). Blocking exchanges write everything to disk by
  design and are not a cause.

Each cause carries its evidence with numbers and a recommendation, like every other kind.
"""

from __future__ import annotations

from collections.abc import Sequence

from bpmon.model.evidence import (
    EvidenceLine,
    EvidencePart,
    count,
    decimal,
    line,
    rounded_percent,
)
from bpmon.model.signals import Spill, TaskScheduling
from bpmon.model.values import Observation, RootCause, VertexObservation

SPILL_MIN_BYTES_PER_S = 64 * 1024
"""Below this, a partition's spilling is too little to name as a cause."""
STARVED_CONFIDENCE = 0.9
"""The task states say it directly: high, though not full (a bulk may be about to be served)."""
SPILLING_CONFIDENCE = 0.7
"""Spilling slows a job by its disk time, which bpmon measures but does not weigh against CPU."""


def scheduling_causes(observation: Observation) -> list[RootCause]:
    """The ``resource-starved`` and ``spilling`` causes of one window, starved regions first."""
    return [*_starved(observation), *_spilling(observation)]


def _states(vertex: VertexObservation) -> list[TaskScheduling]:
    return [s.metrics.scheduling for s in vertex.subtasks if s.metrics.scheduling is not None]


def _waiting(vertex: VertexObservation) -> bool:
    """Every subtask of ``vertex`` waits for deployment, and no slot is free for it."""
    states = _states(vertex)
    if not states or len(states) != len(vertex.subtasks) or not all(s.waiting for s in states):
        return False
    if any(s.slot_wait is not None and s.slot_wait.missing > 0 for s in states):
        return True
    free = [s.slots_free for s in states if s.slots_free is not None]
    return bool(free) and min(free) < len(vertex.subtasks)


def _starved(observation: Observation) -> list[RootCause]:
    groups: dict[int, list[VertexObservation]] = {}
    for vertex in (v for v in observation.vertices if _waiting(v)):
        wait = next((s.slot_wait for s in _states(vertex) if s.slot_wait is not None), None)
        groups.setdefault(-1 if wait is None else wait.region, []).append(vertex)
    slots = FLINK_SLOTS if observation.source == "flink" else RUNTIME_SLOTS
    return [
        _starved_cause(i, vertices, slots, _pipelined_into(vertices))
        for i, vertices in sorted(groups.items())
    ]


def _pipelined_into(vertices: Sequence[VertexObservation]) -> bool:
    """Every input of the waiting vertices is pipelined: a blocking or hybrid exchange there
    would let the regions run one after another (the advice is moot when one already is)."""
    return all(e.exchange == "pipelined" for v in vertices for e in v.inputs)


RUNTIME_SLOTS = "[cluster] slots_per_task_manager or [network] task_managers"
FLINK_SLOTS = "taskmanager.numberOfTaskSlots, or more TaskManagers"
"""Where a user adds slots, by target: the scenario's keys, Flink's configuration."""


def _starved_cause(
    region: int, vertices: Sequence[VertexObservation], slot_keys: str, pipelined: bool
) -> RootCause:
    widest = max(vertices, key=lambda v: v.parallelism)
    states = [s for v in vertices for s in _states(v)]
    waits = [s.slot_wait for s in states if s.slot_wait is not None]
    free = min((s.slots_free for s in states if s.slots_free is not None), default=0)
    # without the region's request: the widest waiting vertex, as slot sharing packs the rest
    needed = max((w.needed for w in waits), default=widest.parallelism)
    missing = max((w.missing for w in waits), default=max(1, needed - free))
    total = next((s.slots_total for s in states if s.slots_total is not None), None)
    waited = max((s.waited_s for s in states if s.waited_s is not None), default=None)
    failures = max((s.slot_failures for s in states), default=0)
    names = ", ".join(v.name for v in vertices)
    subtasks = sum(len(v.subtasks) for v in vertices)
    lower = max(1, widest.parallelism - missing)
    # slot sharing packs one subtask of each vertex into a slot: every waiting vertex wider than
    # `lower` must come down to it; a parallelism is recommended when that is the widest alone
    wider = [v.name for v in vertices if v.parallelism > lower]
    name = widest.name
    which: tuple[EvidencePart, ...] = (names,)
    if region >= 0:
        which = ("region ", count("region", region), f" ({names})")
    waiting: tuple[EvidencePart, ...] = ()
    if waited is not None:
        waiting = (" waiting ", decimal("waited", waited, "s", 1, name), " s")
    needs = count("slots-needed", needed, name)
    others = "the others held by tasks that run)"
    held: tuple[EvidencePart, ...] = ("(", others)
    if total is not None:
        held = ("(", count("slots-total", total), " slots in the cluster, ", others)
    if total is not None and free >= total:  # nothing else runs: the cluster is too small
        plural = "s" if total != 1 else ""
        held = ("(the cluster has ", count("slots-total", total), f" slot{plural} in all)")
    return RootCause(
        vertex=widest.name,
        kind="resource-starved",
        subtasks=tuple(s.index for s in widest.subtasks),
        confidence=STARVED_CONFIDENCE,
        evidence=(
            line(
                which,
                " is not running: its ",
                count("waiting-subtasks", subtasks, name),
                " subtasks wait to be deployed,",
                waiting,
                " for ",
                needs,
                " slots",
            ),
            line(
                count("slots-missing", missing, name),
                " of the ",
                needs,
                f" slots it needs {'is' if missing == 1 else 'are'} not free ",
                held,
            ),
            line(
                f"{name} needs ",
                count("parallelism", widest.parallelism, name),
                " slots (its parallelism), the most of those waiting; records cannot reach a "
                "task that has not started",
            ),
            *_gave_up(failures),
        ),
        recommendation=(
            f"add {missing} slot{'s' if missing != 1 else ''} ({slot_keys})"
            + (f", or lower the parallelism of {' and '.join(wider)} to {lower}" if wider else "")
            + (
                "; a batch job can instead use blocking or hybrid exchanges, which let regions "
                "run one after another in fewer slots"
                if pipelined
                else ""
            )
        ),
        recommended_parallelism=lower if wider == [widest.name] else None,
    )


def _gave_up(failures: int) -> tuple[EvidenceLine, ...]:
    """The evidence line of a scheduler that gave up waiting for slots (none if it never did)."""
    if not failures:
        return ()
    times: tuple[EvidencePart, ...] = ("once",)
    if failures != 1:
        times = (count("restarts", failures), " times")
    return (
        line(
            "the scheduler gave up waiting for the slots ",
            times,
            " and restarted the job (NoResourceAvailableException in its exception history)",
        ),
    )


def _spills(vertex: VertexObservation) -> list[Spill]:
    return [s.metrics.spill for s in vertex.subtasks if s.metrics.spill is not None]


def _spilling(observation: Observation) -> list[RootCause]:
    causes = []
    for vertex in observation.vertices:
        outgoing = [
            (v, e)
            for v in observation.vertices
            for e in v.inputs
            if e.source == vertex.name and e.exchange.startswith("hybrid")
        ]
        spilled = sum(s.written_bytes_per_s for s in _spills(vertex))
        if outgoing and spilled >= SPILL_MIN_BYTES_PER_S:
            causes.append(_spilling_cause(vertex, outgoing, spilled))
    return causes


def _spilling_cause(
    vertex: VertexObservation,
    outgoing: Sequence[tuple[VertexObservation, object]],
    spilled: float,
) -> RootCause:
    read = sum(s.read_bytes_per_s for s in _spills(vertex))
    disk_ms = max((s.disk_ms_per_s for s in _spills(vertex)), default=0.0)
    exchanges = sorted({getattr(e, "exchange", "") for _, e in outgoing})
    consumers = [v for v, _ in outgoing]
    busy = [
        (v.name, max((s.metrics.busy_ratio or 0.0 for s in v.subtasks), default=0.0))
        for v in consumers
    ]
    slowest, slowest_busy = max(busy, key=lambda b: b[1])
    undeployed = [v.name for v in consumers if _not_started(v)]
    full = exchanges == ["hybrid-full"]
    to = ", ".join(v.name for v in consumers)
    name = vertex.name
    evidence = (
        line(
            f"{name}'s {'/'.join(exchanges)} partitions to {to} spill ",
            decimal("spilled-mb", spilled / 1e6, "MB/s", 2, name),
            " MB/s to disk and read back ",
            decimal("read-back-mb", read / 1e6, "MB/s", 2, name),
            " MB/s",
        ),
        line(
            "its busiest subtask spends ",
            decimal("disk-ms", disk_ms, "ms/s", 0, name),
            " ms/s on the disk",
        ),
        _consumer_line(slowest, slowest_busy, undeployed),
    )
    if undeployed:
        advice = (
            f"give {' and '.join(undeployed)} slots (see resource-starved): once running, it "
            "reads the partition from memory; or give the partitions more network memory "
            "([network] buffers_per_channel, floating_buffers_per_gate)"
        )
    elif full:
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


def _not_started(vertex: VertexObservation) -> bool:
    """Every subtask of ``vertex`` waits to be deployed (free slots or not)."""
    states = _states(vertex)
    return bool(states) and all(s.waiting for s in states)


def _consumer_line(slowest: str, busy: float, undeployed: Sequence[str]) -> EvidenceLine:
    """What the spilling partition's consumers do: not deployed yet (nothing reads the
    partition, so it spills), too slow to read it in time, or able to read more."""
    if undeployed:
        names = " and ".join(undeployed)
        verb = "has" if len(undeployed) == 1 else "have"
        return line(
            f"{names} {verb} not started (waiting to be deployed): nothing reads what spills"
        )
    shown = rounded_percent("busy", busy, slowest)
    if busy >= 0.5:
        return line(f"{slowest} is busy ", shown, ": it does not consume in time")
    return line(f"{slowest} is busy ", shown, ": it could consume more")
