"""``bpmon history import DIR``: the dataset (re)built from stored report.json folders.

The run folders are the source of truth and the dataset an index over them, so importing is how
a history is started for runs made before it existed, copied from another machine, or completed
after a writer was killed between saving a report and appending it. Importing is idempotent: a
report whose window is already in the dataset (in a part of its own or in a compacted part) is
counted as present and nothing is written. Appends compact as they go (``compaction.py``), so
importing thousands of reports leaves a few files per job-day, not thousands.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from bpmon.history.runs import REPORT_FILE, RunStore
from bpmon.history.store import HistoryStore
from bpmon.model.errors import HistoryError, TargetNotFoundError


@dataclass(frozen=True, slots=True)
class ImportResult:
    """What an import did.

    Attributes:
        runs: run folders read.
        added: reports appended to the dataset.
        present: reports already in it (nothing written).
        skipped: one line per unreadable run folder or report file (each left as it is), or
            per report with a value the history cannot hold.
    """

    runs: int
    added: int
    present: int
    skipped: tuple[str, ...]


def import_runs(
    history: HistoryStore, source: Path, progress: Callable[[str], None] | None = None
) -> ImportResult:
    """Append every report of every run folder in ``source`` to ``history``.

    Raises:
        TargetNotFoundError: ``source`` is not a folder.
        MissingDependencyError: pyarrow is not installed.
    """
    source = Path(source)
    if not source.is_dir():
        raise TargetNotFoundError(
            f"{source} is not a folder of runs: give the runs directory (a folder of "
            f"RUN_ID/{REPORT_FILE} folders, default bpmon-runs)"
        )
    runs = RunStore(source)
    folders = sorted(p for p in source.iterdir() if p.is_dir() and (p / REPORT_FILE).is_file())
    added = present = 0
    skipped: list[str] = []
    for number, folder in enumerate(folders, start=1):
        try:
            bursts = runs.bursts(folder)
        except (HistoryError, TargetNotFoundError) as exc:
            skipped.append(str(exc))
            continue
        for burst, report in bursts:
            try:
                if history.append(report, burst):
                    added += 1
                else:
                    present += 1
            except OSError as exc:
                raise HistoryError(
                    f"cannot write to {history.root}: {exc.strerror or exc}"
                ) from None
            except (ValueError, TypeError, ArithmeticError, NotImplementedError) as exc:
                # pyarrow refused a value (ArrowInvalid is a ValueError): this report only
                skipped.append(
                    f"{folder} burst {burst}: a value does not fit the history's schema "
                    f"({type(exc).__name__}: {(str(exc).splitlines() or [''])[0][:160]}); not added"
                )
        if progress is not None and number % 100 == 0:
            progress(f"imported {number:,} of {len(folders):,} runs")
    return ImportResult(len(folders), added, present, tuple(skipped))
