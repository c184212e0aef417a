"""Deployment: a scenario turned into a frozen execution plan before anything is built or run.

The plan decides, and :class:`~bpmon.runtime.job.Job` only carries it out:

- **placement**: the task manager of every subtask;
- **result partitions**: one per outgoing edge of each producing subtask, with one subpartition
  per consuming subtask (one in all for ``forward``, read by the subtask of the same index);
- **input gates**: one per incoming edge of each consuming subtask, with one channel per
  subpartition it reads, local when the producer runs on the same task manager, else remote;
- **connections**: the connections remote channels need (:func:`connection_index`): under
  ``flow_control = "tcp"`` one per ordered pair of task managers *and intermediate result*, under
  ``credit`` one per ordered pair of task managers.

Placement follows Flink's slot sharing (``scenario/compiled.py`` compiles the groups): subtask
*i* of every vertex of a slot sharing group runs in the group's slot *i*, so a forward edge
between equal parallelisms in one group never crosses the network. Slots are numbered group after
group (groups in the order of their first vertex), and slot *k* lives on task manager
``k % task_managers``: slots are spread evenly over the task managers, as Flink's
``cluster.evenly-spread-out-slots`` does. When the cluster has fewer slots than the groups need
at once (a batch job run region by region), the numbering wraps around: later groups reuse the
slots of earlier ones, which the scheduler frees before it hands them out again. What differs
from Flink: the slot of each subtask is fixed when the job is deployed, where Flink gives a
region's bulk any free slots when it schedules it. The rule is :func:`slot_placement`, one
function, so the rest of the plan does not depend on it.

Everything in the plan is listed in the order the job builds it (partitions, then gates subtask by
subtask), which fixes how buffer pools are sized among themselves, exactly as before the plan
existed.
"""

from __future__ import annotations

import random
from dataclasses import dataclass

from bpmon.model.errors import ConfigError
from bpmon.runtime.connection import ConnectionID
from bpmon.scenario import Exchange, Partitioner, Scenario
from bpmon.scenario.compiled import JobPlan, compile_job
from bpmon.scenario.spec import KeySpec

Placement = dict[str, tuple[int, ...]]
"""The task manager of each subtask, by vertex."""
Slots = dict[str, tuple[int, ...]]
"""The slot of each subtask, by vertex (slot ``k`` is on task manager ``k % task_managers``)."""

EdgePartitions = dict[tuple[str, int], list[int]]
"""The positions of the partitions of each edge, by (consumer vertex, edge index)."""


@dataclass(frozen=True, slots=True)
class SubtaskPlan:
    """One subtask, the task manager it runs on and its slot there (``slot % task_managers``
    is the task manager; -1 for a plan built by hand without slots)."""

    vertex: str
    index: int
    parallelism: int
    task_manager: int
    slot: int = -1

    @property
    def name(self) -> str:
        """Flink's subtask name, also its thread's name: ``"map (2/3)"``."""
        return f"{self.vertex} ({self.index + 1}/{self.parallelism})"


@dataclass(frozen=True, slots=True)
class PartitionPlan:
    """The result partition one producing subtask writes for one input edge of a consumer.

    Attributes:
        name: ``"source (1/2) -> map"``, shown in errors and metrics.
        producer: the producing vertex.
        producer_index: the producing subtask's index.
        consumer: the consuming vertex.
        edge: the position of this edge among the consumer's inputs.
        task_manager: where the partition lives (its producer's task manager).
        partitioner: how the producer routes records to the subpartitions.
        skew: ``hash`` only: the hot key's share of the records.
        keys: ``hash`` only: the records' key distribution, routed by key groups.
        max_parallelism: the consumer's number of key groups.
        consumers: the consuming subtask that reads each subpartition, by subpartition.
        exchange: pipelined, blocking or hybrid, as compiled (``scenario/compiled.py``).
    """

    name: str
    producer: str
    producer_index: int
    consumer: str
    edge: int
    task_manager: int
    partitioner: Partitioner
    skew: float | None
    consumers: tuple[int, ...]
    exchange: Exchange = "pipelined"
    keys: KeySpec | None = None
    max_parallelism: int = 128

    @property
    def num_subpartitions(self) -> int:
        """One per consuming subtask (one for ``forward``)."""
        return len(self.consumers)


@dataclass(frozen=True, slots=True)
class ChannelPlan:
    """One input channel: which subpartition of which partition it reads, and how.

    Attributes:
        partition: the partition's position in :attr:`ExecutionPlan.partitions`.
        subpartition: the subpartition it reads.
        remote: True when the producer runs on another task manager (credit, a connection).
    """

    partition: int
    subpartition: int
    remote: bool


@dataclass(frozen=True, slots=True)
class GatePlan:
    """The input gate of one consuming subtask for one of its input edges.

    Attributes:
        connection_index: the index of the connections its remote channels use, with the
            producer's and this gate's task managers (:func:`connection_index`).
    """

    name: str
    consumer: str
    consumer_index: int
    edge: int
    task_manager: int
    channels: tuple[ChannelPlan, ...]
    connection_index: int = 0

    def connection(self, producer_tm: int) -> ConnectionID:
        """The connection a remote channel from a producer on ``producer_tm`` uses."""
        return ConnectionID(producer_tm, self.task_manager, self.connection_index)


@dataclass(frozen=True, slots=True)
class ExecutionPlan:
    """Where every subtask runs and how the network connects them, for one scenario.

    Attributes:
        job: the scenario's name.
        task_managers: how many task managers the plan uses.
        subtasks: every subtask, vertex by vertex in topological order.
        partitions: every result partition, in the order they are created.
        gates: every input gate, subtask by subtask (as ``subtasks``), edge by edge.
        connections: the connections remote channels use (``(source, destination, index)``),
            in the order they are first needed.
        compiled: the compiled job it deploys (regions, groups, slots); ``None`` for a plan
            built by hand.
    """

    job: str
    task_managers: int
    subtasks: tuple[SubtaskPlan, ...]
    partitions: tuple[PartitionPlan, ...]
    gates: tuple[GatePlan, ...]
    connections: tuple[ConnectionID, ...]
    compiled: JobPlan | None = None

    def __post_init__(self) -> None:
        """Refuse a plan that contradicts itself (one built by hand, or by a new placement rule).

        Raises:
            ConfigError: a subtask, partition or gate on a task manager that does not exist, a
                channel called local or remote against the task managers of its two ends, or a
                remote channel whose connection the plan does not list.
        """
        placed = [(s.name, s.task_manager) for s in self.subtasks]
        placed += [(p.name, p.task_manager) for p in self.partitions]
        placed += [(g.name, g.task_manager) for g in self.gates]
        for name, tm in placed:
            if not 0 <= tm < self.task_managers:
                raise ConfigError(
                    f"execution plan of {self.job!r}: {name} is on task manager {tm}, but the "
                    f"plan has {self.task_managers} (0..{self.task_managers - 1})"
                )
        for gate in self.gates:
            for channel in gate.channels:
                producer_tm = self.partitions[channel.partition].task_manager
                remote = producer_tm != gate.task_manager
                if channel.remote != remote:
                    raise ConfigError(
                        f"execution plan of {self.job!r}: a channel of {gate.name} is called "
                        f"{'remote' if channel.remote else 'local'} but its producer is "
                        f"{'elsewhere' if remote else 'on the same task manager'}"
                    )
                if remote and gate.connection(producer_tm) not in self.connections:
                    raise ConfigError(
                        f"execution plan of {self.job!r}: a channel of {gate.name} needs "
                        f"connection {tuple(gate.connection(producer_tm))}, which the plan "
                        "does not list"
                    )

    def placement(self) -> dict[str, list[int]]:
        """The task manager of each subtask, by vertex, in topological order."""
        placed: dict[str, list[int]] = {}
        for subtask in self.subtasks:
            placed.setdefault(subtask.vertex, []).append(subtask.task_manager)
        return placed


def slot_placement(scenario: Scenario, job: JobPlan | None = None) -> tuple[Placement, Slots]:
    """The task manager and the slot of each subtask, by vertex: slot sharing as in Flink.

    Args:
        scenario: the scenario.
        job: its compiled plan (default: ``compile_job(scenario)``).
    """
    job = compile_job(scenario) if job is None else job
    total = job.slots
    offsets: dict[str, int] = {}
    for group in job.groups:
        offsets[group.name] = sum(g.slots for g in job.groups[: job.groups.index(group)])
    task_managers = scenario.network.task_managers
    placement: Placement = {}
    slots: Slots = {}
    for op in job.operators:
        slots[op.name] = tuple((offsets[op.group] + i) % total for i in range(op.parallelism))
        placement[op.name] = tuple(slot % task_managers for slot in slots[op.name])
    return placement, slots


def connection_index(scenario: Scenario, producer: str, consumer: str, edge: int) -> int:
    """The index of the connections that carry the intermediate result ``producer -> consumer``.

    Flink identifies a connection by the remote task manager's address and a connection index
    (``ConnectionID(address, connectionIndex)``); each consuming task manager keeps one TCP
    connection per such ID. The index comes from the intermediate result: each
    ``IntermediateResult`` draws ``connectionIndex`` at random in ``[0, Integer.MAX_VALUE)``
    when the execution graph is built. bpmon's intermediate result is one input edge of a vertex
    (Flink's streaming job graph makes one per edge), and the index is drawn in the same range
    from the scenario's ``seed``, so it repeats from run to run.

    - ``flow_control = "tcp"`` (Flink before 1.5): the index is used as drawn, so the channels of
      different results do not share a connection (two results share one only if their indices
      collide, as in Flink: about one chance in 2^31). Head-of-line blocking happens among the
      channels of one result between two task managers.
    - ``flow_control = "credit"`` (Flink 1.20): ``taskmanager.network.max-num-tcp-connections``
      (default 1, FLINK-22643) maps every index to ``index % 1 = 0``, so one connection per pair of
      task managers carries every result; credit keeps its channels from blocking each other.
    """
    if scenario.network.flow_control != "tcp":
        return 0
    rng = random.Random(f"{scenario.seed}/connection-index/{producer}->{consumer}/{edge}")
    return rng.randrange(2**31 - 1)


def plan_deployment(scenario: Scenario) -> ExecutionPlan:
    """The execution plan of ``scenario``: placement, partitions, gates and connections."""
    job = compile_job(scenario)
    placement, slots = slot_placement(scenario, job)
    subtasks = tuple(
        SubtaskPlan(op.name, i, op.parallelism, tm, slots[op.name][i])
        for op in scenario.topological_order()
        for i, tm in enumerate(placement[op.name])
    )
    partitions, by_edge = _plan_partitions(scenario, placement, job)
    gates, connections = _plan_gates(scenario, placement, partitions, by_edge)
    return ExecutionPlan(
        job=scenario.name,
        task_managers=scenario.network.task_managers,
        subtasks=subtasks,
        partitions=partitions,
        gates=gates,
        connections=connections,
        compiled=job,
    )


def _plan_partitions(
    scenario: Scenario, placement: Placement, job: JobPlan
) -> tuple[tuple[PartitionPlan, ...], EdgePartitions]:
    """One partition per producing subtask and input edge, consumers edge by edge in order."""
    partitions: list[PartitionPlan] = []
    by_edge: EdgePartitions = {}
    for op in scenario.topological_order():
        for edge_index, edge in enumerate(op.inputs):
            up = scenario.operator(edge.source)
            forward = edge.partitioner == "forward"
            exchange = job.edge(op.name, edge_index).exchange
            positions = by_edge.setdefault((op.name, edge_index), [])
            for i in range(up.parallelism):
                positions.append(len(partitions))
                partitions.append(
                    PartitionPlan(
                        name=f"{up.name} ({i + 1}/{up.parallelism}) -> {op.name}",
                        producer=up.name,
                        producer_index=i,
                        consumer=op.name,
                        edge=edge_index,
                        task_manager=placement[up.name][i],
                        partitioner=edge.partitioner,
                        skew=edge.skew,
                        consumers=(i,) if forward else tuple(range(op.parallelism)),
                        exchange=exchange,
                        keys=edge.keys,
                        max_parallelism=op.max_parallelism,
                    )
                )
    return tuple(partitions), by_edge


def _plan_gates(
    scenario: Scenario,
    placement: Placement,
    partitions: tuple[PartitionPlan, ...],
    by_edge: EdgePartitions,
) -> tuple[tuple[GatePlan, ...], tuple[ConnectionID, ...]]:
    """One gate per consuming subtask and input edge; the connections its remote channels need.

    ``forward``: subtask j reads the only subpartition of producer j; otherwise subpartition j of
    every producer.
    """
    gates: list[GatePlan] = []
    connections: dict[ConnectionID, None] = {}  # ordered by first use
    for op in scenario.topological_order():
        indices = [
            connection_index(scenario, edge.source, op.name, i) for i, edge in enumerate(op.inputs)
        ]
        for j, tm in enumerate(placement[op.name]):
            for edge_index, edge in enumerate(op.inputs):
                positions = by_edge[(op.name, edge_index)]
                if edge.partitioner == "forward":
                    reads = [(positions[j], 0)]
                else:
                    reads = [(position, j) for position in positions]
                name = f"{edge.source} -> {op.name} ({j + 1}/{op.parallelism})"
                channels = []
                for position, sub in reads:
                    src = partitions[position].task_manager
                    channels.append(ChannelPlan(position, sub, remote=src != tm))
                gate = GatePlan(
                    name, op.name, j, edge_index, tm, tuple(channels), indices[edge_index]
                )
                for channel in channels:
                    if channel.remote:
                        connections[gate.connection(partitions[channel.partition].task_manager)] = (
                            None
                        )
                gates.append(gate)
    return tuple(gates), tuple(connections)
