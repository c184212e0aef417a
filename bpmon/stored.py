"""The runs directory seen as jobs: each job's latest stored report and the history of its bursts.

The server answers ``/api/v1/jobs`` and every Prometheus scrape from this index, so it must be
cheap to ask: it re-reads the runs directory at most every ``ttl_s`` seconds, and a run already
read is read again only when its number of bursts changed (a stored report is never rewritten,
see :mod:`bpmon.history.runs`). A run whose reports cannot be read is left out of the jobs and
named in :attr:`StoredJobs.errors`; its files are left untouched.

May import: the service and the model (the service layer).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from datetime import datetime

from bpmon import service
from bpmon.errors import HistoryError
from bpmon.model import Level, Report, RootCause, RunInfo

HISTORY_LIMIT = 1000
"""The most bursts kept per job (the newest)."""
STORED_TTL_S = 2.0
"""How long a reading of the runs directory is served before it is read again."""


@dataclass(frozen=True, slots=True)
class BurstSummary:
    """One burst of a job in its history: when, the level of each vertex, the root causes.

    Attributes:
        run_id: the run the burst belongs to.
        burst: the burst's number in its run (0 first).
        time: the end of the burst's window (UTC).
        levels: ``(vertex, level)`` for every vertex, in the report's order.
        root_causes: the diagnosis (None: not diagnosed).
    """

    run_id: str
    burst: int
    time: datetime
    levels: tuple[tuple[str, Level | None], ...]
    root_causes: tuple[RootCause, ...] | None

    @classmethod
    def of(cls, run_id: str, burst: int, report: Report) -> BurstSummary:
        """The summary of burst ``burst`` of run ``run_id``."""
        return cls(
            run_id=run_id,
            burst=burst,
            time=report.window.end,
            levels=tuple((v.name, v.level) for v in report.vertices),
            root_causes=report.root_causes,
        )


@dataclass(frozen=True, slots=True)
class StoredJob:
    """A job as the runs directory holds it: its newest report and every burst, oldest first."""

    job: str
    latest: Report
    history: tuple[BurstSummary, ...]


@dataclass(frozen=True, slots=True)
class _StoredRun:
    info: RunInfo
    latest: Report
    history: tuple[BurstSummary, ...]


class StoredJobs:
    """An index of the runs directory by job, refreshed at most every ``ttl_s`` seconds.

    Args:
        settings: where the runs directory is.
        ttl_s: how long one reading is served (0 reads the directory on every call).
        clock: a monotonic clock in seconds (tests pass their own).
    """

    def __init__(
        self,
        settings: service.Settings,
        *,
        ttl_s: float = STORED_TTL_S,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.settings = settings
        self.ttl_s = ttl_s
        self._clock = clock
        self._lock = threading.Lock()
        self._read_at: float | None = None
        self._runs: dict[tuple[str, int], _StoredRun] = {}
        self._jobs: dict[str, StoredJob] = {}
        self._errors: tuple[str, ...] = ()

    def jobs(self) -> Mapping[str, StoredJob]:
        """Every stored job by name (read again when the last reading is older than ttl_s)."""
        with self._lock:
            now = self._clock()
            if self._read_at is None or now - self._read_at >= self.ttl_s:
                self._refresh()
                self._read_at = now
            return self._jobs

    @property
    def errors(self) -> tuple[str, ...]:
        """The unreadable runs of the last reading, one line each (their files untouched)."""
        with self._lock:
            return self._errors

    def _refresh(self) -> None:
        errors: list[str] = []
        infos = service.stored_runs(self.settings, on_corrupt=lambda e: errors.append(str(e)))
        runs: dict[tuple[str, int], _StoredRun] = {}
        for info in infos:
            key = (info.run_id, info.bursts)
            run = self._runs.get(key) or _read_run(info, self.settings, errors)
            if run is not None:
                runs[key] = run
        self._runs, self._errors = runs, tuple(errors)
        self._jobs = _by_job(runs.values())


def _read_run(info: RunInfo, settings: service.Settings, errors: list[str]) -> _StoredRun | None:
    """Every burst of one run; None (and a line in ``errors``) when one cannot be read."""
    try:
        bursts = service.run_bursts(str(info.path), settings)
    except HistoryError as exc:
        errors.append(str(exc))
        return None
    if not bursts:
        return None
    history = tuple(BurstSummary.of(info.run_id, b, report) for b, report in bursts)
    return _StoredRun(info, bursts[-1][1], history)


def _by_job(runs: Iterable[_StoredRun]) -> dict[str, StoredJob]:
    grouped: dict[str, list[_StoredRun]] = {}
    for run in runs:
        grouped.setdefault(run.info.job, []).append(run)
    jobs: dict[str, StoredJob] = {}
    for job, group in grouped.items():
        group.sort(key=lambda r: (r.info.start, r.info.run_id))
        history = tuple(s for r in group for s in r.history)[-HISTORY_LIMIT:]
        jobs[job] = StoredJob(job, group[-1].latest, history)
    return jobs
