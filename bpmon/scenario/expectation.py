"""The ground truth of an example scenario: its ``[expect]`` table (``docs/scenario.md``).

The runtime ignores ``[expect]``; the acceptance tests read it to check that the diagnosis of a
run names the right root cause, kind and subtasks.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass
from typing import cast

from bpmon.model.values import CAUSE_KINDS, FINDING_KINDS, CauseKind, FindingKind
from bpmon.scenario._table import Table, did_you_mean, quoted
from bpmon.scenario.compiled import compile_job
from bpmon.scenario.loader import build_scenario, read_toml_file

EXPECT_KEYS = ("root_cause", "kind", "subtasks", "findings", "without_findings")


@dataclass(frozen=True, slots=True)
class Expectation:
    """What the diagnosis of a scenario must find.

    Attributes:
        root_cause: the bottleneck vertex; ``""`` when nothing should be backpressured.
        kind: the kind of cause (``docs/report.md``); ``None`` exactly when ``root_cause`` is "".
        subtasks: the subtasks the diagnosis must name (may be empty).
        findings: kinds of finding the report must carry (``checkpoint-backpressure``).
        without_findings: kinds of finding it must not carry.
    """

    root_cause: str
    kind: CauseKind | None = None
    subtasks: tuple[int, ...] = ()
    findings: tuple[FindingKind, ...] = ()
    without_findings: tuple[FindingKind, ...] = ()


def load_expectation(path: str | os.PathLike[str]) -> Expectation | None:
    """The ``[expect]`` table of the scenario file at ``path``; ``None`` if it has none.

    Raises:
        ScenarioError: the file cannot be read, or ``[expect]`` is malformed or names a vertex
            the file does not define.
    """
    return expectation_from(read_toml_file(path), str(path))


def expectation_from(data: Mapping[str, object], source: str) -> Expectation | None:
    """The ``[expect]`` table of a parsed scenario document; ``source`` names it in errors."""
    expect = Table(data, source).table("expect")
    if expect is None:
        return None
    table = Table(expect, f"{source}: [expect]")
    table.check_keys(EXPECT_KEYS)
    root = table.require(
        "root_cause",
        table.string("root_cause"),
        'the bottleneck operator, "" when nothing is backpressured',
    )
    names = _vertex_names(data, source)
    if root and root not in names:
        chain = " or a chain (as `bpmon plan` names it)" if _chaining(data) else ""
        what = f"an operator{chain}"
        raise table.key_error("root_cause", f'{what} of this file or ""{did_you_mean(root, names)}')
    kind = table.string("kind", CAUSE_KINDS)
    if root and kind is None:
        table.require("kind", kind, f"one of {quoted(CAUSE_KINDS)}")
    if not root and kind is not None:
        raise table.error('key "kind" needs a root_cause; leave it out when root_cause = ""')
    return Expectation(
        root,
        cast(CauseKind | None, kind),
        _read_subtasks(table),
        _read_kinds(table, "findings"),
        _read_kinds(table, "without_findings"),
    )


def _vertex_names(data: Mapping[str, object], source: str) -> list[str]:
    """The operators of the document and, with ``chaining = true``, its chained tasks (a
    chain is one vertex, named as Flink names it: ``"parse -> (enrich, audit)"``)."""
    operators = data.get("operators")
    if not isinstance(operators, list):
        return []
    names = [str(op.get("name")) for op in operators if isinstance(op, Mapping)]
    if _chaining(data):
        tasks = compile_job(build_scenario(data, source)).tasks()
        names += [task for task in tasks if task not in names]
    return names


def _read_subtasks(table: Table) -> tuple[int, ...]:
    if not table.has("subtasks"):
        return ()
    value = table.data["subtasks"]
    if not isinstance(value, list) or not all(
        isinstance(i, int) and not isinstance(i, bool) and i >= 0 for i in value
    ):
        raise table.key_error("subtasks", "an array of subtask indices (integers >= 0), e.g. [0]")
    return tuple(value)


def _read_kinds(table: Table, key: str) -> tuple[FindingKind, ...]:
    if not table.has(key):
        return ()
    value = table.data[key]
    if not isinstance(value, list) or not all(k in FINDING_KINDS for k in value):
        bad = (
            next((k for k in value if k not in FINDING_KINDS), None)
            if isinstance(value, list)
            else None
        )
        hint = f" ({bad!r} is none{did_you_mean(str(bad), FINDING_KINDS)})" if bad else ""
        raise table.key_error(key, f'an array of finding kinds, e.g. ["checkpoint-slow"]{hint}')
    return tuple(cast(list[FindingKind], value))


def _chaining(data: Mapping[str, object]) -> bool:
    return data.get("chaining") is True
