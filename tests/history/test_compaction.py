"""Compaction: a watch's many small parts become a few, and every window is read exactly once.

The bursts appended are those of a watch (``make_report``): three subtask rows per window, one
cause row in odd bursts. Every check counts the rows per window actually read back with pyarrow
against the windows appended.
"""

from __future__ import annotations

import logging
import os
import time
from collections.abc import Callable
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from bpmon.history.compaction import compact
from bpmon.history.importer import import_runs
from bpmon.history.runs import RunStore
from bpmon.history.store import HistoryStore
from bpmon.model.values import Report, SubtaskStatus, VertexStatus
from bpmon.service.facade import Settings
from bpmon.service.history import compact_history, synthesize_history
from tests.history.on_disk import files

RUN = "20261122T101500Z-enrich-0001"
Exactly = Callable[[HistoryStore, set[tuple[str, int]]], None]
ROWS = 3  # subtask rows of one window of make_report


def test_a_watch_at_a_burst_a_second_keeps_a_bounded_number_of_files(
    tmp_path: Path, make_report: Callable[..., Report], exactly: Exactly
) -> None:
    store = HistoryStore(tmp_path)
    most = 0
    for burst in range(600):  # ten minutes of a watch at a burst a second
        assert store.append(make_report(burst), burst)
        most = max(most, len(files(tmp_path / "subtasks")))
    assert most <= 40  # 31 single appends, 7 parts of 32 windows, 2 of 256: never 600
    compacted = [p for p in files(tmp_path / "subtasks") if "compacted" in p.name]
    assert 2 <= len(compacted) <= 9  # merged again in tiers, not one part per 32 windows
    exactly(store, {(RUN, b) for b in range(600)})


def test_compact_merges_every_job_day_into_one_part_per_table(
    tmp_path: Path, make_report: Callable[..., Report], exactly: Exactly
) -> None:
    store = HistoryStore(tmp_path, compact=False)
    windows = set()
    for job in ("a", "b"):
        for burst in range(30):  # an hour apart from 10:15: two days
            run = f"20261122T101500Z-{job}-0001"
            store.append(make_report(burst, run_id=run, job=job, every=timedelta(hours=1)), burst)
            windows.add((run, burst))
    before = len(files(tmp_path))
    assert before == 2 * 30 + 2 * 15  # a subtasks part per window, a causes part per cause
    done = compact(pq, tmp_path, today=None)
    assert done.problems == [] and not done.busy
    assert (done.files_before, done.files_after) == (before, 2 * 2 * 2)  # 2 jobs x 2 days
    for folder in (tmp_path / "subtasks").glob("job=*/date=*"):
        assert [p.name.startswith("part-compacted-") for p in folder.iterdir()] == [True]
    exactly(store, windows)
    again = compact(pq, tmp_path, today=None)
    assert (again.days, again.merged, again.files_after) == (0, 0, 8)  # nothing left to do


def test_an_append_or_import_of_a_compacted_window_writes_nothing(
    tmp_path: Path, make_report: Callable[..., Report], exactly: Exactly
) -> None:
    runs = RunStore(tmp_path)
    store = HistoryStore.in_runs_dir(tmp_path)
    for burst in range(40):
        runs.save(make_report(burst), burst)
        store.append(make_report(burst), burst)
    compact(pq, store.root, today=None)
    listed = {p: p.stat().st_mtime_ns for p in files(store.root / "subtasks")}
    assert not store.append(make_report(7), 7)
    assert not HistoryStore.in_runs_dir(tmp_path).append(make_report(33), 33)  # a new process
    done = import_runs(store, tmp_path)
    assert (done.added, done.present, done.skipped) == (0, 40, ())
    assert {p: p.stat().st_mtime_ns for p in files(store.root / "subtasks")} == listed
    exactly(store, {(RUN, b) for b in range(40)})


def test_a_compacted_day_that_grows_compacts_again(
    tmp_path: Path, make_report: Callable[..., Report], exactly: Exactly
) -> None:
    store = HistoryStore(tmp_path, compact=False)
    for burst in range(10):
        store.append(make_report(burst), burst)
    compact(pq, tmp_path, today=None)
    for burst in range(10, 25):
        store.append(make_report(burst), burst)
    exactly(store, {(RUN, b) for b in range(25)})
    done = compact(pq, tmp_path, today=None)
    assert (done.days, done.merged, done.files_after) == (1, 16, 2)
    exactly(store, {(RUN, b) for b in range(25)})


def test_replaced_parts_wait_for_readers_and_are_never_read_twice(
    tmp_path: Path, make_report: Callable[..., Report], exactly: Exactly
) -> None:
    store = HistoryStore(tmp_path, compact=False)
    for burst in range(12):
        store.append(make_report(burst), burst)
    with store.reading() as scan:
        done = compact(pq, tmp_path, today=None)
        assert done.deleted == 0 and done.deferred == 12 + 6
        assert all(Path(p).exists() for p in scan.paths("subtasks"))  # what the reader listed
        assert store.read("subtasks", scan).num_rows == 12 * ROWS
        assert len(store.scan().subtasks) == 1 and len(store.scan().replaced) == 18
        exactly(store, {(RUN, b) for b in range(12)})
    later = compact(pq, tmp_path, today=None)
    assert (later.deleted, later.deferred, later.files_after) == (18, 0, 2)
    exactly(store, {(RUN, b) for b in range(12)})


def test_leftover_temporary_files_go_and_a_live_writers_stays(
    tmp_path: Path, make_report: Callable[..., Report], exactly: Exactly
) -> None:
    store = HistoryStore(tmp_path)
    store.append(make_report(1), 1)
    folder = next((tmp_path / "causes").glob("job=*/date=*"))
    old = folder / ".part-x-3.parquet.k2j4.tmp"
    live = folder / ".part-x-4.parquet.q8w1.tmp"
    for path in (old, live):
        path.write_bytes(b"PAR1 half a part")
    an_hour_ago = time.time() - 3600
    os.utime(old, (an_hour_ago, an_hour_ago))
    done = compact(pq, tmp_path, today=None)
    assert done.temporary == 1
    assert not old.exists() and live.exists()
    assert any(str(live) in line and "temporary" in line for line in store.scan().skipped)
    exactly(store, {(RUN, 1)})


def test_a_part_sharing_only_some_windows_with_a_compacted_one_is_named(
    tmp_path: Path, make_report: Callable[..., Report], exactly: Exactly
) -> None:
    store = HistoryStore(tmp_path, compact=False)
    for burst in range(4):
        store.append(make_report(burst), burst)
    compact(pq, tmp_path, today=None)
    stray = HistoryStore(tmp_path / "elsewhere", compact=False)
    for burst in (2, 4):  # one window the compacted part has, one it has not
        stray.append(make_report(burst), burst)
    rows = stray.read("subtasks")
    assert rows.num_rows == 2 * ROWS
    odd = store.write_part("subtasks", "enrich/eu", make_report(0).window.start.date(), "odd", rows)
    scan = store.scan()
    assert any(str(odd) in line and "some windows" in line for line in scan.skipped)
    exactly(store, {(RUN, b) for b in range(4)})


def test_an_appending_writer_leaves_a_big_merge_to_maintenance(
    tmp_path: Path, make_report: Callable[..., Report]
) -> None:
    wide = VertexStatus(
        "map", 1000, "OK", 0.0, subtasks=tuple(SubtaskStatus(i) for i in range(1000))
    )
    store = HistoryStore(tmp_path)
    for burst in range(256):  # eight parts of 32 windows x 1,000 rows: 256,000 rows to merge
        store.append(replace(make_report(burst), vertices=(wide,), root_causes=()), burst)
    parts = store.scan().subtasks
    assert [p.compacted for p in parts] == [True] * 8  # tier 1 merged as it went, not tier 2
    done = compact(pq, tmp_path, today=parts[0].day)  # what maintain does every hour
    assert (done.merged, done.problems) == (8, [])
    assert store.read("subtasks").num_rows == 256 * 1000


def test_an_append_whose_compaction_fails_still_succeeds_and_says_so_once(
    tmp_path: Path, make_report: Callable[..., Report], caplog: pytest.LogCaptureFixture
) -> None:
    store = HistoryStore(tmp_path)
    store.append(make_report(0), 0)
    (part,) = (tmp_path / "subtasks").glob("job=*/date=*/part-*.parquet")
    data = bytearray(part.read_bytes())
    data[4:100] = bytes(96)  # its pages torn, its footer intact: listed, not readable
    part.write_bytes(bytes(data))
    with caplog.at_level(logging.WARNING, logger="bpmon.history"):
        for burst in range(1, 48):  # compactions due at the 32nd and 40th parts: both fail
            assert store.append(make_report(burst), burst)
    (record,) = caplog.records
    message = record.getMessage()
    assert "was not compacted" in message and "bpmon history compact" in message
    assert "\n" not in message
    assert len(list(part.parent.iterdir())) == 48  # every part still there, none merged


def test_a_synthetic_history_written_again_after_compaction_writes_nothing(
    tmp_path: Path,
) -> None:
    settings = Settings(runs_dir=tmp_path, now=lambda: datetime(2026, 11, 22, 10, 15, tzinfo=UTC))
    first = synthesize_history(settings, runs=4, jobs=2)
    assert (first.runs, first.present) == (8, 0)
    compact_history(settings)
    before = files(tmp_path / "history")
    again = synthesize_history(settings, runs=4, jobs=2)
    assert again.present == 8  # found in the compacted parts that replaced its own
    assert files(tmp_path / "history") == before
