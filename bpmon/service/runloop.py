"""The waiting and sampling of a watch, as generators of events: the inside of the run loop.

:class:`RunLoop` is what :func:`bpmon.service.facade.watch` drives between a target's start and
stop: it lets time pass (the warm-up, the settling, the gap between bursts) and samples bursts, and
yields :class:`~bpmon.model.events.LiveSnapshot` events as it goes — the target's metrics about four
times a second when someone looks (``live``), else a bare heartbeat about once a second, so the
consumer always knows the loop is alive.

Two ways a long watch goes wrong are handled here, without ending it:

- **a burst that overruns its plan** several times over (a stuck py-spy, a JobManager that
  takes minutes to answer) is abandoned: :class:`BurstOverrunError` says so, the watch reports
  it and goes on. The sampler thread is asked to stop; while it has not, no new burst starts.
- **a target that is unavailable for now** (:class:`~bpmon.model.errors.UnavailableError`: a
timeout, an HTTP 5xx, a Flink job restarting) is tried again with backoff: :class:`Setbacks` counts
the tries, says how long to wait, and turns the gap into a ``gap`` finding on the next report; a
watch with a patience gives up once the gap is longer.

May import: the collectors' target protocol, the model (the service layer).
"""

from __future__ import annotations

import re
import threading
import time
from collections.abc import Callable, Generator, Iterator
from dataclasses import dataclass

from bpmon.collectors.target import Target
from bpmon.model.errors import UnavailableError
from bpmon.model.events import LiveSnapshot, SamplingProgress, WatchEvent
from bpmon.model.values import Finding, Observation, VertexStatus
from bpmon.rules.config import RulesConfig
from bpmon.rules.levels import vertex_status
from bpmon.rules.settling import PoolTrend

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
BACKOFF_FIRST_S = 1.0
BACKOFF_MAX_S = 30.0
"""An unavailable target is tried again after 1 s, 2 s, 4 s, ... at most every 30 s."""
REASONS_KEPT = 3
"""The different reasons a gap finding names (the tries for others are counted)."""
_FIGURES = re.compile(r"\d+(?:[.,]\d+)*")


class StoppedError(Exception):
    """The watch was asked to stop in the middle of a burst."""


class BurstOverrunError(Exception):
    """A burst ran far past its plan and was abandoned (the message says how far)."""


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


class Setbacks:
    """The bursts a watch could not take, and what its next report says about them.

    Whatever the length of a gap (a JobManager down for a day), what is kept is bounded: the
    number of tries, the first :data:`REASONS_KEPT` different reasons (told apart by their
    words, not their figures: "4 times in 1.7 s" and "4 times in 1.9 s" are one reason, shown
    as last seen) and how many bursts were abandoned, with the last one's text.

    Args:
        job: the job the findings name.
        patience_s: how long the target may stay unreadable before the watch gives up (None:
            for ever, a watch until stopped).
        clock: monotonic seconds.
    """

    def __init__(
        self, job: str, patience_s: float | None, clock: Callable[[], float] = time.monotonic
    ) -> None:
        self.job, self.patience_s, self._clock = job, patience_s, clock
        self._since: float | None = None
        self._tries = 0
        self._reasons: dict[str, str] = {}
        self._other_reasons = 0
        self._overruns = 0
        self._last_overrun = ""

    def unavailable(self, exc: UnavailableError) -> float:
        """A burst could not be read: the seconds to wait before the next try.

        Raises:
            UnavailableError: ``exc`` itself, once the gap is longer than the patience.
        """
        self._tried()
        key = _FIGURES.sub("#", str(exc))
        if key in self._reasons or len(self._reasons) < REASONS_KEPT:
            self._reasons[key] = str(exc)
        elif key not in self._reasons:
            self._other_reasons += 1
        if self._out_of_patience():
            raise exc
        return float(min(BACKOFF_MAX_S, BACKOFF_FIRST_S * 2.0 ** min(self._tries - 1, 30)))

    def overran(self, exc: BurstOverrunError) -> None:
        """A burst was abandoned: its next report says so (and the gap goes on).

        Raises:
            UnavailableError: the gap is longer than the patience.
        """
        self._tried()
        self._overruns += 1
        self._last_overrun = str(exc)
        if self._out_of_patience():
            raise UnavailableError(f"no burst could be taken for {self.patience_s:g} s: {exc}")

    def _tried(self) -> None:
        if self._since is None:
            self._since = self._clock()
        self._tries += 1

    def _out_of_patience(self) -> bool:
        assert self._since is not None
        return self.patience_s is not None and self._clock() - self._since > self.patience_s

    def findings(self) -> tuple[Finding, ...]:
        """What the next report must say about the bursts missed since the last one; resets."""
        notes = []
        if self._overruns:
            before = f"{self._overruns} bursts abandoned; the last: " if self._overruns > 1 else ""
            notes.append(Finding("overrun", self.job, before + self._last_overrun))
        if self._since is not None and self._reasons:
            gap_s = self._clock() - self._since
            reasons = "; then ".join(self._reasons.values())
            others = self._other_reasons
            more = f" (and {others} tries for other reasons)" if others else ""
            notes.append(
                Finding(
                    "gap",
                    self.job,
                    f"no window for {gap_s:.0f} s before this one ({self._tries} tries): "
                    f"{reasons}{more}",
                )
            )
        self._since, self._tries, self._reasons = None, 0, {}
        self._other_reasons, self._overruns, self._last_overrun = 0, 0, ""
        return tuple(notes)


def observation_levels(observation: Observation, rules: RulesConfig) -> tuple[VertexStatus, ...]:
    """The report lines of an observation, without a diagnosis (levels and totals only)."""
    return tuple(vertex_status(v, rules.levels) for v in observation.vertices)
