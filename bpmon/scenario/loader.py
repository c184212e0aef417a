"""Loading scenario files (``docs/scenario.md``): TOML in, a checked :class:`Scenario` out.

Every problem is one :class:`ScenarioError` whose message names the file, the table or operator,
the key, the bad value and what was expected, so a typo never silently changes an experiment and
never ends in a traceback. A problem with the content of the file (not with reading it) ends with
"see docs/scenario.md" (``docs/topology.md`` for a topology file): the user who wrote a wrong key
needs the format next. What the file format allows but the runtime cannot run yet is checked
separately (:func:`check_runtime_support`), so lifting a limitation is a one-line change.
"""

from __future__ import annotations

import os
import tomllib
from collections.abc import Mapping
from dataclasses import fields, replace
from pathlib import Path
from typing import Any, cast

from bpmon.model.checkpoints import CheckpointMode
from bpmon.model.errors import ConfigError, ScenarioError
from bpmon.scenario._table import Table, quoted
from bpmon.scenario.chained import chained_scenario
from bpmon.scenario.compiled import JobPlan, compile_job
from bpmon.scenario.network import BOOL_KEYS, FLOAT_KEYS, STRING_KEYS, NetworkConfig
from bpmon.scenario.spec import (
    CHECKPOINT_MODES,
    MODES,
    CheckpointConfig,
    ClusterSpec,
    Mode,
    MonitorConfig,
    Scenario,
)
from bpmon.scenario.wiring import build_operators

TOP_KEYS = (
    "name",
    "duration_s",
    "seed",
    "mode",
    "chaining",
    "cluster",
    "network",
    "checkpoints",
    "monitor",
    "operators",
    "expect",
)
"""Keys of a scenario file; ``expect`` (the ground truth of examples) is ignored by the loader."""
CHECKPOINT_KEYS = ("interval_ms", "mode", "timeout_ms", "aligned_timeout_ms", "upload_mb_per_s")
"""Keys of the ``[checkpoints]`` table."""
MONITOR_KEYS = ("warmup_s", "samples", "interval_ms", "settle_s")
"""Keys of the ``[monitor]`` table."""
CLUSTER_KEYS = ("slots_per_task_manager", "managed_memory_mb", "slot_request_timeout_s")
"""Keys of the ``[cluster]`` table."""

SCENARIO_DOC = "docs/scenario.md (`bpmon docs scenario`)"
"""Where the scenario format is documented; named at the end of every format error."""
TOPOLOGY_DOC = "docs/topology.md (`bpmon docs topology`)"
"""Where the topology format is documented; named at the end of every topology format error."""

SUPPORTED_EXCHANGES = ("pipelined", "blocking", "hybrid-selective", "hybrid-full")
"""Exchanges the runtime can run today."""
SUPPORTS_BOUNDED_SOURCES = True
"""Whether the runtime runs sources that finish (``records``)."""
SUPPORTS_CHAINING = True
"""Whether the runtime chains operators into one task (``chaining = true``)."""

DEFAULT_DURATION_S = 10.0


def load_scenario(path: str | os.PathLike[str], *, allow_unsupported: bool = False) -> Scenario:
    """Load and check the scenario file at ``path``.

    Args:
        path: the TOML file; errors name it as given.
        allow_unsupported: skip :func:`check_runtime_support` (for tools that only read the graph).

    Raises:
        ScenarioError: the file is missing, not TOML, or breaks a rule of the format.
    """
    where = str(path)
    scenario = build_scenario(read_toml_file(path), where, path=where)
    if not allow_unsupported:
        check_runtime_support(scenario)
    return scenario


def parse_scenario(
    text: str, source: str = "<string>", *, allow_unsupported: bool = False
) -> Scenario:
    """Parse and check scenario TOML held in a string; ``source`` names it in errors."""
    scenario = build_scenario(parse_toml(text, source), source)
    if not allow_unsupported:
        check_runtime_support(scenario, source)
    return scenario


def check_runtime_support(scenario: Scenario, source: str | None = None) -> None:
    """Reject what the format allows but the in-process runtime cannot run yet.

    Raises:
        ScenarioError: an input uses an exchange other than those in ``SUPPORTED_EXCHANGES``,
            a source is bounded, or operators are chained (each a later step of the runtime).
    """
    where = source or scenario.path or "<string>"
    if scenario.chaining and not SUPPORTS_CHAINING:
        raise ScenarioError(
            f'{where}: key "chaining" = true is not supported yet by the runtime; leave it out '
            "(each operator runs as its own task)"
        )
    for i, op in enumerate(scenario.operators):
        if op.records is not None and not SUPPORTS_BOUNDED_SOURCES:
            raise ScenarioError(
                f'{where}: operators[{i}] "{op.name}": key "records" (a bounded source) is not '
                "supported yet by the runtime; leave it out"
            )
        for j, edge in enumerate(op.inputs):
            if edge.exchange not in SUPPORTED_EXCHANGES:
                raise ScenarioError(
                    f'{where}: operators[{i}] "{op.name}": inputs[{j}]: key "exchange" = '
                    f'"{edge.exchange}" is not supported yet by the runtime; use '
                    f"{quoted(SUPPORTED_EXCHANGES)}"
                )


def read_toml_file(path: str | os.PathLike[str]) -> dict[str, Any]:
    """The parsed TOML document at ``path``; a missing or unreadable file is a ScenarioError."""
    where = str(path)
    try:
        raw = Path(path).read_bytes()
    except FileNotFoundError:
        raise ScenarioError(f"{where}: no such file; check the path") from None
    except IsADirectoryError:
        raise ScenarioError(f"{where}: is a directory; expected a .toml file") from None
    except OSError as exc:
        raise ScenarioError(f"{where}: cannot read the file ({exc.strerror})") from exc
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise ScenarioError(
            f"{where}: not valid TOML: byte {exc.start} is not UTF-8; save the file as UTF-8"
        ) from exc
    return parse_toml(text, where)


def parse_toml(text: str, source: str) -> dict[str, Any]:
    """``text`` parsed as TOML; a syntax error names ``source`` and the line."""
    try:
        return tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise ScenarioError(f"{source}: not valid TOML: {exc}") from exc


def build_scenario(
    data: Mapping[str, object], source: str, *, topology: bool = False, path: str | None = None
) -> Scenario:
    """Check a parsed scenario document and build the :class:`Scenario`.

    Args:
        data: the parsed TOML document.
        source: names the document in errors (the path as the user gave it).
        topology: read it as a topology file (``docs/topology.md``): ``kind``, ``rate`` and
            ``fanout`` become optional and operators may carry a ``threads`` regex.
        path: recorded in :attr:`Scenario.path`.

    Raises:
        ScenarioError: one line naming the problem, ending with the document that describes
            the format.
    """
    try:
        return _build(data, source, topology=topology, path=path)
    except ScenarioError as exc:
        doc = TOPOLOGY_DOC if topology else SCENARIO_DOC
        raise ScenarioError(f"{exc}; see {doc}") from None


def _build(
    data: Mapping[str, object], source: str, *, topology: bool, path: str | None
) -> Scenario:
    top = Table(data, source)
    top.check_keys(TOP_KEYS)
    name = top.require("name", top.string("name"), "the job name")
    if not name.strip():
        raise top.key_error("name", "a non-empty job name")
    duration_s = top.number("duration_s", 0.0, above_minimum=True)
    seed = top.integer("seed")
    mode = cast(Mode, top.string("mode", MODES) or "streaming")
    chaining = top.boolean("chaining")
    operators = build_operators(top, topology=topology, mode=mode)
    scenario = Scenario(
        name=name,
        duration_s=DEFAULT_DURATION_S if duration_s is None else duration_s,
        seed=0 if seed is None else seed,
        network=_read_network(top),
        checkpoints=_read_checkpoints(top),
        monitor=_read_monitor(top),
        operators=operators,
        path=path,
        mode=mode,
        chaining=bool(chaining),
        cluster=_read_cluster(top),
    )
    if not topology:
        try:
            plan = compile_job(scenario)  # what only the whole job shows: its managed memory
            scenario = _with_managed_memory(scenario, plan)  # (what a stateful one spills)
            chained_scenario(scenario)  # and its chains
        except ScenarioError as exc:
            raise top.error(str(exc)) from None
    return scenario


def _with_managed_memory(scenario: Scenario, plan: JobPlan) -> Scenario:
    """``scenario`` with each stateful operator's managed memory per subtask from ``plan``: the
    runtime and the load models read its spill cost from it (``OperatorSpec.spill_us``)."""
    operators = tuple(
        replace(op, managed_mb=plan.operator(op.name).managed_memory_mb)
        if op.state_mb is not None
        else op
        for op in scenario.operators
    )
    return replace(scenario, operators=operators)


def _sub_table(top: Table, key: str) -> Table | None:
    data = top.table(key)
    return None if data is None else Table(data, f"{top.where}: [{key}]")


def _read_network(top: Table) -> NetworkConfig:
    """The ``[network]`` table: typed here, ranges checked by :class:`NetworkConfig` itself."""
    table = _sub_table(top, "network")
    if table is None:
        return NetworkConfig()
    keys = [f.name for f in fields(NetworkConfig)]
    table.check_keys(keys)
    values: dict[str, Any] = {}
    for key in keys:
        if key in BOOL_KEYS:
            values[key] = table.boolean(key)
        elif key in STRING_KEYS:
            values[key] = table.string(key, STRING_KEYS[key])
        elif key in FLOAT_KEYS:
            values[key] = table.number(key)
        else:
            values[key] = table.integer(key)
    try:
        return NetworkConfig(**{k: v for k, v in values.items() if v is not None})
    except ConfigError as exc:
        raise ScenarioError(f"{top.where}: {exc}") from exc


def _read_cluster(top: Table) -> ClusterSpec:
    """The ``[cluster]`` table: slots per task manager, managed memory, slot request timeout."""
    table = _sub_table(top, "cluster")
    default = ClusterSpec()
    if table is None:
        return default
    table.check_keys(CLUSTER_KEYS)
    slots = table.integer("slots_per_task_manager", minimum=1)
    memory = table.number("managed_memory_mb", 0.0)
    timeout = table.number("slot_request_timeout_s", 0.0, above_minimum=True)
    return ClusterSpec(
        slots_per_task_manager=slots,
        managed_memory_mb=default.managed_memory_mb if memory is None else memory,
        slot_request_timeout_s=default.slot_request_timeout_s if timeout is None else timeout,
    )


def _read_checkpoints(top: Table) -> CheckpointConfig:
    table = _sub_table(top, "checkpoints")
    if table is None:
        return CheckpointConfig()
    table.check_keys(CHECKPOINT_KEYS)
    default = CheckpointConfig()
    interval_ms = table.integer("interval_ms", minimum=0)
    mode = table.string("mode", CHECKPOINT_MODES)
    timeout_ms = table.integer("timeout_ms", minimum=1)
    aligned_timeout_ms = table.integer("aligned_timeout_ms", minimum=0)
    upload = table.number("upload_mb_per_s", 0.0, above_minimum=True)
    if aligned_timeout_ms and mode != "unaligned":
        raise table.error(
            f"aligned_timeout_ms = {aligned_timeout_ms} switches aligned checkpoints to unaligned "
            'ones after it, so it needs mode = "unaligned" (checkpoints then start aligned)'
        )
    return CheckpointConfig(
        interval_ms=0 if interval_ms is None else interval_ms,
        mode=cast(CheckpointMode, mode or "aligned"),
        timeout_ms=default.timeout_ms if timeout_ms is None else timeout_ms,
        aligned_timeout_ms=0 if aligned_timeout_ms is None else aligned_timeout_ms,
        upload_mb_per_s=default.upload_mb_per_s if upload is None else upload,
    )


def _read_monitor(top: Table) -> MonitorConfig:
    table = _sub_table(top, "monitor")
    default = MonitorConfig()
    if table is None:
        return default
    table.check_keys(MONITOR_KEYS)
    warmup_s = table.number("warmup_s", 0.0)
    samples = table.integer("samples", minimum=1)
    interval_ms = table.number("interval_ms", 0.0, above_minimum=True)
    settle_s = table.number("settle_s", 0.0)
    return MonitorConfig(
        warmup_s=default.warmup_s if warmup_s is None else warmup_s,
        samples=default.samples if samples is None else samples,
        interval_ms=default.interval_ms if interval_ms is None else interval_ms,
        settle_s=default.settle_s if settle_s is None else settle_s,
    )
