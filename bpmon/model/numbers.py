"""How a figure reads, everywhere a person sees one: the CLI report, the live view, the dashboard.

Ratios and pool usages with two decimals, record rates whole with thousands grouped, and an en dash
for a value the source could not give. One place, so a figure reads the same on every surface.
Model layer: stdlib only.
"""

from __future__ import annotations

import math

NULL = "\u2013"
"""An en dash: a value the source could not give (None, or NaN)."""


def rounded(value: float | None, digits: int) -> float | None:
    """``value`` rounded to ``digits`` decimals for a JSON document; None for None, NaN and the
    infinities (strict JSON has no NaN)."""
    if value is None or not math.isfinite(value):
        return None
    return round(float(value), digits)


def ratio(value: float | None) -> str:
    """A ratio or a pool usage with two decimals (``0.93``), or :data:`NULL`."""
    if value is None or not math.isfinite(value):
        return NULL
    return f"{value:.2f}"


def rate(value: float | None) -> str:
    """Records per second: one decimal below 10 (``0.5``), else whole with thousands grouped
    (``3,990``, ``12,345``, ``1,234,567``): one format, so ``9,999`` and ``10,000`` read alike."""
    if value is None or not math.isfinite(value):
        return NULL
    if abs(value) < 10:
        return f"{value:.1f}"
    return f"{value:,.0f}"


def counted(n: int, noun: str, plural: str | None = None) -> str:
    """``1 run``, ``1,327 runs``: a count with its noun, plural but for one (``plural`` when
    the noun does not take an ``s``: ``counted(2, "vertex", "vertices")``)."""
    return f"{n:,} {noun if n == 1 else plural or noun + 's'}"


def percent(share: float | None) -> str:
    """A share as a whole percentage (``0.973`` is ``97%``), or :data:`NULL`."""
    if share is None or not math.isfinite(share):
        return NULL
    return f"{share:.0%}"


def milliseconds(ms: float | None) -> str:
    """A duration in whole milliseconds, thousands grouped (``48,200 ms``), or :data:`NULL`."""
    if ms is None or not math.isfinite(ms):
        return NULL
    return f"{ms:,.0f} ms"
