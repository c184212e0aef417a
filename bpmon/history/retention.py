"""Retention: the dataset's days older than a cutoff deleted, whole and crash-safe.

A pruned job-day is first moved, table by table (``subtasks`` first), out of the dataset into
``<history>/.trash/`` by one rename each, so a reader sees the day whole or not at all (between
the two renames, its ``causes`` parts are skipped as unfinished appends); the trash is then
deleted. A prune killed half-way leaves a trash that the next prune or compaction empties.

Prunes hold the compaction lock, and the readers' lock while they move folders, so no bpmon
reader loses a part it listed.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import uuid
from dataclasses import dataclass
from datetime import date
from pathlib import Path

from bpmon.history.atomic import sync_folder
from bpmon.history.folders import TRASH, JobDay, entries, walk
from bpmon.history.locks import COMPACTION_LOCK, READERS_LOCK, held
from bpmon.history.schema import TABLES

WAIT_S = 30.0
"""How long a prune waits for a compaction or a reader to finish."""


@dataclass(frozen=True, slots=True)
class Pruned:
    """What a prune of the dataset removed (or, in a dry run, would remove).

    Attributes:
        before: job-days dated before this were removed.
        days: the job-days removed.
        files: the files they held.
        busy: a compaction or a reader held the dataset for longer than the prune waits:
            nothing was removed.
    """

    before: date
    days: tuple[JobDay, ...] = ()
    files: int = 0
    busy: bool = False


def prune_days(
    root: Path, before: date, *, dry_run: bool = False, wait_s: float = WAIT_S
) -> Pruned:
    """Delete every job-day of the dataset ``root`` dated before ``before``.

    Raises:
        OSError: a folder could not be moved or deleted (what was moved is gone; the rest of
            the dataset reads as before).
    """
    if not root.is_dir():
        return Pruned(before)
    if dry_run:  # nothing changes, not even a lock file
        return _old(root, before)
    with held(root / COMPACTION_LOCK, wait_s=wait_s) as mine:
        found = _old(root, before)
        if not mine:  # another compaction or prune: busy only if there was something to do
            return Pruned(before, busy=bool(found.days))
        if found.days:
            with held(root / READERS_LOCK, wait_s=wait_s) as alone:
                if not alone:
                    return Pruned(before, busy=True)
                for day in found.days:
                    _to_trash(root, day)
        empty_trash(root)  # and what a prune killed half-way left
    return found


def _old(root: Path, before: date) -> Pruned:
    """The job-days of ``root`` dated before ``before``, and their files."""
    old = [d for d in walk(root).days if d.day < before]
    files = sum(len(entries(d.folder(root, t))) for d in old for t in TABLES)
    return Pruned(before, tuple(old), files)


def _to_trash(root: Path, day: JobDay) -> None:
    """Move ``day``'s folders into the trash, ``subtasks`` first, and drop an emptied job."""
    trash = root / TRASH
    trash.mkdir(exist_ok=True)
    for table in ("subtasks", "causes"):
        folder = day.folder(root, table)
        if not folder.is_dir():
            continue
        os.rename(folder, trash / f"{uuid.uuid4().hex[:12]}-{table}")
        sync_folder(folder.parent)
        with contextlib.suppress(OSError):  # another day of the job is still there
            folder.parent.rmdir()
    sync_folder(trash)


def empty_trash(root: Path) -> int:
    """Delete what pruned days left in the trash; the number of entries deleted."""
    trash = root / TRASH
    if not trash.is_dir():
        return 0
    removed = 0
    for entry in sorted(trash.iterdir()):
        if entry.is_dir() and not entry.is_symlink():
            shutil.rmtree(entry)
        else:
            entry.unlink()
        removed += 1
    with contextlib.suppress(OSError):
        trash.rmdir()
    return removed
