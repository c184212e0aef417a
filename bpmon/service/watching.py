"""Jobs watched continuously, for ``bpmon serve``: one background thread per watch.

A :class:`Watches` registry starts watches (a scenario on bpmon's runtime, a process read with
py-spy, a Flink job) through the service's run loop with ``bursts=None``, a burst every
``every_s`` seconds, and consumes each watch's events on a thread of its own. Per job it keeps
the latest report, the last :data:`~bpmon.service.stored.RECENT_BURSTS` bursts in short and the
watch's state — nothing that grows with the watch's age — and hands every new report to the job's
readers (the server's event streams) through :mod:`bpmon.service.subscriptions`, so a slow reader
never holds a watch up. Jobs only in the runs directory are served too, from
:class:`~bpmon.service.stored.StoredJobs`.

A watch is *stuck* (:meth:`Watches.stuck`) when its thread has shown no sign of life for
:data:`STUCK_AFTER_S` (the run loop beats at least once a second) or its last burst was
abandoned as overrun and no report followed; ``/healthz`` says so.

Stopping a watch sets its stop event and joins its thread: the run loop then stops the target,
every runtime thread ends and every buffer is returned (``JobEnded.leaks`` says otherwise).
Every report is saved by the run loop itself as it is made, so stopping never leaves a file
half-written. Thread-safe throughout; nothing here starts a thread until asked.
"""

from __future__ import annotations

import logging
import os
import threading
import time
from collections import deque
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field, replace
from typing import Literal

from bpmon.collectors.target import Target
from bpmon.model.counters import ServiceCounters
from bpmon.model.errors import BpmonError, ConfigError, JobError, JobOverError, TargetNotFoundError
from bpmon.model.events import (
    BurstSampled,
    JobEnded,
    JobFailed,
    JobStarted,
    ReportReady,
    Trouble,
    WatchEvent,
)
from bpmon.model.values import Report, Source
from bpmon.scenario import Scenario
from bpmon.service import facade, history
from bpmon.service.stored import RECENT_BURSTS, BurstSummary, StoredJob, StoredJobs
from bpmon.service.subscriptions import Notice, Subscribers

JobState = Literal["running", "ended", "failed", "stored"]
"""A watched job runs, ended (stopped) or failed; a job only in the runs directory is stored."""

JOIN_TIMEOUT_S = 30.0
"""The longest a stop waits for a watch's thread (a burst in progress is dropped; the job is
stopped and every runtime thread joined)."""
STUCK_AFTER_S = 60.0
"""A running watch whose thread has shown no sign of life this long is stuck (by default)."""
STUCK_AFTER_MIN_S = 5.0
"""The least ``stuck_after_s`` a server takes: a watch beats once a second, but one Flink
request or py-spy call of a burst may take a few seconds on a loaded machine."""

_log = logging.getLogger(__name__)


class AlreadyWatchedError(ConfigError):
    """A watch of this job is running already: stop it first (exit code 2, HTTP 409)."""


@dataclass(frozen=True, slots=True)
class JobView:
    """One job as the server shows it: state, latest report and its recent bursts.

    ``run_id`` and ``latest`` always belong together: the run a report came from (a running
    watch before its first report: its own run, and no report yet).

    Attributes:
        job: the job name.
        state: ``running``, ``ended``, ``failed`` (watched here) or ``stored``.
        source: what was watched (None for a watch that has no report yet and no stored run).
        run_id: the run of ``latest``; for a running watch without a report, its own run.
        latest: the newest report (None before the first burst of a job never seen before).
        recent_bursts: the job's newest bursts, oldest first: stored runs, then this watch's.
        error: why the watch failed.
        leaks: what did not end cleanly when the watch stopped.
        trouble: while running, the last setback since the last report (the target
            unavailable, a burst abandoned, a report not saved).
        reason: how the job ended when it ended by itself (finished, cancelled, exited).
        runs: the runs this server's watch saved in (none for a stored job): a watched job's
            own timeline, apart from the job's ``bpmon run`` and ``whatif`` runs.
    """

    job: str
    state: JobState
    source: Source | None
    run_id: str | None
    latest: Report | None
    recent_bursts: tuple[BurstSummary, ...]
    error: str | None = None
    leaks: tuple[str, ...] = ()
    trouble: str | None = None
    reason: str | None = None
    runs: tuple[str, ...] = ()

    @property
    def watched(self) -> bool:
        """True for a job watched by this server (running or not)."""
        return self.state != "stored"


@dataclass(eq=False)
class _Watch:
    """The mutable state of one watch, guarded by the registry's lock."""

    job: str
    run_id: str
    source: Source
    stop: threading.Event
    events: Iterator[WatchEvent]
    state: JobState = "running"
    error: str | None = None
    latest: Report | None = None
    recent_bursts: deque[BurstSummary] = field(default_factory=lambda: deque(maxlen=RECENT_BURSTS))
    leaks: tuple[str, ...] = ()
    thread: threading.Thread | None = None
    beat: float = field(default_factory=time.monotonic)
    runs: set[str] = field(default_factory=set)
    """Every run this watch saved in (a long watch goes on in a new run now and then)."""
    trouble: str | None = None
    overrun: bool = False
    reason: str | None = None


class Watches:
    """The jobs a server watches, and the stored ones it serves.

    Args:
        settings: the runs directory every report is saved to (and stored runs read from) and
            the rules to diagnose with.
        every_s: the default gap from one burst's start to the next.
        stored: the index of the runs directory (default: one over ``settings``).
    """

    def __init__(
        self,
        settings: facade.Settings,
        *,
        every_s: float | None = 10.0,
        stored: StoredJobs | None = None,
        stuck_after_s: float = STUCK_AFTER_S,
    ) -> None:
        self.settings = settings
        self.every_s = every_s
        self.stuck_after_s = stuck_after_s
        self.stored = stored if stored is not None else StoredJobs(settings)
        self._lock = threading.Lock()
        self._watches: dict[str, _Watch] = {}
        self._starting: set[str] = set()
        self.subscribers = Subscribers()
        self._counters = ServiceCounters()
        self._closed = False
        self._clock: Callable[[], float] = time.monotonic
        self._upkeep: history.Upkeep | None = None
        self.last_upkeep: history.Maintenance | None = None

    # ------------------------------------------------------------------------------- starting

    def start_scenario(self, scenario: Scenario, *, every_s: float | None = None) -> str:
        """Run ``scenario`` on bpmon's runtime until stopped, a burst every ``every_s`` s.

        Returns the job name. Raises AlreadyWatchedError when that job is watched already, and
        the service's errors (a bad rules file, too few buffers) before any thread starts.
        """
        self._reserve(scenario.name)
        try:
            stop = threading.Event()
            events = facade.run_scenario(
                scenario,
                self.settings,
                bursts=None,
                every_s=self._every(every_s),
                stop=stop,
                live=False,
            )
            return self._begin(events, stop)
        finally:
            with self._lock:
                self._starting.discard(scenario.name)

    def start_process(
        self,
        pid: int,
        *,
        profile: str = "python-queue",
        topology: str | None = None,
        every_s: float | None = None,
    ) -> str:
        """Monitor process ``pid`` with py-spy until stopped; returns the job name.

        Raises TargetNotFoundError at once when there is no such process.
        """
        _check_alive(pid)
        stop = threading.Event()
        events = facade.monitor_process(
            pid,
            collector_profile=profile,
            topology=topology,
            bursts=None,
            every_s=self._every(every_s),
            settings=self.settings,
            stop=stop,
            live=False,
        )
        return self._begin(events, stop)

    def start_flink(
        self,
        url: str,
        *,
        job: str | None = None,
        every_s: float | None = None,
        label: str | None = None,
    ) -> str:
        """Watch a running job of the Flink cluster at ``url`` (REST) until stopped.

        ``job`` is its id or name (None: the one running job); ``label`` is added to its name
        (its cluster). Returns bpmon's job name; an unreachable cluster or an unknown job raises
        at once (CollectorError), a job watched already AlreadyWatchedError.
        """
        with self._lock:
            self._refuse_if_closed()  # before the target's first requests to the cluster
        stop = threading.Event()
        events = facade.monitor_flink(
            url,
            job=job,
            bursts=None,
            every_s=self._every(every_s),
            settings=self.settings,
            stop=stop,
            live=False,
            label=label,
        )
        return self._begin(events, stop)

    def start_target(self, target: Target, plan: facade.WatchPlan) -> str:
        """Watch any target as ``plan`` says until stopped (``plan.bursts`` None) or done;
        returns the job name."""
        self._reserve(target.job)
        try:
            stop = threading.Event()
            events = facade.watch(target, plan, self.settings, stop=stop, live=False)
            return self._begin(events, stop)
        finally:
            with self._lock:
                self._starting.discard(target.job)

    def _every(self, every_s: float | None) -> float | None:
        return self.every_s if every_s is None else every_s

    def _refuse_if_closed(self) -> None:
        """Raise when the server is stopping (called under the lock)."""
        if self._closed:
            raise ConfigError("the server is stopping: no new watch can start")

    def _reserve(self, job: str) -> None:
        with self._lock:
            self._refuse_if_closed()
            if job in self._starting or self._running(job):
                raise AlreadyWatchedError(f"job {job!r} is watched already; stop it first")
            self._starting.add(job)

    def _running(self, job: str) -> bool:
        watch = self._watches.get(job)
        return watch is not None and watch.state == "running"

    def _begin(self, events: Iterator[WatchEvent], stop: threading.Event) -> str:
        """Take the watch's first event here (errors surface to the caller), then hand over."""
        first = next(events)
        if not isinstance(first, JobStarted):  # the target failed or ended as it started
            _close(events)
            raise _ended_at_once(first)
        watch = _Watch(first.job, first.run_id, first.source, stop, events)
        with self._lock:
            refused = self._closed or (first.job not in self._starting and self._running(first.job))
            if not refused:
                self._watches[first.job] = watch
                self._count(watches_started=1)
        if refused:  # closed outside the lock: stopping a job takes seconds
            stop.set()
            _close(events)
            raise AlreadyWatchedError(f"job {first.job!r} is watched already; stop it first")
        watch.thread = threading.Thread(
            target=self._consume, args=(watch,), name=f"bpmon-watch-{first.job}", daemon=True
        )
        watch.thread.start()
        return first.job

    # ------------------------------------------------------------------------------ consuming

    def _consume(self, watch: _Watch) -> None:
        """The watch's thread: record every burst and report until the run loop ends."""
        try:
            for event in watch.events:
                self._record(watch, event)
        except BpmonError as exc:
            self._finish(watch, "failed", str(exc))
        except Exception as exc:  # a bug: keep the server up, say so, count it
            _log.exception("watch of job %r failed", watch.job)
            self._finish(watch, "failed", f"unexpected error: {type(exc).__name__}: {exc}")
        finally:
            _close(watch.events)

    def _record(self, watch: _Watch, event: WatchEvent) -> None:
        with self._lock:
            watch.beat = self._clock()
        if isinstance(event, BurstSampled):
            with self._lock:
                self._count(bursts=1)
        elif isinstance(event, ReportReady):
            summary = BurstSummary.of(event.run_id, event.burst, event.report)
            with self._lock:
                watch.run_id = event.run_id
                watch.runs.add(event.run_id)
                watch.latest = event.report
                watch.recent_bursts.append(summary)
                watch.trouble, watch.overrun = event.save_error, False
                self._count(diagnoses=1)
                if event.save_error is not None:
                    self._count(errors=1)
            self.subscribers.notify(
                Notice(watch.job, "running", event.run_id, event.burst, event.report)
            )
        elif isinstance(event, Trouble):
            with self._lock:
                watch.trouble = f"{event.kind}: {event.detail}"
                watch.overrun = watch.overrun or event.kind == "overrun"
                self._count(errors=1)
            _log.warning("bpmon: watch of job %r: %s: %s", watch.job, event.kind, event.detail)
        elif isinstance(event, JobEnded):
            with self._lock:
                watch.leaks, watch.reason = event.leaks, event.reason
            if isinstance(event, JobFailed):
                self._finish(watch, "failed", event.error)
            else:
                self._finish(watch, "ended", None)

    def _finish(self, watch: _Watch, state: JobState, error: str | None) -> None:
        with self._lock:
            if watch.state != "running":
                return
            watch.state, watch.error = state, error
            if state == "failed":
                self._count(errors=1)
        self.subscribers.notify(Notice(watch.job, state, watch.run_id))

    # ----------------------------------------------------------------------------------- upkeep

    def start_upkeep(self, every_s: float = history.UPKEEP_EVERY_S) -> None:
        """Compact and prune the history now and then every ``every_s`` on a thread of its own
        (:class:`bpmon.service.history.Upkeep`); what could not be done counts as an error.
        Stopped by :meth:`stop_all`."""
        with self._lock:
            if self._upkeep is not None or self._closed:
                return
            self._upkeep = history.Upkeep(self.settings, self._kept_up, every_s)
        self._upkeep.start()

    def _kept_up(self, done: history.Maintenance) -> None:
        with self._lock:
            self.last_upkeep = done
            self._count(errors=len(done.problems))

    # ------------------------------------------------------------------------------- stopping

    def stop(self, job: str) -> JobView | None:
        """Stop the watch of ``job`` and wait for it; None when this server never watched it."""
        with self._lock:
            watch = self._watches.get(job)
        if watch is None:
            return None
        self._join([watch])
        return self.job(job)

    def stop_all(self, deadline_s: float = JOIN_TIMEOUT_S) -> tuple[str, ...]:
        """Stop every watch (all at once, then wait for each) and refuse new ones.

        Waits ``deadline_s`` in all for the watches' threads; a thread still running then is
        named among the leaks (a daemon thread: it does not hold the process). Returns what did
        not end cleanly, job by job (empty when everything stopped cleanly).
        """
        with self._lock:
            self._closed = True
            watches = list(self._watches.values())
            upkeep = self._upkeep
        began = self._clock()
        self._join(watches, deadline_s)
        if upkeep is not None:
            upkeep.stop(deadline_s - (self._clock() - began))
        self.close_streams()
        with self._lock:
            return tuple(f"{w.job}: {leak}" for w in watches for leak in w.leaks)

    def _join(self, watches: list[_Watch], deadline_s: float = JOIN_TIMEOUT_S) -> None:
        for watch in watches:
            watch.stop.set()
        deadline = self._clock() + deadline_s
        for watch in watches:
            if watch.thread is not None:
                watch.thread.join(max(0.0, deadline - self._clock()))
                leak = f"thread {watch.thread.name} did not stop"
                if watch.thread.is_alive() and leak not in watch.leaks:
                    with self._lock:
                        watch.leaks += (leak,)
            self._finish(watch, "ended", None)

    def close_streams(self) -> None:
        """End every subscription now and refuse new watches (the server is stopping)."""
        with self._lock:
            self._closed = True
        self.subscribers.close()

    # -------------------------------------------------------------------------------- reading

    def jobs(self) -> list[JobView]:
        """Every job, watched or stored, by name."""
        stored = self.stored.jobs()
        with self._lock:
            watched = {job: self._view(w, stored.get(job)) for job, w in self._watches.items()}
        views = {job: _stored_view(s) for job, s in stored.items()} | watched
        return [views[job] for job in sorted(views)]

    def job(self, name: str) -> JobView | None:
        """One job by name; None when it is neither watched nor stored."""
        stored = self.stored.jobs().get(name)
        with self._lock:
            watch = self._watches.get(name)
            if watch is not None:
                return self._view(watch, stored)
        return None if stored is None else _stored_view(stored)

    def running(self) -> list[str]:
        """The jobs being watched now, by name (no disk access)."""
        with self._lock:
            return sorted(job for job, w in self._watches.items() if w.state == "running")

    def stuck(self) -> list[str]:
        """The running watches that are stuck, by name, each with why (no disk access): no
        sign of life for ``stuck_after_s``, or a burst abandoned and no report since."""
        now = self._clock()
        found = []
        with self._lock:
            for job, w in sorted(self._watches.items()):
                if w.state != "running":
                    continue
                if now - w.beat > self.stuck_after_s:
                    found.append(f"{job}: no sign of life for {now - w.beat:.0f} s")
                elif w.overrun:
                    found.append(f"{job}: {w.trouble}")
        return found

    def latest(self) -> list[Report]:
        """The latest report of every job that has one (for ``/metrics``)."""
        return [v.latest for v in self.jobs() if v.latest is not None]

    def counters(self) -> ServiceCounters:
        """bpmon's own counters since the registry was made: bursts, diagnoses, errors."""
        with self._lock:
            return self._counters

    def _count(self, **more: int) -> None:
        """Add ``more`` to the counters (the lock held)."""
        now = self._counters
        self._counters = replace(now, **{k: getattr(now, k) + n for k, n in more.items()})

    def _view(self, watch: _Watch, stored: StoredJob | None) -> JobView:
        """A watched job's view (the lock held): its stored past, then this watch's bursts.

        Before its first report a running watch shows its own run and no report; an ended one
        shows the newest stored run instead (its own run has no report to show).
        """
        past = () if stored is None else stored.recent_bursts
        own = watch.runs | {watch.run_id}
        recent = tuple(s for s in past if s.run_id not in own) + tuple(watch.recent_bursts)
        run_id: str | None = watch.run_id
        latest = watch.latest
        if latest is None and watch.state != "running":
            run_id = None if stored is None else stored.latest.run_id
            latest = None if stored is None else stored.latest
        return JobView(
            job=watch.job,
            state=watch.state,
            source=watch.source,
            run_id=run_id,
            latest=latest,
            recent_bursts=recent[-RECENT_BURSTS:],
            error=watch.error,
            leaks=watch.leaks,
            trouble=watch.trouble if watch.state == "running" else None,
            reason=watch.reason,
            runs=tuple(sorted(own)),
        )


def _stored_view(stored: StoredJob) -> JobView:
    return JobView(
        job=stored.job,
        state="stored",
        source=stored.latest.source,
        run_id=stored.latest.run_id,
        latest=stored.latest,
        recent_bursts=stored.recent_bursts,
    )


def _check_alive(pid: int) -> None:
    if pid < 1:
        raise ConfigError(f"--monitor-pid {pid}: expected a process id (1 or more)")
    try:
        os.kill(pid, 0)  # signal 0: is it there (PermissionError: yes, not ours)
    except ProcessLookupError:
        raise TargetNotFoundError(f"--monitor-pid {pid}: no process has PID {pid}") from None
    except PermissionError:
        pass


def _ended_at_once(first: WatchEvent) -> BpmonError:
    """The error of a watch whose first event was its end: how the job ended, or why it
    failed."""
    if isinstance(first, JobFailed):
        return JobError(first.error)
    if isinstance(first, JobEnded) and first.reason is not None:
        return JobOverError(f"{first.reason} before its first burst")
    return BpmonError("the watch ended before it started")


def _close(events: Iterator[WatchEvent]) -> None:
    close = getattr(events, "close", None)
    if close is not None:
        close()
