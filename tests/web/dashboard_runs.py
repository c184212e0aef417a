"""Real runs for the dashboard's tests: the lookup chain as shipped, then changed so its bottleneck
moves, both run on bpmon's runtime into one runs directory (as ``bpmon whatif`` runs them).

The shipped ``slow-map-chain`` (job ``lookup-chain``) starves at ``geo-lookup``; the changed copy
makes ``geo-lookup`` cheap and the sink ``store`` slow, so the root cause moves from a
slow-operator at geo-lookup to a slow-sink at store. A ``[monitor]`` table is added to the copy
so a burst takes under a second after a warm-up long enough for the buffers to fill.
"""

from __future__ import annotations

from pathlib import Path

from bpmon import service
from bpmon.model import Report
from bpmon.scenario import example_path, load_scenario
from bpmon.whatif import Change, changed

FAST_MONITOR = """
[monitor]
warmup_s = 2.0
samples = 40
interval_ms = 20
"""
MOVED = (Change("geo-lookup", "cost_us", 100), Change("store", "cost_us", 1500))
"""The change that moves the bottleneck from geo-lookup to store."""


def chain_file(folder: Path) -> Path:
    """A copy of the shipped slow-map-chain scenario with the fast ``[monitor]`` table."""
    path = folder / "lookup-chain.toml"
    path.write_text(example_path("slow-map-chain").read_text() + FAST_MONITOR)
    return path


def moved_bottleneck_runs(runs_dir: Path, folder: Path) -> tuple[Report, Report]:
    """Run the chain, then its changed copy, one burst each; both reports (before, after)."""
    settings = service.Settings(runs_dir=runs_dir)
    scenario = load_scenario(chain_file(folder))
    reports = []
    for version in (scenario, changed(scenario, MOVED)):
        ended = service.drain(service.run_scenario(version, settings, bursts=1, duration_s=1.0))
        reports.append(ended.reports[-1])
    return reports[0], reports[1]
