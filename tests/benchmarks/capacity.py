"""The least parallelism a scenario's own arithmetic allows a vertex: the benchmarks' ground truth.

A benchmark may read what a scenario configures (a diagnosis may not): the sources' offered
rates, each operator's ``fanout`` and ``selectivity``, its ``cost_us`` per record (with
``slow_subtasks`` and the spill cost), how its inputs route records (``rebalance`` and
``forward`` evenly, ``broadcast`` every record to every subtask, ``hash`` with ``skew`` or
``keys`` as the runtime routes them by key groups). From these, every operator's input rate when
nothing holds it back follows in topological order, and a vertex (an operator, or a chain of
them: ``"parse -> enrich"``, one thread per subtask) keeps up at parallelism ``N`` when every
subtask's share of the work fits in one second of its thread:

    sum over members m of  (records m serves per second on subtask j) x cost_m(j) / 10^6  <= 1

The least ``N`` from 1 to the vertex's ``max_parallelism`` for which it holds is returned; None
when none does (a hot key beyond one subtask, a broadcast input beyond one subtask's capacity, a
slow instance whose share never fits). Links, credit and memory are not in the arithmetic:
:data:`UNMODELLED` names the kinds of cause it cannot size.
"""

from __future__ import annotations

import math
from dataclasses import replace

from bpmon.runtime.keygroups import subtask_shares
from bpmon.scenario.chaining import operator_names
from bpmon.scenario.rates import offered_total
from bpmon.scenario.spec import InputSpec, OperatorSpec, Scenario

UNMODELLED = frozenset({"network", "stalled", "resource-starved"})
"""Kinds of cause the arithmetic has no term for: a capped link, latency, a cycle, slots."""


def input_rates(scenario: Scenario) -> dict[str, float]:
    """Every operator's records in per second when nothing holds it back (a source: what it is
    offered, on average over the run)."""
    rates: dict[str, float] = {}
    out: dict[str, float] = {}
    for op in scenario.topological_order():
        if op.kind == "source":
            rates[op.name] = offered_total(op, scenario.duration_s)
        else:
            rates[op.name] = sum(out[e.source] for e in op.inputs)
        out[op.name] = 0.0 if op.kind == "sink" else rates[op.name] * op.fanout * op.selectivity
    return rates


def least_parallelism(scenario: Scenario, vertex: str, utilisation: float = 1.0) -> int | None:
    """The least parallelism at which ``vertex`` keeps up at ``utilisation`` of its threads;
    None when no parallelism up to its ``max_parallelism`` does. A slow instance keeps its index
    (a slow machine does not go away with fewer subtasks), so the least is above it."""
    members = [scenario.operator(name) for name in operator_names(vertex)]
    head = members[0]
    rates = input_rates(scenario)
    outputs = {
        op.name: 0.0 if op.kind == "sink" else rates[op.name] * op.fanout * op.selectivity
        for op in scenario.operators
    }
    kept = max((i + 1 for op in members for i in op.slow_subtasks), default=1)
    for n in range(kept, head.max_parallelism + 1):  # a slow instance stays where it is
        head_load = _head_load(scenario, head, n, rates, outputs)
        work = [0.0] * n
        for op in members:
            ratio = rates[op.name] / rates[head.name] if rates[head.name] else 0.0
            for j in range(n):
                work[j] += head_load[j] * ratio * _cost_us(op, j) / 1e6
        if max(work) <= utilisation:
            return n
    return None


def slots(scenario: Scenario) -> int:
    """The slots the job takes: per slot sharing group, its widest vertex (Flink's rule)."""
    widest: dict[str, int] = {}
    for op in scenario.operators:
        group = op.slot_sharing_group or "default"
        widest[group] = max(widest.get(group, 0), op.parallelism)
    return sum(widest.values())


def _head_load(
    scenario: Scenario,
    head: OperatorSpec,
    n: int,
    rates: dict[str, float],
    outputs: dict[str, float],
) -> list[float]:
    """Records per second each of ``n`` subtasks of ``head`` is offered."""
    if head.kind == "source":
        return [rates[head.name] / n] * n  # the offer is spread over the new subtasks
    load = [0.0] * n
    for edge in head.inputs:
        for j, share in enumerate(_shares(edge, replace(head, parallelism=n))):
            load[j] += outputs[edge.source] * share
    return load


def _shares(edge: InputSpec, consumer: OperatorSpec) -> list[float]:
    """Each consumer subtask's share of the records on ``edge`` (broadcast: all of them)."""
    n = consumer.parallelism
    if edge.partitioner == "broadcast":
        return [1.0] * n
    if edge.partitioner == "hash" and edge.keys is not None:
        return list(subtask_shares(edge.keys, consumer.max_parallelism, n))
    if edge.partitioner == "hash" and edge.skew is not None:
        return [edge.skew + (1 - edge.skew) / n, *[(1 - edge.skew) / n] * (n - 1)]
    return [1.0 / n] * n


def _cost_us(op: OperatorSpec, index: int) -> float:
    """Service time per record of subtask ``index`` (a slow instance keeps its index)."""
    cost = op.cost_of(index)
    return cost if math.isfinite(cost) else 0.0
