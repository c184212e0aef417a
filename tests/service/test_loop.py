"""The run loop over a long watch: a target unavailable for a while, a burst that overruns,
a job that ends by itself, a report that cannot be saved.

The jobs run for real on bpmon's runtime. Where a test needs the target to misbehave in a way
the runtime never does (a JobManager answering HTTP 503, a burst stuck in a dead TaskManager),
a subclass of the real :class:`RuntimeTarget` injects that one fault and nothing else: the
samples, metrics, diagnosis and saving stay real. The same faults against a real Flink cluster
are in ``tests/collectors/flink`` (the chaos test).
"""

from __future__ import annotations

import random
import threading
from datetime import UTC, datetime
from pathlib import Path

import pytest

from bpmon.collectors.inprocess import RuntimeTarget
from bpmon.collectors.sampler import Progress, StopSignal
from bpmon.model.errors import JobOverError, UnavailableError
from bpmon.model.events import JobEnded, ReportReady, Trouble, WatchEvent
from bpmon.model.values import Observation
from bpmon.scenario import parse_scenario
from bpmon.service.facade import Settings, WatchPlan, watch
from bpmon.service.setbacks import BACKOFF_MAX_S, REASONS_KEPT, BurstOverrunError, Setbacks
from tests.runtime.jobs import task_threads
from tests.tiny import TINY


def settings(runs_dir: Path) -> Settings:
    return Settings(
        runs_dir=runs_dir, now=lambda: datetime(2026, 1, 2, tzinfo=UTC), rng=random.Random(4)
    )


class Unavailable(RuntimeTarget):
    """The real runtime, whose first ``failures`` windows cannot be read (as a JobManager that
    answers HTTP 503 while it fails over)."""

    def __init__(self, failures: int) -> None:
        super().__init__(parse_scenario(TINY))
        self.failures = failures

    def observe(
        self,
        samples: int = 100,
        interval_ms: float = 50.0,
        progress: Progress | None = None,
        stop: StopSignal | None = None,
    ) -> Observation:
        if self.failures > 0:
            self.failures -= 1
            raise UnavailableError(f"the job is RESTARTING ({self.failures} more)")
        return super().observe(samples, interval_ms, progress, stop)


class StuckOnce(RuntimeTarget):
    """The real runtime, whose first window hangs until it is told to stop (a thread dump from a
    TaskManager that never answers)."""

    def __init__(self) -> None:
        super().__init__(parse_scenario(TINY))
        self.hung = threading.Event()
        self.released = threading.Event()

    def observe(
        self,
        samples: int = 100,
        interval_ms: float = 50.0,
        progress: Progress | None = None,
        stop: StopSignal | None = None,
    ) -> Observation:
        if not self.hung.is_set():
            self.hung.set()
            while stop is not None and not stop.is_set():
                threading.Event().wait(0.05)
            self.released.set()
            raise UnavailableError("released")  # never seen: the burst was abandoned
        return super().observe(samples, interval_ms, progress, stop)


def until_reports(
    events: list[WatchEvent], stream: object, count: int, stop: threading.Event
) -> None:
    """Consume ``stream`` into ``events`` until ``count`` reports, then stop the watch."""
    for event in stream:  # type: ignore[attr-defined]
        events.append(event)
        if sum(isinstance(e, ReportReady) for e in events) >= count:
            stop.set()


def test_backoff_doubles_up_to_its_ceiling_and_the_gap_is_said_once() -> None:
    now = [0.0]
    setbacks = Setbacks("job", patience_s=None, clock=lambda: now[0])
    delays = []
    for n in range(8):
        now[0] = float(n)
        took = f"{n + 1}.{n}"  # the same reason, other figures: one reason
        delays.append(setbacks.unavailable(UnavailableError(f"HTTP 503, 4 times in {took} s")))
    assert delays == [1.0, 2.0, 4.0, 8.0, 16.0, BACKOFF_MAX_S, BACKOFF_MAX_S, BACKOFF_MAX_S]
    setbacks.unavailable(UnavailableError("job j is RESTARTING"))
    now[0] = 42.0
    [gap] = setbacks.findings()
    assert gap.kind == "gap" and gap.vertex == "job"
    assert "no window for 42 s" in gap.detail and "9 tries" in gap.detail
    assert "HTTP 503, 4 times in 8.7 s; then job j is RESTARTING" in gap.detail  # as last seen
    assert setbacks.findings() == ()  # said once: the next report has no gap


def test_a_long_gap_keeps_a_bounded_account_of_itself() -> None:
    setbacks = Setbacks("job", patience_s=None, clock=lambda: 0.0)
    for n in range(10_000):
        setbacks.unavailable(UnavailableError(f"reason number {chr(97 + n % 26)}"))
        setbacks.overran(BurstOverrunError(f"burst {n} abandoned"))
    overrun, gap = setbacks.findings()
    assert (overrun.kind, overrun.detail) == (
        "overrun",
        "10000 bursts abandoned; the last: burst 9999 abandoned",
    )
    assert gap.detail.count("reason number") == REASONS_KEPT == 3  # a, b and c
    kept = 3 * (10_000 // 26) + 3  # the tries whose reason is a, b or c
    assert f"(and {10_000 - kept} tries for other reasons)" in gap.detail
    assert len(gap.detail) < 400


def test_a_watch_with_patience_gives_up_once_the_gap_is_longer() -> None:
    now = [0.0]
    setbacks = Setbacks("job", patience_s=10.0, clock=lambda: now[0])
    setbacks.unavailable(UnavailableError("timeout"))
    now[0] = 10.0
    setbacks.unavailable(UnavailableError("timeout"))  # 10 s: not longer yet
    now[0] = 10.5
    with pytest.raises(UnavailableError, match="timeout"):
        setbacks.unavailable(UnavailableError("timeout"))
    with pytest.raises(UnavailableError, match="burst 3 abandoned"):
        setbacks.overran(BurstOverrunError("burst 3 abandoned"))  # an overrun extends the gap
    fresh = Setbacks("job", patience_s=10.0, clock=lambda: now[0])
    fresh.overran(BurstOverrunError("burst 4 abandoned"))
    assert [(n.kind, n.detail) for n in fresh.findings()] == [("overrun", "burst 4 abandoned")]


def test_an_unavailable_target_is_tried_again_and_the_next_report_says_so(tmp_path: Path) -> None:
    target = Unavailable(failures=2)
    stop = threading.Event()
    events: list[WatchEvent] = []
    until_reports(
        events,
        watch(
            target,
            WatchPlan(bursts=None, samples=10, interval_ms=10),
            settings(tmp_path),
            stop=stop,
            live=False,
        ),
        2,
        stop,
    )
    troubles = [e for e in events if isinstance(e, Trouble)]
    assert [t.kind for t in troubles] == ["unavailable", "unavailable"]
    assert "RESTARTING" in troubles[0].detail and "trying again in 1 s" in troubles[0].detail
    assert "trying again in 2 s" in troubles[1].detail
    first, second = [e for e in events if isinstance(e, ReportReady)]
    gaps = [f for f in first.report.findings if f.kind == "gap"]
    assert len(gaps) == 1 and "2 tries" in gaps[0].detail and "RESTARTING" in gaps[0].detail
    assert not [f for f in second.report.findings if f.kind == "gap"]
    assert first.path is not None and first.path.is_file()
    ended = events[-1]
    assert isinstance(ended, JobEnded) and ended.leaks == () and ended.bursts == 2


def test_a_planned_watch_gives_up_after_its_patience(tmp_path: Path) -> None:
    target = Unavailable(failures=1000)
    plan = WatchPlan(bursts=1, samples=10, interval_ms=10, patience_s=2.5)
    with pytest.raises(UnavailableError, match="RESTARTING"):
        list(watch(target, plan, settings(tmp_path), live=False))
    assert task_threads() == []  # the job was stopped however the watch ended


def test_an_overrun_burst_is_abandoned_and_the_watch_goes_on(tmp_path: Path) -> None:
    target = StuckOnce()
    stop = threading.Event()
    plan = WatchPlan(bursts=None, samples=10, interval_ms=10, abandon_after_s=1.0)
    events: list[WatchEvent] = []
    until_reports(events, watch(target, plan, settings(tmp_path), stop=stop, live=False), 1, stop)
    assert target.released.is_set()  # the stuck sampler was told to stop, and did
    [trouble] = [e for e in events if isinstance(e, Trouble)]
    assert trouble.kind == "overrun" and "burst 0 abandoned after 1 s" in trouble.detail
    [ready] = [e for e in events if isinstance(e, ReportReady)]
    assert ready.burst == 0  # burst numbers stay those of saved reports
    kinds = [f.kind for f in ready.report.findings]
    assert "overrun" in kinds and "gap" not in kinds
    assert not [t for t in threading.enumerate() if t.name == "bpmon-sampler"]


class EndsAfterOne(RuntimeTarget):
    """The real runtime, whose job is over once one window was taken (as a Flink job that was
    cancelled, or a process that exited)."""

    def __init__(self) -> None:
        super().__init__(parse_scenario(TINY))
        self.windows = 0

    def observe(
        self,
        samples: int = 100,
        interval_ms: float = 50.0,
        progress: Progress | None = None,
        stop: StopSignal | None = None,
    ) -> Observation:
        self.windows += 1
        return super().observe(samples, interval_ms, progress, stop)

    def wait(self, seconds: float) -> None:
        super().wait(seconds)
        if self.windows:
            raise JobOverError("job 'tiny' was CANCELED")


def test_a_job_that_ends_by_itself_ends_the_watch_as_ended(tmp_path: Path) -> None:
    target = EndsAfterOne()
    plan = WatchPlan(bursts=None, samples=10, interval_ms=10, every_s=2.0)
    events = list(watch(target, plan, settings(tmp_path), live=False))
    ended = events[-1]
    assert type(ended) is JobEnded
    assert ended.reason == "job 'tiny' was CANCELED" and ended.bursts == 1
    assert ended.leaks == ()


def test_a_report_that_cannot_be_saved_is_still_handed_out(tmp_path: Path) -> None:
    runs = tmp_path / "runs"
    events = watch(
        RuntimeTarget(parse_scenario(TINY)),
        WatchPlan(bursts=2, samples=10, interval_ms=10),
        settings(runs),
        live=False,
    )
    first = next(events)
    (runs / first.run_id).write_text("not a folder")  # type: ignore[union-attr]
    rest = list(events)
    ready = [e for e in rest if isinstance(e, ReportReady)]
    assert [e.path for e in ready] == [None, None]
    assert all(e.save_error and first.run_id in e.save_error for e in ready)  # type: ignore[union-attr]
    ended = rest[-1]
    assert isinstance(ended, JobEnded)
    assert len(ended.reports) == 2 and ended.paths == () and len(ended.save_errors) == 2
    assert [t.kind for t in rest if isinstance(t, Trouble)] == []  # said on the report itself


def test_a_job_that_finishes_ends_the_watch_even_with_bursts_back_to_back(
    tmp_path: Path,
) -> None:
    bounded = TINY.replace("rate = 200\n", "rate = 200\nrecords = 200\n")  # done in 1 s
    target = RuntimeTarget(parse_scenario(bounded))
    plan = WatchPlan(bursts=None, samples=60, interval_ms=10, every_s=0.1)  # 0.6 s > 0.1 s
    events = list(watch(target, plan, settings(tmp_path), live=False))
    ended = events[-1]
    assert type(ended) is JobEnded and ended.reason is not None and "finished" in ended.reason
    assert 1 <= ended.bursts <= 4 and task_threads() == []


class IgnoresHalt(RuntimeTarget):
    """The real runtime whose first window takes ``hang_s`` whatever it is told (a py-spy that
    does not answer and cannot be interrupted)."""

    def __init__(self, hang_s: float) -> None:
        super().__init__(parse_scenario(TINY))
        self.hang_s = hang_s
        self.windows = 0

    def observe(
        self,
        samples: int = 100,
        interval_ms: float = 50.0,
        progress: Progress | None = None,
        stop: StopSignal | None = None,
    ) -> Observation:
        self.windows += 1
        if self.windows == 1:
            threading.Event().wait(self.hang_s)
        return super().observe(samples, interval_ms, progress, stop)


def test_no_burst_starts_while_an_abandoned_sampler_still_runs(tmp_path: Path) -> None:
    target = IgnoresHalt(hang_s=2.5)
    stop = threading.Event()
    plan = WatchPlan(bursts=None, samples=10, interval_ms=10, abandon_after_s=1.0)
    events: list[WatchEvent] = []
    until_reports(events, watch(target, plan, settings(tmp_path), stop=stop, live=False), 1, stop)
    troubles = [e.detail for e in events if isinstance(e, Trouble)]
    assert troubles[0].startswith("burst 0 abandoned after 1 s")
    assert troubles[1].startswith("burst 0 not started: the sampler of an abandoned burst")
    assert target.windows == 2  # the stuck one, then the one reported: never two at once
    [ready] = [e for e in events if isinstance(e, ReportReady)]
    [overrun] = [f for f in ready.report.findings if f.kind == "overrun"]
    assert overrun.detail.startswith("2 bursts abandoned; the last: burst 0 not started")


def test_a_long_watch_goes_on_in_a_new_run_every_so_many_bursts(tmp_path: Path) -> None:
    target = RuntimeTarget(parse_scenario(TINY))
    stop = threading.Event()
    plan = WatchPlan(bursts=None, samples=10, interval_ms=10, run_bursts=2)
    events: list[WatchEvent] = []
    until_reports(events, watch(target, plan, settings(tmp_path), stop=stop, live=False), 5, stop)
    ready = [e for e in events if isinstance(e, ReportReady)]
    runs = list(dict.fromkeys(e.run_id for e in ready))
    assert len(runs) == 3 and [e.burst for e in ready] == [0, 1, 0, 1, 0]
    assert all(e.report.run_id == e.run_id for e in ready)
    for run_id in runs:
        saved = sorted(p.name for p in (tmp_path / run_id).iterdir())
        assert saved[0] == "bursts.jsonl" and len(saved) in (2, 3)  # a manifest, 1 or 2 bursts
    ended = events[-1]
    assert isinstance(ended, JobEnded)
    assert (ended.run_id, ended.bursts) == (ready[-1].run_id, 5)  # the run it ended in
