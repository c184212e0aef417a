"""Sources that vary: a rate that changes over time, uneven subtasks, and a backlog at the start.

A source's ``rate`` is its base. ``rate_profile`` makes it a curve over the seconds since the
subtask started: a list of ``[t_seconds, rate]`` steps, or a named shape (``burst``, ``ramp``,
``sine``). ``subtask_rates`` gives some subtasks another base; a subtask's curve is then the
profile scaled by its base over ``rate``. ``backlog`` is records already waiting for every subtask
when it starts (a restart, a Kafka lag).

Each curve knows its integral (:meth:`RateCurve.due`): the runtime's limiter releases record ``k``
when the integral reaches ``k``, an absolute schedule that never drifts, and the load models take
a profile's mean rate from it (:func:`mean_rate`).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Protocol

from bpmon.scenario._table import Table, quoted, show

SHAPES = ("burst", "ramp", "sine")
SHAPE_KEYS = {
    "burst": ("shape", "every_s", "for_s", "factor", "start_s"),
    "ramp": ("shape", "to", "over_s", "start_s"),
    "sine": ("shape", "amplitude", "period_s"),
}
PROFILE_EXAMPLE = (
    "[[0, 500], [3, 2000]] (from 3 s on 2,000/s) or "
    '{ shape = "burst", every_s = 4, for_s = 1, factor = 3 }'
)


class RateCurve(Protocol):
    """A source subtask's records per second over the seconds since it started."""

    def rate_at(self, t: float) -> float:
        """Records per second at ``t`` seconds."""
        ...

    def due(self, t: float) -> float:
        """Records the curve calls for over ``[0, t]``: its integral (0 for ``t <= 0``)."""
        ...

    def scaled(self, factor: float) -> RateCurve:
        """The same shape at ``factor`` times the rate."""
        ...


@dataclass(frozen=True, slots=True)
class Steps:
    """``base`` until the first step's time, then each step's rate from its time on."""

    base: float
    steps: tuple[tuple[float, float], ...]

    def rate_at(self, t: float) -> float:
        """The rate of the last step at or before ``t``."""
        rate = self.base
        for at, step_rate in self.steps:
            if at > t:
                break
            rate = step_rate
        return rate

    def due(self, t: float) -> float:
        """Each constant piece's rate times its length, up to ``t``."""
        if t <= 0:
            return 0.0
        total, since, rate = 0.0, 0.0, self.base
        for at, step_rate in self.steps:
            if at >= t:
                break
            total += rate * (at - since)
            since, rate = at, step_rate
        return total + rate * (t - since)

    def scaled(self, factor: float) -> Steps:
        """Every rate times ``factor``."""
        return Steps(self.base * factor, tuple((at, r * factor) for at, r in self.steps))


@dataclass(frozen=True, slots=True)
class RateBurst:
    """``base``, and ``factor`` times it for ``for_s`` at the start of every ``every_s`` period
    from ``start_s`` on."""

    base: float
    every_s: float
    for_s: float
    factor: float
    start_s: float = 0.0

    def rate_at(self, t: float) -> float:
        """``base x factor`` inside a burst, else ``base``."""
        if t < self.start_s:
            return self.base
        inside = (t - self.start_s) % self.every_s < self.for_s
        return self.base * self.factor if inside else self.base

    def due(self, t: float) -> float:
        """The base over ``[0, t]`` plus the extra of every burst (or part of one) in it."""
        if t <= 0:
            return 0.0
        since = max(0.0, t - self.start_s)
        periods, into = divmod(since, self.every_s)
        bursting = periods * self.for_s + min(into, self.for_s)
        return self.base * (t + (self.factor - 1.0) * bursting)

    def scaled(self, factor: float) -> RateBurst:
        """The base times ``factor``; the bursts keep their shape."""
        return RateBurst(self.base * factor, self.every_s, self.for_s, self.factor, self.start_s)


@dataclass(frozen=True, slots=True)
class Ramp:
    """``base`` until ``start_s``, then linearly to ``to`` over ``over_s``, then ``to``."""

    base: float
    to: float
    over_s: float
    start_s: float = 0.0

    def rate_at(self, t: float) -> float:
        """The rate on the line between ``base`` and ``to``."""
        into = min(max(0.0, t - self.start_s), self.over_s)
        return self.base + (self.to - self.base) * into / self.over_s

    def due(self, t: float) -> float:
        """``base`` before the ramp, the trapezoid of the ramp, ``to`` after it."""
        if t <= 0:
            return 0.0
        before = min(t, self.start_s)
        into = min(max(0.0, t - self.start_s), self.over_s)
        ramp = into * (self.base + self.rate_at(self.start_s + into)) / 2
        after = max(0.0, t - self.start_s - self.over_s)
        return self.base * before + ramp + self.to * after

    def scaled(self, factor: float) -> Ramp:
        """Both ends times ``factor``."""
        return Ramp(self.base * factor, self.to * factor, self.over_s, self.start_s)


@dataclass(frozen=True, slots=True)
class Sine:
    """``base x (1 + amplitude x sin(2 pi t / period_s))``: a daily curve, shortened."""

    base: float
    amplitude: float
    period_s: float

    def rate_at(self, t: float) -> float:
        """The rate on the wave."""
        return self.base * (1.0 + self.amplitude * math.sin(2 * math.pi * t / self.period_s))

    def due(self, t: float) -> float:
        """``base x (t + amplitude x period / 2 pi x (1 - cos(2 pi t / period)))``."""
        if t <= 0:
            return 0.0
        w = 2 * math.pi / self.period_s
        return self.base * (t + self.amplitude / w * (1.0 - math.cos(w * t)))

    def scaled(self, factor: float) -> Sine:
        """The base times ``factor``; the wave keeps its shape."""
        return Sine(self.base * factor, self.amplitude, self.period_s)


@dataclass(frozen=True, slots=True)
class SourceRates:
    """A source's ``rate_profile``, ``subtask_rates`` and ``backlog`` (``None`` on the spec when
    it has none of them)."""

    profile: RateCurve | None = None
    """The curve at the operator's ``rate``; ``None``: constant."""
    subtask_rates: Mapping[int, float] = field(default_factory=dict, hash=False)
    """Base rates of the subtasks that do not run at ``rate``."""
    backlog: int = 0
    """Records pending for every subtask at its start."""
    profile_toml: object = field(default=None, compare=False, hash=False)
    """The profile as written (a list of steps or a table), for ``whatif`` to rescale."""


class RatedSource(Protocol):
    """What the functions below read of a source operator (an ``OperatorSpec``)."""

    @property
    def parallelism(self) -> int:
        """Number of subtasks."""
        ...

    @property
    def rate(self) -> float | None:
        """Records per second per subtask; 0 or ``None``: as fast as possible."""
        ...

    @property
    def source_rates(self) -> SourceRates | None:
        """The profile, the uneven subtasks and the backlog; ``None``: a constant rate."""
        ...


def base_rate(spec: RatedSource, index: int) -> float:
    """Subtask ``index``'s base rate: its ``subtask_rates`` entry, else ``rate`` (0: none)."""
    rate = spec.rate or 0.0
    rates = spec.source_rates
    return rate if rates is None else rates.subtask_rates.get(index, rate)


def curve_of(spec: RatedSource, index: int) -> RateCurve | None:
    """Subtask ``index``'s curve, the profile scaled to its base; ``None`` for a constant rate."""
    rates = spec.source_rates
    if rates is None or rates.profile is None or not spec.rate:
        return None
    return rates.profile.scaled(base_rate(spec, index) / spec.rate)


def mean_rate(spec: RatedSource, index: int, horizon_s: float) -> float:
    """Subtask ``index``'s mean records/s over its first ``horizon_s`` seconds."""
    curve = curve_of(spec, index)
    if curve is None or horizon_s <= 0:
        return base_rate(spec, index)
    return curve.due(horizon_s) / horizon_s


def offered_total(spec: RatedSource, horizon_s: float) -> float:
    """Records/s all subtasks of a source are offered on average over ``horizon_s``."""
    return sum(mean_rate(spec, i, horizon_s) for i in range(spec.parallelism))


# -- reading -------------------------------------------------------------------------------------


def read_source_rates(table: Table, rate: float | None, parallelism: int) -> SourceRates | None:
    """The ``rate_profile``, ``subtask_rates`` and ``backlog`` of a source (None: none given)."""
    if not any(table.has(k) for k in ("rate_profile", "subtask_rates", "backlog")):
        return None
    backlog = table.integer("backlog", minimum=0) or 0
    if (table.has("rate_profile") or backlog) and not rate:
        key = "rate_profile" if table.has("rate_profile") else "backlog"
        raise table.key_error(
            key, 'a "rate" > 0 beside it (a source at rate 0 runs unpaced and has no schedule)'
        )
    profile = _read_profile(table, rate or 0.0) if table.has("rate_profile") else None
    return SourceRates(
        profile=profile,
        subtask_rates=_read_subtask_rates(table, parallelism),
        backlog=backlog,
        profile_toml=table.data.get("rate_profile"),
    )


def _read_subtask_rates(table: Table, parallelism: int) -> Mapping[int, float]:
    data = table.table("subtask_rates")
    if data is None:
        return MappingProxyType({})
    rates = Table(data, f"{table.where}: subtask_rates")
    result: dict[int, float] = {}
    for key in data:
        if not (key.isascii() and key.isdecimal()) or int(key) >= parallelism:
            raise rates.error(
                f'subtask index "{key}": expected a subtask index from 0 to {parallelism - 1} '
                f"(the operator's parallelism is {parallelism})"
            )
        result[int(key)] = float(rates.number(key, 0.0, above_minimum=True) or 0.0)
    return MappingProxyType(result)


def _read_profile(table: Table, base: float) -> RateCurve:
    value = table.data["rate_profile"]
    if isinstance(value, list):
        return Steps(base, _read_steps(table, value))
    if not isinstance(value, Mapping):
        raise table.key_error("rate_profile", f"a list of steps or a shape, e.g. {PROFILE_EXAMPLE}")
    shape = Table(value, f"{table.where}: rate_profile")
    name = shape.require("shape", shape.string("shape", SHAPES), f"one of {quoted(SHAPES)}")
    shape.check_keys(SHAPE_KEYS[name])
    start = shape.number("start_s", 0.0) or 0.0
    if name == "burst":
        every = _positive(shape, "every_s", "the period of the bursts in seconds")
        length = _positive(shape, "for_s", "how long each burst lasts in seconds")
        if length >= every:
            raise shape.key_error("for_s", f"less than every_s ({every:g}): a burst per period")
        factor = _positive(shape, "factor", "the rate during a burst over the base rate")
        return RateBurst(base, every, length, factor, start)
    if name == "ramp":
        to = _positive(shape, "to", "the rate at the end of the ramp, records/s per subtask")
        return Ramp(base, to, _positive(shape, "over_s", "the ramp's length in seconds"), start)
    amplitude = shape.require(
        "amplitude", shape.number("amplitude", 0.0, 1.0), "the swing as a share of rate, 0 to 1"
    )
    return Sine(base, amplitude, _positive(shape, "period_s", "the wave's period in seconds"))


def _positive(shape: Table, key: str, what: str) -> float:
    return shape.require(key, shape.number(key, 0.0, above_minimum=True), what)


def _read_steps(table: Table, value: list[object]) -> tuple[tuple[float, float], ...]:
    steps: list[tuple[float, float]] = []
    for i, step in enumerate(value):
        where = (
            f'key "rate_profile" step {i} = {show(step) if not isinstance(step, list) else step}'
        )
        pair = _number_pair(step)
        if pair is None:
            raise table.error(f"{where}: expected [t_seconds, rate], e.g. {PROFILE_EXAMPLE}")
        at, rate = pair
        if at < 0 or rate <= 0:
            raise table.error(f"{where}: expected a time >= 0 and a rate > 0")
        if steps and at <= steps[-1][0]:
            raise table.error(f"{where}: expected times in increasing order")
        steps.append((at, rate))
    if not steps:
        raise table.key_error("rate_profile", f"at least one step, e.g. {PROFILE_EXAMPLE}")
    return tuple(steps)


def _number_pair(step: object) -> tuple[float, float] | None:
    """``[t, rate]`` as two finite floats; None for anything else."""
    if not isinstance(step, list) or len(step) != 2:
        return None
    if not all(isinstance(v, int | float) and not isinstance(v, bool) for v in step):
        return None
    at, rate = float(step[0]), float(step[1])
    return (at, rate) if math.isfinite(at) and math.isfinite(rate) else None
