"""How a Flink duration reads: ``"50 ms"``, ``"1 min"``, ``"2 s"``, a bare number of milliseconds,
or ISO-8601 (``PT1M``), as Flink's ``TimeUtils`` parses a configuration value. One home for the
cluster's settings the Flink collector reads and the autoscaler options a user overrides.
"""

from __future__ import annotations

import re

_UNITS_MS = {
    "ns": 1e-6,
    "nano": 1e-6,
    "nanos": 1e-6,
    "nanosecond": 1e-6,
    "nanoseconds": 1e-6,
    "us": 1e-3,
    "µs": 1e-3,
    "micro": 1e-3,
    "micros": 1e-3,
    "microsecond": 1e-3,
    "microseconds": 1e-3,
    "ms": 1.0,
    "milli": 1.0,
    "millis": 1.0,
    "millisecond": 1.0,
    "milliseconds": 1.0,
    "s": 1e3,
    "sec": 1e3,
    "secs": 1e3,
    "second": 1e3,
    "seconds": 1e3,
    "m": 60e3,
    "min": 60e3,
    "mins": 60e3,
    "minute": 60e3,
    "minutes": 60e3,
    "h": 3600e3,
    "hour": 3600e3,
    "hours": 3600e3,
    "d": 86400e3,
    "day": 86400e3,
    "days": 86400e3,
}
"""Flink's duration units (``TimeUtils``), in milliseconds; no unit means milliseconds."""

_DURATION = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([a-zµ]*)\s*$", re.IGNORECASE)
_ISO = re.compile(
    r"^P(?:(\d+(?:\.\d+)?)D)?(?:T(?:(\d+(?:\.\d+)?)H)?(?:(\d+(?:\.\d+)?)M)?(?:(\d+(?:\.\d+)?)S)?)?$",
    re.IGNORECASE,
)


def duration_ms(text: str) -> float | None:
    """Milliseconds of a Flink duration (``"50 ms"``, ``"1 min"``, ``"PT1M"``, ``"500"``);
    None when it is not one."""
    found = _DURATION.match(text)
    if found is not None:
        unit = _UNITS_MS.get(found.group(2).lower() or "ms")
        return None if unit is None else float(found.group(1)) * unit
    iso = _ISO.match(text.strip())
    if iso is None or not any(iso.groups()):
        return None
    days, hours, minutes, seconds = (float(g) if g else 0.0 for g in iso.groups())
    return ((days * 24 + hours) * 60 + minutes) * 60e3 + seconds * 1e3
