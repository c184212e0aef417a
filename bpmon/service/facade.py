"""The service facade: every surface (CLI, server, dashboard) stands on this module and the model.

It owns the run loop — warm-up, bursts, the rest of the job's duration, saving, stop — as one
generator of :mod:`bpmon.model.events` (job started, live snapshot, burst sampled, report ready, job
ended or failed) over any :class:`~bpmon.collectors.target.Target`: bpmon's runtime running a
scenario, or another process read with py-spy. Surfaces consume the events and never reach
below: they render model values, and stopping a watch is closing its generator (or setting its
``stop`` event).

May import: everything below it (history, rules, collectors, runtime, model).
"""

from __future__ import annotations

import random
import threading
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field, replace
from datetime import datetime
from pathlib import Path

from bpmon.collectors.flink import FlinkTarget
from bpmon.collectors.flink_rescale import FlinkRescale
from bpmon.collectors.inprocess import RuntimeTarget
from bpmon.collectors.process import ProcessTarget
from bpmon.collectors.target import Target
from bpmon.history.runs import RunStore, new_run_id
from bpmon.history.store import keep_in_history
from bpmon.model.clock import utc_now
from bpmon.model.datafiles import set_data_dir, shipped_doc
from bpmon.model.errors import (
    ConfigError,
    HistoryError,
    JobError,
    JobOverError,
    SaveError,
    UnavailableError,
)
from bpmon.model.events import (
    BurstSampled,
    JobEnded,
    JobFailed,
    JobStarted,
    ReportReady,
    Trouble,
    WatchEvent,
)
from bpmon.model.signals import VIEWS, Signal
from bpmon.model.values import Finding, Observation, Report, RunInfo
from bpmon.rules.config import RulesConfig, load_rules
from bpmon.rules.engine import diagnose
from bpmon.scenario import Scenario
from bpmon.service.runloop import BurstOverrunError, LoopPlan, RunLoop, Setbacks, StoppedError

DEFAULT_RUNS_DIR = Path("bpmon-runs")
RUN_BURSTS = 10_000
"""The most bursts in one run folder: a longer watch goes on in a new run (a run id of its own)."""
SAVE_ERRORS_KEPT = 10
"""The reasons of failed saves a watch keeps (it counts the rest)."""
PATIENCE_S = 60.0
"""How long a watch of a planned number of bursts waits for an unavailable target (a watch until
stopped waits for ever)."""


@dataclass(frozen=True, slots=True)
class Settings:
    """Where runs are kept, which rules apply, and the clock and randomness of run ids.

    Built once at the edge (defaults, then flags and ``BPMON_*`` variables) and passed down.
    """

    runs_dir: Path = DEFAULT_RUNS_DIR
    rules_path: Path | None = None
    now: Callable[[], datetime] = utc_now
    rng: random.Random = field(default_factory=random.Random)

    def rules(self) -> RulesConfig:
        """The rules in force."""
        return load_rules(self.rules_path)

    def store(self) -> RunStore:
        """The runs directory."""
        return RunStore(self.runs_dir)

    def new_run_id(self, job: str) -> str:
        """A fresh run id for ``job``: the one place run ids are made."""
        return new_run_id(job, self.now(), self.rng)


@dataclass(frozen=True, slots=True)
class WatchPlan:
    """How a target is watched.

    Attributes:
        samples: stack samples per burst.
        interval_ms: planned delay between two samples.
        bursts: windows to sample; None watches until stopped.
        warmup_s: seconds to let the job run before the first burst.
        settle_s: after the warm-up, at most this many seconds more while backpressure is
            still building (a pool filling, backpressure rising, a queued bottleneck;
            :mod:`bpmon.rules.settling`).
        every_s: seconds from the start of one burst to the start of the next (back to back
            when None or shorter than a burst).
        duration_s: the least total time the job runs (it keeps running after the last burst
            until then); None stops right after the last burst.
        patience_s: how long the target may stay unavailable (a timeout, HTTP 5xx, a Flink
            job restarting) before the watch gives up; None waits for ever.
        abandon_after_s: how long a burst may run before it is abandoned as overrun (None:
            four times its planned length plus 30 s).
        run_bursts: the most bursts saved in one run; the watch goes on in a new run after
            that (None: one run, whatever its length).
    """

    samples: int = 100
    interval_ms: float = 50.0
    bursts: int | None = 1
    warmup_s: float = 0.0
    settle_s: float = 0.0
    every_s: float | None = None
    duration_s: float | None = None
    patience_s: float | None = PATIENCE_S
    abandon_after_s: float | None = None
    run_bursts: int | None = RUN_BURSTS

    def __post_init__(self) -> None:
        if self.samples < 1 or not self.interval_ms > 0:
            raise ConfigError(
                f"--samples {self.samples} / --interval-ms {self.interval_ms:g}: need at least "
                "1 sample and a positive interval"
            )
        if self.bursts is not None and self.bursts < 1:
            raise ConfigError(f"--bursts {self.bursts}: sample at least 1 window")
        if self.duration_s is not None and not self.duration_s > 0:
            raise ConfigError(f"--duration {self.duration_s}: must be a positive number of seconds")
        if self.every_s is not None and not self.every_s > 0:
            raise ConfigError(f"--every {self.every_s}: must be a positive number of seconds")
        if self.run_bursts is not None and self.run_bursts < 1:
            raise ConfigError(f"run_bursts = {self.run_bursts}: a run holds at least 1 burst")


def scenario_plan(
    scenario: Scenario,
    *,
    bursts: int | None = 1,
    duration_s: float | None = None,
    every_s: float | None = None,
) -> WatchPlan:
    """The plan of ``bpmon run``: the scenario's ``[monitor]``, its duration unless overridden.

    ``every_s`` spaces the bursts (``bpmon serve --every``); None takes them back to back.
    """
    monitor = scenario.monitor
    return WatchPlan(
        samples=monitor.samples,
        interval_ms=monitor.interval_ms,
        bursts=bursts,
        warmup_s=monitor.warmup_s,
        settle_s=monitor.settle_s,
        every_s=every_s,
        duration_s=scenario.duration_s if duration_s is None else duration_s,
        patience_s=_patience(bursts),
    )


def _patience(bursts: int | None) -> float | None:
    """A watch until stopped waits for ever for an unavailable target; a planned one, a minute."""
    return None if bursts is None else PATIENCE_S


def outside_plan(
    samples: int, interval_ms: float, bursts: int | None, every_s: float | None
) -> WatchPlan:
    """The plan of a watch of something bpmon did not start (a process, a Flink job): no
    warm-up, no settling, no duration of its own."""
    return WatchPlan(
        samples=samples,
        interval_ms=interval_ms,
        bursts=bursts,
        every_s=every_s,
        patience_s=_patience(bursts),
    )


def run_scenario(
    scenario: Scenario,
    settings: Settings | None = None,
    *,
    bursts: int | None = 1,
    duration_s: float | None = None,
    every_s: float | None = None,
    stop: threading.Event | None = None,
    live: bool = True,
    observe: str = "runtime",
) -> Iterator[WatchEvent]:
    """Run ``scenario`` on bpmon's runtime and watch it: the events of :func:`watch`.

    With ``bursts=None`` the job runs until stopped, a burst every ``every_s`` seconds.
    ``observe`` diagnoses from only what that target would show of the job (``runtime``: all;
    ``flink``: what Flink's REST API and samples give; ``pyspy``: stacks alone).

    Raises:
        ConfigError: ``observe`` names no known target.
    """
    plan = scenario_plan(scenario, bursts=bursts, duration_s=duration_s, every_s=every_s)
    target = RuntimeTarget(scenario, view=view_of(observe))
    return watch(target, plan, settings, stop=stop, live=live)


def view_of(observe: str) -> frozenset[Signal]:
    """The signals ``--observe NAME`` keeps; ConfigError naming the choices otherwise."""
    view = VIEWS.get(observe)
    if view is None:
        raise ConfigError(
            f"--observe {observe}: expected one of {', '.join(VIEWS)} (what that target would "
            "show of the job; default runtime, everything)"
        )
    return view


def monitor_process(
    pid: int,
    *,
    collector_profile: str = "python-queue",
    topology: str | None = None,
    samples: int = 100,
    interval_ms: float = 50.0,
    bursts: int | None = 1,
    every_s: float | None = None,
    pause: bool = False,
    settings: Settings | None = None,
    stop: threading.Event | None = None,
    live: bool = True,
) -> Iterator[WatchEvent]:
    """Diagnose an external Python process through py-spy (``docs/topology.md``)."""
    plan = outside_plan(samples, interval_ms, bursts, every_s)
    target = ProcessTarget(pid, collector_profile=collector_profile, topology=topology, pause=pause)
    return watch(target, plan, settings, stop=stop, live=live)


def monitor_flink(
    url: str,
    *,
    job: str | None = None,
    collector_profile: str = "flink-jvm",
    samples: int = 100,
    interval_ms: float = 50.0,
    bursts: int | None = 1,
    every_s: float | None = None,
    settings: Settings | None = None,
    stop: threading.Event | None = None,
    live: bool = True,
) -> Iterator[WatchEvent]:
    """Diagnose a running job of the Flink cluster at ``url`` (its REST address) by id or name.

    The job is found and its graph read here, so an unreachable cluster or an unknown job is an
    error at once (:class:`~bpmon.model.errors.CollectorError`).
    """
    plan = outside_plan(samples, interval_ms, bursts, every_s)
    target = FlinkTarget(url, job, collector_profile=collector_profile)
    return watch(target, plan, settings, stop=stop, live=live)


RESCALE_TIMEOUT_S = 300.0
"""How long ``--verify`` waits for a Flink job to run at the recommended parallelism."""
RESCALE_SETTLE_S = 20.0
"""How long a rescaled Flink job runs before it is sampled again: backpressure that remains
builds up again within seconds, and Flink's busy time averages over its last few seconds."""


def rescale_flink(
    url: str,
    job: str | None,
    parallelism: Mapping[str, int],
    *,
    say: Callable[[str], None],
    timeout_s: float = RESCALE_TIMEOUT_S,
    settle_s: float = RESCALE_SETTLE_S,
    sleep: Callable[[float], None] = time.sleep,
) -> str:
    """Bring a Flink job to ``parallelism`` (vertex name -> subtasks): through the adaptive
    scheduler where the cluster has it, else by waiting for the user's own rescale; then let it
    run ``settle_s``. Returns the id of the job that runs at it (a restart gives a new one).

    Raises:
        CollectorError: the cluster or job cannot be read, a vertex is unknown, Flink refused the
            change, or the job did not run at it within ``timeout_s`` (with what runs instead).
    """
    rescale = FlinkRescale(url, job)
    rescale.check_slots(parallelism)
    asked = ", ".join(f"{name} to {n}" for name, n in parallelism.items())
    if rescale.adaptive():
        say(f"asking Flink's adaptive scheduler to rescale {asked} (resource requirements)")
        rescale.request(parallelism)
    else:
        say(
            f"the cluster cannot rescale in place (no adaptive scheduler): rescale {asked} "
            f"yourself (a savepoint, then a restart at that parallelism); waiting up to "
            f"{timeout_s:g} s for it"
        )
    ref = rescale.wait(parallelism, timeout_s)
    say(f"{ref.name!r} ({ref.id}) runs at {asked}; letting it settle {settle_s:g} s")
    sleep(settle_s)
    return ref.id


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


def load_report(run: str, settings: Settings | None = None, burst: int = 0) -> Report:
    """A saved report by run id, run directory or file path (burst ``burst`` of a run)."""
    return (settings or Settings()).store().load(run, burst=burst)


def stored_runs(
    settings: Settings | None = None, on_corrupt: Callable[[HistoryError], None] | None = None
) -> list[RunInfo]:
    """Every stored run, newest first; an unreadable one goes to ``on_corrupt``, untouched."""
    return (settings or Settings()).store().list_runs(on_corrupt)


def run_bursts(run: str, settings: Settings | None = None) -> list[tuple[int, Report]]:
    """Every burst report of a stored run, in order."""
    return (settings or Settings()).store().bursts(run)


def use_data_dir(path: Path | None) -> None:
    """Look up rules and collector profiles in ``path`` first (``--data-dir``), then bpmon's own.

    Raises:
        ConfigError: ``path`` is not an existing folder.
    """
    set_data_dir(path)


def format_doc(name: str) -> str:
    """One of bpmon's format documents (``scenario``, ``topology``, ``report``, ...) as text."""
    return shipped_doc(name)
