"""A loaded scenario as frozen values: the job graph, its operators and its settings.

These are what the runtime builds a job from and what ``bpmon monitor`` reads a topology from.
They are plain values with no validation of their own: the loader (``loader.py``) checks a file
once and builds them, so every check has the file name and key at hand for its error.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Literal

from bpmon.model.checkpoints import CheckpointMode
from bpmon.scenario.graph import downstream_map, topological_sort
from bpmon.scenario.network import NetworkConfig
from bpmon.scenario.rates import SourceRates

OperatorKind = Literal["source", "map", "flatmap", "filter", "sink"]
Partitioner = Literal["forward", "rebalance", "hash", "broadcast"]
Exchange = Literal["pipelined", "blocking", "hybrid-selective", "hybrid-full"]

SourceApi = Literal["flip-27", "legacy"]
Mode = Literal["streaming", "batch"]

KINDS: tuple[OperatorKind, ...] = ("source", "map", "flatmap", "filter", "sink")
PARTITIONERS: tuple[Partitioner, ...] = ("forward", "rebalance", "hash", "broadcast")
EXCHANGES: tuple[Exchange, ...] = ("pipelined", "blocking", "hybrid-selective", "hybrid-full")
EXCHANGE_WORDS = (*EXCHANGES, "hybrid")
"""What a file may write as ``exchange``: ``hybrid`` alone means ``hybrid-selective``."""
MODES: tuple[Mode, ...] = ("streaming", "batch")
DEFAULT_SLOT_SHARING_GROUP = "default"
DEFAULT_SPILL_COST_US = 100.0
"""``spill_cost_us`` left out: a record whose state is not in memory waits about one random read
of a local SSD and its deserialization (RocksDB missing its block cache)."""
"""Flink's name of the slot sharing group of an operator that names none."""
CHECKPOINT_MODES: tuple[CheckpointMode, ...] = ("aligned", "unaligned")


@dataclass(frozen=True, slots=True)
class KeySpec:
    """The ``keys`` of a ``hash`` input: the records' keys, Java ints ``0 .. count-1``.

    Exactly one of ``zipf`` (key ``k`` weighs ``1 / (k + 1) ** zipf``) and ``hot`` (the first
    keys' shares, the rest spread evenly over the other keys) is set. The runtime routes each
    key as Flink's key groups do (``runtime/keygroups.py``).
    """

    count: int
    zipf: float | None = None
    hot: tuple[float, ...] = ()


@dataclass(frozen=True, slots=True)
class InputSpec:
    """One input edge of an operator: records flow from ``source`` to the operator listing it.

    Attributes:
        source: the upstream operator (the TOML key ``from``).
        partitioner: how records are routed to downstream subtasks; the loader resolves the
            default (``forward`` for equal parallelisms, else ``rebalance``).
        exchange: ``pipelined``, ``blocking``, ``hybrid-selective`` or ``hybrid-full`` (as
            written; compilation may turn a pipelined edge blocking, see ``compiled.py``).
        skew: ``hash`` only: the share of records carrying one hot key (to subtask 0).
        keys: ``hash`` only: the records' key distribution, routed by key groups.
    """

    source: str
    partitioner: Partitioner
    exchange: Exchange = "pipelined"
    skew: float | None = None
    keys: KeySpec | None = None


@dataclass(frozen=True, slots=True)
class FailSpec:
    """The ``fail`` key of an operator: a failure injected the way a bug in user code fails.

    The chosen subtasks raise a plain ``RuntimeError`` in their own thread, which fails the job
    through the same path as any operator that raises. Exactly one trigger is set.

    Attributes:
        after_records: raise once the subtask has processed this many input records (a source:
            emitted this many records); 0 raises before the first one.
        after_s: raise at the subtask's first step at least this many seconds after its thread
            started (a step: a chunk of records, or a turn of its loop, which an idle task takes
            at least every buffer timeout; a backpressured one, once its output is available).
        subtask: only this subtask index fails; ``None``: every subtask of the operator.
    """

    after_records: int | None = None
    after_s: float | None = None
    subtask: int | None = None

    def applies_to(self, index: int) -> bool:
        """Whether subtask ``index`` fails."""
        return self.subtask is None or self.subtask == index


@dataclass(frozen=True, slots=True)
class ManagedMemory:
    """The ``managed_memory`` key of an operator: a weight, or an explicit size (a resource spec).

    Exactly one is set. Weights share out a slot's managed memory in proportion; sizes are
    Flink's fine-grained resource specs: the operator gets that much.
    """

    weight: float | None = None
    mb: float | None = None

    def __str__(self) -> str:
        return f"{self.mb:g}mb" if self.mb is not None else f"weight {self.weight:g}"


@dataclass(frozen=True, slots=True)
class OperatorSpec:
    """One operator (job vertex) and how fast it is.

    Every kind is modelled as "records out per record in = ``fanout`` x ``selectivity``": a map
    has both at 1.0, a flatmap sets ``fanout``, a filter sets ``selectivity``.

    Attributes:
        name: unique name, ``[A-Za-z0-9_.-]+``.
        kind: ``source``, ``map``, ``flatmap``, ``filter`` or ``sink``.
        parallelism: number of subtasks.
        rate: sources only: records per second per subtask, 0 = as fast as possible; ``None``
            for other kinds (and for sources of a topology file, which the runtime never runs).
        record_bytes: serialized size of each record this operator emits.
        cost_us: service time per input record in microseconds.
        fanout: records emitted per input record (flatmap; 1.0 for other kinds).
        selectivity: share of input records that pass (filter; 1.0 for other kinds).
        slow_subtasks: per-subtask multiplier of ``cost_us`` (a slow machine).
        cost_cv: coefficient of variation of the cost per record (log-normal, mean ``cost_us``).
        max_parallelism: the number of key groups its keyed inputs are routed by (Flink's).
        inputs: the input edges; empty for a source.
        threads: topology files only: regex over thread names; ``None`` = the runtime's naming.
        fail: scenario files only: an injected failure (tests and demos of a failing job).
        records: sources only: a bounded source emits this many records per subtask, then
            finishes; ``None`` = unbounded.
        slot_sharing_group: the group as written; ``None`` = the default (see ``compiled.py``).
        managed_memory: its use of managed memory; ``None`` = none.
        chain: ``False`` breaks an operator chain before this operator.
        members: a chained task (``chained.py``): its operators in order; empty otherwise.
        source_api: sources only: ``"flip-27"`` (a ``Source`` read in the task's mailbox: soft
            backpressure, idle while no record is due) or ``"legacy"`` (a ``SourceFunction`` on
            its own thread: it never checks its output, so it waits only in the buffer request,
            hard backpressure; Flink cannot measure its busy time).
        source_rates: sources only: ``rate_profile``, ``subtask_rates`` and ``backlog``
            (``rates.py``); ``None``: every subtask at ``rate`` from the start, nothing pending.
        state_mb: the size of each subtask's state in MB: what a checkpoint snapshots and
            uploads, and with ``managed_memory`` the working set that may not fit in it (it
            spills); ``None``: no state.
        spill_cost_us: extra service time of a record whose state is not in managed memory.
        managed_mb: the managed memory each subtask gets, from the compiled plan (the loader
            sets it; 0 when the operator uses none).
    """

    name: str
    kind: OperatorKind
    parallelism: int = 1
    rate: float | None = None
    record_bytes: int = 100
    cost_us: float = 0.0
    fanout: float = 1.0
    selectivity: float = 1.0
    slow_subtasks: Mapping[int, float] = field(default_factory=dict, hash=False)
    inputs: tuple[InputSpec, ...] = ()
    threads: str | None = None
    fail: FailSpec | None = None
    records: int | None = None
    slot_sharing_group: str | None = None
    managed_memory: ManagedMemory | None = None
    chain: bool = True
    members: tuple[OperatorSpec, ...] = ()
    source_api: SourceApi = "flip-27"
    source_rates: SourceRates | None = None
    cost_cv: float = 0.0
    max_parallelism: int = 128
    state_mb: float | None = None
    spill_cost_us: float = DEFAULT_SPILL_COST_US
    managed_mb: float = 0.0

    @property
    def spill_share(self) -> float:
        """The share of records whose state misses managed memory: the part of the working set
        beyond the subtask's managed memory, (state_mb - managed_mb) / state_mb; 0 when it fits."""
        if not self.state_mb or self.managed_memory is None:
            return 0.0
        return max(0.0, self.state_mb - self.managed_mb) / self.state_mb

    @property
    def spill_us(self) -> float:
        """Mean extra service time per record from spilling: spill_cost_us x spill_share."""
        return self.spill_cost_us * self.spill_share

    def cost_of(self, index: int) -> float:
        """Service time per input record of subtask ``index``: ``cost_us`` plus the spill cost,
        ``slow_subtasks`` applied to both (a slow machine reads its disk slowly too)."""
        return (self.cost_us + self.spill_us) * self.slow_subtasks.get(index, 1.0)


@dataclass(frozen=True, slots=True)
class CheckpointConfig:
    """The ``[checkpoints]`` table: barrier interval (0 disables), alignment mode, timeouts and
    the speed of the snapshot's upload.

    Attributes:
        interval_ms: time between a checkpoint's end and the next trigger (0: none).
        mode: ``aligned``, or ``unaligned`` (FLIP-76: barriers overtake the in-flight data,
            which is stored with the checkpoint).
        timeout_ms: a checkpoint not complete this long after its trigger fails (Flink's
            ``execution.checkpointing.timeout``, 10 minutes).
        aligned_timeout_ms: with ``unaligned``, checkpoints start aligned and a barrier switches
            to unaligned once this long has passed since the trigger (Flink's
            ``execution.checkpointing.aligned-checkpoint-timeout``); 0 starts them unaligned.
        upload_mb_per_s: how fast each subtask uploads its snapshot (its ``state_mb`` and, when
            unaligned, its in-flight data) to checkpoint storage: the async phase.
    """

    interval_ms: int = 0
    mode: CheckpointMode = "aligned"
    timeout_ms: int = 600_000
    aligned_timeout_ms: int = 0
    upload_mb_per_s: float = 100.0

    @property
    def enabled(self) -> bool:
        """Whether checkpoints are taken at all."""
        return self.interval_ms > 0


@dataclass(frozen=True, slots=True)
class MonitorConfig:
    """The ``[monitor]`` table: how ``bpmon run`` samples the job (Flink's 100 x 50 ms)."""

    warmup_s: float = 2.0
    samples: int = 100
    interval_ms: float = 50.0
    settle_s: float = 30.0
    """After the warm-up, how long bpmon may wait more while backpressure is still building (with
    Flink's flushing and a small excess, 20-30 s)."""


@dataclass(frozen=True, slots=True)
class ClusterSpec:
    """The ``[cluster]`` table: task slots, managed memory and how long a slot request may wait.

    Attributes:
        slots_per_task_manager: task slots per task manager; ``None`` = enough for the job.
        managed_memory_mb: managed memory per task manager, shared out among its slots evenly
            and inside a slot by the operators' fractions.
        slot_request_timeout_s: Flink's ``slot.request.timeout``: how long a bulk of slot
            requests may stay unfulfillable before the job fails.
    """

    slots_per_task_manager: int | None = None
    managed_memory_mb: float = 128.0
    slot_request_timeout_s: float = 300.0


@dataclass(frozen=True, slots=True)
class Scenario:
    """One streaming job: settings plus operators in file order.

    Attributes:
        name: the job name, shown everywhere.
        duration_s: wall time the job runs before it is cancelled.
        seed: makes routing, skew and record sizes repeatable.
        network: the ``[network]`` table.
        checkpoints: the ``[checkpoints]`` table.
        monitor: the ``[monitor]`` table.
        operators: every operator, in the order of the file.
        mode: ``streaming`` or ``batch`` (Flink's ``execution.runtime-mode``).
        chaining: chain operators into tasks as Flink does (off: scenario files describe tasks).
        cluster: the ``[cluster]`` table.
        path: the file it was loaded from; ``None`` when parsed from a string.
    """

    name: str
    duration_s: float = 10.0
    seed: int = 0
    network: NetworkConfig = field(default_factory=NetworkConfig)
    checkpoints: CheckpointConfig = field(default_factory=CheckpointConfig)
    monitor: MonitorConfig = field(default_factory=MonitorConfig)
    operators: tuple[OperatorSpec, ...] = ()
    path: str | None = None
    mode: Mode = "streaming"
    chaining: bool = False
    cluster: ClusterSpec = field(default_factory=ClusterSpec)

    def operator(self, name: str) -> OperatorSpec:
        """The operator called ``name``; KeyError if there is none."""
        for op in self.operators:
            if op.name == name:
                return op
        raise KeyError(name)

    def upstream(self, name: str) -> tuple[OperatorSpec, ...]:
        """The distinct operators ``name`` reads from, in the order of its inputs."""
        sources = dict.fromkeys(edge.source for edge in self.operator(name).inputs)
        return tuple(self.operator(source) for source in sources)

    def downstream(self, name: str) -> tuple[OperatorSpec, ...]:
        """The distinct operators reading from ``name``, in file order."""
        return tuple(self.operator(n) for n in downstream_map(self._inputs_of())[name])

    def topological_order(self) -> tuple[OperatorSpec, ...]:
        """Every operator after all it reads from; ties keep file order."""
        return tuple(self.operator(n) for n in topological_sort(self._inputs_of()))

    def sources(self) -> tuple[OperatorSpec, ...]:
        """The operators of kind ``source``, in file order."""
        return tuple(op for op in self.operators if op.kind == "source")

    def sinks(self) -> tuple[OperatorSpec, ...]:
        """The operators of kind ``sink``, in file order."""
        return tuple(op for op in self.operators if op.kind == "sink")

    @property
    def total_subtasks(self) -> int:
        """Subtasks (threads) the job runs in all."""
        return sum(op.parallelism for op in self.operators)

    def _inputs_of(self) -> dict[str, list[str]]:
        return {op.name: [edge.source for edge in op.inputs] for op in self.operators}
