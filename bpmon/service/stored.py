"""The runs directory seen as jobs: each job's latest stored report and its recent bursts.

The server answers ``/api/v1/jobs`` and every Prometheus scrape from this index, so asking must
be cheap and must never wait long, whatever the size of the runs directory:

- **it reads manifests, not reports, and not all of them**: of each run folder's
  ``bursts.jsonl`` (:mod:`bpmon.history.manifest`) it reads the first line and the newest
  :data:`RECENT_BURSTS` at first, then from where the last reading stopped, so a restart over
  weeks of bursts reads a few lines per run. Only each job's newest report is read whole. A
  report without its manifest line (a run saved before manifests, a process killed between the
  two writes) is read once and its line added (should its writer add the same line a moment
  later, the duplicate is harmless).
- **it keeps what it shows**: per run, the last :data:`RECENT_BURSTS` bursts in short; per job,
  the last :data:`RECENT_BURSTS` of its runs' bursts and its newest report.
- **it refreshes beside the requests**: a reading older than ``ttl_s`` starts a refresh on a
  thread of its own; the caller waits for it at most ``wait_s`` (usually it is done by then)
  and otherwise gets the previous reading. The first reading has none before it: a caller waits
  for it up to :data:`FIRST_READ_WAIT_S`. Only one refresh runs at a time.

A run whose manifest or newest report cannot be read is named in :attr:`StoredJobs.errors`; its
files are left untouched.
"""

from __future__ import annotations

import logging
import os
import threading
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path

from bpmon.history import manifest
from bpmon.history.manifest import BurstSummary, Position
from bpmon.history.runs import RUN_ID, burst_file_name, burst_numbers, read_report
from bpmon.model.errors import HistoryError, TargetNotFoundError
from bpmon.model.values import Report
from bpmon.service.settings import Settings

__all__ = ["RECENT_BURSTS", "BurstSummary", "StoredJob", "StoredJobs", "find_run", "is_run_id"]

RECENT_BURSTS = 1000
"""The most bursts kept per job and per run (the newest): a job's recent bursts, in short (the
Parquet history, ``bpmon.history``, keeps them all)."""
STORED_TTL_S = 2.0
"""How long a reading of the runs directory is served before it is read again."""
REFRESH_WAIT_S = 1.0
"""The longest a caller waits for a refresh before it is given the previous reading."""
FIRST_READ_WAIT_S = 30.0
"""The longest a caller waits for the first reading, which has no previous one to give: a
server just restarted over thousands of stored bursts on a loaded machine took longer than
:data:`REFRESH_WAIT_S`, and answered "no job" for jobs it had."""

_log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class StoredJob:
    """A job as the runs directory holds it: its newest report and recent bursts, oldest first."""

    job: str
    latest: Report
    recent_bursts: tuple[BurstSummary, ...]


@dataclass(eq=False)
class _Run:
    """One run folder as read so far (owned by the refresh, never shared): its first burst, its
    newest :data:`RECENT_BURSTS` bursts, and where its manifest was read up to."""

    run_id: str
    mtime_ns: int = -1
    position: Position | None = None
    first: BurstSummary | None = None
    recent: dict[int, BurstSummary] = field(default_factory=dict)
    checked: bool = False
    bad_lines: tuple[str, ...] = ()
    unreadable: tuple[str, ...] = ()

    @property
    def problems(self) -> tuple[str, ...]:
        """Why parts of the run could not be read: manifest lines, reports."""
        return self.bad_lines + self.unreadable

    def add(self, summary: BurstSummary) -> None:
        self.recent[summary.burst] = summary
        if self.first is None or summary.burst < self.first.burst:
            self.first = summary
        if len(self.recent) > RECENT_BURSTS * 5 // 4:  # trim now and then, not every time
            keep = sorted(self.recent)[-RECENT_BURSTS:]
            self.recent = {b: self.recent[b] for b in keep}

    def forget(self) -> None:
        """The manifest was replaced (pruned): what was read of it no longer holds."""
        self.position, self.first, self.recent, self.bad_lines = None, None, {}, ()

    @property
    def newest(self) -> BurstSummary | None:
        return self.recent[max(self.recent)] if self.recent else None

    @property
    def oldest(self) -> BurstSummary | None:
        return self.first


class StoredJobs:
    """An index of the runs directory by job, refreshed beside the callers (module docstring).

    Args:
        settings: where the runs directory is.
        ttl_s: how long one reading is served (0: a refresh is started on every call).
        clock: a monotonic clock in seconds (tests pass their own).
        wait_s: the longest a call waits for a refresh in progress.
    """

    def __init__(
        self,
        settings: Settings,
        *,
        ttl_s: float = STORED_TTL_S,
        clock: Callable[[], float] = time.monotonic,
        wait_s: float = REFRESH_WAIT_S,
    ) -> None:
        self.settings = settings
        self.ttl_s, self.wait_s = ttl_s, wait_s
        self._clock = clock
        self._lock = threading.Lock()
        self._read_at: float | None = None
        self._refreshed = threading.Event()
        self._refreshed.set()
        self._read_once = False
        self._runs: dict[str, _Run] = {}
        self._reports: dict[tuple[str, int], Report] = {}
        self._jobs: Mapping[str, StoredJob] = {}
        self._errors: tuple[str, ...] = ()

    def jobs(self) -> Mapping[str, StoredJob]:
        """Every stored job by name, as of the last refresh (started here when it is stale)."""
        done = self._start_if_stale()
        if done is not None:
            done.wait(self.wait_s if self._read_once else max(self.wait_s, FIRST_READ_WAIT_S))
        with self._lock:
            return self._jobs

    @property
    def errors(self) -> tuple[str, ...]:
        """The unreadable runs and lines of the last reading, one line each (files untouched)."""
        with self._lock:
            return self._errors

    def _start_if_stale(self) -> threading.Event | None:
        with self._lock:
            now = self._clock()
            if self._read_at is not None and now - self._read_at < self.ttl_s:
                return None
            if not self._refreshed.is_set():
                return self._refreshed  # one in progress: wait for that one
            self._read_at = now
            self._refreshed = done = threading.Event()
        threading.Thread(
            target=self._refresh, args=(done,), name="bpmon-stored", daemon=True
        ).start()
        return done

    def _refresh(self, done: threading.Event) -> None:
        try:
            jobs, errors = self._read()
            with self._lock:
                self._jobs, self._errors = jobs, errors
                self._read_once = True
        except Exception as exc:  # a bug: keep serving the last reading, and say so
            _log.exception("reading the runs directory %s failed", self.settings.runs_dir)
            with self._lock:
                self._errors = (f"{self.settings.runs_dir}: {type(exc).__name__}: {exc}",)
        finally:
            done.set()

    # ------------------------------------------------------------- the refresh (one at a time)

    def _read(self) -> tuple[dict[str, StoredJob], tuple[str, ...]]:
        runs: dict[str, _Run] = {}
        for folder, mtime_ns in _run_folders(self.settings.runs_dir):
            run = self._runs.get(folder.name) or _Run(folder.name)
            if run.mtime_ns != mtime_ns or not run.checked:
                _catch_up(run, folder, mtime_ns)
            runs[folder.name] = run
        self._runs = runs
        errors = [p for run in runs.values() for p in run.problems]
        used: set[tuple[str, int]] = set()
        jobs = self._by_job(runs.values(), errors, used)
        self._reports = {k: r for k, r in self._reports.items() if k in used}
        return jobs, tuple(errors)

    def _by_job(
        self, runs: Iterable[_Run], errors: list[str], used: set[tuple[str, int]]
    ) -> dict[str, StoredJob]:
        grouped: dict[str, list[tuple[datetime, str, _Run]]] = {}
        for run in runs:
            oldest = run.oldest
            if oldest is not None:
                start = oldest.start or oldest.time
                grouped.setdefault(oldest.job, []).append((start, run.run_id, run))
        jobs: dict[str, StoredJob] = {}
        for job, group in grouped.items():
            group.sort(key=lambda item: item[:2])
            latest = self._newest_report(group, errors, used)
            if latest is None:
                continue
            recent: list[BurstSummary] = []
            for _, _, run in reversed(group):
                recent[:0] = [run.recent[b] for b in sorted(run.recent)]
                if len(recent) >= RECENT_BURSTS:
                    break
            jobs[job] = StoredJob(job, latest, tuple(recent[-RECENT_BURSTS:]))
        return jobs

    def _newest_report(
        self,
        group: list[tuple[datetime, str, _Run]],
        errors: list[str],
        used: set[tuple[str, int]],
    ) -> Report | None:
        """The newest readable report of a job's runs (newest run first)."""
        for _, run_id, run in reversed(group):
            newest = run.newest
            if newest is None:
                continue
            key = (run_id, newest.burst)
            report = self._reports.get(key)
            if report is None:
                folder = self.settings.runs_dir / run_id
                try:
                    report = read_report(folder / burst_file_name(newest.burst))
                except (HistoryError, TargetNotFoundError) as exc:
                    errors.append(str(exc))
                    continue
                self._reports[key] = report
            used.add(key)
            return report
        return None


def _catch_up(run: _Run, folder: Path, mtime_ns: int) -> None:
    """Read what is new in a run folder: the first time, its manifest's first line and newest
    lines (never all of it); then, from where the last read stopped. The first time, and
    whenever the folder changed without a new line, reports without a line are looked for."""
    try:
        lines = _new_lines(run, folder)
    except HistoryError as exc:
        run.unreadable = (str(exc),)
        return
    for summary in lines.summaries:
        run.add(summary)
    run.position, run.bad_lines = lines.position, run.bad_lines + lines.bad
    if not run.checked or not lines.summaries:
        run.unreadable = _add_missing(run, folder)
        run.checked = True
    run.mtime_ns = mtime_ns


def _new_lines(run: _Run, folder: Path) -> manifest.Lines:
    if run.position is not None:
        lines = manifest.read(folder, run.position)
        if not lines.restarted:
            return lines
        run.forget()
    run.first = manifest.first(folder)  # the run's start, for ordering (not a recent burst)
    return manifest.tail(folder, RECENT_BURSTS)


def _add_missing(run: _Run, folder: Path) -> tuple[str, ...]:
    """Read the reports that have no manifest line and add their lines: every report of a run
    saved before manifests existed; else those after the newest line (a writer killed between
    a report and its line), found by asking for each next file."""
    if run.position is None:  # no manifest at all
        missing = burst_numbers(folder)
    else:
        newest = run.newest
        missing = []
        following = 0 if newest is None else newest.burst + 1
        while (folder / burst_file_name(following)).is_file():
            missing.append(following)
            following += 1
    problems = []
    for burst in missing:
        try:
            report = read_report(folder / burst_file_name(burst))
        except (HistoryError, TargetNotFoundError) as exc:
            problems.append(str(exc))
            continue
        summary = BurstSummary.of(run.run_id, burst, report)
        run.add(summary)
        try:
            manifest.append(folder, summary)
        except OSError as exc:  # a read-only runs directory: read again at the next restart
            problems.append(f"{folder}: cannot add to its manifest: {exc.strerror or exc}")
    return tuple(problems)


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
        try:
            folders.append((Path(entry.path), entry.stat().st_mtime_ns))
        except OSError:  # removed meanwhile (a prune)
            continue
    return folders


def is_run_id(text: str) -> bool:
    """Whether ``text`` has the form of a run id (:data:`bpmon.history.runs.RUN_ID`)."""
    return RUN_ID.fullmatch(text) is not None


def find_run(run_id: str, settings: Settings) -> Path | None:
    """The folder of run ``run_id`` inside the runs directory; None when there is none.

    None as well for any text that is not a run id, or whose folder (links followed) is not
    directly inside the runs directory: a run id from a request reaches its folder and nothing
    else, and only that resolved path is used, never the text of the request.
    """
    if not is_run_id(run_id):
        return None
    root = settings.runs_dir.resolve()
    path = (root / run_id).resolve()
    return path if path.parent == root and path.is_dir() else None
