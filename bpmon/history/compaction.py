"""Compaction: a job-day's many small parts merged into a few large ones, crash-safe.

Every append writes its own small part, so a watch at a burst a second makes 86,400 parts per
job and day. A compaction merges parts of one job-day, in both tables, into one compacted part
per table (``part-compacted-<id>.parquet``) that records the windows it holds, then deletes the
parts it merged. The order makes every point safe to be killed at (``selection.py``):

1. the ``causes`` part is written (temporary name, sync, rename, folder sync): until its
   ``subtasks`` twin exists, readers skip it as an unfinished compaction;
2. the ``subtasks`` part is written the same way: from then on, readers read the pair and skip
   every part it covers;
3. the merged parts are deleted (unless a reader is reading: then by a later compaction).

Today's job-days are compacted in tiers, so the cost stays proportional to what is new: once
:data:`PLAIN_LIMIT` parts of single appends gather, they become one compacted part of tier 1;
once :data:`FANOUT` compacted parts of a tier gather, they become one of the next tier. A day
of a watch at a burst a second (86,400 windows) never holds more than about 60 parts per table,
and each window is rewritten about four times. A past day is merged into a single part.

Compactions hold the compaction lock (``locks.py``): a second compactor finds it busy and
leaves the job-day to the first.
"""

from __future__ import annotations

import contextlib
import logging
import math
import os
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import date
from pathlib import Path
from typing import Any

from bpmon.history.folders import TRASH, JobDay, Look, entries, look, walk
from bpmon.history.locks import COMPACTION_LOCK, READERS_LOCK, held
from bpmon.history.parts import (
    COMPACTED_PREFIX,
    PART_NAME,
    TEMP_NAME,
    Part,
    compacted_name,
    row_groups,
    windows_of,
    write_stream,
)
from bpmon.history.retention import empty_trash
from bpmon.history.schema import TABLES, TableName
from bpmon.history.windows import Windows

PLAIN_LIMIT = 32
"""Parts of single appends in a job-day that are merged into one compacted part."""

FANOUT = 8
"""Compacted parts of one tier in a job-day that are merged into one of the next tier."""

APPEND_MERGE_ROWS = 200_000
"""The most rows an appending writer merges (about half a second): bigger merges of today's
tiers wait for :func:`compact` (``maintain``), so a burst loop never stalls for long."""

MAX_MERGES = 16
"""Merges of one job-day in one compaction at most (a cascade through every tier is 6)."""

TEMP_AGE_S = 600.0
"""A temporary file not written to for this long is a leftover of a killed writer (an append
writes its part in milliseconds, a compaction holds the lock while it writes)."""

_log = logging.getLogger("bpmon.history")
_warned: set[tuple[Path, JobDay]] = set()
"""The job-days an appending writer could not compact, already said by this process."""


@dataclass(slots=True)
class Compaction:
    """What a compaction did.

    Attributes:
        days: job-days compacted (merged at least once).
        merged: part files merged into compacted ones.
        written: compacted part files written.
        deleted: part files deleted (merged, or replaced by an earlier compaction).
        deferred: replaced part files left because a reader was reading (never read again).
        temporary: leftover temporary files removed.
        files_before: files in the dataset's tables before.
        files_after: files after.
        problems: one line per job-day that could not be compacted (it is left as it was).
        busy: another process was compacting this dataset: nothing was done.
    """

    days: int = 0
    merged: int = 0
    written: int = 0
    deleted: int = 0
    deferred: int = 0
    temporary: int = 0
    files_before: int = 0
    files_after: int = 0
    problems: list[str] = field(default_factory=list)
    busy: bool = False


def tier(part: Part) -> int:
    """0 for a part of a single append (or a synthetic run), else 1 + log8(windows / 32)."""
    if not part.compacted:
        return 0
    size = max(len(part.windows or ()), PLAIN_LIMIT)
    return 1 + int(math.log(size / PLAIN_LIMIT, FANOUT) + 1e-9)


def compact(
    pq: Any, root: Path, *, today: date | None, wait_s: float = 0.0, now: float | None = None
) -> Compaction:
    """Compact every job-day of the dataset ``root`` that needs it.

    Job-days before ``today`` are merged into one part each; ``today`` and later are compacted
    in tiers. ``today`` None merges every job-day into one part (``bpmon history compact``).
    A job-day that fails is named in ``problems`` and left as it was.
    """
    result = Compaction()
    if not root.is_dir():
        return result
    if not os.access(root, os.W_OK):
        result.problems.append(f"{root}: not writable by this user; nothing compacted")
        return result
    with held(root / COMPACTION_LOCK, wait_s=wait_s) as mine:
        found = walk(root)
        result.files_before = result.files_after = found.files
        if not mine:
            result.busy = True
            return result
        moment = time.time() if now is None else now
        try:
            empty_trash(root)
        except OSError as exc:
            result.problems.append(f"{root / TRASH}: not emptied ({_reason(exc)})")
        for day in found.days:
            full = today is None or day.day < today
            if not _due(root, day, full, moment):
                continue
            try:
                _compact_day(pq, root, day, full, moment, result)
            except Exception as exc:  # one bad job-day never stops the others
                result.problems.append(f"{day}: not compacted ({_reason(exc)}); left as it was")
        result.files_after = walk(root).files
    return result


def compact_after_append(pq: Any, root: Path, day: JobDay) -> None:
    """Compact ``day`` in tiers if no one else is compacting (called by the appending writer).

    Never raises: a failure is one warning line (once per job-day), and the parts stay
    readable as they are.
    """
    result = Compaction()
    with held(root / COMPACTION_LOCK) as mine:
        if not mine:
            return
        try:
            _compact_day(pq, root, day, False, time.time(), result, APPEND_MERGE_ROWS)
        except Exception as exc:
            if (root, day) in _warned:  # said once per job-day and process, not every 8 bursts
                return
            _warned.add((root, day))
            _log.warning(
                "bpmon: warning: the history of %s in %s was not compacted (%s); its parts stay "
                "readable, `bpmon history compact` retries",
                day,
                root,
                _reason(exc),
            )


def _due(root: Path, day: JobDay, full: bool, now: float) -> bool:
    """Whether ``day`` may need work, from its files' names and ages only (no file opened)."""
    names = {table: [p.name for p in entries(day.folder(root, table))] for table in TABLES}
    if any(_stale(day.folder(root, t) / n, now) for t in TABLES for n in names[t] if _temp(n)):
        return True
    parts = {t: [n for n in names[t] if PART_NAME.fullmatch(n)] for t in TABLES}
    if full:
        return len(parts["subtasks"]) > 1 or len(parts["causes"]) > 1
    compacted = sum(n.startswith(COMPACTED_PREFIX) for n in parts["subtasks"])
    return len(parts["subtasks"]) - compacted >= PLAIN_LIMIT or compacted >= FANOUT


def _compact_day(
    pq: Any,
    root: Path,
    day: JobDay,
    full: bool,
    now: float,
    result: Compaction,
    max_rows: int | None = None,
) -> None:
    """Merge what ``day`` needs merged (groups of at most ``max_rows`` subtask rows), then
    delete what is replaced and left over."""
    seen = look(pq, root, day)
    merged_any = False
    for _ in range(MAX_MERGES):
        group = _next_group(seen, full)
        if max_rows is not None and sum(p.rows for p in group) > max_rows:
            break
        if not group:
            break
        _merge(pq, root, seen, group)
        result.merged += len(group)
        result.written += 2
        merged_any = True
        seen = look(pq, root, day)
    result.days += merged_any
    _delete(root, seen, now, result)


def _next_group(seen: Look, full: bool) -> list[Part]:
    """The ``subtasks`` parts to merge next: all of a past day, or a full tier of today's."""
    parts = list(seen.selection.subtasks)
    if full:
        return parts if len(parts) > 1 else []
    tiers: dict[int, list[Part]] = {}
    for part in parts:
        tiers.setdefault(tier(part), []).append(part)
    for level in sorted(tiers):
        if len(tiers[level]) >= (PLAIN_LIMIT if level == 0 else FANOUT):
            return tiers[level]
    return []


def _merge(pq: Any, root: Path, seen: Look, group: list[Part]) -> None:
    """Write the compacted pair of the ``subtasks`` parts ``group``, ``causes`` first."""
    windows = Windows().union(*(windows_of(pq, p) for p in group))
    if not windows:
        raise ValueError(f"its parts {', '.join(p.name for p in group[:3])}... hold no window")
    causes = [p for p in seen.selection.causes if windows.covers(windows_of(pq, p))]
    name = f"part-{compacted_name()}.parquet"
    written: list[Path] = []
    pairs: tuple[tuple[TableName, list[Part]], ...] = (("causes", causes), ("subtasks", group))
    try:
        for table, parts in pairs:
            target = seen.day.folder(root, table) / name
            target.parent.mkdir(parents=True, exist_ok=True)
            written.append(
                write_stream(pq, target, _rows(pq, parts), table, windows, compacted=True)
            )
    except Exception:  # a part that does not read: leave no unfinished compaction behind
        if len(written) == 1:
            _unlink(written[0])
        raise


def _rows(pq: Any, parts: list[Part]) -> Iterator[Any]:
    for part in sorted(parts, key=lambda p: p.name):
        yield from row_groups(pq, part)


def _delete(root: Path, seen: Look, now: float, result: Compaction) -> None:
    """Delete the parts ``seen`` found replaced or unfinished, unless someone is reading."""
    garbage = [p.path for p in (*seen.selection.replaced, *seen.selection.unfinished)]
    for path in seen.temporary:
        if _stale(path, now) and _unlink(path):
            result.temporary += 1
    if not garbage:
        return
    with held(root / READERS_LOCK) as alone:
        if not alone:
            result.deferred += len(garbage)
            return
        result.deleted += sum(_unlink(path) for path in garbage)


def _temp(name: str) -> bool:
    return TEMP_NAME.fullmatch(name) is not None


def _stale(path: Path, now: float) -> bool:
    """Whether a temporary file was last written more than :data:`TEMP_AGE_S` ago."""
    try:
        return now - path.stat().st_mtime > TEMP_AGE_S
    except FileNotFoundError:
        return False


def _unlink(path: Path) -> bool:
    with contextlib.suppress(FileNotFoundError):
        os.unlink(path)
        return True
    return False


def _reason(exc: BaseException) -> str:
    text = str(exc).splitlines()[0] if str(exc) else ""
    return f"{type(exc).__name__}: {text[:200]}" if text else type(exc).__name__
