"""One shortened burst of a scenario on the real runtime, and the shipped examples' runs shared by
the modules that check them (the diagnosis end to end, the evidence's figures).

A shipped example run once serves every test that reads its report: ``tests/conftest.py`` gives
the session a :class:`ShippedRuns` (``shipped_runs``) and runs the modules that use it on one
worker under pytest-xdist, so each example runs once a session, not once a module.
"""

from __future__ import annotations

import tempfile
from dataclasses import dataclass
from pathlib import Path

from bpmon.collectors.inprocess import RuntimeTarget
from bpmon.model.events import JobEnded
from bpmon.model.values import Report
from bpmon.scenario import Scenario, load_example
from bpmon.service.facade import Settings, WatchPlan, watch

SAMPLES = 60
INTERVAL_MS = 50.0
"""The burst: 60 samples 50 ms apart (3 s instead of Flink's 5 s), so the whole corpus fits in
a few minutes."""


def watch_once(scenario: Scenario, runs_dir: Path) -> tuple[Report, JobEnded]:
    """Run ``scenario``, take one shortened burst after its warm-up, stop it; report and end."""
    plan = WatchPlan(
        samples=SAMPLES,
        interval_ms=INTERVAL_MS,
        bursts=1,
        warmup_s=scenario.monitor.warmup_s,
        settle_s=scenario.monitor.settle_s,
    )
    *_, ended = watch(RuntimeTarget(scenario), plan, Settings(runs_dir=runs_dir))
    assert isinstance(ended, JobEnded), ended
    assert len(ended.reports) == 1, ended
    report = ended.reports[0]
    assert ended.paths == (runs_dir / report.run_id / "report.json",)
    assert ended.paths[0].is_file()
    return report, ended


@dataclass(frozen=True, slots=True)
class ShippedRun:
    """A shipped example's scenario, and the report and end of its one burst."""

    scenario: Scenario
    report: Report
    ended: JobEnded


class ShippedRuns:
    """The shipped examples, each run at most once (on first asking) into a folder of its own."""

    def __init__(self, folder: Path) -> None:
        self._folder = folder
        self._runs: dict[str, ShippedRun] = {}

    def __getitem__(self, name: str) -> ShippedRun:
        if name not in self._runs:
            self._runs[name] = self.fresh(name)
        return self._runs[name]

    def fresh(self, name: str) -> ShippedRun:
        """A new run of ``name``, not kept (a test that needs another try)."""
        scenario = load_example(name)
        runs_dir = Path(tempfile.mkdtemp(prefix=f"{name}-", dir=self._folder))
        report, ended = watch_once(scenario, runs_dir)
        return ShippedRun(scenario, report, ended)
