"""The service facade: every surface (CLI, server, dashboard) stands on this module and the model.

It owns the run loop — warm-up, bursts, the rest of the job's duration, saving, stop — as one
generator of :mod:`bpmon.events` (job started, live snapshot, burst sampled, report ready, job
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
from collections.abc import Callable, Generator, Iterator, Sequence
from dataclasses import dataclass, field, replace
from datetime import datetime
from pathlib import Path

from bpmon.clock import utc_now
from bpmon.collectors.flink import FlinkTarget
from bpmon.collectors.process import ProcessTarget
from bpmon.collectors.runtime import RuntimeTarget
from bpmon.collectors.target import Target
from bpmon.datafiles import set_data_dir, shipped_doc
from bpmon.errors import ConfigError, HistoryError, JobError
from bpmon.events import (
    BurstSampled,
    Event,
    JobEnded,
    JobFailed,
    JobStarted,
    LiveSnapshot,
    ReportReady,
    Sampling,
)
from bpmon.history.runs import RunStore, new_run_id
from bpmon.history.store import keep_in_history
from bpmon.model import Observation, Report, RunInfo, VertexStatus
from bpmon.rules.config import RulesConfig, load_rules
from bpmon.rules.engine import diagnose
from bpmon.rules.levels import vertex_status
from bpmon.scenario import Scenario, example_names, load_example, load_scenario
from bpmon.scenario.compiled import JobPlan, compile_job
from bpmon.settling import PoolTrend

DEFAULT_RUNS_DIR = Path("bpmon-runs")
LIVE_EVERY_S = 0.25
"""How often a live snapshot is taken while a job runs (the CLI's table refreshes at 4 Hz)."""
LIVE_EVERY_SAMPLES = 5
"""While sampling, a live snapshot follows every fifth sample (4 Hz at 50 ms intervals)."""
SAMPLER_STOP_S = 2.0
"""The longest a burst interrupted mid-way takes to stop (one py-spy dump at most)."""


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
            :mod:`bpmon.settling`).
        every_s: seconds from the start of one burst to the start of the next (back to back
            when None or shorter than a burst).
        duration_s: the least total time the job runs (it keeps running after the last burst
            until then); None stops right after the last burst.
    """

    samples: int = 100
    interval_ms: float = 50.0
    bursts: int | None = 1
    warmup_s: float = 0.0
    settle_s: float = 0.0
    every_s: float | None = None
    duration_s: float | None = None

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

    @property
    def burst_s(self) -> float:
        """The planned length of one burst."""
        return self.samples * self.interval_ms / 1000


def resolve_scenario(name_or_path: str, *, allow_unsupported: bool = False) -> Scenario:
    """A scenario file by path, or one of the shipped examples by name (``demo``, ``hot-key``).

    ``allow_unsupported`` also loads what the runtime cannot run yet (for tools that only read).
    """
    path = Path(name_or_path)
    try:
        exists = path.exists()
    except OSError as exc:
        raise ConfigError(f"scenario {name_or_path[:80]!r}: {exc.strerror}") from None
    if exists:
        return load_scenario(path, allow_unsupported=allow_unsupported)
    if name_or_path.removesuffix(".toml") in example_names() and "/" not in name_or_path:
        return load_example(name_or_path)
    if path.suffix == ".toml" or "/" in name_or_path:
        return load_scenario(path)  # says which file is missing
    raise ConfigError(
        f"{name_or_path!r} is neither a scenario file nor a shipped example; "
        f"examples: {', '.join(example_names())}"
    )


def job_plan(name_or_path: str) -> JobPlan:
    """The compiled plan of a scenario (``bpmon plan``): regions, slot sharing groups, slots and
    managed memory, as the runtime will schedule them; nothing is run."""
    return compile_job(resolve_scenario(name_or_path, allow_unsupported=True))


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
    )


def run_scenario(
    scenario: Scenario,
    settings: Settings | None = None,
    *,
    bursts: int | None = 1,
    duration_s: float | None = None,
    every_s: float | None = None,
    stop: threading.Event | None = None,
) -> Iterator[Event]:
    """Run ``scenario`` on bpmon's runtime and watch it: the events of :func:`watch`.

    With ``bursts=None`` the job runs until stopped, a burst every ``every_s`` seconds.
    """
    plan = scenario_plan(scenario, bursts=bursts, duration_s=duration_s, every_s=every_s)
    return watch(RuntimeTarget(scenario), plan, settings, stop=stop)


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
) -> Iterator[Event]:
    """Diagnose an external Python process through py-spy (``docs/topology.md``)."""
    plan = WatchPlan(samples=samples, interval_ms=interval_ms, bursts=bursts, every_s=every_s)
    target = ProcessTarget(pid, collector_profile=collector_profile, topology=topology, pause=pause)
    return watch(target, plan, settings, stop=stop)


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
) -> Iterator[Event]:
    """Diagnose a running job of the Flink cluster at ``url`` (its REST address) by id or name.

    The job is found and its graph read here, so an unreachable cluster or an unknown job is an
    error at once (:class:`~bpmon.errors.CollectorError`).
    """
    plan = WatchPlan(samples=samples, interval_ms=interval_ms, bursts=bursts, every_s=every_s)
    target = FlinkTarget(url, job, collector_profile=collector_profile)
    return watch(target, plan, settings, stop=stop)


def watch(
    target: Target,
    plan: WatchPlan,
    settings: Settings | None = None,
    *,
    stop: threading.Event | None = None,
) -> Iterator[Event]:
    """The run loop: start ``target``, sample it as ``plan`` says, diagnose and save every burst.

    The rules are read here, before anything starts, so a bad rules file is an error at once.
    The returned stream yields :class:`JobStarted`, then :class:`LiveSnapshot` about four times
    a second, :class:`BurstSampled` and :class:`ReportReady` per burst, and last
    :class:`JobEnded` (or :class:`JobFailed`). The target is stopped however the stream ends:
    exhausted, closed by the consumer (``close()``), interrupted (Ctrl-C) or through ``stop``.

    Raises:
        BpmonError: bad settings at once; an unreadable target while watching. A failed runtime
            job is not raised: it ends the stream with :class:`JobFailed`.
    """
    settings = settings or Settings()
    loop = _Loop(target, plan, settings.rules(), stop or threading.Event())
    return _watch(loop, settings.store(), settings.new_run_id(target.job))


def _watch(loop: _Loop, store: RunStore, run_id: str) -> Iterator[Event]:
    target, plan = loop.target, loop.plan
    reports: list[Report] = []
    paths: list[Path] = []
    failure: str | None = None
    try:
        target.start()
        yield JobStarted(run_id, target.job, target.source, plan.bursts, plan.duration_s)
        yield from loop.warm_up(plan.warmup_s, plan.settle_s)
        burst = 0
        while not loop.stopped and (plan.bursts is None or burst < plan.bursts):
            began = loop.clock()
            observation = yield from loop.sample(burst)
            observation = replace(observation, run_id=run_id)
            yield BurstSampled(run_id, burst, observation)
            report = diagnose(observation, loop.rules)
            if observation.notes:  # the collector's own findings (a Flink burst's sampling)
                report = replace(report, findings=(*report.findings, *observation.notes))
            paths.append(save_report(store, report, burst))
            reports.append(report)
            yield ReportReady(run_id, burst, report, paths[-1])
            burst += 1
            if plan.every_s is not None and (plan.bursts is None or burst < plan.bursts):
                yield from loop.idle(plan.every_s - (loop.clock() - began), "waiting")
        if plan.duration_s is not None:
            yield from loop.idle(plan.duration_s - loop.elapsed(), "running")
    except JobError as exc:
        failure = str(exc)
    except _StoppedError:
        pass  # asked to stop mid-burst: the unfinished burst is dropped, the rest is kept
    finally:
        loop.end()
        ending = target.stop()
    ended = (run_id, tuple(reports), tuple(paths), ending.leaks)
    yield JobFailed(*ended, error=failure) if failure is not None else JobEnded(*ended)


class _StoppedError(Exception):
    """The watch was asked to stop in the middle of a burst."""


class _Loop:
    """The waiting and sampling of :func:`watch`, yielding live snapshots as it goes."""

    def __init__(
        self, target: Target, plan: WatchPlan, rules: RulesConfig, stop: threading.Event
    ) -> None:
        self.target, self.plan, self.rules, self.stop = target, plan, rules, stop
        self.clock = time.monotonic
        self._t0 = self.clock()
        self._ended = False

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

    def idle(
        self, seconds: float, phase: str, until: Callable[[], bool] | None = None
    ) -> Iterator[LiveSnapshot]:
        """Let ``seconds`` pass (or less, once ``until()`` holds), a live snapshot every quarter
        second."""
        deadline = self.clock() + max(0.0, seconds)
        while not self.stopped and (left := deadline - self.clock()) > 0:
            if until is not None and until():
                break
            if self.stop.wait(min(LIVE_EVERY_S, left)):
                break
            self.target.wait(0)
            yield self.live(phase)

    def warm_up(self, warmup_s: float, settle_s: float) -> Iterator[Event]:
        """The warm-up, then up to ``settle_s`` more while backpressure is still building."""
        trend = PoolTrend()
        for event in self.idle(warmup_s, "warming up"):
            trend.add(event.vertices)
            yield event
        for event in self.idle(settle_s, "settling", until=trend.settled):
            trend.add(event.vertices)
            yield event

    def sample(self, burst: int) -> Generator[Event, None, Observation]:
        """One burst, sampled on a thread of its own; live snapshots from this one meanwhile.

        A snapshot is taken (and drawn by the consumer) right after every fifth sample, when the
        sampler has most of an interval before its next deadline: never on the sampler's thread,
        and never at a moment when holding the interpreter would make a sample late.
        """
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
        sampler.start()
        try:
            while sampler.is_alive():
                tick.wait(LIVE_EVERY_S * 2)  # a slow sampler (py-spy) still shows progress
                tick.clear()
                if self.stopped:
                    raise _StoppedError
                if sampler.is_alive():
                    yield self.live("sampling", Sampling(burst, done[0], self.plan.samples))
        finally:  # closed or interrupted mid-burst: the sampler stops too
            halt.set()
            sampler.join(SAMPLER_STOP_S)
        if errors:
            raise errors[0]
        return result[0]

    def live(self, phase: str, sampling: Sampling | None = None) -> LiveSnapshot:
        """The target's metrics now, with levels from the time accounting."""
        snapshot = self.target.snapshot()
        vertices = () if snapshot is None else observation_levels(snapshot, self.rules)
        return LiveSnapshot(self.elapsed(), phase, vertices, sampling)


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


def drain(events: Iterator[Event]) -> JobEnded:
    """Run a watch to its end without looking at it; JobError if the job failed."""
    last: Event | None = None
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


def shipped_examples() -> Sequence[str]:
    """The names of the example scenarios bpmon ships."""
    return example_names()


def observation_levels(observation: Observation, rules: RulesConfig) -> tuple[VertexStatus, ...]:
    """The report lines of an observation, without a diagnosis (levels and totals only)."""
    return tuple(vertex_status(v, rules.levels) for v in observation.vertices)
