"""Watches: jobs watched on background threads, their reports, their state, a clean stop.

Jobs run on the real runtime (the tiny scenario, a burst every 0.2 s) and save to a temporary
runs directory; every test ends with no task thread of the runtime left.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import threading
from collections.abc import Iterator
from dataclasses import replace
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest

from bpmon.collectors.inprocess import RuntimeTarget
from bpmon.model.errors import ConfigError, JobOverError, TargetNotFoundError
from bpmon.model.report_json import report_from_json
from bpmon.model.values import Observation
from bpmon.scenario import parse_scenario
from bpmon.service import facade
from bpmon.service.stored import StoredJobs
from bpmon.service.subscriptions import Notice
from bpmon.service.watching import AlreadyWatchedError, Watches

from .servers import task_threads, tiny, wait_until

FAILING = tiny("failing").replace(
    "cost_us = 50\n", "cost_us = 50\nfail = { after_s = 0.5, subtask = 0 }\n"
)


@pytest.fixture
def registry(tmp_path: Path) -> Iterator[Watches]:
    """A registry over an empty runs directory, every watch stopped at the end."""
    watches = Watches(facade.Settings(runs_dir=tmp_path / "runs"), every_s=0.2)
    yield watches
    assert watches.stop_all() == ()
    assert task_threads() == []


def reports_of(watches: Watches, job: str) -> int:
    view = watches.job(job)
    return 0 if view is None else len(view.recent_bursts)


def test_a_watch_takes_a_burst_after_another_and_saves_each(
    registry: Watches, tmp_path: Path
) -> None:
    job = registry.start_scenario(parse_scenario(tiny()))
    assert job == "tiny" and registry.running() == ["tiny"]
    wait_until(lambda: reports_of(registry, job) >= 3, "three bursts")
    view = registry.job(job)
    assert view is not None and view.latest is not None
    assert (view.state, view.source, view.watched) == ("running", "runtime", True)
    assert [b.burst for b in view.recent_bursts[:3]] == [0, 1, 2]
    assert {b.run_id for b in view.recent_bursts} == {view.run_id}
    assert dict(view.recent_bursts[0].levels).keys() == {"src", "out"}
    saved = tmp_path / "runs" / str(view.run_id)
    assert report_from_json((saved / "report.json").read_text()).run_id == view.run_id
    counters = registry.counters()
    assert counters.diagnoses >= 3 and counters.bursts >= 3
    assert counters.errors == 0 and counters.watches_started == 1


def test_a_stopped_watch_ends_cleanly_and_keeps_its_reports(registry: Watches) -> None:
    job = registry.start_scenario(parse_scenario(tiny()))
    wait_until(lambda: reports_of(registry, job), "a burst")
    view = registry.stop(job)
    assert view is not None
    assert (view.state, view.leaks, view.error) == ("ended", (), None)
    assert registry.running() == [] and task_threads() == []
    assert view.latest is not None


def test_a_job_is_watched_once_at_a_time(registry: Watches) -> None:
    job = registry.start_scenario(parse_scenario(tiny()))
    with pytest.raises(AlreadyWatchedError, match="'tiny' is watched already"):
        registry.start_scenario(parse_scenario(tiny()))
    first = registry.job(job)
    registry.stop(job)
    registry.start_scenario(parse_scenario(tiny()))  # stopped: it may start again
    second = registry.job(job)
    assert first is not None and second is not None
    assert second.state == "running" and second.run_id != first.run_id


def test_readers_get_each_report_then_the_end(registry: Watches) -> None:
    got: list[Notice] = []
    woken = threading.Event()
    reader = registry.subscribers.subscribe("tiny", woken.set)
    job = registry.start_scenario(parse_scenario(tiny()))

    def two_reports() -> bool:
        got.extend(reader.take())
        return sum(n.report is not None for n in got) >= 2

    wait_until(two_reports, "two reports")
    registry.stop(job)
    got.extend(reader.take())
    assert woken.is_set()
    assert [n.burst for n in got if n.report is not None][:2] == [0, 1]
    assert got[-1].report is None and got[-1].state == "ended"


def test_a_failing_job_is_failed_with_its_error_and_counted(registry: Watches) -> None:
    job = registry.start_scenario(parse_scenario(FAILING))
    wait_until(lambda: registry.running() == [], "the job to fail")
    view = registry.job(job)
    assert view is not None and view.state == "failed"
    assert view.error is not None and "injected failure" in view.error
    assert registry.counters().errors == 1
    assert task_threads() == []


def test_stop_all_stops_everything_and_refuses_new_watches(tmp_path: Path) -> None:
    watches = Watches(facade.Settings(runs_dir=tmp_path), every_s=0.2)
    watches.start_scenario(parse_scenario(tiny("one")))
    watches.start_scenario(parse_scenario(tiny("two")))
    reader = watches.subscribers.subscribe("one", lambda: None)
    assert watches.stop_all() == ()
    assert watches.running() == [] and task_threads() == []
    assert reader.closed
    assert [v.state for v in watches.jobs()] == ["ended", "ended"]
    with pytest.raises(ConfigError, match="stopping"):
        watches.start_scenario(parse_scenario(tiny("three")))
    assert watches.stop_all() == ()  # again: nothing to do
    assert watches.stop("nope") is None


def test_a_process_that_is_not_there_is_refused_at_once(registry: Watches) -> None:
    gone = subprocess.Popen([sys.executable, "-c", "pass"])
    gone.wait(timeout=30)
    with pytest.raises(TargetNotFoundError, match=f"PID {gone.pid}"):
        registry.start_process(gone.pid)
    with pytest.raises(ConfigError, match="process id"):
        registry.start_process(0)
    assert registry.running() == []


def test_stored_jobs_are_read_again_only_after_their_time(runs_dir: Path) -> None:
    now = [0.0]
    stored = StoredJobs(facade.Settings(runs_dir=runs_dir), ttl_s=10, clock=lambda: now[0])
    assert sorted(stored.jobs()) == ["alpha", "beta"]
    assert len(stored.jobs()["beta"].recent_bursts) == 1
    beta = next(p for p in runs_dir.iterdir() if "beta" in p.name)
    shutil.copytree(beta, runs_dir / "20990101T000000Z-beta-0001")  # another run of beta
    torn = runs_dir / "20990101T000000Z-torn-0000"
    torn.mkdir()
    (torn / "report.json").write_text("torn")
    assert len(stored.jobs()["beta"].recent_bursts) == 1  # not read again yet
    now[0] = 10.0
    assert len(stored.jobs()["beta"].recent_bursts) == 2
    assert len(stored.errors) == 1 and torn.name in stored.errors[0]
    assert sorted(stored.jobs()) == ["alpha", "beta"]
    assert (torn / "report.json").read_text() == "torn"


def test_a_watched_job_continues_its_stored_history(runs_dir: Path) -> None:
    settings = facade.Settings(runs_dir=runs_dir)
    watches = Watches(settings, every_s=0.2, stored=StoredJobs(settings, ttl_s=0))
    before = watches.job("alpha")
    assert before is not None and before.state == "stored" and len(before.recent_bursts) == 3
    watches.start_scenario(parse_scenario(tiny("alpha")))
    wait_until(lambda: reports_of(watches, "alpha") >= 5, "two new bursts")
    view = watches.job("alpha")
    assert view is not None
    assert view.recent_bursts[:3] == before.recent_bursts
    assert all(b.run_id == view.run_id for b in view.recent_bursts[3:])
    assert len({(b.run_id, b.burst) for b in view.recent_bursts}) == len(view.recent_bursts)
    assert [r.job for r in watches.latest()] == ["alpha", "beta"]
    assert watches.stop_all() == ()


# -- a long watch: stuck watches, views before the first report, a bounded memory -------------


class _Hangs(RuntimeTarget):
    """The real runtime whose status check hangs once a report was made (as a JobManager that
    accepts the connection and never answers): the watch's thread stops beating."""

    def __init__(self, text: str) -> None:
        super().__init__(parse_scenario(text))
        self.release = threading.Event()
        self.observed = 0

    def observe(self, *args: Any, **kwargs: Any) -> Observation:
        self.observed += 1
        return super().observe(*args, **kwargs)

    def wait(self, seconds: float) -> None:
        super().wait(seconds)
        if self.observed:
            self.release.wait(60)


def test_a_watch_that_stops_beating_is_stuck_and_says_for_how_long(tmp_path: Path) -> None:
    watches = Watches(facade.Settings(runs_dir=tmp_path), every_s=5.0, stuck_after_s=1.0)
    target = _Hangs(tiny("hangs"))
    plan = facade.WatchPlan(bursts=None, samples=10, interval_ms=10, every_s=5.0)
    watches.start_target(target, plan)
    found = wait_until(watches.stuck, "the hung watch to be stuck")
    assert isinstance(found, list) and len(found) == 1
    assert re.fullmatch(r"hangs: no sign of life for \d+ s", found[0])
    target.release.set()
    assert watches.stop_all(deadline_s=20) == ()
    assert watches.stuck() == []  # an ended watch is not stuck


def test_an_overrun_burst_makes_the_watch_stuck_until_a_report_follows(tmp_path: Path) -> None:
    watches = Watches(facade.Settings(runs_dir=tmp_path), every_s=0.2)
    slow = tiny("slow").replace("samples = 10", "samples = 400")  # a 4 s burst...
    plan = facade.WatchPlan(bursts=None, samples=400, interval_ms=10, abandon_after_s=0.5)
    target = RuntimeTarget(parse_scenario(slow))
    watches.start_target(target, plan)  # ...abandoned after half a second, every time
    found = wait_until(watches.stuck, "the overrun to make the watch stuck")
    assert isinstance(found, list) and "burst 0 abandoned after 0.5 s" in found[0]
    view = watches.job("slow")
    assert view is not None and view.trouble is not None and view.trouble.startswith("overrun")
    assert watches.counters().errors >= 1
    assert watches.stop_all(deadline_s=20) == ()
    assert task_threads() == []


def test_views_pair_a_run_with_its_own_report(runs_dir: Path) -> None:
    settings = facade.Settings(runs_dir=runs_dir)
    watches = Watches(settings, every_s=0.2, stored=StoredJobs(settings, ttl_s=0))
    stored = watches.job("alpha")
    assert stored is not None and stored.latest is not None
    slow_start = tiny("alpha").replace("warmup_s = 0", "warmup_s = 30")
    watches.start_scenario(parse_scenario(slow_start))
    running = watches.job("alpha")
    assert running is not None and running.state == "running"
    assert running.run_id != stored.run_id and running.latest is None  # its own run, no report
    assert running.recent_bursts == stored.recent_bursts  # the past is still shown
    ended = watches.stop("alpha")  # stopped before its first burst
    assert ended is not None and ended.state == "ended"
    assert (ended.run_id, ended.latest) == (stored.run_id, stored.latest)  # a run that exists
    assert watches.stop_all() == ()
    nothing = Watches(facade.Settings(runs_dir=runs_dir / "empty"), every_s=0.2)
    nothing.start_scenario(parse_scenario(slow_start.replace('"alpha"', '"fresh"')))
    view = nothing.stop("fresh")
    assert view is not None and (view.run_id, view.latest) == (None, None)
    assert nothing.stop_all() == ()


def test_upkeep_prunes_old_runs_and_temp_files_then_stops_with_the_rest(tmp_path: Path) -> None:
    runs = tmp_path / "runs"
    settings = facade.Settings(runs_dir=runs)
    ended = facade.drain(facade.run_scenario(parse_scenario(tiny("old")), settings))
    old = ended.reports[0]
    aged = old.window.start - timedelta(days=40)  # older than [history] keep_days (30)
    store = settings.store()
    store.save(
        replace(
            old,
            run_id="20200101T000000Z-old-0001",
            window=replace(old.window, start=aged, end=aged + timedelta(seconds=1)),
        )
    )
    leftover = runs / ended.run_id / ".report-7.json.abc.tmp"
    leftover.write_text("a writer died here")
    os.utime(leftover, (0, 0))
    watches = Watches(settings, every_s=0.2)
    watches.start_upkeep(every_s=3600)
    wait_until(lambda: watches.last_upkeep is not None, "the first upkeep")
    assert not (runs / "20200101T000000Z-old-0001").exists()
    assert (runs / ended.run_id / "report.json").is_file()  # a recent run is kept
    assert not leftover.exists()
    upkeep = watches.last_upkeep
    assert upkeep is not None and upkeep.pruning is not None and upkeep.pruning.runs == 1
    assert watches.stop_all() == ()
    assert not [t for t in threading.enumerate() if t.name == "bpmon-upkeep"]


def test_a_bounded_job_that_finishes_ends_its_watch(registry: Watches) -> None:
    bounded = tiny("bounded").replace("rate = 200\n", "rate = 200\nrecords = 300\n")
    job = registry.start_scenario(parse_scenario(bounded))  # 300 records per subtask: 1.5 s
    wait_until(lambda: registry.running() == [], "the finished job's watch to end")
    view = registry.job(job)
    assert view is not None and (view.state, view.error) == ("ended", None)
    assert view.reason is not None and "finished" in view.reason
    assert view.leaks == () and task_threads() == []


class _StuckOnce(RuntimeTarget):
    """The real runtime whose first window hangs until it is told to stop, and whose second
    waits for the test to let it go: the window between the two is the test's to look at."""

    def __init__(self) -> None:
        super().__init__(parse_scenario(tiny("once")))
        self.windows = 0
        self.go_on = threading.Event()

    def observe(self, *args: Any, **kwargs: Any) -> Observation:
        self.windows += 1
        stop = kwargs.get("stop") or args[3]
        if self.windows == 1:
            while not stop.is_set():
                threading.Event().wait(0.05)
        elif self.windows == 2:
            self.go_on.wait(60)
        return super().observe(*args, **kwargs)


def test_an_overrun_watch_is_stuck_until_its_next_report(tmp_path: Path) -> None:
    watches = Watches(facade.Settings(runs_dir=tmp_path), every_s=0.2)
    target = _StuckOnce()
    plan = facade.WatchPlan(bursts=None, samples=10, interval_ms=10, abandon_after_s=0.5)
    watches.start_target(target, plan)
    wait_until(watches.stuck, "the abandoned burst to make the watch stuck")
    target.go_on.set()
    wait_until(lambda: reports_of(watches, "once") >= 1, "the report after the overrun")
    assert watches.stuck() == []
    view = watches.job("once")
    assert view is not None and view.trouble is None
    assert view.latest is not None and "overrun" in [f.kind for f in view.latest.findings]
    assert watches.stop_all(deadline_s=20) == ()


class _OverAtStart(RuntimeTarget):
    """The real runtime whose job is over as the watch starts (a Flink job cancelled between
    its lookup and the start of the watch)."""

    def start(self) -> None:
        raise JobOverError(f"job {self.job!r} was CANCELED")


def test_a_job_that_ends_as_its_watch_starts_says_how(tmp_path: Path) -> None:
    watches = Watches(facade.Settings(runs_dir=tmp_path), every_s=0.2)
    target = _OverAtStart(parse_scenario(tiny("brief")))
    plan = facade.WatchPlan(bursts=None, samples=10, interval_ms=10)
    with pytest.raises(JobOverError, match=r"^job 'brief' was CANCELED before its first burst$"):
        watches.start_target(target, plan)
    assert watches.running() == [] and watches.job("brief") is None
    assert task_threads() == []


def test_a_watch_that_goes_on_in_new_runs_shows_each_burst_once(tmp_path: Path) -> None:
    settings = facade.Settings(runs_dir=tmp_path)
    watches = Watches(settings, every_s=0.05, stored=StoredJobs(settings, ttl_s=0))
    plan = facade.WatchPlan(bursts=None, samples=10, interval_ms=10, every_s=0.05, run_bursts=2)
    watches.start_target(RuntimeTarget(parse_scenario(tiny("rolls"))), plan)
    wait_until(lambda: reports_of(watches, "rolls") >= 5, "five bursts in three runs")
    view = watches.job("rolls")
    assert view is not None and view.latest is not None
    keys = [(b.run_id, b.burst) for b in view.recent_bursts]
    assert len(keys) == len(set(keys))  # the stored runs of this watch are not shown twice
    assert len({run for run, _ in keys}) >= 3
    assert view.run_id == view.latest.run_id == keys[-1][0]
    assert watches.stop_all() == ()
