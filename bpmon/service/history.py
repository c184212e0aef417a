"""The service's history: import, synthesise, analyse, compact and prune the Parquet history.

Surfaces (``bpmon history``, ``bpmon analyze``, the server) call these functions and get model
values back (:class:`~bpmon.model.analysis.Analysis`, plain results); they never import
:mod:`bpmon.history`, pyarrow or pyspark. Spark is imported only when an analysis runs, and not
at all when there is nothing to analyse, so an empty history is answered at once.

:func:`maintain` is what a long-running server calls now and then (at start, then hourly): it
compacts what needs it and prunes what ``[history] keep_days`` no longer keeps, never raising;
:class:`Upkeep` calls it on a thread of its own, for ``bpmon serve``.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, replace
from datetime import date, datetime, timedelta
from pathlib import Path

from bpmon.history.compaction import Compaction, compact
from bpmon.history.export import write_aggregates
from bpmon.history.importer import ImportResult, import_runs
from bpmon.history.retention import Pruned, prune_days
from bpmon.history.runs import RunStore
from bpmon.history.store import HISTORY_DIR, HistoryStore, Scan, require_pyarrow
from bpmon.history.synth import SynthPlan, SynthResult, synthesize
from bpmon.model.analysis import Analysis, Thresholds
from bpmon.model.clock import as_utc
from bpmon.model.errors import BpmonError, ConfigError, HistoryError
from bpmon.rules.config import RulesConfig
from bpmon.service.settings import Settings

DEFAULT_MASTER = "local[*]"
UPKEEP_EVERY_S = 3600.0
"""How often a server compacts and prunes its history (and once when it starts)."""
SYNTH_EVERY = timedelta(hours=6)

Progress = Callable[[str], None]

_log = logging.getLogger(__name__)


def history_dir(settings: Settings) -> Path:
    """The dataset's folder: ``<runs-dir>/history``."""
    return Path(settings.runs_dir) / HISTORY_DIR


def import_history(
    source: Path, settings: Settings, progress: Progress | None = None
) -> ImportResult:
    """Add every report of the run folders in ``source`` to the history (idempotent)."""
    return import_runs(HistoryStore(history_dir(settings)), source, progress)


def synthesize_history(
    settings: Settings,
    *,
    runs: int,
    jobs: int,
    bursts: int = 3,
    parallelism: int = 4,
    seed: int = 0,
) -> SynthResult:
    """Write a synthetic history (rows marked ``synthetic``) ending at the settings' clock.

    The clock is taken to the hour, so the same command run twice within an hour makes the same
    run ids and writes nothing the second time.
    """
    hour = settings.now().replace(minute=0, second=0, microsecond=0)
    plan = SynthPlan(
        runs=runs,
        jobs=jobs,
        bursts=bursts,
        parallelism=parallelism,
        seed=seed,
        every=SYNTH_EVERY,
        start=hour - runs * SYNTH_EVERY,
    )
    return synthesize(HistoryStore(history_dir(settings)), plan)


def thresholds(rules: RulesConfig) -> Thresholds:
    """The limits of an analysis from the rules: ``[history]``, and three of the diagnosis's."""
    h = rules.history
    return Thresholds(
        capacity_drop=h.capacity_drop,
        cause_share=h.cause_share,
        hot_ratio=h.hot_ratio,
        hot_share=h.hot_share,
        min_busy=rules.capacity.min_busy,
        busy_min=rules.bottleneck.busy_min,
        checkpoint_slow_ms=rules.checkpoints.slow_ms,
    )


def analyze_history(
    settings: Settings,
    *,
    job: str | None = None,
    since: datetime | None = None,
    master: str = DEFAULT_MASTER,
    ui: bool = False,
    progress: Progress | None = None,
) -> Analysis:
    """Aggregate the history of ``settings.runs_dir`` with Spark on ``master``.

    An empty history (or one that ``job``/``since`` empties) is answered without starting
    Spark: an :class:`Analysis` whose ``notes`` say what there is and how to add to it.

    Raises:
        MissingDependencyError: pyarrow, pyspark or Java is missing (one line naming the fix).
        AnalyticsError: Spark did not start or failed.
        ConfigError: a bad rules file.
    """
    began = time.monotonic()
    say = progress or (lambda _: None)
    limits = thresholds(settings.rules())
    store = HistoryStore(history_dir(settings))
    with store.reading() as everything:  # no compaction deletes a part Spark is to read
        scan = everything.only(job, None if since is None else since.date())
        empty = Analysis(
            generated_at=settings.now(),
            history=str(store.root),
            job=job,
            since=since,
            master=None,
            spark_version=None,
            seconds=0.0,
            subtask_rows=0,
            cause_rows=0,
            thresholds=limits,
            skipped=everything.skipped,
        )
        if not scan.subtasks:
            return replace(empty, notes=(_nothing(store, everything, job, since),))
        from bpmon.history.analytics import analyze
        from bpmon.history.spark import spark_session

        with spark_session(master, ui=ui, progress=say) as spark:
            found = analyze(
                spark,
                scan,
                history=str(store.root),
                job=job,
                since=since,
                limits=limits,
                master=master,
                progress=say,
                began=began,
                generated_at=settings.now(),
            )
        if not found.jobs:
            return replace(empty, notes=(_nothing(store, everything, job, since),))
        single = [j.job for j in found.jobs if j.runs == 1]
        notes = tuple(
            f"job {name!r} has a single run: regressions and trends compare runs of a job, so run "
            "it again (every run is added to the history)"
            for name in single
        )
        return replace(found, notes=notes)


def _nothing(store: HistoryStore, scan: Scan, job: str | None, since: datetime | None) -> str:
    """The plain answer when there is nothing to analyse: what there is, and what to do."""
    if not scan.subtasks:
        return (
            f"no history in {store.root} yet: every `bpmon run` and `bpmon monitor` adds its "
            f"reports; `bpmon history import {store.root.parent}` adds runs saved before"
        )
    what = " and ".join(
        part
        for part in (
            f"of job {job!r}" if job is not None else "",
            f"since {since:%Y-%m-%d %H:%M} UTC" if since is not None else "",
        )
        if part
    )
    jobs = scan.jobs()
    listed = ", ".join(jobs[:5]) + (f" and {len(jobs) - 5} more" if len(jobs) > 5 else "")
    return f"no windows {what} in {store.root} (it holds jobs {listed})"


def write_analysis_tables(analysis: Analysis, folder: Path) -> list[Path]:
    """Write the analysis's aggregates as Parquet files into ``folder``."""
    return write_aggregates(analysis, folder)


def parse_since(text: str, now: datetime) -> datetime:
    """``--since``: a date (``2026-11-01``), a UTC time (``2026-11-01T12:00``) or an age
    (``7d``, ``12h``, ``30m``) before ``now``.

    Raises:
        ConfigError: ``text`` is none of these.
    """
    value = text.strip()
    units = {"d": "days", "h": "hours", "m": "minutes"}
    if value[-1:] in units and value[:-1].isdigit():
        return now - timedelta(**{units[value[-1]]: int(value[:-1])})
    try:
        moment = datetime.fromisoformat(value.removesuffix("Z"))
    except ValueError:
        try:
            moment = datetime.combine(date.fromisoformat(value), datetime.min.time())
        except ValueError:
            raise ConfigError(
                f"--since {text!r}: expected a date (2026-11-01), a UTC time (2026-11-01T12:00) "
                "or an age (7d, 12h, 30m)"
            ) from None
    return moment.replace(tzinfo=now.tzinfo) if moment.tzinfo is None else moment


COMPACT_WAIT_S = 30.0
"""How long ``bpmon history compact`` waits for another compaction (an append's) to end."""


def compact_history(settings: Settings) -> Compaction:
    """Merge every job-day of the history into one part per table now.

    Raises:
        MissingDependencyError: pyarrow is not installed.
        HistoryError: another process kept compacting or pruning the history for 30 s.
    """
    pq = require_pyarrow()
    root = history_dir(settings)
    done = compact(pq, root, today=None, wait_s=COMPACT_WAIT_S)
    if done.busy:
        raise HistoryError(_busy(root, "compacting"))
    return done


@dataclass(frozen=True, slots=True)
class Pruning:
    """What a prune removed (or, in a dry run, would remove).

    Attributes:
        keep_days: the days kept (0: everything, nothing was pruned).
        cutoff: what was older than this was removed (None when keep_days is 0).
        dataset: the job-days of the Parquet history removed.
        runs: run folders removed (in a dry run: that would be).
        bursts: burst reports removed (in a dry run: that would be).
        dry_run: nothing was removed.
    """

    keep_days: int
    cutoff: datetime | None
    dataset: Pruned | None
    runs: int
    bursts: int
    dry_run: bool


def prune_history(
    settings: Settings, keep_days: int | None = None, *, dry_run: bool = False
) -> Pruning:
    """Delete the history's days, run folders and burst reports older than ``keep_days`` days.

    ``keep_days`` None takes ``[history] keep_days`` from the rules; 0 keeps everything.

    Raises:
        ConfigError: ``keep_days`` is negative, or the rules file is bad.
        MissingDependencyError: pyarrow is not installed and there is a dataset to prune.
        HistoryError: the history or the runs cannot be deleted, or another process kept the
            history busy for 30 s.
    """
    days = settings.rules().history.keep_days if keep_days is None else keep_days
    if days < 0:
        raise ConfigError(f"--keep-days {days}: expected 0 (keep everything) or more days")
    if days == 0:
        return Pruning(0, None, None, 0, 0, dry_run)
    cutoff = as_utc(settings.now()) - timedelta(days=days)
    root = history_dir(settings)
    try:
        dataset = prune_days(root, cutoff.date(), dry_run=dry_run)
        if dataset.busy:
            raise HistoryError(_busy(root, "compacting or reading"))
        runs, bursts = RunStore(Path(settings.runs_dir)).prune(before=cutoff, dry_run=dry_run)
    except OSError as exc:
        raise HistoryError(f"cannot prune {settings.runs_dir}: {exc.strerror or exc}") from None
    return Pruning(int(days), cutoff, dataset, runs, bursts, dry_run)


@dataclass(frozen=True, slots=True)
class Maintenance:
    """What :func:`maintain` did.

    Attributes:
        compaction: the compaction of the history (None: no history, or no pyarrow).
        pruning: the prune (None when it could not run: see ``problems``).
        problems: one line per thing not done (a job-day not compacted, a prune that failed),
            each naming what and why; everything else was done.
        seconds: how long it took.
    """

    compaction: Compaction | None
    pruning: Pruning | None
    problems: tuple[str, ...]
    seconds: float


def maintain(settings: Settings) -> Maintenance:
    """Compact what needs it and prune per ``[history] keep_days``; never raises.

    For a server to call at start and then every hour or so: days older than ``keep_days``
    are pruned (the Parquet days, the run folders and burst reports), then past days are merged
    into one part per job and table, today's parts in tiers (appends already do most of it),
    and leftovers of killed writers are removed. With nothing to do it lists folders and
    opens no file. The compaction does not wait: a job-day busy with another compaction is left
    for the next call. The prune may wait, up to 30 s for a compaction and 30 s more for
    readers (Spark), then names the history busy and leaves it for the next call (run it on a
    thread of its own, as ``bpmon serve`` does).
    """
    began = time.monotonic()
    problems: list[str] = []
    pruning = compaction = None
    try:  # first, so that no day about to go is merged
        pruning = prune_history(settings)
    except Exception as exc:  # named, and tried again at the next call
        problems.append(f"{settings.runs_dir}: not pruned ({_reason(exc)})")
    root = history_dir(settings)
    if root.is_dir():
        try:
            compaction = compact(require_pyarrow(), root, today=as_utc(settings.now()).date())
            problems += compaction.problems
        except Exception as exc:  # a server's housekeeping never raises
            problems.append(f"{root}: not compacted ({_reason(exc)})")
    return Maintenance(compaction, pruning, tuple(problems), time.monotonic() - began)


class Upkeep:
    """:func:`maintain` now and then every ``every_s`` on a thread of its own, and what dead
    writers left in the run folders removed; what could not be done is logged and handed to
    ``done`` with the rest of what was done.

    Args:
        settings: the runs directory and its history.
        done: called after each round (on the upkeep's thread) with what it did.
        every_s: the time between two rounds.
    """

    def __init__(
        self,
        settings: Settings,
        done: Callable[[Maintenance], None],
        every_s: float = UPKEEP_EVERY_S,
    ) -> None:
        self._settings, self._done, self._every_s = settings, done, every_s
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="bpmon-upkeep", daemon=True)

    def start(self) -> None:
        """The first round now, then one every ``every_s``."""
        self._thread.start()

    def stop(self, timeout_s: float) -> None:
        """No more rounds; wait up to ``timeout_s`` for one in progress (a compaction under way
        is left to finish on its own past that)."""
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join(max(0.0, timeout_s))

    def _run(self) -> None:
        while not self._stop.is_set():
            done = maintain(self._settings)
            try:
                removed = self._settings.store().remove_stale_temp()
            except (OSError, BpmonError) as exc:  # the runs directory went away: next time
                removed = 0
                done = replace(done, problems=(*done.problems, f"temporary files: {exc}"))
            for problem in done.problems:
                _log.warning("bpmon: history upkeep: %s", problem)
            if removed:
                _log.info("bpmon: removed %d temporary file(s) left by dead writers", removed)
            self._done(done)
            self._stop.wait(self._every_s)


def _busy(root: Path, what: str) -> str:
    return (
        f"another bpmon kept {root} busy ({what}) for {COMPACT_WAIT_S:.0f} s: try again when it "
        "is done"
    )


def _reason(exc: BaseException) -> str:
    if isinstance(exc, BpmonError):
        return str(exc)
    text = (str(exc).splitlines() or [""])[0][:200]
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__
