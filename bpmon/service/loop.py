"""The run loop: a target started, watched and stopped, as one generator of events.

:func:`watch` owns a watch from start to end: warm-up, bursts, the rest of the job's duration,
diagnosing and saving each burst, stopping the target however the watch ends. It yields the
:mod:`bpmon.model.events` every surface consumes (job started, live snapshot, burst sampled,
report ready, trouble, job ended or failed) over any :class:`~bpmon.collectors.target.Target`.

:class:`RunLoop` is the waiting and sampling inside it: it lets time pass (the warm-up, the
settling, the gap between bursts) and samples bursts, and yields
:class:`~bpmon.model.events.LiveSnapshot` events as it goes — the target's metrics about four
times a second when someone looks (``live``), else a bare heartbeat about once a second, so the
consumer always knows the loop is alive. A burst that overruns its plan is abandoned, and a
target unavailable for now is tried again with backoff (:mod:`bpmon.service.setbacks`).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Generator, Iterator, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path

from bpmon.collectors.target import Target
from bpmon.history.runs import RunStore
from bpmon.history.store import keep_in_history
from bpmon.model.errors import HistoryError, JobError, JobOverError, SaveError, UnavailableError
from bpmon.model.events import (
    BurstSampled,
    JobEnded,
    JobFailed,
    JobStarted,
    LiveSnapshot,
    ReportReady,
    SamplingProgress,
    Trouble,
    WatchEvent,
)
from bpmon.model.values import Finding, Observation, Report, VertexStatus
from bpmon.rules.config import RulesConfig
from bpmon.rules.engine import diagnose
from bpmon.rules.levels import vertex_status
from bpmon.rules.settling import PoolTrend
from bpmon.service.setbacks import BurstOverrunError, Setbacks
from bpmon.service.settings import Settings, WatchPlan

LIVE_EVERY_S = 0.25
"""How often a live snapshot is taken while a job runs (the CLI's table refreshes at 4 Hz)."""
HEARTBEAT_S = 1.0
"""How often the loop shows it is alive when nobody watches live."""
LIVE_EVERY_SAMPLES = 5
"""While sampling, a live snapshot follows every fifth sample (4 Hz at 50 ms intervals)."""
SAMPLER_STOP_S = 2.0
"""The longest a burst interrupted mid-way takes to stop (one py-spy dump at most)."""
OVERRUN_FACTOR = 4.0
OVERRUN_SLACK_S = 30.0
"""A burst is abandoned once it has run ``OVERRUN_FACTOR`` times its planned length plus
``OVERRUN_SLACK_S`` (a 5 s burst: after 50 s)."""


class StoppedError(Exception):
    """The watch was asked to stop in the middle of a burst."""


@dataclass(frozen=True, slots=True)
class LoopPlan:
    """What the loop needs of a watch's plan: the burst, and how long one may take.

    ``abandon_after_s`` overrides :attr:`overrun_s` (None: the default rule).
    """

    samples: int
    interval_ms: float
    abandon_after_s: float | None = None

    @property
    def burst_s(self) -> float:
        """The planned length of one burst."""
        return self.samples * self.interval_ms / 1000

    @property
    def overrun_s(self) -> float:
        """How long a burst may run before it is abandoned."""
        if self.abandon_after_s is not None:
            return self.abandon_after_s
        return self.burst_s * OVERRUN_FACTOR + OVERRUN_SLACK_S


class RunLoop:
    """The waiting and sampling of one watch, yielding live snapshots (or heartbeats) as it goes.

    Args:
        target: what is watched (started and stopped by the caller).
        plan: the burst's samples and interval.
        rules: the levels applied to live snapshots.
        stop: set to end the watch; checked between every step.
        live: take the target's metrics for every snapshot (someone shows them); when False
            only the settling reads them, and the loop yields bare heartbeats otherwise.
    """

    def __init__(
        self,
        target: Target,
        plan: LoopPlan,
        rules: RulesConfig,
        stop: threading.Event,
        *,
        live: bool = True,
    ) -> None:
        self.target, self.plan, self.rules, self.stop = target, plan, rules, stop
        self.live_wanted = live
        self.clock: Callable[[], float] = time.monotonic
        self._t0 = self.clock()
        self._ended = False
        self._abandoned: threading.Thread | None = None
        self.unavailable: str | None = None
        """Why the target could not be read at its last check between bursts (None: it could)."""

    @property
    def stopped(self) -> bool:
        """Whether the watch must end: asked through ``stop``, or over."""
        return self._ended or self.stop.is_set()

    def end(self) -> None:
        """Mark the watch as over."""
        self._ended = True

    def elapsed(self) -> float:
        """Seconds since the loop began."""
        return self.clock() - self._t0

    # -------------------------------------------------------------------------------- waiting

    def idle(
        self,
        seconds: float,
        phase: str,
        until: Callable[[], bool] | None = None,
        *,
        metrics: bool | None = None,
    ) -> Iterator[LiveSnapshot]:
        """Let ``seconds`` pass (or less, once ``until()`` holds), checking the target as it goes.

        A failed or ended target raises (``JobError``, ``JobOverError``); one that is
        unavailable for now does not: the reason is kept in :attr:`unavailable`, and the next
        burst finds out for itself. ``metrics`` overrides whether snapshots carry the target's
        metrics (the settling needs them whoever watches).
        """
        with_metrics = self.live_wanted if metrics is None else metrics
        step = LIVE_EVERY_S if with_metrics else HEARTBEAT_S
        deadline = self.clock() + max(0.0, seconds)
        while not self.stopped and (left := deadline - self.clock()) > 0:
            if until is not None and until():
                break
            if self.stop.wait(min(step, left)):
                break
            self._check_target()
            yield self.live(phase, metrics=with_metrics)

    def check(self) -> None:
        """Ask the target how it is now (between two bursts that follow each other at once):
        raises when it failed or ended by itself; one unavailable for now is noted."""
        self._check_target()

    def _check_target(self) -> None:
        try:
            self.target.wait(0)
        except UnavailableError as exc:
            self.unavailable = str(exc)
        else:
            self.unavailable = None

    def warm_up(self, warmup_s: float, settle_s: float) -> Iterator[WatchEvent]:
        """The warm-up, then up to ``settle_s`` more while backpressure is still building."""
        trend = PoolTrend()
        settling = settle_s > 0
        for event in self.idle(warmup_s, "warming up", metrics=self.live_wanted or settling):
            trend.add(event.vertices)
            yield event
        for event in self.idle(settle_s, "settling", until=trend.settled, metrics=True):
            trend.add(event.vertices)
            yield event

    # ------------------------------------------------------------------------------- sampling

    def sample(self, burst: int) -> Generator[WatchEvent, None, Observation]:
        """One burst, sampled on a thread of its own; live snapshots from this one meanwhile.

        A snapshot is taken (and drawn by the consumer) right after every fifth sample, when the
        sampler has most of an interval before its next deadline: never on the sampler's thread,
        and never at a moment when holding the interpreter would make a sample late.

        Raises:
            BurstOverrunError: the burst ran past :attr:`LoopPlan.overrun_s` and was abandoned,
                or the sampler of an abandoned burst has still not stopped.
            StoppedError: the watch was asked to stop meanwhile.
        """
        yield from self._await_abandoned(burst)
        done = [0]
        tick = threading.Event()

        def progress(taken: int, total: int) -> None:
            done[0] = taken
            if taken % LIVE_EVERY_SAMPLES == 0:
                tick.set()

        result: list[Observation] = []
        errors: list[BaseException] = []
        halt = threading.Event()

        def run() -> None:
            try:
                plan = self.plan
                result.append(self.target.observe(plan.samples, plan.interval_ms, progress, halt))
            except BaseException as exc:  # handed to the loop's thread, raised there
                errors.append(exc)
            finally:
                tick.set()

        sampler = threading.Thread(target=run, name="bpmon-sampler", daemon=True)
        began = self.clock()
        sampler.start()
        try:
            while sampler.is_alive():
                tick.wait(LIVE_EVERY_S * 2)  # a slow sampler (py-spy) still shows progress
                tick.clear()
                if self.stopped:
                    raise StoppedError
                if self.clock() - began > self.plan.overrun_s:
                    self._abandoned = sampler
                    raise BurstOverrunError(self._overrun_text(burst, done[0]))
                if sampler.is_alive():
                    yield self.live("sampling", SamplingProgress(burst, done[0], self.plan.samples))
        finally:  # closed, interrupted or abandoned mid-burst: the sampler is asked to stop
            halt.set()
            if self._abandoned is not sampler:
                sampler.join(SAMPLER_STOP_S)
        if errors:
            raise errors[0]
        return result[0]

    def _overrun_text(self, burst: int, done: int) -> str:
        plan = self.plan
        return (
            f"burst {burst} abandoned after {self.plan.overrun_s:g} s, "
            f"{done} of {plan.samples} samples taken (planned: {plan.burst_s:g} s); "
            "the target answered too slowly"
        )

    def _await_abandoned(self, burst: int) -> Iterator[WatchEvent]:
        """Before a new burst: wait (up to one overrun) for an abandoned sampler to stop."""
        stuck = self._abandoned
        if stuck is None:
            return
        deadline = self.clock() + self.plan.overrun_s
        while stuck.is_alive() and self.clock() < deadline and not self.stopped:
            stuck.join(HEARTBEAT_S)
            yield self.live("sampling")
        if self.stopped:
            raise StoppedError
        if stuck.is_alive():
            raise BurstOverrunError(
                f"burst {burst} not started: the sampler of an abandoned burst is still running "
                f"{self.plan.overrun_s:.0f} s later (the target does not answer)"
            )
        self._abandoned = None

    def live(
        self, phase: str, sampling: SamplingProgress | None = None, *, metrics: bool | None = None
    ) -> LiveSnapshot:
        """The target's metrics now with levels from the time accounting (when someone looks,
        or ``metrics``); else a bare heartbeat with no vertices."""
        vertices: tuple[VertexStatus, ...] = ()
        if self.live_wanted if metrics is None else metrics:
            snapshot = self.target.snapshot()
            if snapshot is not None:
                vertices = observation_levels(snapshot, self.rules)
        return LiveSnapshot(self.elapsed(), phase, vertices, sampling)


def observation_levels(observation: Observation, rules: RulesConfig) -> tuple[VertexStatus, ...]:
    """The report lines of an observation, without a diagnosis (levels and totals only)."""
    return tuple(vertex_status(v, rules.levels) for v in observation.vertices)


SAVE_ERRORS_KEPT = 10
"""The reasons of failed saves a watch keeps (it counts the rest)."""


def watch(
    target: Target,
    plan: WatchPlan,
    settings: Settings | None = None,
    *,
    stop: threading.Event | None = None,
    live: bool = True,
) -> Iterator[WatchEvent]:
    """The run loop: start ``target``, sample it as ``plan`` says, diagnose and save every burst.

    The rules are read and the runs directory checked writable here, before anything starts, so
    a bad rules file or a read-only ``--runs-dir`` is an error at once. The returned stream
    yields :class:`JobStarted`, then :class:`LiveSnapshot` about four times a second (``live``;
    else a bare heartbeat about once a second), :class:`BurstSampled` and :class:`ReportReady`
    per burst, :class:`Trouble` for a burst that could not be taken or saved, and last
    :class:`JobEnded` (or :class:`JobFailed`). The target is stopped however the stream ends:
    exhausted, closed by the consumer (``close()``), interrupted (Ctrl-C) or through ``stop``.

    A watch until stopped (``plan.bursts`` None) keeps no report: each goes to disk and to the
    consumer, and :attr:`JobEnded.reports` is empty. A target unavailable for now is tried again
    with backoff (``plan.patience_s`` bounds the gap); a job that ends by itself (finished,
    cancelled) ends the watch as :class:`JobEnded` with its ``reason``.

    Raises:
        BpmonError: bad settings at once; an unreadable target while watching (after the
            patience, for one unavailable for now). A failed runtime job is not raised: it ends
            the stream with :class:`JobFailed`.
    """
    settings = settings or Settings()
    rules = settings.rules()
    store = settings.store()
    store.check_writable()
    loop_plan = LoopPlan(plan.samples, plan.interval_ms, plan.abandon_after_s)
    loop = RunLoop(target, loop_plan, rules, stop or threading.Event(), live=live)
    cursor = _RunCursor(settings.new_run_id(target.job), lambda: settings.new_run_id(target.job))
    return _watch(loop, plan, store, cursor)


@dataclass
class _Outcome:
    """What a watch has done so far: the reports it keeps (a planned number of bursts only),
    how many bursts it diagnosed, what could not be saved (the first few reasons and a count:
    a watch until stopped on a full disk keeps no more), and how it ended."""

    keep: bool
    reports: list[Report] = field(default_factory=list)
    paths: list[Path] = field(default_factory=list)
    bursts: int = 0
    save_errors: list[str] = field(default_factory=list)
    unsaved: int = 0
    failure: str | None = None
    reason: str | None = None

    def not_saved(self, why: str) -> None:
        self.unsaved += 1
        if len(self.save_errors) < SAVE_ERRORS_KEPT:
            self.save_errors.append(why)

    def ended(self, run_id: str, leaks: tuple[str, ...]) -> JobEnded:
        args = (run_id, tuple(self.reports), tuple(self.paths), leaks, self.bursts, self.reason)
        saving = (tuple(self.save_errors), self.unsaved)
        if self.failure is not None:
            return JobFailed(*args, *saving, error=self.failure)
        return JobEnded(*args, *saving)


@dataclass
class _RunCursor:
    """The run the next burst is saved in, and its number there. A watch until stopped starts
    a new run every :attr:`WatchPlan.run_bursts` bursts, so no run folder (nor its manifest)
    grows without bound: a week at a burst a second is some sixty runs of 10,000 bursts."""

    run_id: str
    new_run_id: Callable[[], str]
    burst: int = 0

    def advance(self, run_bursts: int | None) -> None:
        """The burst was saved: the next one follows it, in a new run past ``run_bursts``."""
        self.burst += 1
        if run_bursts is not None and self.burst >= run_bursts:
            self.run_id, self.burst = self.new_run_id(), 0


def _watch(
    loop: RunLoop, plan: WatchPlan, store: RunStore, cursor: _RunCursor
) -> Iterator[WatchEvent]:
    target = loop.target
    outcome = _Outcome(keep=plan.bursts is not None)
    try:
        target.start()
        yield JobStarted(cursor.run_id, target.job, target.source, plan.bursts, plan.duration_s)
        yield from loop.warm_up(plan.warmup_s, plan.settle_s)
        yield from _bursts(loop, plan, store, cursor, outcome)
        if plan.duration_s is not None:
            yield from loop.idle(plan.duration_s - loop.elapsed(), "running")
    except JobError as exc:
        outcome.failure = str(exc)
    except JobOverError as exc:
        outcome.reason = str(exc)
    except StoppedError:
        pass  # asked to stop mid-burst: the unfinished burst is dropped, the rest is kept
    finally:
        loop.end()
        ending = target.stop()
    yield outcome.ended(cursor.run_id, ending.leaks)


def _bursts(
    loop: RunLoop, plan: WatchPlan, store: RunStore, cursor: _RunCursor, outcome: _Outcome
) -> Iterator[WatchEvent]:
    """Sample, diagnose and save bursts until the plan is done or the watch is stopped."""
    setbacks = Setbacks(loop.target.job, plan.patience_s)
    while not loop.stopped and (plan.bursts is None or outcome.bursts < plan.bursts):
        run_id, burst = cursor.run_id, cursor.burst
        began = loop.clock()
        loop.check()  # a job that finished or failed ends here, even with bursts back to back
        try:
            observation = yield from loop.sample(burst)
        except UnavailableError as exc:
            delay = setbacks.unavailable(exc)
            yield Trouble(run_id, burst, "unavailable", f"{exc}; trying again in {delay:g} s")
            yield from loop.idle(delay, "unavailable")
            continue
        except BurstOverrunError as exc:
            setbacks.overran(exc)
            yield Trouble(run_id, burst, "overrun", str(exc))
            continue
        observation = replace(observation, run_id=run_id)
        yield BurstSampled(run_id, burst, observation)
        report = _diagnosed(observation, loop.rules, setbacks.findings())
        yield _saved(store, report, burst, outcome)
        cursor.advance(plan.run_bursts)
        if plan.every_s is not None and (plan.bursts is None or outcome.bursts < plan.bursts):
            yield from loop.idle(plan.every_s - (loop.clock() - began), "waiting")


def _diagnosed(observation: Observation, rules: RulesConfig, notes: Sequence[Finding]) -> Report:
    """The report of a window, with the collector's own findings (a Flink burst's sampling) and
    the watch's (a gap before it) after the diagnosis's."""
    report = diagnose(observation, rules)
    extra = (*observation.notes, *notes)
    return replace(report, findings=(*report.findings, *extra)) if extra else report


def _saved(store: RunStore, report: Report, burst: int, outcome: _Outcome) -> ReportReady:
    """Save a burst's report and keep what the watch keeps; a failed save is said, not raised."""
    outcome.bursts += 1
    if outcome.keep:
        outcome.reports.append(report)
    try:
        path = save_report(store, report, burst)
    except (HistoryError, SaveError) as exc:
        outcome.not_saved(str(exc))
        return ReportReady(report.run_id, burst, report, None, str(exc))
    if outcome.keep:
        outcome.paths.append(path)
    return ReportReady(report.run_id, burst, report, path)


def save_report(store: RunStore, report: Report, burst: int = 0) -> Path:
    """Save ``report`` as burst ``burst`` of its run, then add it to the history dataset.

    The one save path of every surface (run, monitor, serve). The report.json is written first
    and is what counts; adding it to ``<runs-dir>/history/`` (Parquet) is best effort: without
    pyarrow it is skipped with one warning, and a failed append is one warning line naming the
    fix (``bpmon history import``), never a failed run.
    """
    path = store.save(report, burst=burst)
    keep_in_history(store.root, report, burst)
    return path


def drain(events: Iterator[WatchEvent]) -> JobEnded:
    """Run a watch to its end without looking at it; JobError if the job failed."""
    last: WatchEvent | None = None
    for event in events:
        last = event
    if isinstance(last, JobFailed):
        raise JobError(last.error)
    assert isinstance(last, JobEnded)
    return last
