"""A scenario with some settings changed: ``--set VERTEX.KEY=VALUE`` applied to its TOML.

``bpmon whatif`` and ``bpmon run --verify`` re-run a scenario as changed. A change is made to the
scenario's TOML document and the whole document is checked again by the loader, so a change that
breaks a rule of the format (a ``slow_subtasks`` index beyond the new parallelism, a forward edge
between unequal parallelisms) is the same one-line error as in a file. What a change implies is
applied with it, as Flink would apply it: a source given more subtasks keeps the records it is
offered in all, and a forward edge between two vertices whose parallelisms now differ becomes a
rebalance.
"""

from __future__ import annotations

import copy
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from bpmon.model.errors import ConfigError
from bpmon.scenario.chaining import operator_names
from bpmon.scenario.loader import build_scenario, check_runtime_support, read_toml_file
from bpmon.scenario.spec import Scenario

SETTABLE: Mapping[str, type] = {
    "parallelism": int,
    "cost_us": float,
    "cost_cv": float,
    "rate": float,
    "record_bytes": int,
    "fanout": float,
    "selectivity": float,
    "managed_memory": float,
    "state_mb": float,
    "spill_cost_us": float,
}
"""The operator keys ``--set VERTEX.KEY=VALUE`` may change, with their types."""

SECTIONS: Mapping[str, Mapping[str, type | tuple[str, ...]]] = {
    "checkpoints": {
        "mode": ("aligned", "unaligned"),
        "interval_ms": int,
        "timeout_ms": int,
        "aligned_timeout_ms": int,
        "upload_mb_per_s": float,
    },
    "network": {
        "debloat": bool,
        "debloat_target_ms": int,
        "max_overdraft_buffers_per_gate": int,
        "buffers_per_channel": int,
        "floating_buffers_per_gate": int,
        "buffer_timeout_ms": int,
    },
}
"""The job-wide keys ``--set TABLE.KEY=VALUE`` may change (``checkpoints.mode=unaligned``,
``network.debloat=true``): a type, or the strings the key takes. A change names one of these
tables unless the scenario has an operator of that name with the key as an operator key."""

Value = int | float | bool | str


EXPERIMENT = " with "
"""What joins a job's name and the changes tried on it, naming the changed job."""


def tried_on(job: str, base: str) -> bool:
    """Whether ``job`` is ``base`` itself or a what-if experiment on it (``base with ...``)."""
    return job == base or job.startswith(f"{base}{EXPERIMENT}")


@dataclass(frozen=True, slots=True)
class SettingChange:
    """One ``VERTEX.KEY=VALUE`` change to a scenario (``vertex`` may name a job-wide table of
    :data:`SECTIONS` instead: ``checkpoints.mode=unaligned``)."""

    vertex: str
    key: str
    value: Value

    def __str__(self) -> str:
        value = self.value
        shown = (
            str(value).lower()
            if isinstance(value, bool)
            else value
            if isinstance(value, str)
            else f"{value:g}"
        )
        return f"{self.vertex}.{self.key}={shown}"

    @property
    def section(self) -> bool:
        """Whether it changes a job-wide table (:data:`SECTIONS`), not an operator."""
        return self.key in SECTIONS.get(self.vertex, {}) and self.key not in SETTABLE


def parse_change(text: str) -> SettingChange:
    """``enrich.parallelism=7`` or ``checkpoints.mode=unaligned`` as a :class:`SettingChange`;
    ConfigError names what is wrong."""
    where, eq, value = text.partition("=")
    vertex, dot, key = where.rpartition(".")
    value = value.strip()
    if not eq or not dot or not vertex or not value:
        raise ConfigError(
            f"--set {text!r}: expected VERTEX.KEY=VALUE, e.g. enrich.parallelism=4 (or "
            "checkpoints.mode=unaligned, network.debloat=true)"
        )
    kind = SECTIONS[vertex].get(key) if vertex in SECTIONS else None
    if kind is None or key in SETTABLE:
        kind = SETTABLE.get(key)
    if kind is None:
        tables = "; ".join(f"{t}.{', '.join(keys)}" for t, keys in SECTIONS.items())
        raise ConfigError(
            f"--set {text!r}: {key!r} cannot be set; use an operator's "
            f"{', '.join(SETTABLE)}, or {tables}"
        )
    return SettingChange(vertex, key, _typed(text, value, kind))


def _typed(text: str, value: str, kind: type | tuple[str, ...]) -> Value:
    if isinstance(kind, tuple):
        if value.strip('"') not in kind:
            raise ConfigError(f"--set {text!r}: expected one of {', '.join(kind)}")
        return value.strip('"')
    if kind is bool:
        if value.lower() not in ("true", "false"):
            raise ConfigError(f"--set {text!r}: {value!r} is not true or false")
        return value.lower() == "true"
    try:
        number: int | float = kind(value)
    except ValueError:
        article = "an integer" if kind is int else "a number"
        raise ConfigError(f"--set {text!r}: {value!r} is not {article}") from None
    return number


def changed(scenario: Scenario, changes: Sequence[SettingChange]) -> Scenario:
    """``scenario`` with ``changes`` applied and the whole document checked again.

    The changed job is named ``"<name> with <changes>"``: its runs are an experiment, stored
    and listed apart from the job's own (a dashboard's timeline and ``bpmon analyze``'s trends
    of ``demo`` never mix in a run of ``demo with enrich.parallelism=6``).

    Raises:
        ConfigError: a change names an unknown vertex, or the scenario has no file to change.
            A chained vertex (``"enrich -> check"``) takes a parallelism for all its operators.
        ScenarioError: the changed scenario breaks a rule of the format.
    """
    if scenario.path is None:
        raise ConfigError(f"scenario {scenario.name!r} has no file: changes need its TOML")
    data: dict[str, Any] = copy.deepcopy(read_toml_file(scenario.path))
    operators = {op.get("name"): op for op in data.get("operators", []) if isinstance(op, dict)}
    rated = {id(op) for c in changes if c.key == "rate" for op in _targets(c, operators)}
    rescaled: set[object] = set()
    for change in changes:
        if change.section and change.vertex not in operators:
            table = data.setdefault(change.vertex, {})
            if not isinstance(table, dict):
                raise ConfigError(f"--set {change}: [{change.vertex}] is not a table in the file")
            table[change.key] = change.value
            continue
        for op in _targets(change, operators):
            if change.key == "parallelism" and op.get("kind") == "source" and id(op) not in rated:
                _keep_offered(op, int(change.value))  # an int: SETTABLE types it
            if change.key == "parallelism":
                rescaled.add(op.get("name"))
            op[change.key] = change.value
    _unforward(operators, rescaled)
    what = ", ".join(str(c) for c in changes)
    data["name"] = f"{scenario.name}{EXPERIMENT}{what}"  # another job: kept apart in history
    source = f"{scenario.path} with {what}"
    result = build_scenario(data, source, path=scenario.path)
    check_runtime_support(result, source)
    return result


def _unforward(operators: Mapping[object, dict[str, Any]], rescaled: set[object]) -> None:
    """A ``forward`` edge to or from a rescaled operator whose two ends now differ in
    parallelism becomes ``rebalance``: Flink keeps forward only between equal parallelisms, and
    a job rescaled to bpmon's recommendation would have that edge rewritten the same way."""

    def parallelism(name: object) -> object:
        op = operators.get(name)
        return op.get("parallelism", 1) if op is not None else None

    for name, op in operators.items():
        for edge in op.get("inputs", []):
            if not isinstance(edge, dict) or edge.get("partitioner") != "forward":
                continue
            ends = {name, edge.get("from")}
            if ends & rescaled and parallelism(name) != parallelism(edge.get("from")):
                edge["partitioner"] = "rebalance"


def rerouted(before: Scenario, after: Scenario) -> list[str]:
    """The edges forward in ``before`` and not in ``after`` (``"src → work"``), to say so."""
    was = {(e.source, op.name): e.partitioner for op in before.operators for e in op.inputs}
    return [
        f"{e.source} → {op.name}"
        for op in after.operators
        for e in op.inputs
        if was.get((e.source, op.name)) == "forward" and e.partitioner != "forward"
    ]


def _keep_offered(source: dict[str, Any], parallelism: int) -> None:
    """A source given another parallelism keeps the records it is offered in all: its ``rate``
    (per subtask) is spread over the new subtasks, as a topic's partitions are, since more
    readers do not make more records arrive. A ``rate`` set in the same run is taken as given.

    Uneven ``subtask_rates`` are summed and spread evenly (the partitions are assigned anew),
    a ``rate_profile`` keeps its shape at the new rate (its steps' rates and a ramp's ``to``
    scale with it), and the ``backlog`` in all is shared out too."""
    rate, before = source.get("rate"), source.get("parallelism", 1)
    if not (isinstance(rate, int | float) and isinstance(before, int)):
        return
    if rate <= 0 or parallelism <= 0:
        return
    uneven = source.get("subtask_rates")
    uneven = uneven if isinstance(uneven, dict) else {}
    if not all(_is_number(v) for v in uneven.values()):
        return  # the loader names the bad value
    source.pop("subtask_rates", None)
    total = sum(float(uneven.get(str(i), rate)) for i in range(before))
    source["rate"] = total / parallelism
    _scale_profile(source, source["rate"] / rate)
    backlog = source.get("backlog")
    if isinstance(backlog, int) and backlog > 0:
        source["backlog"] = math.ceil(backlog * before / parallelism)


def _scale_profile(source: dict[str, Any], factor: float) -> None:
    """Scale the absolute rates of ``rate_profile`` by ``factor`` (a burst and a wave are
    relative to ``rate`` already)."""
    profile = source.get("rate_profile")
    if isinstance(profile, list):
        source["rate_profile"] = [
            [s[0], s[1] * factor] if isinstance(s, list) and len(s) == 2 and _is_number(s[1]) else s
            for s in profile
        ]
    elif isinstance(profile, dict) and _is_number(profile.get("to")):
        source["rate_profile"] = {**profile, "to": profile["to"] * factor}


def _is_number(value: object) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


def _targets(
    change: SettingChange, operators: Mapping[object, dict[str, Any]]
) -> list[dict[str, Any]]:
    """The operators of the scenario a change applies to.

    A vertex that is a chain (``chaining = true``: ``"enrich -> check"``, or a branching
    ``"parse -> (enrich, audit)"``) takes a parallelism for all its operators at once, as one
    task does; other keys name one operator of it.
    """
    op = operators.get(change.vertex)
    if op is not None:
        return [op]
    members = operator_names(change.vertex)
    if len(members) > 1 and all(m in operators for m in members):
        if change.key != "parallelism":
            raise ConfigError(
                f"--set {change}: {change.vertex!r} is a chain of {', '.join(members)}; "
                f"set {change.key} on one of its operators (e.g. {members[0]}.{change.key})"
            )
        return [operators[m] for m in members]
    known = ", ".join(str(n) for n in operators)
    raise ConfigError(f"--set {change}: no operator {change.vertex!r}; known: {known}")
