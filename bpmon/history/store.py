"""The history store: every saved report appended to a Parquet dataset (``docs/history.md``).

The dataset lives in ``<runs-dir>/history/`` beside the run folders, partitioned by job and date
(``schema.py`` draws the layout). The report.json files stay the source of truth; the dataset is
an index over them that ``bpmon history import`` can rebuild at any time.

An append is crash-safe and cheap: the ``subtasks`` part of a window is written under a hidden
temporary name in its final folder, synced, renamed, and the folder synced; a window with root
causes first writes its ``causes`` part the same way, so a ``subtasks`` part is the mark of a
complete append (a window without causes has no ``causes`` part: one file, two syncs). A
process killed at any point leaves either nothing, a hidden temporary file, or a ``causes``
part without its ``subtasks`` part: readers skip and name both, and the next append (or import)
of the same report completes it. Part names are derived from the run id and burst, and every
part records its windows, so appending a report already in the dataset (as a part of its own
or inside a compacted part) writes nothing.

Once a job-day holds enough parts of single appends, the appending writer compacts them
(``compaction.py``); readers read each window exactly once whatever a crash left behind
(``selection.py``), and hold the readers' lock while they read, so no part they listed is
deleted under them.

pyarrow is imported only when a part is written or read (the ``[spark]`` extra): without it,
:class:`MissingDependencyError` says how to install it.
"""

from __future__ import annotations

import contextlib
import logging
import os
import threading
from collections import OrderedDict
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import date, timedelta
from pathlib import Path
from typing import TYPE_CHECKING, Any

from bpmon.history.compaction import FANOUT, PLAIN_LIMIT, compact_after_append
from bpmon.history.folders import JobDay, look, walk
from bpmon.history.locks import READERS_LOCK, held
from bpmon.history.parts import (
    COMPACTED_PREFIX,
    PART_NAME,
    Part,
    job_folder,
    make_folders,
    read_part,
    write_part,
)
from bpmon.history.rows import Columns, WindowKey, report_rows
from bpmon.history.schema import WINDOWS_KEY, TableName, arrow_schema
from bpmon.history.windows import Windows
from bpmon.model.errors import BpmonError
from bpmon.model.values import Report

if TYPE_CHECKING:
    import pyarrow as pa

HISTORY_DIR = "history"
"""The dataset's folder inside the runs directory."""

READ_WAIT_S = 10.0
"""How long a reader waits for a compaction's deletions to end before reading anyway."""

_log = logging.getLogger("bpmon.history")

_WINDOWS: OrderedDict[Path, Windows] = OrderedDict()
"""The windows of compacted parts already read by this process (their files never change)."""
_WINDOWS_KEPT = 256
_WINDOWS_LOCK = threading.Lock()
"""Watches append from threads of their own: the cache is shared."""


class MissingDependencyError(BpmonError, ImportError):
    """An optional dependency of the history (pyarrow, pyspark, Java) is not installed."""


def require_pyarrow() -> Any:
    """The pyarrow.parquet module; MissingDependencyError naming the fix when it is missing."""
    try:
        import pyarrow.parquet as pq
    except ImportError:
        raise MissingDependencyError(
            "pyarrow is not installed, so the history (Parquet) cannot be written or read: "
            "install the spark extra (scripts/setup --spark, or pip install 'bpmon[spark]'), "
            "then `bpmon history import RUNS_DIR` adds the runs saved without it"
        ) from None
    return pq


def keep_in_history(runs_dir: Path, report: Report, burst: int) -> bool:
    """Append a just-saved report to the history of ``runs_dir``; False when it was not added.

    Best effort, because the report.json already saved is what counts: without pyarrow (the
    core install) the append is skipped silently (the history is an extra the core install
    does not promise; what reads it says pyarrow is missing); an append that fails
    is one warning line naming the run and what to do, whatever failed (the file system, or a
    value pyarrow refuses). Both go to the ``bpmon.history`` logger (printed on stderr when
    nothing configures logging); nothing is raised.
    """
    history = HistoryStore.in_runs_dir(runs_dir)
    try:
        return history.append(report, burst)
    except MissingDependencyError:
        # the core install: nothing to say on every run; the commands that read the history
        # (bpmon analyze, history import) name the fix when they are asked for
        _log.debug("bpmon: pyarrow is missing: run %s burst %d not added", report.run_id, burst)
    except (OSError, BpmonError) as exc:
        reason = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc)
        _log.warning(
            "bpmon: warning: run %s burst %d is saved but not in the history (%s: %s); "
            "`bpmon history import %s` adds it",
            report.run_id,
            burst,
            history.root,
            reason,
            runs_dir,
        )
    except Exception as exc:  # pyarrow refused a value (ArrowInvalid is a ValueError, ...)
        first = str(exc).splitlines()[0][:200] if str(exc) else ""
        _log.warning(
            "bpmon: warning: run %s burst %d is saved but not in the history: a value does not "
            "fit its schema (%s: %s); the report is kept in %s, please report this as a bug",
            report.run_id,
            burst,
            type(exc).__name__,
            first,
            runs_dir,
        )
    return False


@dataclass(frozen=True, slots=True)
class Scan:
    """What the dataset holds: its parts to read, and every file skipped with the reason.

    Attributes:
        replaced: parts a compacted part covers, not read (a compaction deletes them).
        files: every file in the dataset's tables.
    """

    subtasks: tuple[Part, ...] = ()
    causes: tuple[Part, ...] = ()
    skipped: tuple[str, ...] = ()
    replaced: tuple[Path, ...] = ()
    files: int = 0

    def rows(self, table: TableName) -> int:
        """The number of rows of ``table`` in the readable parts."""
        return sum(p.rows for p in (self.subtasks if table == "subtasks" else self.causes))

    def jobs(self) -> list[str]:
        """The jobs the readable parts hold, sorted."""
        return sorted({p.job for p in self.subtasks})

    def only(self, job: str | None = None, since: date | None = None) -> Scan:
        """The parts of ``job`` dated ``since`` or later, by their folders (from a day early: a
        part of several windows may span midnight; the reader filters the rows exactly)."""
        first = None if since is None else since - timedelta(days=1)

        def keep(p: Part) -> bool:
            return (job is None or p.job == job) and (first is None or p.day >= first)

        return Scan(
            tuple(filter(keep, self.subtasks)),
            tuple(filter(keep, self.causes)),
            self.skipped,
            self.replaced,
            self.files,
        )

    def paths(self, table: TableName) -> list[str]:
        """The readable part files of ``table``, as strings (for Spark and DuckDB)."""
        return [str(p.path) for p in (self.subtasks if table == "subtasks" else self.causes)]


class HistoryStore:
    """The Parquet dataset in ``root`` (``<runs-dir>/history``), created on the first append.

    Args:
        root: the dataset's folder.
        compact: whether an append compacts its job-day once enough parts gathered (the
            default; off only to measure what compaction saves).
    """

    def __init__(self, root: Path, *, compact: bool = True) -> None:
        self.root = Path(root)
        self.compact = compact

    @classmethod
    def in_runs_dir(cls, runs_dir: Path, *, compact: bool = True) -> HistoryStore:
        """The history of the runs directory ``runs_dir``."""
        return cls(Path(runs_dir) / HISTORY_DIR, compact=compact)

    # ---------------------------------------------------------------------------------- writing

    def part_path(self, table: TableName, job: str, day: date, name: str) -> Path:
        """Where a part file named ``part-<name>.parquet`` of ``job`` on ``day`` goes."""
        return self._day(job, day).folder(self.root, table) / f"part-{name}.parquet"

    @staticmethod
    def _day(job: str, day: date) -> JobDay:
        return JobDay(job_folder(job), f"date={day.isoformat()}")

    def contains(self, report: Report, burst: int) -> bool:
        """Whether the report of burst ``burst`` of its run is already in the dataset."""
        key = WindowKey.of(report, burst)
        return self.holds(key.job, key.day, f"{key.run_id}-{burst}", key.run_id, burst)

    def holds(self, job: str, day: date, name: str, run_id: str, burst: int) -> bool:
        """Whether window ``(run_id, burst)`` of ``job`` on ``day`` is in the dataset: in its own
        part ``part-<name>.parquet``, or in a compacted part that replaced it."""
        return self._present(job, day, name, (run_id, burst))[0]

    def _present(
        self, job: str, day: date, name: str, window: tuple[str, int]
    ) -> tuple[bool, list[str]]:
        """Whether ``window`` is in the dataset (its part ``name``, or a compacted part), and the
        names in its subtasks folder."""
        folder = self._day(job, day).folder(self.root, "subtasks")
        try:
            names = os.listdir(folder)  # names only: an append must stay cheap
        except (FileNotFoundError, NotADirectoryError):
            names = []
        if f"part-{name}.parquet" in names:
            return True, names
        compacted = [n for n in names if n.startswith(COMPACTED_PREFIX) and PART_NAME.fullmatch(n)]
        return any(window in _compacted_windows(folder / n) for n in compacted), names

    def append(self, report: Report, burst: int, *, synthetic: bool = False) -> bool:
        """Add the rows of ``report`` (burst ``burst`` of its run); False when already there.

        Raises:
            MissingDependencyError: pyarrow is not installed.
            OSError: the dataset cannot be written (the report.json files are not touched).
            ValueError: pyarrow refused a value of the report (ArrowInvalid).
        """
        import bpmon

        key = WindowKey.of(report, burst)
        present, names = self._present(
            key.job, key.day, f"{key.run_id}-{burst}", (key.run_id, burst)
        )
        if present:
            return False
        pq = require_pyarrow()
        rows = report_rows(report, burst, bpmon.__version__, synthetic=synthetic)
        name = f"{key.run_id}-{burst}"
        window = Windows.one(key.run_id, burst)
        if rows["causes"]["run_id"]:
            self.write_part("causes", key.job, key.day, name, rows["causes"], window)
        self.write_part("subtasks", key.job, key.day, name, rows["subtasks"], window)
        if self.compact and _due_after(names):
            compact_after_append(pq, self.root, self._day(key.job, key.day))
        return True

    def write_part(
        self,
        table: TableName,
        job: str,
        day: date,
        name: str,
        rows: Columns | pa.Table,
        windows: Windows | None = None,
    ) -> Path:
        """Write one part file atomically (temporary name, sync, rename, sync the folder).

        ``rows`` are columns of Python values, or a pyarrow table of the table's schema;
        ``windows`` defaults to the windows of the rows.
        """
        pq = require_pyarrow()
        import pyarrow as pa

        target = self.part_path(table, job, day, name)
        make_folders(target.parent)
        schema = arrow_schema(table)
        data = pa.Table.from_pydict(rows, schema=schema) if isinstance(rows, dict) else rows
        return write_part(pq, target, data, table, windows=windows)

    # ---------------------------------------------------------------------------------- reading

    def scan(self) -> Scan:
        """Every part to read, and every other file named with why it was skipped (untouched).

        Parts a compacted part replaced are neither read nor named (``Scan.replaced``). Hold
        :meth:`reading` while the parts are read, so that no compaction deletes them meanwhile.
        """
        pq = require_pyarrow()
        found = walk(self.root)
        subtasks: list[Part] = []
        causes: list[Part] = []
        skipped: list[str] = []
        replaced: list[Path] = []
        for day in found.days:
            seen = look(pq, self.root, day)
            subtasks += seen.selection.subtasks
            causes += seen.selection.causes
            skipped += seen.skipped
            replaced += [p.path for p in seen.selection.replaced]
        return Scan(
            tuple(subtasks),
            tuple(causes),
            tuple(skipped) + found.foreign,
            tuple(replaced),
            found.files,
        )

    @contextlib.contextmanager
    def reading(self) -> Iterator[Scan]:
        """The dataset's scan, with the readers' lock held until the block ends."""
        with held(self.root / READERS_LOCK, shared=True, wait_s=READ_WAIT_S):
            yield self.scan()

    def read(self, table: TableName, scan: Scan | None = None) -> pa.Table:
        """All readable rows of ``table`` as one pyarrow table (small histories, tests, checks)."""
        if scan is None:
            with self.reading() as now:
                return self.read(table, now)
        pq = require_pyarrow()
        import pyarrow as pa

        parts = scan.subtasks if table == "subtasks" else scan.causes
        tables = [read_part(pq, p) for p in parts]
        return pa.concat_tables(tables) if tables else arrow_schema(table).empty_table()


def _due_after(names: list[str]) -> bool:
    """Whether the append that found ``names`` in its folder should compact it now: at the
    :data:`PLAIN_LIMIT`-th part of a single append, then at every :data:`FANOUT`-th more
    (parts a reader kept from being deleted are still counted)."""
    plain = (
        sum(
            not n.startswith(COMPACTED_PREFIX) and PART_NAME.fullmatch(n) is not None for n in names
        )
        + 1
    )
    return plain >= PLAIN_LIMIT and (plain - PLAIN_LIMIT) % FANOUT == 0


def _compacted_windows(path: Path) -> Windows:
    """The windows a compacted part holds (cached: its file never changes); none if unreadable."""
    with _WINDOWS_LOCK:
        known = _WINDOWS.get(path)
        if known is not None:
            _WINDOWS.move_to_end(path)
            return known
    pq = require_pyarrow()
    try:
        windows = Windows.decode(pq.read_metadata(path).metadata[WINDOWS_KEY])
    except Exception:  # torn, foreign or unfinished: not a part that holds anything
        return Windows()
    with _WINDOWS_LOCK:
        _WINDOWS[path] = windows
        if len(_WINDOWS) > _WINDOWS_KEPT:
            _WINDOWS.popitem(last=False)
    return windows
