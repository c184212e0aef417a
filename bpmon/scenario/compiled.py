"""A scenario compiled as Flink's job graph generator compiles a program: regions, groups, memory.

What this module decides, in Flink's order (``docs/scenario.md``, Scheduling):

1. **Exchanges**: in batch mode a pipelined edge between two different slot sharing groups is
   turned blocking (its two ends are not meant to hold slots at the same time); an operator
   without a group counts as Flink's ``"default"`` one here.
2. **Pipelined regions**: the connected components over pipelined edges (blocking and hybrid
   edges separate regions). A streaming job is one region per connected component.
3. **Slot sharing groups**: an operator without ``slot_sharing_group`` is in ``"default"`` in
   streaming mode (one group for the whole job) and, in batch mode, in its region's own group
   (``region-N``), as ``StreamingJobGraphGenerator.buildVertexRegionSlotSharingGroups`` does.
   Subtask *i* of every vertex of a group runs in one slot, so a group needs as many slots as
   its largest parallelism, and groups add up.
4. **Managed memory**: each slot gets ``managed_memory_mb / slots_per_task_manager``; inside a
   group, operators that use managed memory get fractions of it by their weights, or, where
   sizes are given (resource specs), by their sizes. Fractions add up to 1 per group.
5. **Chains** (``chaining = true``): an operator joins its input's task when the edge is forward
   and pipelined, both are in one group with one parallelism, it has that one input and
   ``chain`` is not false (``chaining.py``). As in Flink, an operator may be chained to several
   consumers: the chain branches and is named ``"a -> (b, c)"``.

Everything is a frozen value computed from the scenario alone, so ``bpmon plan`` can show it
without running anything, and the runtime schedules exactly what is shown.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from bpmon.model.errors import ScenarioError
from bpmon.scenario.chaining import chain_heads, chain_name
from bpmon.scenario.spec import DEFAULT_SLOT_SHARING_GROUP, Exchange, Mode, Partitioner, Scenario


@dataclass(frozen=True, slots=True)
class CompiledEdge:
    """One input edge after compilation.

    Attributes:
        source: the producing vertex.
        target: the consuming vertex.
        edge: its position among the consumer's inputs.
        partitioner: how records are routed.
        exchange: the exchange the runtime uses.
        written: the exchange the file gives (``exchange`` differs only where ``reason`` says).
        reason: why compilation changed the exchange; ``None`` when it did not.
    """

    source: str
    target: str
    edge: int
    partitioner: Partitioner
    exchange: Exchange
    written: Exchange
    reason: str | None = None


@dataclass(frozen=True, slots=True)
class Region:
    """A pipelined region: vertices that must run at the same time, scheduled as one bulk.

    Attributes:
        index: its position, regions ordered by their first vertex in topological order.
        vertices: its vertices, in topological order.
        slots: the slots its bulk requests: per slot sharing group, the largest parallelism of
            the region's vertices in it, added up.
        blocking_inputs: regions it reads through blocking edges (finished before it starts).
        hybrid_inputs: regions it reads through hybrid edges (running before it starts).
    """

    index: int
    vertices: tuple[str, ...]
    slots: int
    blocking_inputs: tuple[int, ...] = ()
    hybrid_inputs: tuple[int, ...] = ()


@dataclass(frozen=True, slots=True)
class SlotSharingGroup:
    """A slot sharing group: subtask *i* of each of its vertices shares slot *i* of the group.

    Attributes:
        name: as written, ``"default"``, or ``"region-N"`` (batch default).
        vertices: its vertices, in topological order.
        slots: slots it needs: its vertices' largest parallelism.
        managed_memory_mb: managed memory of each of its slots.
    """

    name: str
    vertices: tuple[str, ...]
    slots: int
    managed_memory_mb: float


@dataclass(frozen=True, slots=True)
class OperatorPlan:
    """Where one operator lands: region, group, task (chain) and managed memory.

    Attributes:
        name: the operator.
        parallelism: its subtasks.
        region: the index of its pipelined region.
        group: its slot sharing group's name.
        task: the task (vertex) it runs in: its own name, or a chain's ``"a -> b"``.
        fraction: its share of its slot's managed memory; ``None`` when it uses none.
        managed_memory_mb: the managed memory each of its subtasks gets.
    """

    name: str
    parallelism: int
    region: int
    group: str
    task: str
    fraction: float | None = None
    managed_memory_mb: float = 0.0


@dataclass(frozen=True, slots=True)
class JobPlan:
    """The compiled job: what ``bpmon plan`` prints and what the scheduler follows.

    Attributes:
        job: the scenario's name.
        mode: ``streaming`` or ``batch``.
        task_managers: simulated task managers.
        slots_per_task_manager: given, or enough for the job (all regions at once).
        operators: every operator, in topological order.
        edges: every input edge, consumers in topological order.
        regions: the pipelined regions.
        groups: the slot sharing groups, by first vertex in topological order.
        slots_all_at_once: slots to run every region at the same time.
        min_slots: the fewest slots the job can finish with (batch: the largest region).
    """

    job: str
    mode: Mode
    task_managers: int
    slots_per_task_manager: int
    operators: tuple[OperatorPlan, ...]
    edges: tuple[CompiledEdge, ...]
    regions: tuple[Region, ...]
    groups: tuple[SlotSharingGroup, ...]
    slots_all_at_once: int
    min_slots: int

    @property
    def slots(self) -> int:
        """Slots the cluster has: task managers x slots per task manager."""
        return self.task_managers * self.slots_per_task_manager

    def operator(self, name: str) -> OperatorPlan:
        """The plan of operator ``name``; KeyError if there is none."""
        for op in self.operators:
            if op.name == name:
                return op
        raise KeyError(name)

    def edge(self, target: str, index: int) -> CompiledEdge:
        """Input ``index`` of ``target``; KeyError if there is none."""
        for edge in self.edges:
            if (edge.target, edge.edge) == (target, index):
                return edge
        raise KeyError((target, index))

    def tasks(self) -> tuple[str, ...]:
        """The tasks (chains, or single operators), in topological order."""
        return tuple(dict.fromkeys(op.task for op in self.operators))


def compile_job(scenario: Scenario) -> JobPlan:
    """Compile ``scenario`` into its :class:`JobPlan`.

    Raises:
        ScenarioError: managed memory that cannot be shared out (weights and sizes mixed in one
            group, or sizes above what a slot has).
    """
    order = [op.name for op in scenario.topological_order()]
    edges = _compile_edges(scenario)
    region_of = _regions(order, edges)
    group_of = _groups(scenario, order, region_of)
    groups_slots = _group_slots(scenario, group_of)
    all_at_once = sum(groups_slots.values())
    spt = scenario.cluster.slots_per_task_manager or max(
        1, math.ceil(all_at_once / scenario.network.task_managers)
    )
    slot_mb = scenario.cluster.managed_memory_mb / spt
    regions = _region_plans(scenario, order, edges, region_of, group_of)
    memory = _managed_memory(scenario, group_of, slot_mb)
    tasks = _chains(scenario, order, edges, group_of)
    operators = tuple(
        OperatorPlan(
            name=name,
            parallelism=scenario.operator(name).parallelism,
            region=region_of[name],
            group=group_of[name],
            task=tasks[name],
            fraction=memory[name][0],
            managed_memory_mb=memory[name][1],
        )
        for name in order
    )
    groups = tuple(
        SlotSharingGroup(g, tuple(n for n in order if group_of[n] == g), slots, slot_mb)
        for g, slots in groups_slots.items()
    )
    min_slots = all_at_once if scenario.mode == "streaming" else max(r.slots for r in regions)
    return JobPlan(
        job=scenario.name,
        mode=scenario.mode,
        task_managers=scenario.network.task_managers,
        slots_per_task_manager=spt,
        operators=operators,
        edges=edges,
        regions=regions,
        groups=groups,
        slots_all_at_once=all_at_once,
        min_slots=min_slots,
    )


def _compile_edges(scenario: Scenario) -> tuple[CompiledEdge, ...]:
    """Every edge; in batch mode a pipelined one between two slot sharing groups turns blocking."""
    compiled: list[CompiledEdge] = []
    for op in scenario.topological_order():
        for index, edge in enumerate(op.inputs):
            up = scenario.operator(edge.source)
            mine = op.slot_sharing_group or DEFAULT_SLOT_SHARING_GROUP
            theirs = up.slot_sharing_group or DEFAULT_SLOT_SHARING_GROUP
            exchange, reason = edge.exchange, None
            if scenario.mode == "batch" and exchange == "pipelined" and mine != theirs:
                exchange = "blocking"
                reason = f'slot sharing groups differ ("{theirs}" -> "{mine}")'
            compiled.append(
                CompiledEdge(
                    edge.source, op.name, index, edge.partitioner, exchange, edge.exchange, reason
                )
            )
    return tuple(compiled)


def _regions(order: list[str], edges: tuple[CompiledEdge, ...]) -> dict[str, int]:
    """Connected components over pipelined edges, numbered by their first vertex in ``order``."""
    parent = {name: name for name in order}

    def root(name: str) -> str:
        while parent[name] != name:
            parent[name] = parent[parent[name]]
            name = parent[name]
        return name

    for edge in edges:
        if edge.exchange == "pipelined":
            a, b = root(edge.source), root(edge.target)
            if a != b:
                parent[b] = a
    numbers: dict[str, int] = {}
    for name in order:
        numbers.setdefault(root(name), len(numbers))
    return {name: numbers[root(name)] for name in order}


def _groups(scenario: Scenario, order: list[str], region_of: dict[str, int]) -> dict[str, str]:
    """Each operator's slot sharing group: as written, else the job's or its region's default."""
    groups: dict[str, str] = {}
    for name in order:
        written = scenario.operator(name).slot_sharing_group
        if written is not None:
            groups[name] = written
        elif scenario.mode == "batch":
            groups[name] = f"region-{region_of[name]}"
        else:
            groups[name] = DEFAULT_SLOT_SHARING_GROUP
    return groups


def _group_slots(scenario: Scenario, group_of: dict[str, str]) -> dict[str, int]:
    """Slots per group (its largest parallelism), groups in order of their first vertex."""
    slots: dict[str, int] = {}
    for name, group in group_of.items():
        slots[group] = max(slots.get(group, 0), scenario.operator(name).parallelism)
    return slots


def _region_plans(
    scenario: Scenario,
    order: list[str],
    edges: tuple[CompiledEdge, ...],
    region_of: dict[str, int],
    group_of: dict[str, str],
) -> tuple[Region, ...]:
    """Each region with its bulk of slots and the regions it reads through other exchanges."""
    plans: list[Region] = []
    for index in range(max(region_of.values()) + 1):
        vertices = tuple(n for n in order if region_of[n] == index)
        per_group: dict[str, int] = {}
        for name in vertices:
            parallelism = scenario.operator(name).parallelism
            per_group[group_of[name]] = max(per_group.get(group_of[name], 0), parallelism)
        inputs = [e for e in edges if region_of[e.target] == index and e.exchange != "pipelined"]
        blocking = {region_of[e.source] for e in inputs if e.exchange == "blocking"}
        hybrid = {region_of[e.source] for e in inputs if e.exchange.startswith("hybrid")}
        plans.append(
            Region(
                index,
                vertices,
                sum(per_group.values()),
                tuple(sorted(blocking)),
                tuple(sorted(hybrid)),
            )
        )
    return tuple(plans)


def _managed_memory(
    scenario: Scenario, group_of: dict[str, str], slot_mb: float
) -> dict[str, tuple[float | None, float]]:
    """Each operator's fraction of its slot's managed memory and the MB that makes.

    Raises:
        ScenarioError: one group mixes weights and sizes, or its sizes exceed a slot's memory.
    """
    result: dict[str, tuple[float | None, float]] = dict.fromkeys(group_of, (None, 0.0))
    for group in dict.fromkeys(group_of.values()):
        users = [
            op
            for op in scenario.operators
            if group_of[op.name] == group and op.managed_memory is not None
        ]
        sized = [op for op in users if op.managed_memory and op.managed_memory.mb is not None]
        if sized and len(sized) != len(users):
            raise ScenarioError(
                f'slot sharing group "{group}" mixes managed_memory weights and sizes '
                f'("{sized[0].name}" has a size): give all of its operators weights, or all sizes'
            )
        if sized:
            sizes = {op.name: float(op.managed_memory.mb or 0) for op in sized if op.managed_memory}
            total = sum(sizes.values())
            if total > slot_mb + 1e-9:
                raise ScenarioError(
                    f'slot sharing group "{group}" asks for {total:g} MB of managed memory per '
                    f"slot, but a slot has {slot_mb:g} MB ([cluster] managed_memory_mb / "
                    "slots_per_task_manager): lower the sizes or raise managed_memory_mb"
                )
            result.update({name: (mb / total, mb) for name, mb in sizes.items()})
        elif users:
            weights = {
                op.name: float(op.managed_memory.weight or 0) for op in users if op.managed_memory
            }
            total = sum(weights.values())
            result.update({n: (w / total, w / total * slot_mb) for n, w in weights.items()})
    return result


def _chains(
    scenario: Scenario,
    order: list[str],
    edges: tuple[CompiledEdge, ...],
    group_of: dict[str, str],
) -> dict[str, str]:
    """The task each operator runs in, named as Flink names it; with ``chaining`` off, its own."""
    if not scenario.chaining:
        return {name: name for name in order}

    def chained_input(name: str) -> str | None:
        inputs = [e for e in edges if e.target == name]
        if len(inputs) != 1 or not scenario.operator(name).chain:
            return None
        edge = inputs[0]
        up = edge.source
        chainable = (
            edge.partitioner == "forward"
            and edge.exchange == "pipelined"
            and group_of[up] == group_of[name]
            and scenario.operator(up).parallelism == scenario.operator(name).parallelism
        )
        return up if chainable else None

    parent = {name: chained_input(name) for name in order}
    head = chain_heads(order, parent.__getitem__)
    children = {
        name: [d.name for d in scenario.downstream(name) if parent[d.name] == name]
        for name in order
    }
    return {name: chain_name(head[name], children) for name in order}
