"""A scenario with ``chaining = true`` turned into the scenario of its tasks: one per chain.

Flink chains operators joined by a forward, pipelined edge in one slot sharing group into one task
(``compiled.py`` decides the chains). The runtime runs tasks, so a chained scenario is rewritten
into one whose operators are the chains: ``"parse -> enrich"`` with the chain's members kept in
:attr:`~bpmon.scenario.spec.OperatorSpec.members` in topological order (each after the member
it is chained to), each with its own cost, fanout and selectivity, so the task runs them nested
and accounts records and time per member. A chain may branch (``"a -> (b, c)"``): a member
hands its output to each member chained to it. A chain behaves as its head towards its inputs
(a source chain emits at the head's rate); each of its outputs is written by the member it
leaves (:func:`chain_writers`), with that member's record size. Without ``chaining`` the
scenario is returned as it is.
"""

from __future__ import annotations

from dataclasses import replace

from bpmon.model.errors import ScenarioError
from bpmon.scenario.compiled import compile_job
from bpmon.scenario.spec import InputSpec, OperatorKind, OperatorSpec, Scenario


def chained_scenario(scenario: Scenario) -> Scenario:
    """The scenario of ``scenario``'s tasks: each chain one operator (itself when not chaining).

    Raises:
        ScenarioError: a chained operator injects a failure (``fail``), which a chain does not
            model; break the chain before it (``chain = false``).
    """
    if not scenario.chaining:
        return scenario
    plan = compile_job(scenario)
    task_of = {op.name: op.task for op in plan.operators}
    members: dict[str, list[OperatorSpec]] = {}
    for op in scenario.topological_order():
        members.setdefault(task_of[op.name], []).append(op)
    tasks = []
    for name, chain in members.items():
        if len(chain) == 1:
            op = chain[0]
            tasks.append(replace(op, inputs=_remap(op.inputs, task_of)))
            continue
        failing = [op.name for op in chain if op.fail is not None]
        if failing:
            raise ScenarioError(
                f'operator "{failing[0]}" has "fail" inside the chain "{name}": a chain does not '
                'inject failures; set chain = false on it, or leave "fail" out'
            )
        elsewhere = [e for op in scenario.operators if task_of[op.name] != name for e in op.inputs]
        tasks.append(_chain_spec(name, chain, task_of, elsewhere))
    return replace(scenario, operators=tuple(tasks), chaining=False)


def chain_writers(scenario: Scenario) -> dict[tuple[str, int], str]:
    """Which operator writes each input edge of each task, by (task, edge index): the member
    of the producing chain that the edge leaves (any member may have outputs that are not
    chained: the tail of a linear chain, each branch of a branching one, a member that also
    feeds a hash exchange). Empty without ``chaining``."""
    if not scenario.chaining:
        return {}
    plan = compile_job(scenario)
    task_of = {op.name: op.task for op in plan.operators}
    heads: dict[str, OperatorSpec] = {}
    for op in scenario.topological_order():
        heads.setdefault(task_of[op.name], op)  # a task's inputs are its head's
    return {
        (task, index): edge.source
        for task, head in heads.items()
        for index, edge in enumerate(head.inputs)
    }


def _remap(inputs: tuple[InputSpec, ...], task_of: dict[str, str]) -> tuple[InputSpec, ...]:
    """Inputs from an operator become inputs from the task (chain) it ends."""
    return tuple(replace(edge, source=task_of[edge.source]) for edge in inputs)


def _chain_spec(
    name: str,
    chain: list[OperatorSpec],
    task_of: dict[str, str],
    inputs_elsewhere: list[InputSpec],
) -> OperatorSpec:
    """The task of ``chain``; ``inputs_elsewhere`` are the edges other tasks read."""
    head, tail = chain[0], chain[-1]
    feeding = {edge.source for op in chain[1:] for edge in op.inputs}
    ends = [op for op in chain if op.name not in feeding]  # the members chained to nothing
    writes = any(task_of[edge.source] == name for edge in inputs_elsewhere)
    kind: OperatorKind = "map"  # the members do the flatmapping and filtering
    if head.kind == "source":
        kind = "source"
    elif not writes and all(op.kind == "sink" for op in ends):
        kind = "sink"  # every branch ends in a sink and nothing leaves the task
    return OperatorSpec(
        name=name,
        kind=kind,
        parallelism=head.parallelism,
        rate=head.rate,
        record_bytes=tail.record_bytes,
        inputs=_remap(head.inputs, task_of),
        records=head.records,
        slot_sharing_group=head.slot_sharing_group,
        members=tuple(chain),
        source_api=head.source_api,
        source_rates=head.source_rates,
        max_parallelism=head.max_parallelism,
    )
