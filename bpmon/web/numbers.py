"""How figures read on the dashboard: ratios with two decimals, rates in a few characters, an en
dash for a value the source could not give, times in UTC to the second.

The same conventions as the CLI's report (``bpmon diagnose``), written here without rich so the
web layer does not import the terminal renderer.
"""

from __future__ import annotations

import math
from datetime import UTC, datetime

from bpmon.model import Level

NULL = "\u2013"
"""An en dash: a value the source could not give (None, or NaN)."""
LEVEL_WORDS: dict[Level | None, str] = {"OK": "OK", "LOW": "LOW", "HIGH": "HIGH", None: "no level"}
"""The word shown with every level colour, so no level is told by colour alone."""


def ratio(value: float | None) -> str:
    """A ratio or pool usage with two decimals (``0.93``), or an en dash."""
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


def when(moment: datetime | None) -> str:
    """``2026-11-23 12:35:00 UTC``, or an en dash."""
    if moment is None:
        return NULL
    return moment.astimezone(UTC).strftime("%Y-%m-%d %H:%M:%S UTC")


def iso(moment: datetime) -> str:
    """An ISO 8601 time with milliseconds and ``Z`` (what the browser's clock and plotly read)."""
    moment = moment.astimezone(UTC)
    return moment.strftime("%Y-%m-%dT%H:%M:%S.") + f"{moment.microsecond // 1000:03d}Z"


def rounded(value: float | None, digits: int = 3) -> float | None:
    """``value`` rounded for a figure's JSON (None for None or NaN: a gap in a line)."""
    if value is None or not math.isfinite(value):
        return None
    return round(value, digits)
