"""Real runs for the dashboard's tests, made on bpmon's runtime and by py-spy on a real process.

- **The lookup chain** as shipped, then changed so its bottleneck moves, both run into one runs
  directory as one job (a job re-run after a change of its code; ``bpmon whatif`` would store
  the changed run as a job of its own, ``lookup-chain with ...``). The shipped
  ``slow-map-chain`` (job ``lookup-chain``) starves at ``geo-lookup``; the changed copy makes
  ``geo-lookup`` cheap and the sink ``store`` slow, so the root cause moves from a
  slow-operator at geo-lookup to a slow-sink at store: the root cause that is not
  backpressured itself (level OK).
- **The hot key** as shipped (job ``hot-customer``): data skew at ``aggregate``, subtask 0.
- **Checkpoints**: the shipped ``checkpoint-timeouts`` (job ``checkpoint-timeouts``: aligned
  checkpoints that fail behind the backpressure of ``enrich``, a ``checkpoint-backpressure``
  finding) for three bursts and ``healthy`` (job ``healthy-filter``: quick checkpoints, no
  finding) for two, bursts of 40 samples 50 ms apart; and the tiny job ``plain``, without
  checkpoints.
- **A py-spy'd process**: ``tests/collectors/queue_pipeline.py``, watched without a topology
  file (job ``pid-PID``, no edges) and with one (job ``etl``).

Small network buffers (4 KB segments) and a ``[monitor]`` table are added to the scenarios, so
the buffers fill within seconds and a burst takes under a second: a run takes about 4 s, not 8.
"""

from __future__ import annotations

import shutil
from dataclasses import replace
from pathlib import Path

from bpmon.model.values import Report
from bpmon.scenario import example_path, load_example, load_scenario, parse_scenario
from bpmon.service import facade
from bpmon.service.whatif import SettingChange, changed
from tests.collectors.pipelines import TOPOLOGY
from tests.tiny import tiny

FAST_MONITOR = """
[network]
segment_size = 4096

[monitor]
warmup_s = 1.0
samples = 40
interval_ms = 20
"""
Chain = tuple[Path, Report, Report]
"""The chain's runs directory, and its reports before and after the change."""
MOVED = (SettingChange("geo-lookup", "cost_us", 100), SettingChange("store", "cost_us", 1500))
"""The change that moves the bottleneck from geo-lookup to store."""


def chain_file(folder: Path) -> Path:
    """A copy of the shipped slow-map-chain scenario with the fast ``[monitor]`` table."""
    path = folder / "lookup-chain.toml"
    path.write_text(example_path("slow-map-chain").read_text() + FAST_MONITOR)
    return path


def moved_bottleneck_runs(runs_dir: Path, folder: Path) -> tuple[Report, Report]:
    """Run the chain, then its changed copy, one burst each; both reports (before, after)."""
    settings = facade.Settings(runs_dir=runs_dir)
    scenario = load_scenario(chain_file(folder))
    reports = []
    for version in (scenario, replace(changed(scenario, MOVED), name=scenario.name)):
        ended = facade.drain(facade.run_scenario(version, settings, bursts=1, duration_s=1.0))
        reports.append(ended.reports[-1])
    return reports[0], reports[1]


TRIES = 2
"""A run whose newest burst the runtime counts as saturated (the machine, not the job: other
processes held the cores) is made once more, as the diagnosis tests do."""


def skew_run(runs_dir: Path) -> Report:
    """The shipped hot-key example, one burst: data skew at aggregate, subtask 0 (made again,
    :data:`TRIES` times at most, while the runtime counts it as saturated). Only the run kept is
    in ``runs_dir``."""
    scenario = parse_scenario(example_path("hot-key").read_text() + FAST_MONITOR)
    for attempt in range(TRIES):
        tried = runs_dir.parent / f"hot-key-{attempt}"
        settings = facade.Settings(runs_dir=tried)
        ended = facade.drain(facade.run_scenario(scenario, settings, bursts=1, duration_s=1.0))
        if not any(f.kind == "runtime-saturated" for f in ended.reports[-1].findings):
            break
    copy_runs(tried, runs_dir)
    return ended.reports[-1]


CHECKPOINTED = (("checkpoint-timeouts", 3), ("healthy", 2))
"""The shipped examples with checkpoints, and how many bursts of each are run."""
Checkpointed = tuple[Path, dict[str, list[Report]]]
"""The runs directory, and each checkpointed job's reports by job name, oldest first."""


def checkpoint_runs(runs_dir: Path) -> dict[str, list[Report]]:
    """The examples of :data:`CHECKPOINTED` (their warm-up and settling as shipped, so the
    checkpoints have failed by the first burst), and the tiny job ``plain``, without
    checkpoints; the reports of each job, oldest first. Only the run kept of each job is in
    ``runs_dir``."""
    reports = {}
    for name, bursts in CHECKPOINTED:
        scenario = load_example(name)
        shorter = replace(scenario, monitor=replace(scenario.monitor, samples=40, interval_ms=50.0))
        for attempt in range(TRIES):
            tried = runs_dir.parent / f"{name}-{attempt}"
            settings = facade.Settings(runs_dir=tried)
            events = facade.run_scenario(
                shorter, settings, bursts=bursts, duration_s=1.0, live=False
            )
            made = list(facade.drain(events).reports)
            if not any(f.kind == "runtime-saturated" for f in made[-1].findings):
                break
        copy_runs(tried, runs_dir)
        reports[scenario.name] = made
    settings = facade.Settings(runs_dir=runs_dir)
    plain = facade.run_scenario(parse_scenario(tiny("plain")), settings, duration_s=0.1)
    reports["plain"] = list(facade.drain(plain).reports)
    return reports


def pyspy_runs(runs_dir: Path, pid: int) -> tuple[Report, Report]:
    """Process ``pid`` watched by py-spy for one short burst without a topology file, then with
    ``etl-topology.toml``; both reports. Raises the collector's error when py-spy cannot read it."""
    settings = facade.Settings(runs_dir=runs_dir)
    reports = []
    for topology in (None, str(TOPOLOGY)):
        events = facade.monitor_process(
            pid, topology=topology, samples=20, interval_ms=20, settings=settings, live=False
        )
        reports.append(facade.drain(events).reports[-1])
    return reports[0], reports[1]


def copy_runs(source: Path, runs_dir: Path) -> None:
    """Copy the run folders of ``source`` into ``runs_dir`` (not its history store)."""
    shutil.copytree(source, runs_dir, dirs_exist_ok=True, ignore=shutil.ignore_patterns("history"))
