"""Scheduling pipelined regions as bulks of slots, as Flink's ``PipelinedRegionSchedulingStrategy``.

A region (``scenario/compiled.py``) is schedulable once every region it reads through a blocking
edge has finished, and every region it reads through a hybrid edge is running (Flink's consume
constraint ``UNFINISHED_PRODUCERS``: a hybrid consumer may start as soon as its producers run).
Its slots are requested as one **bulk**: every subtask's slot (``deployment.slot_placement``)
must be free, or held by the same slot of the same slot sharing group (slot sharing), and then
all of its tasks are deployed at once, consumers first. A slot is freed when the last task in it
finishes, and the regions waiting for it are tried again (later regions reuse freed slots).

A bulk that cannot be fulfilled waits. A checker looks at the waiting bulks periodically, as
``PhysicalSlotRequestBulkCheckerImpl`` does: a bulk is *fulfillable* if each slot it needs is free
or held by tasks that will finish (their sources are bounded); one that stays unfulfillable for
the ``slot_request_timeout_s`` fails the job with Flink's ``NoResourceAvailableException``.

Task states are Flink's ``ExecutionState`` (CREATED, SCHEDULED, DEPLOYING, RUNNING, FINISHED,
CANCELED, FAILED) with its ordinals, so they read as Flink's in metrics.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from enum import IntEnum
from typing import Generic, Protocol, TypeVar

from bpmon.scenario import OperatorSpec
from bpmon.scenario.compiled import JobPlan, Region

NO_RESOURCE = (
    "NoResourceAvailableException: Slot request bulk is not fulfillable! Could not allocate the "
    "required slot within slot request timeout"
)
"""Flink's message when a bulk stayed unfulfillable for the slot request timeout."""


class TaskState(IntEnum):
    """A task's state: Flink's ``ExecutionState``, with its ordinals."""

    CREATED = 0
    SCHEDULED = 1
    DEPLOYING = 2
    INITIALIZING = 3
    RUNNING = 4
    FINISHED = 5
    CANCELING = 6
    CANCELED = 7
    FAILED = 8


@dataclass(frozen=True, slots=True)
class WaitingForSlots:
    """Why a SCHEDULED task is not running: its region's bulk waits for slots.

    Attributes:
        region: the region's index.
        missing: the slots the bulk lacks now.
        since: when the bulk was requested (the scheduler's clock).
        slots: the slots the bulk needs in all.
        total: the slots the cluster has.
        free: the slots no region holds, when the wait was last marked (what Flink's
            ``/overview`` shows as slots available).
    """

    region: int
    missing: int
    since: float
    slots: int
    total: int
    free: int = 0


class ScheduledTask(Protocol):
    """A subtask as the scheduler sees it (a ``task.Task``): where it goes, what state it is in."""

    @property
    def spec(self) -> OperatorSpec:
        """Its operator (the vertex, by name)."""
        ...

    @property
    def index(self) -> int:
        """Its subtask index."""
        ...

    state: TaskState
    """Set to SCHEDULED and DEPLOYING here; FINISHED is read here."""
    slot_wait: WaitingForSlots | None
    """Why it waits for slots while SCHEDULED."""


T = TypeVar("T", bound=ScheduledTask)


class _Bulk(Generic[T]):
    """One region being scheduled: its tasks, the slot each needs, and how long it has waited."""

    def __init__(self, region: Region, tasks: list[T], slots: dict[T, tuple[int, str]]):
        self.region = region
        self.tasks = tasks
        self.slots = slots  # task -> (physical slot, logical slot "group/index")
        self.state = "created"  # created, pending, running, finished
        self.pending_since = 0.0
        self.unfulfillable_since: float | None = None
        self.bounded = True


class RegionScheduler(Generic[T]):
    """Schedules a job's regions as bulks of slots and frees slots as tasks finish.

    Args:
        job: the compiled job (regions, groups).
        tasks: the job's tasks by vertex, in subtask order.
        slots: the slot of each subtask by vertex (``deployment.slot_placement``).
        bounded: the vertices whose sources all finish (a slot they hold will be freed).
        timeout_s: the slot request timeout.
        deploy: starts one task's thread.
        fail: fails the job with a message.
        clock: monotonic seconds.
    """

    def __init__(
        self,
        job: JobPlan,
        tasks: Mapping[str, Sequence[T]],
        slots: Mapping[str, Sequence[int]],
        bounded: set[str],
        *,
        timeout_s: float,
        deploy: Callable[[T], None],
        fail: Callable[[str], None],
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        groups = {op.name: op.group for op in job.operators}
        self._bulks: list[_Bulk[T]] = []
        for region in job.regions:
            members = [t for v in region.vertices for t in tasks[v]]
            placed = {
                t: (slots[t.spec.name][t.index], f"{groups[t.spec.name]}/{t.index}")
                for t in members
            }
            bulk = _Bulk(region, members, placed)
            bulk.bounded = all(v in bounded for v in region.vertices)
            self._bulks.append(bulk)
        self._region_of = {t: b for b in self._bulks for t in b.tasks}
        self._total = job.slots
        self._holder: dict[int, str] = {}  # physical slot -> the logical slot in it
        self._users: dict[int, set[T]] = {}  # physical slot -> tasks deployed and unfinished
        self.peak_slots = 0
        """The most slots in use at once so far."""
        self.deployed: list[tuple[int, tuple[str, ...]]] = []
        """Each region when deployed: its index and the regions finished by then."""
        self._timeout_s = timeout_s
        self._deploy, self._fail, self._clock = deploy, fail, clock
        self._lock = threading.RLock()
        self._stopped = threading.Event()
        self.finished = threading.Event()
        self._checker = threading.Thread(
            target=self._check_loop, name="bpmon-slot-checker", daemon=True
        )

    # -- lifecycle ----------------------------------------------------------------------------

    def start(self) -> None:
        """Schedule the regions that can start (the checker starts once a bulk has to wait)."""
        with self._lock:
            self._advance()

    def stop(self) -> None:
        """Deploy nothing more and stop the checker (the job stops its tasks); idempotent."""
        with self._lock:
            self._stopped.set()
        if self._checker.ident is not None:
            self._checker.join(timeout=2.0)

    @property
    def alive(self) -> bool:
        """Whether the checker thread still runs."""
        return self._checker.is_alive()

    def task_finished(self, task: T) -> None:
        """``task`` finished: free its slot if it was the last one in it, schedule what can go."""
        with self._lock:
            slot, _ = self._region_of[task].slots[task]
            users = self._users.get(slot, set())
            users.discard(task)
            if not users:
                self._users.pop(slot, None)
                self._holder.pop(slot, None)
            bulk = self._region_of[task]
            if all(t.state == TaskState.FINISHED for t in bulk.tasks):
                bulk.state = "finished"
            self._advance()
            if all(b.state == "finished" for b in self._bulks):
                self.finished.set()

    # -- what the diagnosis reads ---------------------------------------------------------------

    def waiting(self) -> list[tuple[Region, int, float]]:
        """Each region waiting for slots: the region, the slots it still lacks, seconds waited."""
        with self._lock:
            now = self._clock()
            return [
                (b.region, self._missing(b), now - b.pending_since)
                for b in self._bulks
                if b.state == "pending"
            ]

    # -- scheduling (lock held) -----------------------------------------------------------------

    def _advance(self) -> None:
        """Mark schedulable regions pending, then deploy every pending bulk whose slots are free."""
        if self._stopped.is_set():
            return
        progress = True
        while progress:  # a deployed region may make a hybrid consumer schedulable
            progress = False
            for bulk in self._bulks:
                if bulk.state == "created" and self._inputs_ready(bulk.region):
                    bulk.state = "pending"
                    bulk.pending_since = self._clock()
                    for task in bulk.tasks:
                        task.state = TaskState.SCHEDULED
            for bulk in self._bulks:
                if bulk.state == "pending" and self._missing(bulk) == 0:
                    self._allocate(bulk)
                    progress = True
        for bulk in self._bulks:
            if bulk.state == "pending":
                self._mark_waiting(bulk)
        waiting = any(b.state == "pending" for b in self._bulks)
        if waiting and self._checker.ident is None:
            self._checker.start()

    def _mark_waiting(self, bulk: _Bulk[T]) -> None:
        """Tell the bulk's tasks what they wait for (the metrics read it)."""
        wait = WaitingForSlots(
            bulk.region.index,
            self._missing(bulk),
            bulk.pending_since,
            bulk.region.slots,
            self._total,
            self._total - len(self._holder),
        )
        for task in bulk.tasks:
            task.slot_wait = wait

    def _inputs_ready(self, region: Region) -> bool:
        done = all(self._bulks[i].state == "finished" for i in region.blocking_inputs)
        running = all(self._bulks[i].state in ("running", "finished") for i in region.hybrid_inputs)
        return done and running

    def _missing(self, bulk: _Bulk[T]) -> int:
        """Slots of ``bulk`` it cannot have now (0: it can be deployed).

        A slot is lacking when another logical slot holds its physical slot, or when two
        logical slots of the bulk would need the same physical slot (more than the cluster has).
        """
        wanted: dict[int, str] = {}
        lacking: set[str] = set()
        for slot, logical in bulk.slots.values():
            clash = wanted.setdefault(slot, logical) != logical
            if clash or self._holder.get(slot, logical) != logical:
                lacking.add(logical)
        return len(lacking)

    def _allocate(self, bulk: _Bulk[T]) -> None:
        bulk.state = "running"
        bulk.unfulfillable_since = None
        for task, (slot, logical) in bulk.slots.items():
            self._holder[slot] = logical
            self._users.setdefault(slot, set()).add(task)
            task.state = TaskState.DEPLOYING
            task.slot_wait = None
        self.peak_slots = max(self.peak_slots, len(self._holder))
        done = tuple(str(b.region.index) for b in self._bulks if b.state == "finished")
        self.deployed.append((bulk.region.index, done))
        for task in reversed(bulk.tasks):  # consumers first, as Flink deploys
            self._deploy(task)

    # -- the bulk checker -------------------------------------------------------------------------

    def _check_loop(self) -> None:
        period = min(1.0, max(0.01, self._timeout_s / 10))
        while not self._stopped.wait(period):
            with self._lock:
                message = self._check()
            if message is not None:
                self._fail(message)
                return

    def _check(self) -> str | None:
        """Flink's periodic check: a bulk unfulfillable for the timeout fails the job."""
        now = self._clock()
        for bulk in self._bulks:
            if bulk.state != "pending":
                continue
            if self._fulfillable(bulk):
                bulk.unfulfillable_since = None
                continue
            if bulk.unfulfillable_since is None:
                bulk.unfulfillable_since = now
            elif now - bulk.unfulfillable_since >= self._timeout_s:
                region = bulk.region
                return (
                    f"{NO_RESOURCE} ({self._timeout_s:g} s): region {region.index} "
                    f"({', '.join(region.vertices)}) needs {region.slots} slots"
                )
        return None

    def _fulfillable(self, bulk: _Bulk[T]) -> bool:
        """Whether every slot the bulk needs is free or will be freed (held by bounded tasks)."""
        wanted: dict[int, str] = {}
        for slot, logical in bulk.slots.values():
            if wanted.setdefault(slot, logical) != logical:
                return False
            holder = self._holder.get(slot)
            users = self._users.get(slot, set())
            if holder not in (None, logical) and not all(self._region_of[t].bounded for t in users):
                return False
        return True
