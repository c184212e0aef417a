"""The dashboard writes a moment as the report's JSON does, naive ones included (they are UTC)."""

from __future__ import annotations

from datetime import datetime

import pytest

from bpmon.model.report_json import report_to_dict
from bpmon.model.values import Report, Window
from bpmon.web.charts import plot_time
from bpmon.web.formats import iso, when


@pytest.mark.usefixtures("away_from_utc")
def test_a_naive_moment_reads_the_same_in_the_report_and_on_the_dashboard() -> None:
    start = datetime(2026, 11, 22, 10, 15, 2, 123_456)
    window = Window(start, start, samples=1, interval_ms=50.0)
    written = report_to_dict(Report("r", "j", "runtime", window, ()))["window"]["start"]
    assert written == "2026-11-22T10:15:02.123Z"
    assert iso(start) == written
    assert when(start) == "2026-11-22 10:15:02 UTC"
    assert plot_time(start) == "2026-11-22 10:15:02.123"
