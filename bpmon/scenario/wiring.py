"""Wiring the operators into a job graph: every check that needs more than one operator.

Unknown ``from`` names, kinds against inputs, reading from a sink, operators no source feeds,
cycles, the default partitioner, ``forward`` between different parallelisms and ``skew``
without ``hash``. Each error names the operator (and input) where the user has to fix it.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from bpmon.scenario._table import Table, did_you_mean, quoted
from bpmon.scenario.graph import downstream_map, find_cycle, reachable
from bpmon.scenario.operators import (
    InputDraft,
    OperatorDraft,
    finish_operator,
    read_drafts,
)
from bpmon.scenario.spec import (
    KINDS,
    InputSpec,
    Mode,
    OperatorKind,
    OperatorSpec,
    Partitioner,
)


def build_operators(
    top: Table, *, topology: bool, mode: Mode = "streaming"
) -> tuple[OperatorSpec, ...]:
    """Read, check and wire every ``[[operators]]`` table of the file ``top``.

    ``mode`` is checked against the sources and exchanges (scenario files only): a batch job
    needs bounded sources, and only a batch job may have blocking or hybrid exchanges.
    """
    drafts = read_drafts(top, topology=topology)
    by_name = {draft.name: draft for draft in drafts}
    _check_known_inputs(drafts, by_name)
    inputs_of = {draft.name: draft.upstream_names for draft in drafts}
    downstream = downstream_map(inputs_of)
    kinds = {d.name: _resolve_kind(d, downstream[d.name]) for d in drafts}
    for draft in drafts:
        _check_inputs_for_kind(draft, kinds[draft.name])
    _check_no_input_from_sink(drafts, kinds)
    _check_connected(drafts, kinds, inputs_of)
    _check_acyclic(by_name, inputs_of)
    operators = tuple(
        finish_operator(
            draft, kinds[draft.name], _resolve_inputs(draft, by_name), topology=topology
        )
        for draft in drafts
    )
    if not topology:
        _check_mode(drafts, operators, mode)
    return operators


def _check_mode(
    drafts: Sequence[OperatorDraft], operators: Sequence[OperatorSpec], mode: Mode
) -> None:
    """Batch needs bounded sources (as Flink refuses an unbounded one); streaming, pipelined edges.

    A streaming job's sources never finish, so a blocking or hybrid consumer would never read
    everything it waits for; Flink offers those exchanges for batch jobs only.
    """
    for draft, op in zip(drafts, operators, strict=True):
        if mode == "batch" and op.kind == "source" and op.records is None:
            raise draft.table.error(
                'mode = "batch" needs bounded sources, as Flink refuses an UNBOUNDED source in '
                'BATCH mode: give this source records = N, or use mode = "streaming"'
            )
        for edge, written in zip(op.inputs, draft.inputs or (), strict=True):
            if mode == "streaming" and edge.exchange != "pipelined":
                raise written.table.error(
                    f'key "exchange" = "{edge.exchange}" needs mode = "batch" (bounded sources): '
                    "in a streaming job only pipelined exchanges exist"
                )


def _check_known_inputs(drafts: Sequence[OperatorDraft], by_name: Mapping[str, object]) -> None:
    for draft in drafts:
        for edge in draft.inputs or ():
            if edge.source not in by_name:
                raise edge.table.key_error(
                    "from",
                    f"the name of an operator in this file{did_you_mean(edge.source, by_name)}",
                )


def _resolve_kind(draft: OperatorDraft, downstream: Sequence[str]) -> OperatorKind:
    """The written kind, or (topology files) source / sink / map from where it sits."""
    if draft.kind is not None:
        return draft.kind
    if not draft.inputs:
        return "source"
    return "map" if downstream else "sink"


def _check_inputs_for_kind(draft: OperatorDraft, kind: OperatorKind) -> None:
    table = draft.table
    if kind == "source" and draft.inputs is not None:
        raise table.error(
            'key "inputs" is not valid for kind "source": a source reads no input; '
            'remove "inputs" or change "kind"'
        )
    if kind == "source":
        return
    if draft.inputs is None:
        table.require(
            "inputs",
            None,
            f'a "{kind}" reads from at least one operator, e.g. '
            'inputs = [{ from = "source" }]; only a source has none',
        )
    if not draft.inputs:
        raise table.key_error("inputs", 'at least one input, e.g. [{ from = "source" }]')


def _check_no_input_from_sink(
    drafts: Sequence[OperatorDraft], kinds: Mapping[str, OperatorKind]
) -> None:
    emitting = [kind for kind in KINDS if kind != "sink"]
    for draft in drafts:
        for edge in draft.inputs or ():
            if kinds[edge.source] == "sink":
                raise edge.table.key_error(
                    "from",
                    f'an operator that emits records ({quoted(emitting)}); "{edge.source}" is a '
                    "sink, which emits none",
                )


def _check_connected(
    drafts: Sequence[OperatorDraft],
    kinds: Mapping[str, OperatorKind],
    inputs_of: Mapping[str, Sequence[str]],
) -> None:
    sources = [name for name, kind in kinds.items() if kind == "source"]
    fed = reachable(sources, inputs_of)
    cut_off = [draft for draft in drafts if draft.name not in fed]
    if not cut_off:
        return
    names = [draft.name for draft in cut_off]
    cycle = find_cycle({name: inputs_of[name] for name in names})
    loop = f"; their inputs only go round the cycle {' -> '.join(cycle)}" if cycle else ""
    raise cut_off[0].table.error(
        f"not connected to any source: no records reach {', '.join(names)}{loop}; "
        "expected every operator to be fed, directly or not, by a source"
    )


def _check_acyclic(
    by_name: Mapping[str, OperatorDraft], inputs_of: Mapping[str, Sequence[str]]
) -> None:
    cycle = find_cycle(inputs_of)
    if cycle is not None:
        raise by_name[cycle[0]].table.error(
            f"the inputs form a cycle: {' -> '.join(cycle)}; expected an acyclic job graph"
        )


def _resolve_inputs(
    draft: OperatorDraft, by_name: Mapping[str, OperatorDraft]
) -> tuple[InputSpec, ...]:
    return tuple(_resolve_input(edge, by_name[edge.source], draft) for edge in draft.inputs or ())


def _resolve_input(edge: InputDraft, upstream: OperatorDraft, draft: OperatorDraft) -> InputSpec:
    """Default the partitioner, then check it against the parallelisms and ``skew``."""
    same = upstream.parallelism == draft.parallelism
    partitioner: Partitioner = edge.partitioner or ("forward" if same else "rebalance")
    if partitioner == "forward" and not same:
        raise edge.table.error(
            f'key "partitioner" = "forward" needs equal parallelisms, but "{upstream.name}" has '
            f'{upstream.parallelism} and "{draft.name}" has {draft.parallelism}; '
            'use "rebalance", "hash" or "broadcast"'
        )
    for key, value in (("skew", edge.skew), ("keys", edge.keys)):
        if value is not None and partitioner != "hash":
            raise edge.table.error(
                f'key "{key}" is only valid with partitioner "hash" '
                f'(this input uses "{partitioner}")'
            )
    if edge.skew is not None and edge.keys is not None:
        raise edge.table.error(
            'keys "skew" and "keys" both set: "skew" is a shorthand for one hot key, '
            '"keys" a whole distribution; keep one'
        )
    return InputSpec(edge.source, partitioner, edge.exchange, edge.skew, edge.keys)
