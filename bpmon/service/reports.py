"""The full reports of a job's recent bursts, for its series, read from the runs directory once.

A watched job's series are its watch's own runs: the job's other runs in the runs directory
(``bpmon run``, ``bpmon whatif``, an earlier watch) are not mixed into its timeline; they are on
the History and Compare pages. A stored job's series are its stored runs, each run apart.

A job's recent bursts (:class:`~bpmon.service.watching.JobView`) say per burst only the levels
and the root causes; the series need every metric, so the reports are read from their run
folders. A stored report is never rewritten (see :mod:`bpmon.service.stored`), so each one is
read once and kept, the least recently used dropped past :data:`CACHE_REPORTS`. A burst whose
report cannot be read is left out of the series (the runs list names the unreadable run).
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from dataclasses import dataclass
from datetime import datetime

from bpmon.model.errors import HistoryError
from bpmon.model.values import Report
from bpmon.service.settings import Settings
from bpmon.service.stored import find_run
from bpmon.service.watching import JobView


@dataclass(frozen=True, slots=True)
class StoredBurst:
    """One burst of a job: its run, its number in the run, and its report."""

    run_id: str
    burst: int
    report: Report

    @property
    def time(self) -> datetime:
        """When the burst's window ended."""
        return self.report.window.end


SERIES_BURSTS = 60
"""The newest bursts a job page shows in its series."""
CACHE_REPORTS = 2000
"""The most burst reports kept in memory across jobs."""


class BurstReports:
    """Recent burst reports of jobs, each read from disk once (thread-safe)."""

    def __init__(self, settings: Settings, capacity: int = CACHE_REPORTS) -> None:
        self.settings = settings
        self.capacity = capacity
        self._lock = threading.Lock()
        self._reports: OrderedDict[tuple[str, int], Report] = OrderedDict()

    def recent(self, view: JobView, limit: int = SERIES_BURSTS) -> list[StoredBurst]:
        """The job's newest ``limit`` bursts, oldest first, with their full reports: a watched
        job's own (the job's stored ones while its watch has none)."""
        own = [s for s in view.recent_bursts if s.run_id in view.runs]
        points = []
        for summary in (own or view.recent_bursts)[-limit:]:
            key = (summary.run_id, summary.burst)
            report = self._cached(key)
            if report is None and view.latest is not None:
                latest = view.latest
                if latest.run_id == summary.run_id and latest.window.end == summary.time:
                    report = latest
            if report is None:
                report = self._read(*key)
            if report is not None:
                self._keep(key, report)
                points.append(StoredBurst(summary.run_id, summary.burst, report))
        return points

    def _cached(self, key: tuple[str, int]) -> Report | None:
        with self._lock:
            report = self._reports.get(key)
            if report is not None:
                self._reports.move_to_end(key)
            return report

    def _keep(self, key: tuple[str, int], report: Report) -> None:
        with self._lock:
            self._reports[key] = report
            self._reports.move_to_end(key)
            while len(self._reports) > self.capacity:
                self._reports.popitem(last=False)

    def _read(self, run_id: str, burst: int) -> Report | None:
        path = find_run(run_id, self.settings)
        if path is None:
            return None
        try:
            return self.settings.store().load(str(path), burst=burst)
        except HistoryError:
            return None
