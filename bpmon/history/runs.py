"""The runs directory: one folder per run, one JSON report per burst of samples.

Layout (``spec/report.md`` documents the JSON)::

    <root>/
        20261122T101500Z-slow-enrich-3f9a/
            report.json        burst 0
            report-1.json      burst 1 (a monitor that took several bursts)

Writes are atomic (a temporary file in the same folder, then ``os.replace``), so a reader never
sees half a report and a crash leaves no torn file. A stored report is never overwritten by a
different one, and a corrupt file is reported with its path and left exactly as it is.
"""

from __future__ import annotations

import contextlib
import os
import random
import re
import tempfile
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path

from bpmon.errors import ConfigError, HistoryError, TargetNotFoundError
from bpmon.model import Report, RunInfo, worst_level
from bpmon.report_json import report_from_json, report_to_json

REPORT_FILE = "report.json"
"""The report of a run's first burst; later bursts are ``report-<k>.json``."""

LIST_HINT = "`bpmon history` lists the stored runs"
"""How a user sees the runs, quoted when a run cannot be found."""

_RUN_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]*")
_BURST_FILE = re.compile(r"report(?:-([1-9][0-9]*))?\.json")
_JOB_SLUG_UNSAFE = re.compile(r"[^A-Za-z0-9_.]+")


def new_run_id(job: str, now: datetime, rng: random.Random) -> str:
    """A fresh run id, ``20261122T101500Z-<job>-<4 hex>``, that sorts by time.

    Args:
        job: the job name; characters a folder name should not hold become ``-``.
        now: the clock's current time (a naive datetime is taken as UTC).
        rng: the source of the 16 random bits that tell apart runs started in the same second.
    """
    moment = now.replace(tzinfo=UTC) if now.tzinfo is None else now.astimezone(UTC)
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

    def save(self, report: Report, burst: int = 0) -> Path:
        """Store ``report`` as burst ``burst`` of its run; return the file written.

        Saving the same report again is a no-op; a different report where one is already
        stored raises HistoryError (the stored file is left untouched).
        """
        run_dir = self.root / _checked_run_id(report.run_id)
        target = run_dir / burst_file_name(burst)
        text = report_to_json(report) + "\n"
        try:
            run_dir.mkdir(parents=True, exist_ok=True)
            if target.exists():
                if target.read_bytes() == text.encode("utf-8"):
                    return target
                raise HistoryError(
                    f"{target} already holds another report of run {report.run_id}: save it "
                    f"as burst={self._next_burst(run_dir)} or under a new run id; "
                    "the file is left untouched"
                )
            _write_atomically(target, text)
        except OSError as exc:
            raise HistoryError(f"cannot write {target}: {_reason(exc)}") from None
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
                found = ", ".join(burst_file_name(b) for b in _bursts(run_dir)) or "no report"
                raise TargetNotFoundError(
                    f"run {run_dir.name} has no burst {burst}: {run_dir} holds {found}"
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
        if isinstance(run_id_or_path, str) and _RUN_ID.fullmatch(text):
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
        names = sorted(
            (p.name for p in self._run_dirs() if (p / REPORT_FILE).is_file()), reverse=True
        )
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
        """Every stored run, newest first.

        A run whose ``report.json`` cannot be read is skipped and passed to ``on_corrupt``
        (its error names the file); folders without a ``report.json`` are not runs.
        """
        runs: list[RunInfo] = []
        for run_dir in self._run_dirs():
            if not (run_dir / REPORT_FILE).is_file():
                continue
            try:
                report = read_report(run_dir / REPORT_FILE)
            except HistoryError as exc:
                if on_corrupt is not None:
                    on_corrupt(exc)
                continue
            runs.append(_run_info(run_dir, report))
        runs.sort(key=lambda r: (r.start, r.run_id), reverse=True)
        return runs


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


def _run_info(run_dir: Path, report: Report) -> RunInfo:
    return RunInfo(
        run_id=run_dir.name,
        path=run_dir,
        job=report.job,
        source=report.source,
        start=report.window.start,
        end=report.window.end,
        bursts=len(_bursts(run_dir)),
        worst_level=worst_level(report),
        root_causes=report.root_causes,
    )


def _bursts(run_dir: Path) -> list[int]:
    """The burst numbers stored in ``run_dir``, ascending."""
    found = []
    for p in run_dir.iterdir():
        match = _BURST_FILE.fullmatch(p.name)
        if match:
            found.append(int(match.group(1) or 0))
    return sorted(found)


def _checked_run_id(run_id: str) -> str:
    if not _RUN_ID.fullmatch(run_id):
        raise ConfigError(
            f"run_id = {run_id!r} cannot name a run folder: use letters, digits, '.', '_' and "
            "'-', starting with a letter or digit (new_run_id makes one)"
        )
    return run_id


def _write_atomically(target: Path, text: str) -> None:
    """Write ``text`` to a temporary file beside ``target``, sync it, then rename it over."""
    fd, temp_name = tempfile.mkstemp(dir=target.parent, prefix=f".{target.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as out:
            out.write(text)
            out.flush()
            os.fsync(out.fileno())
        os.replace(temp_name, target)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(temp_name)
        raise
    sync_folder(target.parent)


def sync_folder(folder: Path) -> None:
    """Make the rename durable (best effort: not every platform can sync a folder)."""
    try:
        fd = os.open(folder, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


def _reason(exc: BaseException) -> str:
    """An OS or decoding error as a short phrase, without the path it may repeat."""
    if isinstance(exc, OSError) and exc.strerror:
        return exc.strerror.lower()
    return str(exc).splitlines()[0] if str(exc) else type(exc).__name__
