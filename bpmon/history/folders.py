"""The dataset's job-day folders: what each holds, sorted into parts read, replaced and skipped.

The dataset is two trees of the same shape, one per table (``schema.py``); a job-day is the pair
of folders ``<table>/job=<job>/date=<day>`` of both tables. :func:`walk` finds every job-day and
names every file that is not where a part goes; :func:`look` checks every file of one job-day
and applies the reading rule of ``selection.py``.
"""

from __future__ import annotations

import os
import threading
from collections import OrderedDict
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import date
from pathlib import Path
from typing import Any

from bpmon.history.locks import LOCK_FILES
from bpmon.history.parts import DATE_FOLDER, TEMP_NAME, Part, check_part, job_of_folder
from bpmon.history.schema import TABLES, TableName
from bpmon.history.selection import LEFT, Selection, select

TRASH = ".trash"
"""Where pruned date folders are moved before they are deleted (``retention.py``)."""

_CHECKED: OrderedDict[tuple[str, int, int, int], Part | str] = OrderedDict()
"""What :func:`check_part` said of the files this process looked at, by file identity."""
_CHECKED_KEPT = 8192
_CHECKED_LOCK = threading.Lock()


@dataclass(frozen=True, slots=True, order=True)
class JobDay:
    """One job-day: its folders' names (the same in both tables)."""

    job_dir: str
    date_dir: str

    @property
    def job(self) -> str:
        """The job's name."""
        return job_of_folder(self.job_dir)

    @property
    def day(self) -> date:
        """The UTC date of its windows."""
        return date.fromisoformat(self.date_dir.removeprefix("date="))

    def folder(self, root: Path, table: TableName) -> Path:
        """This job-day's folder of ``table`` in the dataset ``root``."""
        return root / table / self.job_dir / self.date_dir

    def __str__(self) -> str:
        return f"job {self.job!r} on {self.day}"


@dataclass(frozen=True, slots=True)
class Look:
    """One job-day looked at: its selection, its temporary files, and every file's count."""

    day: JobDay
    selection: Selection
    temporary: tuple[Path, ...]
    skipped: tuple[str, ...]
    files: int


@dataclass(frozen=True, slots=True)
class Walk:
    """The dataset's job-days, the files found outside them, and its stray entries."""

    days: tuple[JobDay, ...]
    foreign: tuple[str, ...]
    files: int


def walk(root: Path) -> Walk:
    """Every job-day of the dataset ``root``, and a line for each file that is not in one."""
    days: set[JobDay] = set()
    foreign: list[str] = []
    count = 0
    for table in TABLES:
        for path, where in _files(root / table):
            count += 1
            if len(where) == 3 and where[0].startswith("job=") and DATE_FOLDER.fullmatch(where[1]):
                days.add(JobDay(where[0], where[1]))
            else:
                foreign.append(
                    f"{path}: a foreign file (not job=<job>/date=<YYYY-MM-DD>/part-<name>"
                    f".parquet); {LEFT}"
                )
    foreign += [f"{p}: not a folder of the history dataset; {LEFT}" for p in strays(root)]
    return Walk(tuple(sorted(days)), tuple(foreign), count)


def look(pq: Any, root: Path, day: JobDay) -> Look:
    """Check every file of ``day`` in both tables and sort out what is read."""
    parts: dict[TableName, list[Part]] = {"subtasks": [], "causes": []}
    temporary: list[Path] = []
    skipped: list[str] = []
    files = 0
    for table in TABLES:
        for path in entries(day.folder(root, table)):
            files += 1
            if TEMP_NAME.fullmatch(path.name):
                temporary.append(path)
            checked = _checked(pq, table, path)
            if checked is None:  # deleted since it was listed
                continue
            if isinstance(checked, str):
                skipped.append(f"{path}: {checked}; {LEFT}")
            else:
                parts[table].append(checked)
    selection = select(pq, parts["subtasks"], parts["causes"])
    return Look(day, selection, tuple(temporary), tuple(skipped) + selection.skipped, files)


def _checked(pq: Any, table: TableName, path: Path) -> Part | str | None:
    """:func:`check_part`, remembered while the file is the same (same inode, size and time):
    a part never changes once renamed into place, so a long-lived process reads each footer
    once, however often it scans or compacts."""
    try:
        stat = path.stat()
    except FileNotFoundError:
        return None
    key = (str(path), stat.st_ino, stat.st_size, stat.st_mtime_ns)
    with _CHECKED_LOCK:
        known = _CHECKED.get(key)
        if known is not None:
            _CHECKED.move_to_end(key)
            return known
    checked = check_part(pq, table, path)
    if not TEMP_NAME.fullmatch(path.name):
        with _CHECKED_LOCK:
            _CHECKED[key] = checked
            if len(_CHECKED) > _CHECKED_KEPT:
                _CHECKED.popitem(last=False)
    return checked


def entries(folder: Path) -> list[Path]:
    """The files of one folder, sorted by name (none when it does not exist)."""
    try:
        with os.scandir(folder) as found:
            return sorted(Path(e.path) for e in found if e.is_file(follow_symlinks=False))
    except (FileNotFoundError, NotADirectoryError):
        return []


def strays(root: Path) -> list[Path]:
    """Entries of the dataset's root other than its table folders, locks and trash."""
    if not root.is_dir():
        return []
    known = {*TABLES, *LOCK_FILES, TRASH}
    return sorted(p for p in root.iterdir() if p.name not in known)


def _files(folder: Path) -> Iterator[tuple[Path, tuple[str, ...]]]:
    """Every file under ``folder``, with its path relative to it."""
    if not folder.is_dir():
        return
    for dirpath, _, names in os.walk(folder):
        for name in sorted(names):
            path = Path(dirpath) / name
            yield path, path.relative_to(folder).parts
