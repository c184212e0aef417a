"""The runs directory seen as jobs: each job's latest stored report and the history of its bursts.

The server answers ``/api/v1/jobs`` and every Prometheus scrape from this index, so it must be
cheap to ask: it looks at the runs directory at most every ``ttl_s`` seconds, and then reads only
the bursts it has not read yet (a stored report is never rewritten, see :mod:`bpmon.history.runs`).
A run whose reports cannot be read is left out of the jobs and named in
:attr:`StoredJobs.errors`; its files are left untouched.

May import: the service and the model (the service layer).
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path

from bpmon import service
from bpmon.errors import HistoryError, TargetNotFoundError
from bpmon.model import Level, Report, RootCause

HISTORY_LIMIT = 1000
"""The most bursts kept per job (the newest)."""
STORED_TTL_S = 2.0
"""How long a reading of the runs directory is served before it is read again."""
SETTLE_S = 2.0
"""A run folder changed this recently is read again whatever its time says (coarse clocks)."""


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
    """One run folder as last read: its bursts so far, or why it cannot be read."""

    run_id: str
    mtime_ns: int
    history: tuple[BurstSummary, ...] = ()
    latest: Report | None = None
    error: str | None = None


class StoredJobs:
    """An index of the runs directory by job, refreshed at most every ``ttl_s`` seconds.

    A refresh lists the run folders and reads only what is new: the bursts added to a folder
    whose modification time moved (a report is written under a temporary name and renamed into
    its folder, which moves the folder's time), and folders not seen before. A folder changed
    within the last SETTLE_S seconds is looked at again on every refresh, for file systems whose
    times are coarse.

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
        self._runs: dict[str, _StoredRun] = {}
        self._jobs: dict[str, StoredJob] = {}

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
            return tuple(r.error for r in self._runs.values() if r.error is not None)

    def _refresh(self) -> None:
        runs: dict[str, _StoredRun] = {}
        changed = False
        settled = time.time_ns() - int(SETTLE_S * 1e9)
        for folder, mtime_ns in _run_folders(self.settings.runs_dir):
            old = self._runs.get(folder.name)
            if old is not None and old.mtime_ns == mtime_ns and mtime_ns < settled:
                runs[folder.name] = old
                continue
            run = _read_run(folder, mtime_ns, old, self.settings)
            changed = changed or old is None or run.history != old.history
            runs[folder.name] = run
        if changed or runs.keys() != self._runs.keys():
            self._jobs = _by_job(runs.values())
        self._runs = runs


def _run_folders(root: Path) -> list[tuple[Path, int]]:
    """The run folders in ``root`` (not links, not hidden) with their modification times."""
    try:
        entries = list(os.scandir(root))
    except OSError:  # no runs directory yet, or unreadable: no stored runs
        return []
    folders = []
    for entry in entries:
        if entry.name.startswith(".") or entry.is_symlink() or not entry.is_dir():
            continue
        folders.append((Path(entry.path), entry.stat().st_mtime_ns))
    return folders


def _read_run(
    folder: Path, mtime_ns: int, old: _StoredRun | None, settings: service.Settings
) -> _StoredRun:
    """The run in ``folder``: the bursts read before, then every later one on disk."""
    history = list(old.history) if old is not None and old.error is None else []
    latest = old.latest if history and old is not None else None
    while True:
        try:
            report = service.load_report(str(folder), settings, burst=len(history))
        except TargetNotFoundError:  # no further burst (or not a run folder at all)
            break
        except HistoryError as exc:
            return _StoredRun(folder.name, mtime_ns, error=str(exc))
        history.append(BurstSummary.of(folder.name, len(history), report))
        latest = report
    return _StoredRun(folder.name, mtime_ns, tuple(history), latest)


def _by_job(runs: Iterable[_StoredRun]) -> dict[str, StoredJob]:
    grouped: dict[str, list[tuple[datetime, str, _StoredRun]]] = {}
    for run in runs:
        if run.latest is not None and run.history:
            start = run.history[0].time
            grouped.setdefault(run.latest.job, []).append((start, run.run_id, run))
    jobs: dict[str, StoredJob] = {}
    for job, group in grouped.items():
        group.sort(key=lambda item: item[:2])
        history = tuple(s for _, _, r in group for s in r.history)[-HISTORY_LIMIT:]
        latest = group[-1][2].latest
        assert latest is not None
        jobs[job] = StoredJob(job, latest, history)
    return jobs
