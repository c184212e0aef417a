"""The history store: every saved report appended to a Parquet dataset (``docs/history.md``).

The dataset lives in ``<runs-dir>/history/`` beside the run folders, partitioned by job and date
(``schema.py`` draws the layout). The report.json files stay the source of truth; the dataset is
an index over them that ``bpmon history import`` can rebuild at any time.

An append is crash-safe: each part file is written under a hidden temporary name in its final
folder, synced, then renamed, and the folder synced; the ``causes`` part of a report is renamed
before its ``subtasks`` part, so a ``subtasks`` part is the mark of a complete append. A process
killed at any point leaves either nothing, a hidden temporary file, or a ``causes`` part without
its ``subtasks`` part: readers skip and name both, and the next append (or import) of the same
report completes it. Part names are derived from the run id and burst, so appending a report
twice writes nothing the second time. Nothing in the dataset is ever deleted or rewritten.

pyarrow is imported only when a part is written or read (the ``[spark]`` extra): without it,
:class:`MissingDependencyError` says how to install it.

May import: the model layer, bpmon.history.
"""

from __future__ import annotations

import contextlib
import logging
import os
import re
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import date, timedelta
from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib.parse import quote, unquote

from bpmon.errors import BpmonError
from bpmon.history.rows import Columns, WindowKey, report_rows
from bpmon.history.runs import sync_folder
from bpmon.history.schema import (
    MAJOR,
    SCHEMA_KEY,
    TABLE_KEY,
    TABLES,
    TableName,
    arrow_schema,
    schema_major,
)
from bpmon.model import Report

if TYPE_CHECKING:
    import pyarrow as pa

HISTORY_DIR = "history"
"""The dataset's folder inside the runs directory."""

_log = logging.getLogger("bpmon.history")
_said: set[str] = set()
"""The warnings already given by this process (a missing pyarrow is said once)."""

_PART = re.compile(r"part-[A-Za-z0-9][A-Za-z0-9_.-]*\.parquet")
_TEMP = re.compile(r"\.part-.*\.tmp")


class MissingDependencyError(BpmonError, ImportError):
    """An optional dependency of the history (pyarrow, pyspark, Java) is not installed."""


def require_pyarrow() -> Any:
    """The pyarrow.parquet module; MissingDependencyError naming the fix when it is missing."""
    try:
        import pyarrow.parquet as pq
    except ImportError:
        raise MissingDependencyError(
            "pyarrow is not installed, so the history (Parquet) cannot be written or read: "
            "install the spark extra (scripts/setup --spark, or pip install 'bpmon[spark]')"
        ) from None
    return pq


def keep_in_history(runs_dir: Path, report: Report, burst: int) -> bool:
    """Append a just-saved report to the history of ``runs_dir``; False when it was not added.

    Best effort, because the report.json already saved is what counts: without pyarrow (the
    core install) the append is skipped with one warning line per process; an append that fails
    is one warning line naming the run and how to add it later. Both go to the ``bpmon.history``
    logger (printed on stderr when nothing configures logging).
    """
    history = HistoryStore.in_runs_dir(runs_dir)
    try:
        return history.append(report, burst)
    except MissingDependencyError as exc:
        if "pyarrow" not in _said:
            _said.add("pyarrow")
            _log.warning("bpmon: warning: %s; reports are saved, not added to the history", exc)
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
    return False


@dataclass(frozen=True, slots=True)
class Part:
    """One readable part file of a table: its job and date (from its folders), its rows."""

    table: TableName
    path: Path
    rows: int
    job: str
    day: date


@dataclass(frozen=True, slots=True)
class Scan:
    """What the dataset holds: its readable parts, and every file skipped with the reason."""

    subtasks: tuple[Part, ...] = ()
    causes: tuple[Part, ...] = ()
    skipped: tuple[str, ...] = ()

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
            tuple(filter(keep, self.subtasks)), tuple(filter(keep, self.causes)), self.skipped
        )

    def paths(self, table: TableName) -> list[str]:
        """The readable part files of ``table``, as strings (for Spark and DuckDB)."""
        return [str(p.path) for p in (self.subtasks if table == "subtasks" else self.causes)]


class HistoryStore:
    """The Parquet dataset in ``root`` (``<runs-dir>/history``), created on the first append."""

    def __init__(self, root: Path) -> None:
        self.root = Path(root)

    @classmethod
    def in_runs_dir(cls, runs_dir: Path) -> HistoryStore:
        """The history of the runs directory ``runs_dir``."""
        return cls(Path(runs_dir) / HISTORY_DIR)

    # ---------------------------------------------------------------------------------- writing

    def part_path(self, table: TableName, job: str, day: date, name: str) -> Path:
        """Where a part file named ``part-<name>.parquet`` of ``job`` on ``day`` goes."""
        folder = self.root / table / f"job={quote(job, safe='')}" / f"date={day.isoformat()}"
        return folder / f"part-{name}.parquet"

    def contains(self, report: Report, burst: int) -> bool:
        """Whether the report of burst ``burst`` of its run is already in the dataset."""
        key = WindowKey.of(report, burst)
        return self.part_path("subtasks", key.job, key.day, f"{key.run_id}-{burst}").is_file()

    def append(self, report: Report, burst: int, *, synthetic: bool = False) -> bool:
        """Add the rows of ``report`` (burst ``burst`` of its run); False when already there.

        Raises:
            MissingDependencyError: pyarrow is not installed.
            OSError: the dataset cannot be written (the report.json files are not touched).
        """
        import bpmon

        if self.contains(report, burst):
            return False
        key = WindowKey.of(report, burst)
        rows = report_rows(report, burst, bpmon.__version__, synthetic=synthetic)
        name = f"{key.run_id}-{burst}"
        self.write_part("causes", key.job, key.day, name, rows["causes"])
        self.write_part("subtasks", key.job, key.day, name, rows["subtasks"])
        return True

    def write_part(
        self, table: TableName, job: str, day: date, name: str, rows: Columns | pa.Table
    ) -> Path:
        """Write one part file atomically (temporary name, sync, rename, sync the folder).

        ``rows`` are columns of Python values, or a pyarrow table of the table's schema.
        """
        pq = require_pyarrow()
        import pyarrow as pa

        target = self.part_path(table, job, day, name)
        _make_folders(target.parent)
        schema = arrow_schema(table)
        data = pa.Table.from_pydict(rows, schema=schema) if isinstance(rows, dict) else rows
        if not data.schema.equals(schema, check_metadata=True):
            raise ValueError(f"rows for {table} do not have the history schema: {data.schema}")
        fd, temp = tempfile.mkstemp(dir=target.parent, prefix=f".{target.name}.", suffix=".tmp")
        try:
            with os.fdopen(fd, "wb") as out:
                pq.write_table(data, out, compression="zstd")
                out.flush()
                os.fsync(out.fileno())
            os.replace(temp, target)
        except BaseException:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(temp)
            raise
        sync_folder(target.parent)
        return target

    # ---------------------------------------------------------------------------------- reading

    def scan(self) -> Scan:
        """Every readable part, and every other file named with why it was skipped (untouched)."""
        pq = require_pyarrow()
        found: dict[TableName, list[Part]] = {"subtasks": [], "causes": []}
        skipped: list[str] = []
        for table in TABLES:
            for path in _files(self.root / table):
                checked = _check_part(pq, self.root / table, path, table)
                if isinstance(checked, str):
                    skipped.append(f"{path}: {checked}; skipped, left as it is")
                    continue
                job, day = path.parent.parent.name, path.parent.name.removeprefix("date=")
                part = Part(table, path, checked, job_of_folder(job), date.fromisoformat(day))
                found[table].append(part)
        complete = {p.path.relative_to(self.root / "subtasks") for p in found["subtasks"]}
        causes = []
        for part in found["causes"]:
            if part.path.relative_to(self.root / "causes") in complete:
                causes.append(part)
            else:
                skipped.append(
                    f"{part.path}: an unfinished append (its subtasks part is missing); "
                    "skipped, left as it is (`bpmon history import` completes it)"
                )
        skipped += [
            f"{p}: not a folder of the history dataset; skipped, left as it is"
            for p in _strays(self.root)
        ]
        return Scan(tuple(found["subtasks"]), tuple(causes), tuple(skipped))

    def read(self, table: TableName, scan: Scan | None = None) -> pa.Table:
        """All readable rows of ``table`` as one pyarrow table (small histories, tests, checks)."""
        pq = require_pyarrow()
        import pyarrow as pa

        scan = scan or self.scan()
        parts = [pq.read_table(p, schema=arrow_schema(table)) for p in scan.paths(table)]
        return pa.concat_tables(parts) if parts else arrow_schema(table).empty_table()


def job_of_folder(name: str) -> str:
    """The job a ``job=<percent-encoded name>`` folder holds."""
    return unquote(name.removeprefix("job="))


def _files(folder: Path) -> Iterator[Path]:
    if not folder.is_dir():
        return
    for dirpath, _, names in os.walk(folder):
        for name in sorted(names):
            yield Path(dirpath) / name


def _strays(root: Path) -> list[Path]:
    """Entries of the dataset's root other than its two table folders."""
    if not root.is_dir():
        return []
    return sorted(p for p in root.iterdir() if p.name not in TABLES)


def _check_part(pq: Any, table_dir: Path, path: Path, table: TableName) -> str | int:
    """Why ``path`` is not a readable part of ``table``, or its number of rows when it is one."""
    if _TEMP.fullmatch(path.name):
        return "an unfinished append (a temporary file)"
    where = path.relative_to(table_dir).parts
    if (
        len(where) != 3
        or not where[0].startswith("job=")
        or not re.fullmatch(r"date=\d{4}-\d{2}-\d{2}", where[1])
        or not _PART.fullmatch(where[2])
    ):
        return "a foreign file (not job=<job>/date=<YYYY-MM-DD>/part-<name>.parquet)"
    try:
        footer = pq.read_metadata(path)
        have = footer.schema.to_arrow_schema()
    except Exception as exc:  # pyarrow raises ArrowInvalid or OSError for a torn file
        first = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        return f"not a readable Parquet file (torn or foreign: {first[:120]})"
    meta = have.metadata or {}
    written = meta.get(SCHEMA_KEY, b"").decode("utf-8", "replace")
    if not written:
        return "a foreign Parquet file (no bpmon.history.schema in its metadata)"
    if schema_major(written) != MAJOR or meta.get(TABLE_KEY, b"").decode() != table:
        return f"written as {written} {meta.get(TABLE_KEY, b'?').decode()!r}, not this reader's"
    problem = _check_columns(have, table)
    return problem if problem is not None else int(footer.num_rows)


def _check_columns(have: pa.Schema, table: TableName) -> str | None:
    """Why the columns of a part differ from the schema's (a later minor may add columns)."""
    for field in arrow_schema(table):
        index = have.get_field_index(field.name)
        if index < 0:
            return f"has no column {field.name!r}"
        if not have.field(index).type.equals(field.type):
            return f"column {field.name!r} is {have.field(index).type}, expected {field.type}"
    return None


def _make_folders(folder: Path) -> None:
    """Create ``folder`` and its parents, syncing each new one into its parent."""
    missing = []
    current = folder
    while not current.exists():
        missing.append(current)
        current = current.parent
    folder.mkdir(parents=True, exist_ok=True)
    for created in reversed(missing):
        sync_folder(created.parent)
