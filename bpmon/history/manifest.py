"""A run folder's manifest: one line per saved burst, so a run is listed without reading reports.

Layout, beside the reports of the run (:mod:`bpmon.history.runs`)::

    <runs-dir>/20261122T101500Z-slow-enrich-3f9a/
        report.json  report-1.json  ...
        bursts.jsonl       one JSON object per line, one line per burst saved

A line holds what a listing or a job's history needs of a burst: its number, job, source,
window, every vertex's level and the root causes (``docs/report.md``'s objects). A reader reads a
manifest from where it stopped last time (a byte offset), so a server that watches a job for
weeks reads each line once, and a restart reads lines, never every report.

The report files stay the truth; the manifest is an index over them, kept right by three rules:

- **appends are whole lines**: a writer takes an exclusive ``flock`` on the manifest, checks it
  still has the file the path names (a prune may have replaced it), ends a torn last line with
  a newline, and writes its line in one ``write``;
- **a reader takes only complete lines**: a line still being written (no newline yet) is left
  for the next read; a line that is not a valid summary (torn by a crash) is skipped and named;
- **a report without its line is found and added**: a reader that sees more reports than lines
  (a process killed between the two writes, or a run saved before manifests existed) reads
  those reports and appends their lines, so the next restart does not read them again.

Duplicate lines of one burst (a reader's repair racing a late writer) are harmless: the last
one read wins.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any, BinaryIO

from bpmon.history.atomic import atomic_write
from bpmon.model.clock import format_timestamp
from bpmon.model.errors import HistoryError
from bpmon.model.report_json import (
    LEVELS,
    SOURCES,
    parse_timestamp,
    root_cause_from_dict,
    root_cause_to_dict,
)
from bpmon.model.values import Level, Report, RootCause, Source, worst_of

MANIFEST_FILE = "bursts.jsonl"
"""The manifest's name inside a run folder."""


@dataclass(frozen=True, slots=True)
class BurstSummary:
    """One burst of a run, as its manifest line holds it.

    Attributes:
        run_id: the run the burst belongs to.
        burst: the burst's number in its run (0 first).
        time: the end of the burst's window (UTC).
        levels: ``(vertex, level)`` for every vertex, in the report's order.
        root_causes: the diagnosis (None: not diagnosed).
        job: the job's name.
        source: what was watched.
        start: the start of the burst's window (UTC).
    """

    run_id: str
    burst: int
    time: datetime
    levels: tuple[tuple[str, Level | None], ...]
    root_causes: tuple[RootCause, ...] | None
    job: str = ""
    source: Source = "runtime"
    start: datetime | None = None

    @classmethod
    def of(cls, run_id: str, burst: int, report: Report) -> BurstSummary:
        """The summary of burst ``burst`` of run ``run_id``."""
        return cls(
            run_id=run_id,
            burst=burst,
            time=report.window.end,
            levels=tuple((v.name, v.level) for v in report.vertices),
            root_causes=report.root_causes,
            job=report.job,
            source=report.source,
            start=report.window.start,
        )

    @property
    def worst_level(self) -> Level | None:
        """The highest level of any vertex (None when no vertex has one)."""
        return worst_of(level for _, level in self.levels)

    def to_line(self) -> str:
        """The manifest line of this burst (JSON, no newline inside, newline at the end)."""
        doc: dict[str, Any] = {
            "burst": self.burst,
            "job": self.job,
            "source": self.source,
            "start": None if self.start is None else format_timestamp(self.start),
            "end": format_timestamp(self.time),
            "levels": [[name, level] for name, level in self.levels],
            "root_causes": None
            if self.root_causes is None
            else [root_cause_to_dict(c) for c in self.root_causes],
        }
        return json.dumps(doc, ensure_ascii=False, separators=(",", ":")) + "\n"

    @classmethod
    def from_line(cls, run_id: str, line: str) -> BurstSummary:
        """Parse one manifest line of run ``run_id``; HistoryError when it is not one."""
        try:
            doc = json.loads(line)
            levels = tuple((str(n), _level(v)) for n, v in doc["levels"])
            causes = doc["root_causes"]
            source = doc["source"]
            if source not in SOURCES or not isinstance(doc["burst"], int):
                raise ValueError(f"source {source!r}, burst {doc['burst']!r}")
            return cls(
                run_id=run_id,
                burst=doc["burst"],
                time=parse_timestamp(doc["end"], "end"),
                levels=levels,
                root_causes=None
                if causes is None
                else tuple(root_cause_from_dict(c) for c in causes),
                job=str(doc["job"]),
                source=source,
                start=None if doc["start"] is None else parse_timestamp(doc["start"], "start"),
            )
        except (ValueError, KeyError, TypeError, HistoryError) as exc:
            raise HistoryError(f"not a burst summary ({type(exc).__name__}: {exc})") from None


def _level(value: object) -> Level | None:
    for level in LEVELS:
        if value == level:
            return level
    if value is None:
        return None
    raise ValueError(f"level {value!r}")


def append(run_dir: Path, summary: BurstSummary) -> None:
    """Add ``summary``'s line to the manifest of ``run_dir`` (created with its first line).

    Raises:
        OSError: the manifest cannot be written.
    """
    with _locked(run_dir / MANIFEST_FILE) as out:
        out.write(summary.to_line().encode("utf-8"))


def rewrite(run_dir: Path, keep: Callable[[int], bool]) -> int:
    """Replace the manifest of ``run_dir`` with the lines of the bursts ``keep`` keeps (it is
    given burst numbers); returns the lines dropped.

    Done under the manifest's lock and by an atomic rename, so a writer appending meanwhile
    waits and then appends to the new file. Only each line's burst number is read (a run holds
    at most some 10,000 lines: a fraction of a second); a line without one is dropped.
    """
    path = run_dir / MANIFEST_FILE
    if not path.is_file():
        return 0
    dropped = 0
    with _locked(path) as held, atomic_write(path) as out:
        held.seek(0)
        for line in held:
            burst = line_burst(line)
            if line.endswith(b"\n") and burst is not None and keep(burst):
                out.write(line)
            else:
                dropped += 1
    return dropped


_BURST_FIELD = re.compile(rb'^\{"burst":(\d+),')
_END_FIELD = re.compile(rb'"end":"([^"]+)"')


def line_burst(line: bytes) -> int | None:
    """The burst number of a manifest line, read without parsing the line (None: not one)."""
    found = _BURST_FIELD.match(line)
    return int(found.group(1)) if found else None


def ends(run_dir: Path) -> dict[int, datetime]:
    """When each burst of ``run_dir``'s manifest ended, read line by line without parsing the
    lines whole; lines without both fields are left out."""
    found: dict[int, datetime] = {}
    try:
        with open(run_dir / MANIFEST_FILE, "rb") as src:
            for line in src:
                burst, end = line_burst(line), _END_FIELD.search(line)
                if burst is None or end is None:
                    continue
                with contextlib.suppress(HistoryError):
                    found[burst] = parse_timestamp(end.group(1).decode("ascii", "replace"))
    except OSError:
        return {}
    return found


@dataclass(frozen=True, slots=True)
class Position:
    """Where a reader of a manifest stopped: the file (its inode) and the byte after the last
    complete line read."""

    inode: int
    offset: int


@dataclass(frozen=True, slots=True)
class Lines:
    """What a read of a manifest found after a position.

    Attributes:
        summaries: the valid lines, in file order.
        position: where the next read starts (None: there is no manifest).
        restarted: the manifest was replaced (pruned) since the position given: ``summaries``
            are its whole content, and what was read before must be forgotten.
        bad: one message per line that is not a valid summary (skipped).
    """

    summaries: tuple[BurstSummary, ...]
    position: Position | None
    restarted: bool = False
    bad: tuple[str, ...] = ()


def read(run_dir: Path, since: Position | None = None) -> Lines:
    """The complete lines of ``run_dir``'s manifest after ``since`` (all of it when None)."""
    path = run_dir / MANIFEST_FILE
    try:
        with open(path, "rb") as src:
            stat = os.fstat(src.fileno())
            restarted = since is not None and (
                since.inode != stat.st_ino or stat.st_size < since.offset
            )
            offset = 0 if since is None or restarted else since.offset
            src.seek(offset)
            data = src.read()
    except FileNotFoundError:
        return Lines((), None, restarted=since is not None)
    except OSError as exc:
        raise HistoryError(f"{path}: {(exc.strerror or str(exc)).lower()}") from None
    end = data.rfind(b"\n") + 1  # only complete lines
    found, bad = _parsed(run_dir, data[:end].splitlines(), offset)
    return Lines(found, Position(stat.st_ino, offset + end), restarted, bad)


def first(run_dir: Path) -> BurstSummary | None:
    """The first line of ``run_dir``'s manifest (its oldest burst, as lines are appended in
    order); None when there is no manifest or its first line is not a valid summary."""
    try:
        with open(run_dir / MANIFEST_FILE, "rb") as src:
            line = src.readline()
    except OSError:
        return None
    try:
        return BurstSummary.from_line(run_dir.name, line.decode("utf-8"))
    except (HistoryError, UnicodeDecodeError):
        return None


TAIL_BLOCK = 256 * 1024


def tail(run_dir: Path, count: int) -> Lines:
    """The last ``count`` complete lines of ``run_dir``'s manifest (its newest bursts), read
    from the end: a run of 10,000 lines costs what its last ``count`` cost. The position is
    the end of the last complete line."""
    path = run_dir / MANIFEST_FILE
    try:
        with open(path, "rb") as src:
            stat = os.fstat(src.fileno())
            data, start = b"", stat.st_size
            while start > 0 and data.count(b"\n") <= count:
                step = min(TAIL_BLOCK, start)
                start -= step
                src.seek(start)
                data = src.read(step) + data
    except FileNotFoundError:
        return Lines((), None)
    except OSError as exc:
        raise HistoryError(f"{path}: {(exc.strerror or str(exc)).lower()}") from None
    end = data.rfind(b"\n") + 1
    lines = data[:end].split(b"\n")[:-1]
    if start > 0:
        lines = lines[1:]  # the first may be cut
    summaries, bad = _parsed(run_dir, lines[-count:] if count else [], start)
    return Lines(summaries, Position(stat.st_ino, start + end), False, bad)


def _parsed(
    run_dir: Path, lines: list[bytes], offset: int
) -> tuple[tuple[BurstSummary, ...], tuple[str, ...]]:
    found, bad = [], []
    for number, raw in enumerate(lines):
        try:
            found.append(BurstSummary.from_line(run_dir.name, raw.decode("utf-8")))
        except (HistoryError, UnicodeDecodeError) as exc:
            where = run_dir / MANIFEST_FILE
            bad.append(f"{where}: line {number + 1} after byte {offset}: {exc}; skipped")
    return tuple(found), tuple(bad)


@contextlib.contextmanager
def _locked(path: Path) -> Iterator[BinaryIO]:
    """The manifest at ``path`` open for appending under an exclusive lock, on the file the
    path names now (reopened if a rewrite replaced it while we waited), its last line ended."""
    while True:
        out = open(path, "ab+")  # noqa: SIM115 (closed below, or handed out and closed)
        try:
            fcntl.flock(out.fileno(), fcntl.LOCK_EX)
            try:
                same = os.stat(path).st_ino == os.fstat(out.fileno()).st_ino
            except FileNotFoundError:
                same = False
            if not same:
                continue  # replaced while we waited: lock the new one
            size = os.fstat(out.fileno()).st_size
            if size and os.pread(out.fileno(), 1, size - 1) != b"\n":
                out.write(b"\n")  # a torn line (a crash mid-write) stays on its own line
            yield out
            out.flush()
            return
        finally:
            out.close()  # closing releases the lock
