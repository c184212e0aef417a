"""Sampling jitter with the live view on: drawn from the event stream, against drawn in the sampler.

``bpmon run`` shows a live table while it samples. Before the service owned the run loop, the CLI
redrew that table from the sampler's progress callback, on the sampler's thread, between two of
its 50 ms deadlines: jitter p99 rose from about 1.7 ms to 4.5 ms. Now the burst runs on a thread of
its own and the table is drawn on the thread that consumes the events. Three ways, interleaved,
on the same busy job (``demo``-shaped, parallelism 2, the source HIGH):

- ``no view``: the event stream consumed, nothing drawn;
- ``live view``: the event stream consumed by the real :class:`~bpmon.render.liveview.LiveView`,
drawing into a terminal-sized buffer (rich renders every table as it would on a screen);
- ``in sampler``: the old way, for comparison: the same table drawn from the progress callback
  every 5 samples, on the sampler's thread.

Each round runs one burst of 100 samples 50 ms apart per mode; the figure is each burst's jitter
p99 (how late samples were against their absolute deadlines), median over the rounds, and how
many samples were taken. The last line is a JSON object of the figures.

    .venv/bin/python tests/benchmarks/bench_live_view.py [--rounds 5]
"""

from __future__ import annotations

import argparse
import io
import json
import statistics
import tempfile
from collections.abc import Callable
from pathlib import Path

from rich.console import Console

from bpmon.collectors.inprocess import RuntimeTarget
from bpmon.model.events import LiveSnapshot, ReportReady
from bpmon.render.liveview import LiveView, live_table
from bpmon.rules.config import load_rules
from bpmon.scenario import parse_scenario
from bpmon.service.facade import Settings, observation_levels, run_scenario

SCENARIO = """
name = "bench-live-view"
duration_s = 1
[monitor]
warmup_s = 1.5
samples = 100
interval_ms = 50
[[operators]]
name = "source"
kind = "source"
parallelism = 2
rate = 4000
[[operators]]
name = "parse"
kind = "map"
parallelism = 2
cost_us = 20
inputs = [{ from = "source" }]
[[operators]]
name = "enrich"
kind = "map"
parallelism = 2
cost_us = 600
inputs = [{ from = "parse", partitioner = "rebalance" }]
[[operators]]
name = "sink"
kind = "sink"
parallelism = 1
cost_us = 10
inputs = [{ from = "enrich", partitioner = "rebalance" }]
"""


def screen() -> Console:
    """A console that renders as a 120-column terminal would, into memory."""
    return Console(file=io.StringIO(), force_terminal=True, width=120, height=40)


def via_events(draw: bool, runs: Path) -> tuple[float, int]:
    """One burst through the service's event stream, drawn by the live view or not."""
    events = run_scenario(parse_scenario(SCENARIO), Settings(runs_dir=runs), duration_s=0.1)
    report = None
    with LiveView(screen() if draw else Console(file=io.StringIO()), "bench") as view:
        for event in events:
            if isinstance(event, LiveSnapshot):
                view.update(event)
            elif isinstance(event, ReportReady):
                report = event.report
    assert report is not None and report.window.jitter_ms_p99 is not None
    return report.window.jitter_ms_p99, report.window.samples


def in_sampler() -> tuple[float, int]:
    """One burst drawing the table from the sampler's progress callback (the old CLI)."""
    scenario = parse_scenario(SCENARIO)
    target, rules, console = RuntimeTarget(scenario), load_rules(), screen()
    target.start()
    try:
        target.wait(scenario.monitor.warmup_s)

        def progress(done: int, total: int) -> None:
            if done % 5 == 0:
                snapshot = target.snapshot()
                vertices = observation_levels(snapshot, rules)
                console.print(
                    live_table("bench", LiveSnapshot(0.0, "sampling", vertices), console.width)
                )

        observation = target.observe(100, 50.0, progress)
    finally:
        target.stop()
    assert observation.window.jitter_ms_p99 is not None
    return observation.window.jitter_ms_p99, observation.window.samples


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as folder:
        runs = Path(folder)
        modes: dict[str, Callable[[], tuple[float, int]]] = {
            "no view": lambda: via_events(False, runs),
            "live view": lambda: via_events(True, runs),
            "in sampler": in_sampler,
        }
        jitter: dict[str, list[float]] = {m: [] for m in modes}
        taken: dict[str, list[int]] = {m: [] for m in modes}
        for n in range(args.rounds):
            for mode, run in modes.items():
                p99, samples = run()
                jitter[mode].append(p99)
                taken[mode].append(samples)
            print(
                f"round {n + 1}/{args.rounds}: "
                + ", ".join(f"{m} {jitter[m][-1]:.2f} ms" for m in modes)
            )
    medians = {m: statistics.median(v) for m, v in jitter.items()}
    print(f"\n{'mode':<12} {'jitter p99 (median)':>20} {'worst':>8} {'samples':>8}")
    for mode in modes:
        print(
            f"{mode:<12} {medians[mode]:>17.2f} ms {max(jitter[mode]):>5.2f} ms "
            f"{min(taken[mode]):>8}"
        )
    base = medians["no view"] or 1e-9
    print(
        f"\nlive view / no view: {medians['live view'] / base:.2f}x; "
        f"in sampler / no view: {medians['in sampler'] / base:.2f}x"
    )
    figures = {
        "rounds": args.rounds,
        **{f"jitter_p99_ms_{m.replace(' ', '_')}": round(v, 3) for m, v in medians.items()},
        "live_view_ratio": round(medians["live view"] / base, 2),
        "in_sampler_ratio": round(medians["in sampler"] / base, 2),
    }
    print(json.dumps(figures))


if __name__ == "__main__":
    main()
