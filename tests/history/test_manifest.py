"""A run folder's manifest: whole lines under concurrent writers, a rewrite that loses no append,
a reader that takes complete lines from where it stopped, and the index that stands on it."""

from __future__ import annotations

import multiprocessing
import os
import time
from datetime import timedelta
from pathlib import Path

import pytest

from bpmon.history import manifest
from bpmon.history.manifest import MANIFEST_FILE, BurstSummary
from bpmon.history.runs import RunStore
from bpmon.model.errors import SaveError
from bpmon.model.values import Report
from bpmon.service.facade import Settings
from bpmon.service.stored import RECENT_BURSTS, StoredJob, StoredJobs
from tests.history.reports import T0, run_report


def report(run_id: str, k: int, job: str = "orders") -> Report:
    """Burst ``k`` of ``run_id``: its window starts ``10 * k`` s after T0."""
    return run_report(run_id, T0 + timedelta(seconds=10 * k), job)


def summary(run_id: str, k: int) -> BurstSummary:
    return BurstSummary.of(run_id, k, report(run_id, k))


def _append_many(run_dir: str, start: int, count: int) -> None:
    for k in range(start, start + count):
        manifest.append(Path(run_dir), summary(Path(run_dir).name, k))


def test_a_line_reads_back_as_the_summary_it_was() -> None:
    original = summary("r1", 3)
    line = original.to_line()
    assert line.endswith("\n") and "\n" not in line[:-1]
    assert BurstSummary.from_line("r1", line) == original
    assert original.worst_level == "HIGH"


@pytest.mark.slow
def test_concurrent_writers_and_a_rewrite_lose_no_line_and_tear_none(tmp_path: Path) -> None:
    run_dir = tmp_path / "r1"
    run_dir.mkdir()
    context = multiprocessing.get_context("spawn")
    writers = [
        context.Process(target=_append_many, args=(str(run_dir), n * 1000, 300)) for n in range(3)
    ]
    for w in writers:
        w.start()
    dropped = 0
    while any(w.is_alive() for w in writers):  # rewrite (drop nothing) while they append
        dropped += manifest.rewrite(run_dir, lambda burst: True)
    for w in writers:
        w.join(60)
        assert w.exitcode == 0
    lines = manifest.read(run_dir)
    assert lines.bad == () and dropped == 0
    expected = {n * 1000 + k for n in range(3) for k in range(300)}
    assert sorted(s.burst for s in lines.summaries) == sorted(expected)


def test_a_reader_takes_complete_lines_from_where_it_stopped(tmp_path: Path) -> None:
    run_dir = tmp_path / "r1"
    run_dir.mkdir()
    manifest.append(run_dir, summary("r1", 0))
    first = manifest.read(run_dir)
    assert [s.burst for s in first.summaries] == [0]
    half = summary("r1", 1).to_line()[:40]
    with open(run_dir / MANIFEST_FILE, "a", encoding="utf-8") as out:
        out.write(half)  # a writer mid-line (or killed there)
    assert manifest.read(run_dir, first.position).summaries == ()
    manifest.append(run_dir, summary("r1", 2))  # the torn line is ended, then this one
    after = manifest.read(run_dir, first.position)
    assert [s.burst for s in after.summaries] == [2]
    assert len(after.bad) == 1 and "skipped" in after.bad[0]
    manifest.rewrite(run_dir, lambda burst: burst != 0)  # a prune replaces the file
    again = manifest.read(run_dir, after.position)
    assert again.restarted and [s.burst for s in again.summaries] == [2]


def test_the_index_adds_the_lines_of_reports_saved_without_one(tmp_path: Path) -> None:
    store = RunStore(tmp_path)
    for k in range(3):
        store.save(report("20261122T101500Z-orders-0001", k), burst=k)
    run_dir = tmp_path / "20261122T101500Z-orders-0001"
    (run_dir / MANIFEST_FILE).unlink()  # saved before manifests existed
    stored = StoredJobs(Settings(runs_dir=tmp_path), ttl_s=0)
    job = stored.jobs()["orders"]
    assert [s.burst for s in job.recent_bursts] == [0, 1, 2]
    assert job.latest == report("20261122T101500Z-orders-0001", 2)
    assert [s.burst for s in manifest.read(run_dir).summaries] == [0, 1, 2]  # kept for next time
    restarted = StoredJobs(Settings(runs_dir=tmp_path), ttl_s=0)
    assert restarted.jobs()["orders"].recent_bursts == job.recent_bursts


def test_the_index_keeps_a_bounded_window_of_a_long_run(tmp_path: Path) -> None:
    run_id = "20261122T101500Z-orders-0002"
    run_dir = tmp_path / run_id
    run_dir.mkdir()
    total = RECENT_BURSTS * 2 + 7
    with open(run_dir / MANIFEST_FILE, "w", encoding="utf-8") as out:
        for k in range(total - 1):  # a long run's lines (its older reports pruned)...
            out.write(summary(run_id, k).to_line())
    RunStore(tmp_path).save(report(run_id, total - 1), burst=total - 1)  # ...and its newest
    stored = StoredJobs(Settings(runs_dir=tmp_path), ttl_s=0)
    recent = stored.jobs()["orders"].recent_bursts
    assert len(recent) == RECENT_BURSTS
    assert [s.burst for s in recent] == list(range(total - RECENT_BURSTS, total))
    assert stored.errors == ()


def test_prune_removes_old_bursts_their_lines_and_empty_runs(tmp_path: Path) -> None:
    store = RunStore(tmp_path)
    for k in range(6):
        store.save(report("a-long", k), burst=k)
    store.save(report("b-old", 0))
    old_temp = tmp_path / "a-long" / ".report-9.json.x.tmp"
    old_temp.write_text("left by a crash")
    os.utime(old_temp, (0, 0))
    fresh_temp = tmp_path / "a-long" / ".report-10.json.y.tmp"
    fresh_temp.write_text("a writer at work")
    cutoff = report("a-long", 3).window.end  # bursts 0..2 ended before it
    assert store.prune(cutoff - timedelta(microseconds=1)) == (1, 4)
    assert not (tmp_path / "b-old").exists()
    assert sorted(os.listdir(tmp_path / "a-long")) == sorted(
        [".report-10.json.y.tmp", MANIFEST_FILE, "report-3.json", "report-4.json", "report-5.json"]
    )
    assert [s.burst for s in manifest.read(tmp_path / "a-long").summaries] == [3, 4, 5]
    [run] = store.list_runs()
    assert (run.run_id, run.bursts, run.last_burst, run.start) == (
        "a-long",
        3,
        5,
        report("a-long", 3).window.start,
    )
    assert store.prune(T0 - timedelta(days=1)) == (0, 0)


def _save_as(root: str, job: str, go: object, results: object) -> None:
    go.wait(30)  # type: ignore[attr-defined]
    try:
        RunStore(Path(root)).save(report("r1", 0, job=job))
        results.put((job, "saved"))  # type: ignore[attr-defined]
    except SaveError as exc:
        results.put((job, str(exc)))  # type: ignore[attr-defined]


@pytest.mark.slow
def test_two_writers_of_one_burst_never_replace_each_other(tmp_path: Path) -> None:
    context = multiprocessing.get_context("spawn")
    for attempt in range(5):
        root = tmp_path / f"try{attempt}"
        go, results = context.Event(), context.Queue()
        writers = [
            context.Process(target=_save_as, args=(str(root), job, go, results))
            for job in ("mine", "theirs")
        ]
        for w in writers:
            w.start()
        go.set()  # both at once
        outcomes = dict(results.get(timeout=60) for _ in writers)
        for w in writers:
            w.join(60)
        saved = [job for job, said in outcomes.items() if said == "saved"]
        assert len(saved) == 1, outcomes  # exactly one wins...
        [loser] = [job for job in outcomes if job not in saved]
        assert "already holds another report" in outcomes[loser]  # ...and the other is told
        stored = RunStore(root).load("r1")
        assert stored.job == saved[0]  # the winner's file, whole
        assert [s.job for s in manifest.read(root / "r1").summaries] == saved


def test_the_tail_is_the_newest_lines_across_read_blocks(tmp_path: Path) -> None:
    run_dir = tmp_path / "r1"
    run_dir.mkdir()
    for k in range(700):  # ~700 KB: the tail spans several blocks
        manifest.append(run_dir, summary("r1", k))
    last = manifest.tail(run_dir, 500)
    assert [s.burst for s in last.summaries] == list(range(200, 700))
    assert last.bad == () and last.position is not None
    assert last.position.offset == (run_dir / MANIFEST_FILE).stat().st_size
    assert [s.burst for s in manifest.tail(run_dir, 5000).summaries] == list(range(700))
    manifest.append(run_dir, summary("r1", 700))
    assert [s.burst for s in manifest.read(run_dir, last.position).summaries] == [700]


def test_a_report_saved_after_the_newest_line_without_its_own_is_found(tmp_path: Path) -> None:
    store = RunStore(tmp_path)
    run_id = "20261122T101500Z-orders-0003"
    for k in range(4):
        store.save(report(run_id, k), burst=k)
    run_dir = tmp_path / run_id
    manifest.rewrite(run_dir, lambda burst: burst < 2)  # killed before lines 2 and 3
    stored = StoredJobs(Settings(runs_dir=tmp_path), ttl_s=0)
    assert [s.burst for s in stored.jobs()["orders"].recent_bursts] == [0, 1, 2, 3]
    assert [s.burst for s in manifest.read(run_dir).summaries] == [0, 1, 2, 3]  # added


class SlowDisk(StoredJobs):
    """The index over a disk that takes ``read_s`` to read (a restart over many bursts on a
    loaded machine)."""

    read_s = 0.6

    def _read(self) -> tuple[dict[str, StoredJob], tuple[str, ...]]:
        time.sleep(self.read_s)
        return super()._read()


def test_the_first_reading_is_waited_for_a_later_one_is_not(tmp_path: Path) -> None:
    """A server just started has no earlier reading to give: its first answer waits for the
    first one (it said "no job" for jobs it had); later, a slow refresh gives the last one."""
    store = RunStore(tmp_path)
    store.save(report("20261122T101500Z-orders-0001", 0), burst=0)
    stored = SlowDisk(Settings(runs_dir=tmp_path), ttl_s=0, wait_s=0.05)
    assert set(stored.jobs()) == {"orders"}  # waited past wait_s for the first reading
    store.save(report("20261122T101600Z-clicks-0002", 0, job="clicks"), burst=0)
    began = time.monotonic()
    assert set(stored.jobs()) == {"orders"}  # the refresh is slow: the last reading, at once
    assert time.monotonic() - began < SlowDisk.read_s
