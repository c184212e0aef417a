"""Where a Flink job's subtasks run: task manager and attempt of each, read from the REST API.

Thread dumps are per task manager, and a task thread's name carries its attempt (``#0``); this
is what ties a thread of a dump to one subtask. :func:`read_placement` reads
``GET /jobs/{id}/vertices/{vertex}`` for every vertex that still runs (one request each) at the
start of every window, so a restarted job's new attempts, possibly on other task managers, and a
rescaled vertex's new subtasks are followed.

A job whose scheduler gave up waiting for slots (``slot.request.timeout``) fails with
``NoResourceAvailableException`` and, with a restart strategy, waits again: its subtasks' waits
start over and may never reach :data:`STARVED_AFTER_S`. So when a subtask waits for less, the
job's exception history (``GET /jobs/{id}/exceptions``) is read once: if it names that
exception, the waiting subtasks are starved too, and each carries the count
(:attr:`~bpmon.model.signals.TaskScheduling.slot_failures`) for the evidence.

A subtask that ``FINISHED`` (a bounded source that read everything) has no thread and no metrics
any more (Flink 2.3 drops them from its metric store): it is left out of the window. Any other
state than RUNNING or FINISHED means the job is restarting: the window waits
(:class:`~bpmon.model.errors.UnavailableError`) rather than read half a job. Except a subtask
waiting to be deployed (CREATED, SCHEDULED, DEPLOYING) for :data:`STARVED_AFTER_S` or longer, which
a restart does not take: the job waits for slots, and the window shows it waiting
(:attr:`JobPlacement.waiting`), for ``resource-starved`` to be diagnosed.

Each subtask of a window also carries its state and the cluster's slots (``GET /overview``:
``slots-total``, ``slots-available``) as its :class:`~bpmon.model.signals.TaskScheduling`, and each
running vertex's Flink's own backpressure level is read for a cross-check (:func:`flink_levels`).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from bpmon.collectors.flink.dumps import SubtaskKey, TaskThread, task_thread
from bpmon.collectors.flink.metrics import FlinkLevel, flink_level
from bpmon.collectors.flink.plan import FlinkGraph, SubtaskPlacement, placements_of
from bpmon.collectors.flink.rest import FlinkRest
from bpmon.collectors.flink.status import TASKS_OK
from bpmon.model.errors import BpmonError, UnavailableError
from bpmon.model.signals import RESTARTED_STATES, WAITING_STATES, TaskScheduling

STARVED_AFTER_S = 10.0
"""How long a subtask waits to be deployed before the window shows it waiting (a failover
deploys within seconds; a job short of slots waits on)."""

Slots = tuple[int | None, int | None]
"""The cluster's slots: (total, free); None where not known."""


@dataclass(frozen=True, slots=True)
class JobPlacement:
    """The task manager and attempt of every running subtask of ``graph``'s job, which subtasks
    finished, which wait for slots, and how often the job failed for want of them (read only
    while a subtask waits)."""

    graph: FlinkGraph
    where: Mapping[SubtaskKey, SubtaskPlacement]
    finished: frozenset[SubtaskKey] = frozenset()
    waiting: Mapping[SubtaskKey, SubtaskPlacement] = field(default_factory=dict)
    slot_failures: int = 0

    @property
    def task_managers(self) -> list[str]:
        """The task managers running the job's subtasks, in id order."""
        return sorted({p.task_manager for p in self.where.values() if p.task_manager})

    def running(self, vertex_id: str) -> list[int]:
        """The indices of the vertex's subtasks that run (not finished), in order."""
        return sorted(i for (v, i) in self.where if v == vertex_id)

    def waiting_of(self, vertex_id: str) -> list[int]:
        """The indices of the vertex's subtasks waiting to be deployed, in order."""
        return sorted(i for (v, i) in self.waiting if v == vertex_id)

    def expected(self) -> Mapping[str, Mapping[SubtaskKey, TaskThread]]:
        """Per task manager, its subtasks and the threads they run on."""
        by_tm: dict[str, dict[SubtaskKey, TaskThread]] = {}
        for key, place in self.where.items():
            v = self.graph.by_id(key[0])
            thread = task_thread(v.task_name or v.name, key[1], v.parallelism, place.attempt)
            by_tm.setdefault(place.task_manager, {})[key] = thread
        return by_tm

    def of(self, vertex_id: str, index: int) -> SubtaskPlacement | None:
        """The placement of subtask ``index`` of vertex ``vertex_id``, None if unknown."""
        return self.where.get((vertex_id, index))

    def index_of(self, place: SubtaskPlacement | None) -> int | None:
        """The task manager's number (0, 1, ... in id order), as the model numbers them."""
        managers = self.task_managers
        if place is None or place.task_manager not in managers:
            return None
        return managers.index(place.task_manager)


def read_placement(
    rest: FlinkRest, graph: FlinkGraph, done: frozenset[str] = frozenset(), slot_loop: int = 0
) -> JobPlacement:
    """Every vertex's subtasks, read now (``done``: vertices whose every task FINISHED, not
    read; ``slot_loop``: the job restarts over and over for want of slots, :func:`slot_failures`
    times so far, and its subtasks between two attempts wait for slots too).

    Raises:
        UnavailableError: a subtask is neither RUNNING nor FINISHED nor waiting for slots
            (:func:`starving`), or a vertex shows another number of subtasks than its
            parallelism (the job is restarting or rescaling).
    """
    where: dict[SubtaskKey, SubtaskPlacement] = {}
    over = [v for v in graph.vertices if v.id in done]
    finished: set[SubtaskKey] = {(v.id, i) for v in over for i in range(v.parallelism)}
    starved: dict[SubtaskKey, SubtaskPlacement] = {}
    waiting: list[str] = []
    read = [
        (v, placements_of(rest.get(f"/jobs/{graph.job.id}/vertices/{v.id}")))
        for v in graph.vertices
        if v.id not in done
    ]
    young = any(
        p.status in WAITING_STATES and not starving(p)
        for _, places in read
        for p in places.values()
    )
    failures = slot_loop or (slot_failures(rest, graph.job.id) if young else 0)
    unplaced = WAITING_STATES | RESTARTED_STATES if slot_loop else WAITING_STATES
    for v, places in read:
        if sorted(places) != list(range(v.parallelism)):
            waiting.append(f"{v.name} shows {len(places)} of {v.parallelism} subtasks")
        for index, place in places.items():
            if starving(place) or (failures and place.status in unplaced):
                starved[(v.id, index)] = place
            elif place.status not in TASKS_OK:
                waiting.append(f"{v.name}[{index}] is {place.status}")
            elif place.status == "FINISHED":
                finished.add((v.id, index))
            else:
                where[(v.id, index)] = place
    if waiting:
        raise UnavailableError(
            f"job {graph.job.name!r} ({graph.job.id}) is not running every task: "
            f"{'; '.join(sorted(waiting)[:4])}"
        )
    return JobPlacement(graph, where, frozenset(finished), starved, failures)


NO_RESOURCE = "NoResourceAvailableException"
"""What Flink's scheduler fails a job with when the slots it asked for did not come in time."""


def slot_failures(rest: FlinkRest, job: str) -> int:
    """How many of the job's latest failures in a row (its exception history, newest first, at
    most 20; each with its concurrent ones) are :data:`NO_RESOURCE`: 0 when the newest is
    another failure, there is none, or the history cannot be read."""
    try:
        answer = rest.get(f"/jobs/{job}/exceptions", {"maxExceptions": "20"}, retry=False)
    except BpmonError:
        return 0
    history = answer.get("exceptionHistory") if isinstance(answer, dict) else None
    entries = history.get("entries") if isinstance(history, dict) else None
    count = 0
    for entry in entries if isinstance(entries, list) else ():
        if not isinstance(entry, dict):
            break
        concurrent = entry.get("concurrentExceptions")
        failures = [entry, *(concurrent if isinstance(concurrent, list) else ())]
        if not any(isinstance(f, dict) and _names_no_resource(f) for f in failures):
            break  # the job failed for another reason since
        count += 1
    return count


def _names_no_resource(failure: Mapping[str, object]) -> bool:
    name, trace = failure.get("exceptionName"), failure.get("stacktrace")
    return any(isinstance(text, str) and NO_RESOURCE in text for text in (name, trace))


def starving(place: SubtaskPlacement) -> bool:
    """Whether a subtask has waited to be deployed :data:`STARVED_AFTER_S` or longer."""
    waited = place.in_status_s
    return place.status in WAITING_STATES and waited is not None and waited >= STARVED_AFTER_S


def flink_levels(rest: FlinkRest, placement: JobPlacement) -> dict[str, FlinkLevel]:
    """Per running vertex's id, Flink's own backpressure level and subtask ratios
    (``GET .../vertices/{id}/backpressure``): to cross-check the samples with, and to decide a
    subtask neither the samples nor the time accounting can see."""
    job = placement.graph.job.id
    return {
        v.id: flink_level(rest.get(f"/jobs/{job}/vertices/{v.id}/backpressure"))
        for v in placement.graph.vertices
        if placement.running(v.id)
    }


def read_slots(rest: FlinkRest, placement: JobPlacement | None = None) -> Slots:
    """The cluster's slots now (``GET /overview``); unknown when it does not answer.

    A job short of slots holds the slots it did get while it waits for the rest (Flink keeps
    them in the job's slot pool, and across its restarts), so ``/overview`` counts them as taken.
    When none of the job's subtasks runs, the slots free for it are the cluster's less those the
    other jobs hold (:func:`held_by_others`).
    """
    try:
        answer = rest.get("/overview", retry=False)
    except BpmonError:
        return None, None
    if not isinstance(answer, dict):
        return None, None
    total, free = _count(answer.get("slots-total")), _count(answer.get("slots-available"))
    waits = placement is not None and bool(placement.waiting) and not placement.where
    if waits and total is not None and free is not None and placement is not None:
        others = held_by_others(rest, placement.graph.job.id)
        if others is not None:
            return total, max(free, total - others)
    return total, free


def held_by_others(rest: FlinkRest, job: str) -> int | None:
    """The slots the cluster's other unfinished jobs hold: each its widest vertex (slot sharing
    puts one subtask of each vertex in a slot; a job with several slot sharing groups holds
    more, so this is a lower bound). None when the jobs cannot be read."""
    try:
        answer = rest.get("/jobs/overview", retry=False)
        jobs = answer.get("jobs") if isinstance(answer, dict) else None
        if not isinstance(jobs, list):
            return None
        held = 0
        for other in jobs:
            if not isinstance(other, dict) or other.get("jid") == job:
                continue
            if other.get("state") in ("FINISHED", "CANCELED", "FAILED"):
                continue
            details = rest.get(f"/jobs/{other.get('jid')}", retry=False)
            vertices = details.get("vertices") if isinstance(details, dict) else None
            widths = [_count(v.get("parallelism")) for v in vertices or [] if isinstance(v, dict)]
            held += max((w for w in widths if w is not None), default=0)
    except BpmonError:
        return None
    return held


def scheduling_of(
    place: SubtaskPlacement | None, slots: Slots, slot_failures: int = 0
) -> TaskScheduling | None:
    """A subtask's state (as Flink reports it; how long it has waited, if it waits), the
    cluster's slots, and how often the job failed for want of slots (:func:`slot_failures`)."""
    if place is None or not place.status:
        return None
    waited = place.in_status_s if place.status in WAITING_STATES else None
    return TaskScheduling(
        place.status,
        waited,
        slots_total=slots[0],
        slots_free=slots[1],
        slot_failures=slot_failures,
    )


def _count(value: object) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) and value >= 0 else None
