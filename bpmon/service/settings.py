"""What a watch is given: where runs are kept and which rules apply, and how a target is watched.

Built once at the edge (defaults, then flags and ``BPMON_*`` variables) and passed down:
:class:`Settings` for every command, :class:`WatchPlan` for a watch (the plan of ``bpmon run``
from a scenario's ``[monitor]``, :func:`scenario_plan`; that of a watch of something bpmon did
not start, :func:`outside_plan`).
"""

from __future__ import annotations

import random
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from datetime import datetime
from pathlib import Path

from bpmon.history.runs import RunStore, new_run_id
from bpmon.model.clock import utc_now
from bpmon.model.errors import ConfigError
from bpmon.rules.autoscaler_config import load_autoscaler_config
from bpmon.rules.config import RulesConfig, load_rules
from bpmon.scenario import Scenario

DEFAULT_RUNS_DIR = Path("bpmon-runs")
RUN_BURSTS = 10_000
"""The most bursts in one run folder: a longer watch goes on in a new run (a run id of its own)."""
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
    autoscaler_path: Path | None = None
    """A file of ``job.autoscaler.*`` options for the report's autoscaler opinion (None: the
    autoscaler's defaults)."""

    def rules(self) -> RulesConfig:
        """The rules in force, with the autoscaler's options of :attr:`autoscaler_path`."""
        rules = load_rules(self.rules_path)
        if self.autoscaler_path is None:
            return rules
        return replace(rules, autoscaler=load_autoscaler_config(self.autoscaler_path))

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
