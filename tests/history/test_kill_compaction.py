"""A compaction or a prune killed with SIGKILL at any step: no window lost, none read twice.

A real process compacts (or prunes) a real dataset and is killed with SIGKILL just before its
k-th call that changes the file system (rename, replace, unlink, rmdir, fsync): k = 1, 2, ...
until the process runs to its end, so every point between two of its steps is a point it dies
at. After each kill the dataset must read every window exactly once (pyarrow), an import of the
run folders must add nothing, and the next compaction (or prune) must finish the work: one part
per table, no leftover.
"""

from __future__ import annotations

import shutil
import signal
import subprocess
import sys
import textwrap
import time
from collections.abc import Callable
from datetime import timedelta
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from bpmon.history.compaction import compact
from bpmon.history.importer import import_runs
from bpmon.history.retention import prune_days
from bpmon.history.runs import RunStore
from bpmon.history.store import HistoryStore
from bpmon.model.values import Report
from tests.history.on_disk import files

Exactly = Callable[[HistoryStore, set[tuple[str, int]]], None]
RUN = "20261122T101500Z-enrich-0001"

KILLED_AT = textwrap.dedent(
    """
    import os, signal, sys
    from datetime import date
    from pathlib import Path

    import pyarrow.parquet as pq

    from bpmon.history.compaction import compact
    from bpmon.history.retention import prune_days

    target, calls = int(sys.argv[3]), [0]

    def killing(real):
        def call(*args, **kwargs):
            calls[0] += 1
            if calls[0] == target:
                os.kill(os.getpid(), signal.SIGKILL)
            return real(*args, **kwargs)
        return call

    for name in ("rename", "replace", "unlink", "rmdir", "fsync"):
        setattr(os, name, killing(getattr(os, name)))
    root = Path(sys.argv[2])
    if sys.argv[1] == "compact":
        compact(pq, root, today=None)
    else:
        prune_days(root, date.fromisoformat(sys.argv[4]))
    print(calls[0])
    """
)


def killed_at(step: int, *args: str) -> subprocess.CompletedProcess[str]:
    """Run the compaction (or prune) of ``args``, killed before its ``step``-th change."""
    command = [sys.executable, "-c", KILLED_AT, args[0], args[1], str(step), *args[2:]]
    return subprocess.run(command, capture_output=True, text=True, timeout=120, check=False)


def every_kill(
    base: Path, command: str, *extra: str
) -> tuple[int, list[tuple[Path, subprocess.CompletedProcess[str]]]]:
    """Each kill point on its own copy of the runs folder ``base``; the steps of a full run."""
    killed = []
    for step in range(1, 200):
        copy = base.parent / f"killed-{command}-{step}"
        shutil.copytree(base, copy)
        done = killed_at(step, command, str(copy / "history"), *extra)
        if done.returncode == 0:
            return int(done.stdout), killed
        assert done.returncode == -signal.SIGKILL, done.stderr
        killed.append((copy, done))
    raise AssertionError("the process never ran to its end")


@pytest.mark.slow
def test_a_compaction_killed_at_any_step_loses_and_repeats_no_window(
    tmp_path: Path, make_report: Callable[..., Report], exactly: Exactly
) -> None:
    base = tmp_path / "runs"
    runs, store = RunStore(base), HistoryStore.in_runs_dir(base, compact=False)
    for burst in range(18):
        runs.save(make_report(burst), burst)
        store.append(make_report(burst), burst)
        if burst == 9:  # a compacted part and ten parts of single appends: a merge of both
            compact(pq, store.root, today=None)
    windows = {(RUN, b) for b in range(18)}

    steps, killed = every_kill(base, "compact")
    assert steps >= 2 + 4 + 9 + 5  # 2 renames, 4 syncs, the 9 + 5 replaced parts deleted
    assert len(killed) == steps
    for copy, _ in killed:
        history = HistoryStore.in_runs_dir(copy, compact=False)
        exactly(history, windows)
        imported = import_runs(history, copy)
        assert (imported.added, imported.present) == (0, 18)
        later = compact(pq, history.root, today=None, now=time.time() + 3600)
        assert later.problems == []
        assert [p.name.startswith("part-compacted-") for p in files(history.root / "subtasks")] == [
            True
        ]
        assert len(files(history.root / "causes")) == 1  # no leftover, temporary or replaced
        exactly(history, windows)


@pytest.mark.slow
def test_a_prune_killed_at_any_step_keeps_the_days_it_keeps(
    tmp_path: Path, make_report: Callable[..., Report], exactly: Exactly
) -> None:
    base = tmp_path / "runs"
    store = HistoryStore.in_runs_dir(base, compact=False)
    reports = [make_report(burst, every=timedelta(hours=8)) for burst in range(12)]
    for burst, report in enumerate(reports[:8]):  # compacted days...
        store.append(report, burst)
    compact(pq, store.root, today=None)
    for burst, report in enumerate(reports[8:], start=8):  # ...and parts of single appends
        store.append(report, burst)
    days = sorted({r.window.start.date() for r in reports})
    assert len(days) == 5
    keep = days[2]
    kept = {(RUN, b) for b, r in enumerate(reports) if r.window.start.date() >= keep}

    steps, killed = every_kill(base, "prune", keep.isoformat())
    assert steps >= 4  # two days, two tables: a rename each
    for copy, _ in killed:
        history = HistoryStore.in_runs_dir(copy, compact=False)
        subtasks = history.read("subtasks")
        seen = list(zip(subtasks["run_id"].to_pylist(), subtasks["burst"].to_pylist(), strict=True))
        assert kept <= set(seen)  # every kept window, whole...
        assert len(seen) == 3 * len(set(seen))  # ...and none twice, a pruned day whole or gone
        prune_days(history.root, keep)
        exactly(history, kept)
        assert not (history.root / ".trash").exists()
