"""How figures read on the dashboard: ratios with two decimals, rates in a few characters, an en
dash for a value the source could not give, times in UTC to the second.

Ratios, rates and the en dash come from :mod:`bpmon.model.numbers`, as in the CLI's report;
``iso`` (what the browser's clock and plotly read) is the report's own
:func:`~bpmon.model.clock.format_timestamp`.
"""

from __future__ import annotations

import math
from datetime import datetime

from bpmon.model.clock import as_utc
from bpmon.model.clock import format_timestamp as iso
from bpmon.model.numbers import NULL, rate, ratio
from bpmon.model.values import Level

__all__ = ["LEVEL_WORDS", "NULL", "counted", "iso", "rate", "ratio", "rounded", "when"]

LEVEL_WORDS: dict[Level | None, str] = {"OK": "OK", "LOW": "LOW", "HIGH": "HIGH", None: "no level"}
"""The word shown with every level colour, so no level is told by colour alone."""


def when(moment: datetime | None) -> str:
    """``2026-11-23 12:35:00 UTC``, or an en dash (a naive datetime is UTC, as everywhere)."""
    if moment is None:
        return NULL
    return as_utc(moment).strftime("%Y-%m-%d %H:%M:%S UTC")


def rounded(value: float | None, digits: int = 3) -> float | None:
    """``value`` rounded for a figure's JSON (None for None or NaN: a gap in a line)."""
    if value is None or not math.isfinite(value):
        return None
    return round(value, digits)


def counted(n: int, word: str) -> str:
    """``1 burst``, ``2 bursts``, ``1,200 runs``: a count with its noun in the right number."""
    return f"{n:,} {word}{'' if n == 1 else 's'}"
