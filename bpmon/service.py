"""The service facade: run a scenario and diagnose it, monitor a process, re-read a saved run.

Surfaces (the CLI, later the web dashboard) call only this module. It wires the layers below:
runtime -> collectors -> rules -> history, and owns no state of its own beyond a run in progress.

May import: everything below it (history, rules, collectors, runtime, model).
"""

from __future__ import annotations

import random
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from pathlib import Path

from bpmon.collectors.observe import observation_from_burst
from bpmon.collectors.profile import load_profile
from bpmon.collectors.pyspy import PySpySampler
from bpmon.collectors.runtime import RuntimeCollector
from bpmon.errors import ConfigError, JobError
from bpmon.history.runs import RunStore, new_run_id
from bpmon.model import Report
from bpmon.rules.config import RulesConfig, load_rules
from bpmon.rules.engine import diagnose
from bpmon.runtime.job import Job, JobResult
from bpmon.runtime.metrics import TaskMetrics, job_metrics
from bpmon.scenario import Scenario, example_names, load_example, load_scenario, load_topology

Progress = Callable[[int, int], None]
DEFAULT_RUNS_DIR = Path("bpmon-runs")


@dataclass(frozen=True, slots=True)
class Settings:
    """Where runs are kept and which rules apply (built once at the edge, passed down)."""

    runs_dir: Path = DEFAULT_RUNS_DIR
    rules_path: Path | None = None

    def rules(self) -> RulesConfig:
        """The rules in force."""
        return load_rules(self.rules_path)

    def store(self) -> RunStore:
        """The runs directory."""
        return RunStore(self.runs_dir)


def resolve_scenario(name_or_path: str) -> Scenario:
    """A scenario file by path, or one of the shipped examples by name (``demo``, ``hot-key``)."""
    path = Path(name_or_path)
    try:
        exists = path.exists()
    except OSError as exc:
        raise ConfigError(f"scenario {name_or_path[:80]!r}: {exc.strerror}") from None
    if exists:
        return load_scenario(path)
    if name_or_path.removesuffix(".toml") in example_names() and "/" not in name_or_path:
        return load_example(name_or_path)
    if path.suffix == ".toml" or "/" in name_or_path:
        return load_scenario(path)  # says which file is missing
    raise ConfigError(
        f"{name_or_path!r} is neither a scenario file nor a shipped example; "
        f"examples: {', '.join(example_names())}"
    )


@dataclass
class RunOutcome:
    """What a run produced."""

    run_id: str
    reports: list[Report] = field(default_factory=list)
    saved: list[Path] = field(default_factory=list)
    result: JobResult | None = None


class RunSession:
    """One scenario run under watch: start, look at its live metrics, take bursts, stop.

    Args:
        scenario: the job to run.
        settings: runs directory and rules.
        clock_now: wall clock for the run id (injected for tests).
        rng: randomness for the run id.
    """

    def __init__(
        self,
        scenario: Scenario,
        settings: Settings | None = None,
        clock_now: Callable[[], datetime] | None = None,
        rng: random.Random | None = None,
    ) -> None:
        self.scenario = scenario
        self.settings = settings or Settings()
        self._rules = self.settings.rules()
        now = (clock_now or (lambda: datetime.now(UTC)))()
        self.run_id = new_run_id(scenario.name, now, rng or random.Random())
        self.job = Job(scenario)
        self._collector = RuntimeCollector(self.job, run_id=self.run_id)
        self.outcome = RunOutcome(self.run_id)

    def start(self) -> None:
        """Start the job."""
        self.job.start()

    def live_metrics(self) -> dict[str, list[TaskMetrics]]:
        """Every subtask's metrics right now."""
        return job_metrics(self.job.tasks)

    def burst(self, progress: Progress | None = None) -> Report:
        """Sample one window, diagnose it, save the report; a failed job raises JobError."""
        monitor = self.scenario.monitor
        observation = self._collector.collect(monitor.samples, monitor.interval_ms, progress)
        self._raise_if_failed()
        report = diagnose(observation, self._rules)
        burst_no = len(self.outcome.reports)
        self.outcome.saved.append(self.settings.store().save(report, burst=burst_no))
        self.outcome.reports.append(report)
        return report

    def wait(self, seconds: float) -> None:
        """Let the job run ``seconds`` more (returns early, raising, if it fails)."""
        self.job.wait(seconds)
        self._raise_if_failed()

    def stop(self) -> JobResult:
        """Stop the job (idempotent); every thread stops and every buffer returns."""
        result = self.job.stop()
        self.outcome.result = result
        return result

    def _raise_if_failed(self) -> None:
        if self.job.failed:
            result = self.stop()
            raise JobError(f"job {self.scenario.name!r} failed: {result.error}")


def load_report(run: str, settings: Settings | None = None) -> Report:
    """A saved report by run id, run directory or file path."""
    return (settings or Settings()).store().load(run)


def monitor_process(
    pid: int,
    *,
    profile: str = "python-queue",
    topology: str | None = None,
    samples: int = 100,
    interval_ms: float = 50.0,
    pause: bool = False,
    settings: Settings | None = None,
    progress: Progress | None = None,
) -> Report:
    """Diagnose an external Python process through py-spy (``spec/monitor.md``)."""
    if samples < 1 or interval_ms <= 0:
        raise ConfigError(
            f"--samples {samples} / --interval-ms {interval_ms}: need at least 1 sample and a "
            f"positive interval"
        )
    settings = settings or Settings()
    chosen = load_profile(profile)
    graph = load_topology(topology) if topology is not None else None
    sampler = PySpySampler(pid, chosen, pause=pause)
    burst = sampler.burst(samples, interval_ms, progress=progress)
    job = graph.name if graph is not None else f"pid-{pid}"
    observation = observation_from_burst(burst, graph, chosen, job, "pyspy")
    run_id = new_run_id(job, datetime.now(UTC), random.Random())
    report = diagnose(replace(observation, run_id=run_id), settings.rules())
    settings.store().save(report)
    return report


def shipped_examples() -> Sequence[str]:
    """The names of the example scenarios bpmon ships."""
    return example_names()
