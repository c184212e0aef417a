"""Reading one ``[[operators]]`` table: its name, kind, inputs and kind-specific keys.

Reading happens in two steps because a topology file may leave ``kind`` out, and the default
depends on the whole graph (no inputs: source; nobody downstream: sink). :func:`read_drafts`
reads what every operator has; once kinds are known, :func:`finish_operator` reads the keys
whose meaning depends on the kind and builds the :class:`OperatorSpec`.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from types import MappingProxyType
from typing import cast

from bpmon.scenario._table import Table, quoted
from bpmon.scenario.keys import read_keys
from bpmon.scenario.rates import read_source_rates
from bpmon.scenario.spec import (
    DEFAULT_SPILL_COST_US,
    EXCHANGE_WORDS,
    KINDS,
    PARTITIONERS,
    Exchange,
    FailSpec,
    InputSpec,
    KeySpec,
    ManagedMemory,
    OperatorKind,
    OperatorSpec,
    Partitioner,
)

NAME_PATTERN = re.compile(r"[A-Za-z0-9_.-]+")
"""What an operator name may be made of: it appears in thread names and metric labels."""

OPERATOR_KEYS = (
    "name",
    "kind",
    "parallelism",
    "rate",
    "record_bytes",
    "cost_us",
    "fanout",
    "selectivity",
    "slow_subtasks",
    "fail",
    "inputs",
    "records",
    "slot_sharing_group",
    "managed_memory",
    "chain",
    "source_api",
    "cost_cv",
    "max_parallelism",
    "rate_profile",
    "subtask_rates",
    "backlog",
    "state_mb",
    "spill_cost_us",
)
TOPOLOGY_OPERATOR_KEYS = (*(k for k in OPERATOR_KEYS if k != "fail"), "threads")
FAIL_KEYS = ("after_records", "after_s", "subtask")
FAIL_EXAMPLE = "fail = { after_records = 1000 } or fail = { after_s = 2.5, subtask = 0 }"
INPUT_KEYS = ("from", "partitioner", "exchange", "skew", "keys")
KIND_KEYS = {
    "rate": "source",
    "records": "source",
    "source_api": "source",
    "rate_profile": "source",
    "subtask_rates": "source",
    "backlog": "source",
    "fanout": "flatmap",
    "selectivity": "filter",
}
"""Keys that only one kind of operator may have."""

MEMORY_SIZE = re.compile(r"(\d+(?:\.\d+)?)\s*(mb|gb)")
"""A managed memory resource spec: ``"64mb"``, ``"1.5gb"``."""

MAX_PARALLELISM = 32768
"""Flink's upper bound of the maximum parallelism."""
DEFAULT_RECORD_BYTES = 100
DEFAULT_SELECTIVITY = 0.5


@dataclass(frozen=True, slots=True)
class InputDraft:
    """An input edge as written: the partitioner is ``None`` until the graph resolves it."""

    table: Table
    source: str
    partitioner: Partitioner | None
    exchange: Exchange
    skew: float | None
    keys: KeySpec | None = None


@dataclass(frozen=True, slots=True)
class OperatorDraft:
    """An operator as written; ``inputs`` is ``None`` when the key is absent."""

    table: Table
    name: str
    kind: OperatorKind | None
    parallelism: int
    inputs: tuple[InputDraft, ...] | None

    @property
    def upstream_names(self) -> list[str]:
        """The ``from`` of every input, in order (empty when there are none)."""
        return [edge.source for edge in self.inputs or ()]


def read_drafts(top: Table, *, topology: bool) -> list[OperatorDraft]:
    """Every ``[[operators]]`` table of the file, names checked for shape and uniqueness."""
    tables = top.tables("operators", "one [[operators]] table per operator")
    tables = top.require("operators", tables, "one [[operators]] table per operator")
    if not tables:
        raise top.error('key "operators" is empty: a job needs at least one operator')
    drafts: list[OperatorDraft] = []
    seen: dict[str, int] = {}
    for index, data in enumerate(tables):
        draft = _read_draft(Table(data, f"{top.where}: operators[{index}]"), seen, topology)
        seen[draft.name] = index
        drafts.append(draft)
    return drafts


def _read_draft(table: Table, seen: Mapping[str, int], topology: bool) -> OperatorDraft:
    name = table.require("name", table.string("name"), "the operator's unique name")
    if not NAME_PATTERN.fullmatch(name):
        raise table.key_error("name", "a name made of letters, digits, '_', '.' and '-'")
    table = Table(table.data, f'{table.where} "{name}"')
    if name in seen:
        raise table.error(
            f'duplicate operator name "{name}" (operators[{seen[name]}] has it too): '
            "expected unique names"
        )
    if not topology and table.has("threads"):
        raise table.error(
            'key "threads" is only valid in topology files (bpmon monitor --topology); '
            "the runtime names its threads itself"
        )
    if topology and table.has("fail"):
        raise table.error(
            'key "fail" is only valid in scenario files: it makes the runtime fail a subtask, '
            "and bpmon monitor does not run the process it watches"
        )
    table.check_keys(TOPOLOGY_OPERATOR_KEYS if topology else OPERATOR_KEYS)
    kind = table.string("kind", KINDS)
    if kind is None and not topology:
        table.require("kind", kind, f"one of {quoted(KINDS)}")
    parallelism = table.integer("parallelism", minimum=1)
    return OperatorDraft(
        table=table,
        name=name,
        kind=cast(OperatorKind | None, kind),
        parallelism=1 if parallelism is None else parallelism,
        inputs=_read_inputs(table),
    )


def _read_inputs(table: Table) -> tuple[InputDraft, ...] | None:
    tables = table.tables("inputs", '[{ from = "source" }]')
    if tables is None:
        return None
    return tuple(
        _read_input(Table(data, f"{table.where}: inputs[{i}]")) for i, data in enumerate(tables)
    )


def _read_input(table: Table) -> InputDraft:
    table.check_keys(INPUT_KEYS)
    source = table.require("from", table.string("from"), "the name of the upstream operator")
    exchange = table.string("exchange", EXCHANGE_WORDS) or "pipelined"
    return InputDraft(
        table=table,
        source=source,
        partitioner=cast(Partitioner | None, table.string("partitioner", PARTITIONERS)),
        exchange=cast(Exchange, "hybrid-selective" if exchange == "hybrid" else exchange),
        skew=table.number("skew", 0.0, 1.0),
        keys=read_keys(table),
    )


def finish_operator(
    draft: OperatorDraft, kind: OperatorKind, inputs: tuple[InputSpec, ...], *, topology: bool
) -> OperatorSpec:
    """Read the kind-specific keys of ``draft`` and build its spec with resolved ``inputs``.

    A topology file describes a process bpmon does not run, so ``rate`` and ``fanout`` are
    optional there; a scenario file must give them.
    """
    table = draft.table
    for key, valid_kind in KIND_KEYS.items():
        if table.has(key) and kind != valid_kind:
            raise table.error(
                f'key "{key}" is only valid for kind "{valid_kind}" (this operator is a "{kind}")'
            )
    rate = table.number("rate", 0.0)
    if kind == "source" and not topology:
        table.require("rate", rate, "records per second per subtask; 0 = as fast as possible")
    fanout = table.number("fanout", 0.0)
    if kind == "flatmap" and not topology:
        table.require("fanout", fanout, "records emitted per input record, e.g. 2.5")
    selectivity = table.number("selectivity", 0.0, 1.0)
    if selectivity is None:
        selectivity = DEFAULT_SELECTIVITY if kind == "filter" else 1.0
    record_bytes = table.integer("record_bytes", minimum=1)
    cost_us = table.number("cost_us", 0.0)
    group = table.string("slot_sharing_group")
    if group is not None and not group.strip():
        raise table.key_error("slot_sharing_group", 'a group name, e.g. "heavy"')
    chain = table.boolean("chain")
    source_api = table.string("source_api", ("flip-27", "legacy"))
    state_mb, spill_cost_us = _read_state(table)
    return OperatorSpec(
        name=draft.name,
        kind=kind,
        parallelism=draft.parallelism,
        rate=rate,
        record_bytes=DEFAULT_RECORD_BYTES if record_bytes is None else record_bytes,
        cost_us=0.0 if cost_us is None else cost_us,
        fanout=1.0 if fanout is None else fanout,
        selectivity=selectivity,
        slow_subtasks=_read_slow_subtasks(table, draft.parallelism),
        inputs=inputs,
        threads=_read_threads(table) if topology else None,
        fail=_read_fail(table, draft.parallelism),
        records=table.integer("records", minimum=1),
        slot_sharing_group=group,
        managed_memory=_read_managed_memory(table),
        chain=True if chain is None else chain,
        source_api="legacy" if source_api == "legacy" else "flip-27",
        source_rates=read_source_rates(table, rate, draft.parallelism),
        cost_cv=table.number("cost_cv", 0.0) or 0.0,
        max_parallelism=_read_max_parallelism(table, draft.parallelism),
        state_mb=state_mb,
        spill_cost_us=spill_cost_us,
    )


def _read_max_parallelism(table: Table, parallelism: int) -> int:
    """``max_parallelism``: Flink's number of key groups, from the parallelism to 32768.

    The default is Flink's (``computeDefaultMaxParallelism``): 1.5 x the parallelism rounded up
    to a power of two, at least 128 and at most 32768; so 128 for a parallelism up to 85.
    """
    value = table.integer("max_parallelism", minimum=1)
    if value is None:
        wanted = 1 << (parallelism + parallelism // 2 - 1).bit_length()
        return min(max(wanted, 128), MAX_PARALLELISM)
    if not parallelism <= value <= MAX_PARALLELISM:
        raise table.key_error(
            "max_parallelism",
            f"an integer from the operator's parallelism ({parallelism}) to {MAX_PARALLELISM}",
        )
    return value


def _read_state(table: Table) -> tuple[float | None, float]:
    """``state_mb`` (> 0: the state a checkpoint snapshots; with ``managed_memory``, the working
    set that may spill) and ``spill_cost_us`` (>= 0, needs both; default
    :data:`DEFAULT_SPILL_COST_US`)."""
    state_mb = table.number("state_mb", 0.0, above_minimum=True)
    spill_cost_us = table.number("spill_cost_us", 0.0)
    if spill_cost_us is not None and state_mb is not None and not table.has("managed_memory"):
        raise table.error(
            'key "spill_cost_us" needs "managed_memory": a state spills only when it outgrows '
            "the managed memory the operator gets; add managed_memory = 1 (a weight) or a size "
            'such as "64mb"'
        )
    if spill_cost_us is not None and state_mb is None:
        raise table.error(
            'key "spill_cost_us" needs "state_mb": only an operator whose state outgrows its '
            "managed memory spills; add state_mb (its working set per subtask, in MB)"
        )
    return state_mb, DEFAULT_SPILL_COST_US if spill_cost_us is None else spill_cost_us


def _read_managed_memory(table: Table) -> ManagedMemory | None:
    """``managed_memory``: a weight (a number > 0) or a resource spec (``"64mb"``, ``"1gb"``)."""
    if not table.has("managed_memory"):
        return None
    value = table.data["managed_memory"]
    expected = 'a weight > 0 (e.g. 1) or a size (e.g. "64mb" or "1gb")'
    if isinstance(value, str):
        found = MEMORY_SIZE.fullmatch(value.strip().lower())
        if found is None or float(found.group(1)) <= 0:
            raise table.key_error("managed_memory", expected)
        scale = 1024.0 if found.group(2) == "gb" else 1.0
        return ManagedMemory(mb=float(found.group(1)) * scale)
    if isinstance(value, bool) or not isinstance(value, int | float) or not value > 0:
        raise table.key_error("managed_memory", expected)
    return ManagedMemory(weight=float(value))


def _read_slow_subtasks(table: Table, parallelism: int) -> Mapping[int, float]:
    """The ``slow_subtasks`` table as a read-only mapping of subtask index to multiplier."""
    data = table.table("slow_subtasks")
    if data is None:
        return MappingProxyType({})
    slow = Table(data, f"{table.where}: slow_subtasks")
    result: dict[int, float] = {}
    for key in data:
        if not (key.isascii() and key.isdecimal()) or int(key) >= parallelism:
            raise slow.error(
                f'subtask index "{key}": expected a subtask index from 0 to {parallelism - 1} '
                f"(the operator's parallelism is {parallelism})"
            )
        multiplier = slow.number(key, 0.0, above_minimum=True)
        result[int(key)] = cast(float, multiplier)
    return MappingProxyType(result)


def _read_fail(table: Table, parallelism: int) -> FailSpec | None:
    """The ``fail`` inline table: one trigger (records or seconds) and an optional subtask."""
    data = table.table("fail")
    if data is None:
        return None
    fail = Table(data, f"{table.where}: fail")
    fail.check_keys(FAIL_KEYS)
    after_records = fail.integer("after_records", minimum=0)
    after_s = fail.number("after_s", 0.0)
    if (after_records is None) == (after_s is None):
        raise fail.error(
            'expected exactly one of "after_records" (input records, a source: records emitted) '
            f'and "after_s" (seconds after the subtask started), e.g. {FAIL_EXAMPLE}'
        )
    subtask = fail.integer("subtask", minimum=0)
    if subtask is not None and subtask >= parallelism:
        raise fail.key_error(
            "subtask",
            f"a subtask index from 0 to {parallelism - 1} (the operator's parallelism is "
            f"{parallelism}); leave it out to fail every subtask",
        )
    return FailSpec(after_records=after_records, after_s=after_s, subtask=subtask)


def _read_threads(table: Table) -> str | None:
    pattern = table.string("threads")
    if pattern is None:
        return None
    if not pattern:
        raise table.key_error("threads", "a regular expression over thread names, e.g. '^w-\\d+$'")
    try:
        re.compile(pattern)
    except re.error as exc:
        raise table.key_error("threads", f"a valid regular expression ({exc})") from exc
    return pattern
