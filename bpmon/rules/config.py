"""The diagnosis parameters (``rules/backpressure.toml``) as one frozen, validated value.

Every threshold the rules engine uses lives in the rules file, documented there, so users tune the
diagnosis without touching code. :func:`load_rules` reads the file (the shipped one by default);
a missing key keeps its default, an unknown key or a bad value is a one-line :class:`ConfigError`
naming the file, the key, the value and what is expected (a typo must not silently change the
diagnosis). Building :class:`RulesConfig` in code validates the same way.
"""

from __future__ import annotations

import tomllib
from dataclasses import dataclass, field, fields, replace
from pathlib import Path
from typing import Any

from bpmon.model import capacity
from bpmon.model.datafiles import data_file
from bpmon.model.errors import ConfigError
from bpmon.rules.autoscaler import AutoscalerConfig

_UNIT = (0.0, 1.0)
_AT_LEAST_ONE = (1.0, float("inf"))
_NON_NEGATIVE = (0.0, float("inf"))

_BOUNDS: dict[str, tuple[float, float]] = {
    "kinds.skew_ratio": _AT_LEAST_ONE,
    "kinds.slow_subtask_ratio": _AT_LEAST_ONE,
    "kinds.spill_bytes_per_s_min": _NON_NEGATIVE,
    "network.link_backlog_min": _NON_NEGATIVE,
    "confidence.pressure": _NON_NEGATIVE,
    "confidence.separation": _NON_NEGATIVE,
    "confidence.saturation": _NON_NEGATIVE,
    "confidence.agreement": _NON_NEGATIVE,
    "history.hot_ratio": _AT_LEAST_ONE,
    "history.keep_days": _NON_NEGATIVE,
    "checkpoints.slow_ms": _NON_NEGATIVE,
    "checkpoints.skew_ratio": _AT_LEAST_ONE,
    "checkpoints.skew_min_ms": _NON_NEGATIVE,
    "sizing.catch_up_s": (1.0, float("inf")),
}
"""Inclusive bounds of the numeric parameters that are not ratios in [0, 1]."""


@dataclass(frozen=True, slots=True)
class LevelRules:
    """``[levels]``: OK <= ok_max < LOW <= low_max < HIGH, and the samples/time disagreement."""

    ok_max: float = 0.10
    low_max: float = 0.50
    disagreement: float = 0.20


@dataclass(frozen=True, slots=True)
class BottleneckRules:
    """``[bottleneck]``: when a vertex that backpressured producers wait on is the cause."""

    busy_min: float = 0.70
    saturated_busy: float = 0.90
    less_backpressured_margin: float = 0.30


@dataclass(frozen=True, slots=True)
class NetworkRules:
    """``[network]``: a saturated connection (producer blocked, consumer starved and idle)."""

    producer_backpressure_min: float = 0.50
    idle_min: float = 0.50
    in_pool_max: float = 0.50
    out_pool_min: float = 0.50
    sibling_busy_gap: float = 0.30
    link_backlog_min: float = 2.0
    round_trip_overlap_min: float = 0.25


@dataclass(frozen=True, slots=True)
class KindRules:
    """``[kinds]``: how the subtasks of a bottleneck differ (skew, slow instance, spilling)."""

    busy_share_of_max: float = 0.80
    skew_ratio: float = 1.5
    slow_subtask_ratio: float = 2.0
    spill_bytes_per_s_min: float = 1.0


@dataclass(frozen=True, slots=True)
class ConfidenceRules:
    """``[confidence]``: weights of the evidence and the factors that lower a confidence."""

    pressure: float = 0.3
    separation: float = 0.2
    saturation: float = 0.3
    agreement: float = 0.2
    secondary: float = 0.8
    no_rates: float = 0.7
    no_pool_metrics: float = 0.6
    no_topology: float = 0.4
    not_running: float = 0.7

    def weight_sum(self) -> float:
        """The sum of the four evidence weights (at least one must be positive)."""
        return self.pressure + self.separation + self.saturation + self.agreement


@dataclass(frozen=True, slots=True)
class CapacityRules:
    """``[capacity]``: the capacity figure and the parallelism suggested."""

    utilisation_target: float = 0.9
    min_busy: float = capacity.MIN_BUSY


@dataclass(frozen=True, slots=True)
class StallRules:
    """``[stall]``: a region that moves no records while something in it waits."""

    max_records_per_s: float = 0.0
    confidence: float = 0.6


@dataclass(frozen=True, slots=True)
class HistoryRules:
    """``[history]``: what ``bpmon analyze`` calls a regression, a run's cause, and skew; and
    how many days of history are kept (``keep_days``; 0 keeps everything)."""

    capacity_drop: float = 0.20
    cause_share: float = 0.50
    hot_ratio: float = 1.5
    hot_share: float = 0.50
    keep_days: int = 30


@dataclass(frozen=True, slots=True)
class SizingRules:
    """``[sizing]``: how long a recommended parallelism may take to drain the sources' backlog."""

    catch_up_s: float = 1800.0


@dataclass(frozen=True, slots=True)
class CheckpointRules:
    """``[checkpoints]``: when a checkpoint is slow, held by backpressure, or skewed."""

    slow_ms: float = 1000.0
    waiting_share: float = 0.5
    own_share: float = 0.5
    skew_ratio: float = 3.0
    skew_min_ms: float = 500.0


_TABLES: dict[str, type] = {
    "levels": LevelRules,
    "bottleneck": BottleneckRules,
    "network": NetworkRules,
    "kinds": KindRules,
    "confidence": ConfidenceRules,
    "capacity": CapacityRules,
    "stall": StallRules,
    "history": HistoryRules,
    "checkpoints": CheckpointRules,
    "sizing": SizingRules,
}


@dataclass(frozen=True, slots=True)
class RulesConfig:
    """Every parameter of the diagnosis; ``RulesConfig()`` holds the documented defaults.

    Attributes:
        origin: where the values came from (a file path, or ``"defaults"``), for messages.
    """

    levels: LevelRules = field(default_factory=LevelRules)
    bottleneck: BottleneckRules = field(default_factory=BottleneckRules)
    network: NetworkRules = field(default_factory=NetworkRules)
    kinds: KindRules = field(default_factory=KindRules)
    confidence: ConfidenceRules = field(default_factory=ConfidenceRules)
    capacity: CapacityRules = field(default_factory=CapacityRules)
    stall: StallRules = field(default_factory=StallRules)
    history: HistoryRules = field(default_factory=HistoryRules)
    checkpoints: CheckpointRules = field(default_factory=CheckpointRules)
    sizing: SizingRules = field(default_factory=SizingRules)
    autoscaler: AutoscalerConfig = field(default_factory=AutoscalerConfig)
    """The autoscaler's options the second opinion is computed with (not a table of this file:
    ``--autoscaler-config FILE`` gives them, in Flink's own keys)."""
    origin: str = "defaults"

    def __post_init__(self) -> None:
        for table in _TABLES:
            _check_table(table, getattr(self, table))
        _check_order(self)


def _check_table(table: str, value: object) -> None:
    for f in fields(value):  # type: ignore[arg-type]
        current = getattr(value, f.name)
        low, high = _BOUNDS.get(f"{table}.{f.name}", _UNIT)
        if isinstance(current, bool) or not isinstance(current, int | float):
            raise ConfigError(f"{table}.{f.name} = {current!r}: expected a number")
        if not low <= current <= high:
            upper = "" if high == float("inf") else f" and {high:g}"
            lead = f"between {low:g}{upper}" if upper else f">= {low:g}"
            raise ConfigError(f"{table}.{f.name} = {current!r}: expected a number {lead}")


def _check_order(rules: RulesConfig) -> None:
    lv, bn, cf, cap = rules.levels, rules.bottleneck, rules.confidence, rules.capacity
    if not lv.ok_max < lv.low_max:
        raise ConfigError(
            f"levels.ok_max = {lv.ok_max} must be below levels.low_max = {lv.low_max} "
            "(defaults 0.10 and 0.50)"
        )
    if bn.busy_min > bn.saturated_busy:
        raise ConfigError(
            f"bottleneck.busy_min = {bn.busy_min} must not exceed bottleneck.saturated_busy = "
            f"{bn.saturated_busy} (defaults 0.70 and 0.90)"
        )
    keep = rules.history.keep_days
    if keep != int(keep):
        raise ConfigError(
            f"history.keep_days = {keep!r}: expected a whole number of days (0 keeps everything; "
            "default 30)"
        )
    if cf.weight_sum() <= 0:
        raise ConfigError("confidence weights are all 0: give at least one a positive weight")
    if not 0 < cap.utilisation_target <= 1:
        raise ConfigError(
            f"capacity.utilisation_target = {cap.utilisation_target}: expected above 0 and at "
            "most 1 (default 0.9)"
        )


def load_rules(path: str | Path | None = None) -> RulesConfig:
    """Read the diagnosis parameters from ``path`` (default: the shipped ``backpressure.toml``).

    ``path`` may also be the name of a shipped rules file. Missing keys keep their defaults.

    Raises:
        ConfigError: the file is missing, is not valid TOML, has an unknown table or key, or a
            value is of the wrong type or out of range; the one-line message names which.
    """
    resolved = data_file("rules", "backpressure" if path is None else str(path))
    try:
        with resolved.open("rb") as fh:
            document = tomllib.load(fh)
    except OSError as exc:
        raise ConfigError(f"{resolved}: cannot read the rules file ({exc.strerror})") from exc
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"{resolved}: not valid TOML ({exc}); fix the syntax") from exc
    try:
        return _from_document(document, str(resolved))
    except ConfigError as exc:
        raise ConfigError(f"{resolved}: {exc}") from exc


def _from_document(document: dict[str, Any], origin: str) -> RulesConfig:
    unknown = sorted(set(document) - set(_TABLES))
    if unknown:
        raise ConfigError(
            f"unknown table or key {unknown[0]!r}; known tables: {', '.join(_TABLES)}"
        )
    tables: dict[str, Any] = {}
    for name, cls in _TABLES.items():
        raw = document.get(name, {})
        if not isinstance(raw, dict):
            raise ConfigError(f"{name} = {raw!r}: expected a table [{name}]")
        tables[name] = _table_from(name, cls, raw)
    return replace(RulesConfig(), origin=origin, **tables)


RETIRED = {
    "kinds.spill_metrics": "spilling is read from the targets' typed spill figures (the "
    "metrics' spill); delete the key",
}
"""Keys older bpmon versions knew, with what replaced them."""


def _table_from(name: str, cls: type, raw: dict[str, Any]) -> object:
    known = {f.name for f in fields(cls)}
    for key in sorted(raw):
        if f"{name}.{key}" in RETIRED:
            raise ConfigError(f"{name}.{key} is no longer read: {RETIRED[f'{name}.{key}']}")
    unknown = sorted(set(raw) - known)
    if unknown:
        raise ConfigError(
            f"unknown key {name}.{unknown[0]}; known keys: {', '.join(sorted(known))}"
        )
    values = {k: tuple(v) if isinstance(v, list) else v for k, v in raw.items()}
    return cls(**values)
