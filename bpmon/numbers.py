"""How a figure reads, everywhere a person sees one: the CLI report, the live view, the dashboard.

Ratios and pool usages with two decimals, record rates in at most five characters, and an en dash
for a value the source could not give. One place, so a figure reads the same on every surface.
Model layer: stdlib only.
"""

from __future__ import annotations

import math

NULL = "\u2013"
"""An en dash: a value the source could not give (None, or NaN)."""


def ratio(value: float | None) -> str:
    """A ratio or a pool usage with two decimals (``0.93``), or :data:`NULL`."""
    if value is None or not math.isfinite(value):
        return NULL
    return f"{value:.2f}"


def rate(value: float | None) -> str:
    """Records per second in at most five characters (``0.5``, ``3,990``, ``12.3k``, ``1.2M``)."""
    if value is None or not math.isfinite(value):
        return NULL
    size = abs(value)
    if size < 10:
        return f"{value:.1f}"
    if size < 10_000:
        return f"{value:,.0f}"
    if size < 100_000:
        return f"{value / 1e3:.1f}k"
    if size < 999_500:
        return f"{value / 1e3:.0f}k"
    return f"{value / 1e6:.1f}M"
