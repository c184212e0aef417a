"""The runs directory: one folder per run, one JSON report per burst of samples.

Layout (``docs/report.md`` documents the JSON)::

    <root>/
        20261122T101500Z-slow-enrich-3f9a/
            report.json        burst 0
            report-1.json      burst 1 (a monitor that took several bursts)
            bursts.jsonl       one line per burst: the manifest (:mod:`bpmon.history.manifest`)

Writes are atomic and exclusive (``atomic.py``): a report is written to a temporary file in the
same folder, synced, then *linked* to its name, which fails if the name exists — so a reader
never sees half a report, a crash leaves no torn file, and of two writers of the same burst
exactly one wins (the other is told, and its file is left as it is). A corrupt file is reported
with its path and left exactly as it is. Runs are listed from their manifests, not by reading
every report.

Retention (:meth:`RunStore.prune`) removes the bursts whose window ended before a cutoff, and a
run folder once all its bursts are gone; temporary files a crash left behind are removed once
they are an hour old (:meth:`RunStore.remove_stale_temp`).
"""

from __future__ import annotations

import contextlib
import logging
import os
import random
import re
import shutil
import tempfile
import time
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path

from bpmon.history import manifest
from bpmon.history.atomic import atomic_write
from bpmon.history.manifest import MANIFEST_FILE, BurstSummary
from bpmon.model.clock import as_utc
from bpmon.model.errors import ConfigError, HistoryError, SaveError, TargetNotFoundError
from bpmon.model.report_json import report_from_json, report_to_json
from bpmon.model.values import Report, RunInfo

REPORT_FILE = "report.json"
"""The report of a run's first burst; later bursts are ``report-<k>.json``."""

LIST_HINT = "`bpmon history` lists the stored runs"
"""How a user sees the runs, quoted when a run cannot be found."""

STALE_TEMP_S = 3600.0
"""A temporary file this old was left by a writer that died: no save takes an hour."""

RUN_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,199}")
"""What a run id looks like (:func:`new_run_id` makes them): letters, digits, ``.``, ``_`` and
``-``, starting with a letter or digit (so no separator and no ``..``), at most 200 characters."""
_BURST_FILE = re.compile(r"report(?:-([1-9][0-9]*))?\.json")
_TEMP_FILE = re.compile(r"\..*\.tmp")
_JOB_SLUG_UNSAFE = re.compile(r"[^A-Za-z0-9_.]+")
_log = logging.getLogger("bpmon.history")


def new_run_id(job: str, now: datetime, rng: random.Random) -> str:
    """A fresh run id, ``20261122T101500Z-<job>-<4 hex>``, that sorts by time.

    Args:
        job: the job name; characters a folder name should not hold become ``-``.
        now: the clock's current time (a naive datetime is taken as UTC).
        rng: the source of the 16 random bits that tell apart runs started in the same second.
    """
    moment = as_utc(now)
    slug = _JOB_SLUG_UNSAFE.sub("-", job).strip("-.")[:40].rstrip("-.") or "job"
    return f"{moment:%Y%m%dT%H%M%SZ}-{slug}-{rng.getrandbits(16):04x}"


def burst_file_name(burst: int) -> str:
    """``report.json`` for burst 0, ``report-<k>.json`` for burst k."""
    if burst < 0:
        raise ConfigError(f"burst = {burst}: expected 0 or more")
    return REPORT_FILE if burst == 0 else f"report-{burst}.json"


class RunStore:
    """The runs directory under ``root`` (created on the first save)."""

    def __init__(self, root: Path) -> None:
        self.root = Path(root)

    # ---------------------------------------------------------------------------------- writing

    def check_writable(self) -> None:
        """Make sure reports can be saved here, before a job starts (the folder is created).

        Raises:
            ConfigError: the folder cannot be created or written (exit code 2).
        """
        try:
            self.root.mkdir(parents=True, exist_ok=True)
            fd, name = tempfile.mkstemp(dir=self.root, prefix=".write-check-", suffix=".tmp")
            os.close(fd)
            os.unlink(name)
        except OSError as exc:
            raise ConfigError(
                f"--runs-dir {self.root}: reports cannot be saved there ({_reason(exc)}); "
                "choose another --runs-dir (or $BPMON_RUNS_DIR) or make it writable"
            ) from None

    def save(self, report: Report, burst: int = 0) -> Path:
        """Store ``report`` as burst ``burst`` of its run, and its line in the run's manifest;
        return the file written.

        Saving the same report again is a no-op; a different report where one is already
        stored (another writer of the same run) raises SaveError and leaves the stored file
        untouched. A manifest line that cannot be written is a warning, not a failure: the
        report is what counts, and a reader adds the missing line.

        Raises:
            SaveError: the report could not be written (the message names the file).
            ConfigError: the run id cannot name a folder.
        """
        run_dir = self.root / _checked_run_id(report.run_id)
        target = run_dir / burst_file_name(burst)
        text = report_to_json(report) + "\n"
        try:
            run_dir.mkdir(parents=True, exist_ok=True)
            if not _create_exclusively(target, text):
                if target.read_bytes() == text.encode("utf-8"):
                    return target
                raise SaveError(
                    f"{target} already holds another report of run {report.run_id}: save it "
                    f"as burst={self._next_burst(run_dir)} or under a new run id; "
                    "the file is left untouched"
                )
        except SaveError:
            raise
        except OSError as exc:
            raise SaveError(f"cannot write {target}: {_reason(exc)}") from None
        try:
            manifest.append(run_dir, BurstSummary.of(report.run_id, burst, report))
        except OSError as exc:
            _log.warning("bpmon: warning: %s: %s", run_dir / MANIFEST_FILE, _reason(exc))
        return target

    def _next_burst(self, run_dir: Path) -> int:
        return max(_bursts(run_dir), default=-1) + 1

    # ---------------------------------------------------------------------------------- reading

    def load(self, run_id_or_path: str | Path, burst: int = 0) -> Report:
        """Read a report from a run id, a run folder or a JSON file.

        ``burst`` picks the burst of a run id or folder; a file path is read as it is.
        Raises TargetNotFoundError when there is no such run or burst, HistoryError when the
        file is unreadable or not a valid report (the file is left untouched).
        """
        path = self._resolve(run_id_or_path)
        if path.is_dir():
            run_dir, path = path, path / burst_file_name(burst)
            if not path.is_file():
                raise TargetNotFoundError(
                    f"run {run_dir.name} has no burst {burst}: {run_dir} holds "
                    f"{_held(_bursts(run_dir))}"
                )
        return read_report(path)

    def bursts(self, run_id_or_path: str | Path) -> list[tuple[int, Report]]:
        """Every burst report of a run, in burst order (a file path is one burst).

        Raises TargetNotFoundError when there is no such run, HistoryError when one of its
        files is unreadable (the file is left untouched).
        """
        path = self._resolve(run_id_or_path)
        if not path.is_dir():
            return [(0, read_report(path))]
        return [(b, read_report(path / burst_file_name(b))) for b in _bursts(path)]

    def _resolve(self, run_id_or_path: str | Path) -> Path:
        """The run folder or file that ``run_id_or_path`` names (store run ids first)."""
        text = str(run_id_or_path)
        if isinstance(run_id_or_path, str) and RUN_ID.fullmatch(text):
            in_store = self.root / text
            if in_store.is_dir():
                return in_store
        path = Path(run_id_or_path)
        try:
            if path.exists():
                return path
        except OSError as exc:
            raise TargetNotFoundError(f"run {text[:80]!r}: {exc.strerror}; {LIST_HINT}") from None
        raise TargetNotFoundError(f"no run {text!r} in {self.root}{self._latest()}; {LIST_HINT}")

    def _latest(self, count: int = 3) -> str:
        """`` (latest: a, b, c)`` from the folder names, or `` (no runs stored yet)``."""
        names = sorted((p.name for p in self._run_dirs() if _bursts(p)), reverse=True)
        if not names:
            return " (no runs stored yet)"
        return " (latest: " + ", ".join(names[:count]) + ")"

    def _run_dirs(self) -> list[Path]:
        try:
            entries = list(self.root.iterdir())
        except (FileNotFoundError, NotADirectoryError):
            return []
        except OSError as exc:
            raise HistoryError(f"cannot list {self.root}: {_reason(exc)}") from None
        return [p for p in entries if p.is_dir() and not p.name.startswith(".")]

    def list_runs(self, on_corrupt: Callable[[HistoryError], None] | None = None) -> list[RunInfo]:
        """Every stored run, newest first, from the run folders' manifests.

        A run is described by its first stored burst; one whose first burst has no manifest
        line (a run saved before manifests) has that report read instead, and a run whose
        report cannot be read is skipped and passed to ``on_corrupt`` (its error names the
        file). Folders without a report are not runs.
        """
        runs: list[RunInfo] = []
        for run_dir in self._run_dirs():
            bursts = _bursts(run_dir)
            if not bursts:
                continue
            try:
                first = self.summary(run_dir, bursts[0])
            except HistoryError as exc:
                if on_corrupt is not None:
                    on_corrupt(exc)
                continue
            runs.append(_run_info(run_dir, first, bursts))
        runs.sort(key=lambda r: (r.start, r.run_id), reverse=True)
        return runs

    def summary(self, run_dir: Path, burst: int) -> BurstSummary:
        """Burst ``burst`` of the run in ``run_dir`` in short: its manifest line, else its
        report read (HistoryError when it cannot be)."""
        oldest = manifest.first(run_dir)
        if oldest is not None and oldest.burst == burst:
            return oldest
        if oldest is not None:
            for line in manifest.read(run_dir).summaries:
                if line.burst == burst:
                    return line
        report = read_report(run_dir / burst_file_name(burst))
        return BurstSummary.of(run_dir.name, burst, report)

    # -------------------------------------------------------------------------------- retention

    def prune(self, before: datetime, *, dry_run: bool = False) -> tuple[int, int]:
        """Remove every burst whose window ended before ``before``, and every run left empty.

        A run's manifest is rewritten without the removed bursts; a burst that can be neither
        found in the manifest nor read is judged by its file's modification time. Stale
        temporary files go too. Returns (runs removed, bursts removed): with ``dry_run``, what
        would be, and nothing is touched.
        """
        cutoff = as_utc(before)
        runs_removed = bursts_removed = 0
        for run_dir in self._run_dirs():
            bursts = _bursts(run_dir)
            if not bursts:
                continue
            ends = _burst_ends(run_dir, bursts)
            old = [b for b in bursts if ends[b] < cutoff]
            if dry_run:
                runs_removed += len(old) == len(bursts)
                bursts_removed += len(old)
                continue
            if len(old) == len(bursts):
                shutil.rmtree(run_dir, ignore_errors=True)
                runs_removed += 1
                bursts_removed += len(old)
                continue
            for b in old:
                with contextlib.suppress(FileNotFoundError):
                    (run_dir / burst_file_name(b)).unlink()
            if old:
                manifest.rewrite(run_dir, _not_in(frozenset(old)))
                bursts_removed += len(old)
        if not dry_run:
            self.remove_stale_temp()
        return runs_removed, bursts_removed

    def remove_stale_temp(self, older_than_s: float = STALE_TEMP_S) -> int:
        """Delete the temporary files that dead writers left in the run folders; returns how
        many. A file younger than ``older_than_s`` may still be written: it is left."""
        horizon = time.time() - older_than_s
        removed = 0
        for run_dir in self._run_dirs():
            with contextlib.suppress(OSError):
                for entry in os.scandir(run_dir):
                    if _TEMP_FILE.fullmatch(entry.name) and entry.stat().st_mtime < horizon:
                        with contextlib.suppress(FileNotFoundError):
                            os.unlink(entry.path)
                            removed += 1
        return removed


def read_report(path: Path) -> Report:
    """Read one report file; HistoryError names the file and promises it was left untouched."""
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise TargetNotFoundError(f"no report file {path}; {LIST_HINT}") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise HistoryError(f"{path}: {_reason(exc)}; the file is left untouched") from None
    try:
        return report_from_json(text)
    except HistoryError as exc:
        raise HistoryError(f"{path}: {exc}; the file is left untouched") from None


def _run_info(run_dir: Path, first: BurstSummary, bursts: list[int]) -> RunInfo:
    return RunInfo(
        run_id=run_dir.name,
        path=run_dir,
        job=first.job,
        source=first.source,
        start=first.start or first.time,
        end=first.time,
        bursts=len(bursts),
        worst_level=first.worst_level,
        root_causes=first.root_causes,
        last_burst=bursts[-1],
    )


def _burst_ends(run_dir: Path, bursts: list[int]) -> dict[int, datetime]:
    """When each burst's window ended: its manifest line, its report, else its file's time."""
    ends = manifest.ends(run_dir)
    for b in bursts:
        if b in ends:
            continue
        path = run_dir / burst_file_name(b)
        try:
            ends[b] = read_report(path).window.end
        except (HistoryError, TargetNotFoundError):
            with contextlib.suppress(OSError):
                ends[b] = datetime.fromtimestamp(path.stat().st_mtime, UTC)
    return {b: ends.get(b, datetime.max.replace(tzinfo=UTC)) for b in bursts}


def _not_in(gone: frozenset[int]) -> Callable[[int], bool]:
    """Keeps the manifest lines of bursts not in ``gone``."""
    return lambda burst: burst not in gone


def _held(bursts: list[int]) -> str:
    """What a run folder holds, in a few words: ``report.json, report-1.json`` or a range."""
    if not bursts:
        return "no report"
    if len(bursts) <= 4:
        return ", ".join(burst_file_name(b) for b in bursts)
    return f"{len(bursts)} bursts, {bursts[0]} to {bursts[-1]}"


def _bursts(run_dir: Path) -> list[int]:
    """The burst numbers stored in ``run_dir``, ascending (none when it cannot be listed)."""
    found = []
    try:
        with os.scandir(run_dir) as entries:
            for entry in entries:
                match = _BURST_FILE.fullmatch(entry.name)
                if match:
                    found.append(int(match.group(1) or 0))
    except OSError:
        return []
    return sorted(found)


def burst_numbers(run_dir: Path) -> list[int]:
    """The burst numbers stored in the run folder ``run_dir``, ascending."""
    return _bursts(run_dir)


def _checked_run_id(run_id: str) -> str:
    if not RUN_ID.fullmatch(run_id):
        raise ConfigError(
            f"run_id = {run_id!r} cannot name a run folder: use letters, digits, '.', '_' and "
            "'-', starting with a letter or digit (new_run_id makes one)"
        )
    return run_id


def _create_exclusively(target: Path, text: str) -> bool:
    """Write ``text`` as ``target`` unless it exists; False (nothing written) when it does."""
    try:
        with atomic_write(target, exclusive=True) as out:
            out.write(text.encode("utf-8"))
    except FileExistsError:
        return False
    return True


def _reason(exc: BaseException) -> str:
    """An OS or decoding error as a short phrase, without the path it may repeat."""
    if isinstance(exc, OSError) and exc.strerror:
        return exc.strerror.lower()
    return str(exc).splitlines()[0] if str(exc) else type(exc).__name__
