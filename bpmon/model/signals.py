"""What a target can observe, and the typed parts of a window only some targets give.

A diagnosis may only use what was measured. bpmon's runtime sees more than a real Flink cluster
shows (every channel's backlog and credit, its own slot waits and spill counters); a py-spy target
sees stacks alone. Each target declares its :class:`Signal` set; a rule that needs a signal the
target lacks does not fire, and the report says which evidence was not available (an
``unobserved`` finding). ``bpmon run SCENARIO --observe flink`` cuts a runtime window down to
:data:`FLINK`, so the accuracy figures say what rests on signals only the runtime has.

The optional parts of a subtask's metrics are typed here instead of travelling as strings:
:class:`SourceBacklog` (FLIP-33 ``pendingRecords``), :class:`Spill` (bytes a partition writes to
disk), :class:`TaskScheduling` (a task's deployment state and the cluster's slots).
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum


class Signal(StrEnum):
    """One kind of evidence a target may or may not observe."""

    SAMPLES = "samples"
    """Stack samples of every task thread (busy / backpressured / idle)."""
    TIME_ACCOUNTING = "time-accounting"
    """busy / idle / backpressured time per second (Flink's task metrics)."""
    POOL_USAGE = "pool-usage"
    """``outPoolUsage`` and ``inPoolUsage``."""
    RECORD_RATES = "record-rates"
    """``numRecordsInPerSecond`` / ``numRecordsOutPerSecond``."""
    PENDING_RECORDS = "pending-records"
    """FLIP-33 ``pendingRecords`` of sources (a Kafka source's lag)."""
    CHAIN_SAMPLES = "chain-samples"
    """Which member of a chained task is on the stack in each busy sample."""
    TASK_STATES = "task-states"
    """Each subtask's deployment state and the cluster's free slots."""
    SLOT_REQUESTS = "slot-requests"
    """Which pipelined region a waiting subtask belongs to and how many slots it lacks (bpmon's
    runtime scheduler; Flink shows the states and the free slots only)."""
    CHANNELS = "channels"
    """Per-channel backlog, queued buffers and credit (no real system publishes these)."""
    SPILL = "spill"
    """Bytes a hybrid or blocking partition writes to and reads from disk."""
    CHECKPOINTS = "checkpoints"
    """Each checkpoint's phases per subtask: start delay, alignment, sync and async, sizes."""


RUNTIME = frozenset(Signal)
"""bpmon's runtime: everything."""
FLINK = frozenset(Signal) - {Signal.CHANNELS, Signal.SPILL, Signal.SLOT_REQUESTS}
"""A Flink cluster through its REST API and its samples: no per-channel readings, no spill
metric for hybrid partitions (Flink 2.3 publishes none), no region's slot request."""
PYSPY = frozenset({Signal.SAMPLES, Signal.CHAIN_SAMPLES})
"""A Python process through py-spy: stacks only."""
VIEWS: dict[str, frozenset[Signal]] = {"runtime": RUNTIME, "flink": FLINK, "pyspy": PYSPY}
"""What ``--observe`` accepts: a runtime window cut down to what each target shows."""


def unavailable(needed: frozenset[Signal], observed: frozenset[Signal]) -> list[Signal]:
    """The signals in ``needed`` that ``observed`` lacks, in :class:`Signal`'s order."""
    return [s for s in Signal if s in needed and s not in observed]


@dataclass(frozen=True, slots=True)
class SourceBacklog:
    """A source's FLIP-33 ``pendingRecords`` over a window.

    Attributes:
        pending_records: records owed at the window's end (None: the source has the gauge but
            gave no value at the end).
        growth_per_s: how fast it grew over the window (records/s; negative while catching up;
            None when only one reading was taken).
    """

    pending_records: float | None
    growth_per_s: float | None


@dataclass(frozen=True, slots=True)
class Spill:
    """What a producer's partitions wrote to and read back from disk over a window.

    Attributes:
        written_bytes_per_s: bytes spilled per second.
        read_bytes_per_s: bytes read back per second.
        disk_ms_per_s: time the task spent on the disk, ms per second.
    """

    written_bytes_per_s: float
    read_bytes_per_s: float = 0.0
    disk_ms_per_s: float = 0.0


TASK_STATES = frozenset(
    {
        "CREATED",
        "SCHEDULED",
        "DEPLOYING",
        "INITIALIZING",
        "RUNNING",
        "FINISHED",
        "CANCELING",
        "CANCELED",
        "FAILED",
        "RECONCILING",
    }
)
"""Flink's ``ExecutionState`` names (the REST API gives names, never ordinals)."""
WAITING_STATES = frozenset({"CREATED", "SCHEDULED", "DEPLOYING"})
"""States of a subtask that has no running task thread yet (it waits for a slot or deploys)."""
RESTARTED_STATES = frozenset({"CANCELING", "CANCELED", "FAILED"})
"""States of a subtask between two attempts of a restarting job: of a job that restarts because
its slots never come, a subtask waiting for them as much as a SCHEDULED one."""


@dataclass(frozen=True, slots=True)
class SlotWait:
    """A waiting subtask's pipelined region and the slots it lacks (bpmon's runtime says it;
    Flink does not, so there the cause is sized from the free slots).

    Attributes:
        region: the region's number.
        missing: slots the region lacks to start.
        needed: slots the region needs at once.
    """

    region: int
    missing: int
    needed: int


@dataclass(frozen=True, slots=True)
class TaskScheduling:
    """A subtask's deployment state and the cluster's slots when the window ended.

    Attributes:
        state: Flink's ``ExecutionState`` name (one of :data:`TASK_STATES`).
        waited_s: how long it has been in a waiting state (None: running, or unknown).
        slots_total: slots in the cluster (None: unknown).
        slots_free: slots free in the cluster (None: unknown).
        slot_wait: the region and slots it waits for, where the target knows them.
        slot_failures: how often the job's scheduler gave up waiting for slots and restarted
            it (Flink: ``NoResourceAvailableException`` entries of the job's exception history;
            0 where none or not known).
    """

    state: str
    waited_s: float | None = None
    slots_total: int | None = None
    slots_free: int | None = None
    slot_wait: SlotWait | None = None
    slot_failures: int = 0

    @property
    def waiting(self) -> bool:
        """Whether the subtask has no running task yet: it waits to be deployed, or is between
        two attempts of a job that restarts for want of slots."""
        if self.slot_failures and self.state in RESTARTED_STATES:
            return True
        return self.state in WAITING_STATES
