"""A file of ``job.autoscaler.*`` options (``--autoscaler-config FILE``) as an
:class:`~bpmon.rules.autoscaler.AutoscalerConfig`.

The file is what a team already has: Flink configuration lines ``key: value`` (a
``config.yaml``, a FlinkDeployment's ``flinkConfiguration``), ``#`` comments, blank lines; ``key
= value`` is read too. Keys with the prefix ``job.autoscaler.`` (or the older
``kubernetes.operator.job.autoscaler.``) that the decision depends on are read; every other key is
left alone, so a whole configuration can be passed. A value of the wrong type is one
:class:`~bpmon.model.errors.ConfigError` line naming the file, the line, the key and the type
expected. Durations read as Flink writes them (``30 min``, ``5m``, ``PT30M``, ``300000``).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from dataclasses import replace
from pathlib import Path
from typing import Any

from bpmon.model.durations import duration_ms
from bpmon.model.errors import ConfigError
from bpmon.rules.autoscaler import KEYS, AutoscalerConfig

PREFIXES = ("job.autoscaler.", "kubernetes.operator.job.autoscaler.")
ALIASES = {
    "job.autoscaler.target.utilization": "job.autoscaler.utilization.target",
    "job.autoscaler.scale-up.grace-period": "job.autoscaler.scale-down.interval",
}
"""Deprecated keys the autoscaler still reads, and the key each stands for."""


def _number(text: str) -> float:
    value = float(text)
    if not math.isfinite(value):
        raise ValueError(text)
    return value


def _seconds(text: str) -> float:
    ms = duration_ms(text)
    if ms is None:
        raise ValueError(text)
    return ms / 1000


def _choice(*options: str) -> Callable[[str], str]:
    def read(text: str) -> str:
        if text.upper() not in options:
            raise ValueError(text)
        return text.upper()

    return read


def _names(text: str) -> tuple[str, ...]:
    return tuple(part.strip() for part in text.replace(";", ",").split(",") if part.strip())


READERS: Mapping[str, tuple[Callable[[str], Any], str]] = {
    "busy_time_aggregator": (_choice("MAX", "AVG", "MIN"), "MAX, AVG or MIN"),
    "utilization_target": (_number, "a number"),
    "utilization_boundary": (_number, "a number"),
    "utilization_max": (_number, "a number"),
    "utilization_min": (_number, "a number"),
    "catch_up_s": (_seconds, "a duration (30 min)"),
    "restart_s": (_seconds, "a duration (5 min)"),
    "backlog_lag_threshold_s": (_seconds, "a duration (5 min)"),
    "observed_lag_threshold_s": (_seconds, "a duration (30 s)"),
    "observed_switch_threshold": (_number, "a number"),
    "scale_down_max_factor": (_number, "a number"),
    "scale_up_max_factor": (_number, "a number"),
    "vertex_min_parallelism": (int, "an integer"),
    "vertex_max_parallelism": (int, "an integer"),
    "scale_down_interval_s": (_seconds, "a duration (1 h)"),
    "alignment_mode": (
        _choice("BALANCED", "EVENLY_SPREAD", "OFF"),
        "BALANCED, EVENLY_SPREAD or OFF",
    ),
    "exclude": (_names, "a list of vertices"),
}
"""How each option's value is read, and the type an error names."""
FIELD_OF = {key: name for name, key in KEYS.items()}


def load_autoscaler_config(path: Path) -> AutoscalerConfig:
    """The options of the file at ``path`` over the autoscaler's defaults.

    Raises:
        ConfigError: the file cannot be read, a line is neither ``key: value`` nor a comment,
            or a known key has a value of the wrong type (the line says which).
    """
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise ConfigError(
            f"--autoscaler-config {path}: cannot read it ({exc.strerror or exc})"
        ) from None
    values: dict[str, Any] = {}
    for number, line in enumerate(text.splitlines(), start=1):
        stripped = line.split("#", 1)[0].strip()
        if not stripped:
            continue
        key, sep, value = _split(stripped)
        if not sep:
            raise ConfigError(
                f"{path}:{number}: {stripped[:60]!r} is not 'key: value' (a Flink configuration "
                "line, e.g. job.autoscaler.utilization.target: 0.7)"
            )
        name = _field(key)
        if name is None:
            continue
        read, expected = READERS[name]
        try:
            values[name] = read(value.strip().strip("'\""))
        except ValueError:
            raise ConfigError(
                f"{path}:{number}: {key} = {value.strip()!r}: expected {expected}"
            ) from None
    config = replace(AutoscalerConfig(), **values)
    _check(config, path)
    return config


def _split(line: str) -> tuple[str, str, str]:
    colon, equals = line.find(":"), line.find("=")
    cut = min(i for i in (colon, equals) if i >= 0) if max(colon, equals) >= 0 else -1
    if cut < 0:
        return line, "", ""
    return line[:cut].strip(), line[cut], line[cut + 1 :]


def _field(key: str) -> str | None:
    for prefix in PREFIXES:
        if key.startswith(prefix):
            key = "job.autoscaler." + key[len(prefix) :]
            return FIELD_OF.get(ALIASES.get(key, key))
    return None


def _check(config: AutoscalerConfig, path: Path) -> None:
    problems = []
    if not 0 < config.utilization_target <= 1:
        problems.append("utilization.target must be above 0 and at most 1")
    if config.vertex_min_parallelism < 1 or config.vertex_max_parallelism < 1:
        problems.append("vertex.min-parallelism and vertex.max-parallelism must be at least 1")
    if not 0 <= config.scale_down_max_factor <= 1:
        problems.append("scale-down.max-factor must be from 0 to 1")
    if config.catch_up_s < 0:
        problems.append("catch-up.duration must not be negative")
    if problems:
        raise ConfigError(f"{path}: {'; '.join(problems)}")
