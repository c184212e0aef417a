"""A loaded scenario as frozen values: the job graph, its operators and its settings.

These are what the runtime builds a job from and what ``bpmon monitor`` reads a topology from.
They are plain values with no validation of their own: the loader (``loader.py``) checks a file
once and builds them, so every check has the file name and key at hand for its error.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Literal

from bpmon.scenario.graph import downstream_map, topological_sort
from bpmon.scenario.network import NetworkConfig

OperatorKind = Literal["source", "map", "flatmap", "filter", "sink"]
Partitioner = Literal["forward", "rebalance", "hash", "broadcast"]
Exchange = Literal["pipelined", "blocking", "hybrid"]
CheckpointMode = Literal["aligned", "unaligned"]

KINDS: tuple[OperatorKind, ...] = ("source", "map", "flatmap", "filter", "sink")
PARTITIONERS: tuple[Partitioner, ...] = ("forward", "rebalance", "hash", "broadcast")
EXCHANGES: tuple[Exchange, ...] = ("pipelined", "blocking", "hybrid")
CHECKPOINT_MODES: tuple[CheckpointMode, ...] = ("aligned", "unaligned")


@dataclass(frozen=True, slots=True)
class InputSpec:
    """One input edge of an operator: records flow from ``source`` to the operator listing it.

    Attributes:
        source: the upstream operator (the TOML key ``from``).
        partitioner: how records are routed to downstream subtasks; the loader resolves the
            default (``forward`` for equal parallelisms, else ``rebalance``).
        exchange: ``pipelined``, ``blocking`` or ``hybrid``.
        skew: ``hash`` only: the share of records carrying one hot key (to subtask 0).
    """

    source: str
    partitioner: Partitioner
    exchange: Exchange = "pipelined"
    skew: float | None = None


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
        inputs: the input edges; empty for a source.
        threads: topology files only: regex over thread names; ``None`` = the runtime's naming.
        fail: scenario files only: an injected failure (tests and demos of a failing job).
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

    def cost_of(self, index: int) -> float:
        """Service time per input record of subtask ``index``, ``slow_subtasks`` applied."""
        return self.cost_us * self.slow_subtasks.get(index, 1.0)


@dataclass(frozen=True, slots=True)
class CheckpointConfig:
    """The ``[checkpoints]`` table: barrier interval (0 disables) and alignment mode."""

    interval_ms: int = 0
    mode: CheckpointMode = "aligned"

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
