"""/metrics for a job of 1,000 subtasks: bpmon's custom collector against labelled Gauge objects.

bpmon exposes its reports through one custom collector (:mod:`bpmon.prometheus`) that builds the
metric families from the latest report at scrape time. The way most exporters do it instead is
to keep prometheus-client ``Gauge`` (and ``Info``) objects with labels and set every child from
each new report. Both are measured on the same reports and must expose the same samples:

- ``update``: the cost of taking in one new report. The collector only swaps a reference; the
  gauges set about 9,000 labelled children (nine per subtask) plus the vertex and job series.
  The gauges are given their best case: children are reused and never removed, so a value
  that disappears from a report would linger (the collector leaves it out).
- ``scrape``: rendering the registry as Prometheus's text format (what ``/metrics`` returns),
  median and p95 over the rounds, CPU time of the rendering thread (the machine may be shared;
  wall time is close when it is not). The collector is rendered both ways: with
  :func:`bpmon.prometheus.exposition` (what ``bpmon serve`` answers) and with prometheus-client's
  ``generate_latest``; the gauges with ``generate_latest``. All three expose the same series
  (checked before measuring). The goal for bpmon's way: <= 50 ms.

The job has ``--vertices`` vertices of equal parallelism adding up to ``--subtasks``; every
subtask has every metric. The last line is a JSON object of the figures.

    .venv/bin/python tests/benchmarks/bench_metrics.py [--subtasks 1000] [--rounds 30]
"""

from __future__ import annotations

import argparse
import json
import random
import statistics
import time
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from functools import partial

from prometheus_client import CollectorRegistry, Counter, Gauge, Info, generate_latest
from prometheus_client.parser import text_string_to_metric_families

from bpmon.model.counters import ServiceCounters
from bpmon.model.values import (
    Level,
    Metrics,
    Report,
    RootCause,
    SubtaskStatus,
    VertexStatus,
    Window,
)
from bpmon.prometheus import SEVERITY, exposition, make_registry

GOAL_MS = 50.0
END = datetime(2026, 1, 1, tzinfo=UTC)
LEVELS: tuple[Level, ...] = ("OK", "LOW", "HIGH")


def synthetic_report(subtasks: int, vertices: int, rng: random.Random, burst: int) -> Report:
    """One report of a job of ``subtasks`` subtasks over ``vertices`` vertices, every value set."""
    per_vertex = subtasks // vertices

    def metrics() -> Metrics:
        return Metrics(
            busy_ratio=rng.random(),
            idle_ratio=rng.random(),
            backpressured_time_ratio=rng.random(),
            out_pool_usage=rng.random(),
            in_pool_usage=rng.random(),
            records_in_per_s=rng.uniform(0, 5e4),
            records_out_per_s=rng.uniform(0, 5e4),
        )

    statuses = []
    for v in range(vertices):
        subs = tuple(
            SubtaskStatus(i, rng.choice(LEVELS), rng.random(), metrics()) for i in range(per_vertex)
        )
        statuses.append(VertexStatus(f"v{v:02d}", per_vertex, "HIGH", 0.9, metrics(), (), subs))
    end = END + timedelta(seconds=10 * burst)
    window = Window(end - timedelta(seconds=5), end, 100, 50.0, 2.0)
    cause = RootCause(f"v{rng.randrange(vertices):02d}", "slow-operator", (0,), rng.random())
    return Report(f"run-{burst}", "bench", "runtime", window, tuple(statuses), (cause,))


class GaugeExporter:
    """The naive way: labelled Gauge/Info objects on a private registry, set from each report."""

    SUBTASK = (
        ("bpmon_subtask_backpressure_ratio", lambda s: s.ratio),
        ("bpmon_subtask_backpressure_severity", lambda s: SEVERITY[s.level]),
        ("bpmon_subtask_busy_time_ratio", lambda s: s.metrics.busy_ratio),
        ("bpmon_subtask_idle_time_ratio", lambda s: s.metrics.idle_ratio),
        ("bpmon_subtask_backpressured_time_ratio", lambda s: s.metrics.backpressured_time_ratio),
        ("bpmon_subtask_out_pool_usage_ratio", lambda s: s.metrics.out_pool_usage),
        ("bpmon_subtask_in_pool_usage_ratio", lambda s: s.metrics.in_pool_usage),
        ("bpmon_subtask_records_in_per_second", lambda s: s.metrics.records_in_per_s),
        ("bpmon_subtask_records_out_per_second", lambda s: s.metrics.records_out_per_s),
    )

    def __init__(self) -> None:
        """Create every metric object once, as an exporter does at start-up."""
        self.registry = CollectorRegistry(auto_describe=False)
        labels = ("job", "vertex", "subtask")
        self.subtask = [
            (Gauge(name, name, labels, registry=self.registry), value)
            for name, value in self.SUBTASK
        ]
        vertex = ("job", "vertex")
        self.ratio = Gauge("bpmon_backpressure_ratio", "r", vertex, registry=self.registry)
        self.severity = Gauge("bpmon_backpressure_severity", "s", vertex, registry=self.registry)
        self.level = Gauge(
            "bpmon_backpressure_level", "l", (*vertex, "level"), registry=self.registry
        )
        self.parallelism = Gauge("bpmon_vertex_parallelism", "p", vertex, registry=self.registry)
        cause = ("job", "vertex", "kind")
        self.cause = Info("bpmon_root_cause", "c", cause, registry=self.registry)
        self.confidence = Gauge(
            "bpmon_root_cause_confidence_ratio", "c", cause, registry=self.registry
        )
        self.causes = Gauge("bpmon_root_causes", "n", ("job",), registry=self.registry)
        self.job = {
            name: Gauge(name, name, ("job",), registry=self.registry)
            for name in ("bpmon_window_samples", "bpmon_window_interval_seconds",
                         "bpmon_window_jitter_p99_seconds", "bpmon_report_timestamp_seconds",
                         "bpmon_report_age_seconds")
        }  # fmt: skip
        self.report_info = Info("bpmon_report", "i", ("job",), registry=self.registry)
        self.bursts = Counter("bpmon_bursts", "b", registry=self.registry)

    def update(self, report: Report) -> None:
        """Set every child from ``report`` (the root cause is cleared first: it may move)."""
        job = report.job
        for vertex in report.vertices:
            for s in vertex.subtasks:
                index = str(s.index)
                for gauge, value in self.subtask:
                    gauge.labels(job, vertex.name, index).set(value(s))
            self.ratio.labels(job, vertex.name).set(vertex.ratio or 0.0)
            self.severity.labels(job, vertex.name).set(SEVERITY[vertex.level or "OK"])
            for level in LEVELS:
                state = float(level == vertex.level)
                self.level.labels(job, vertex.name, level.lower()).set(state)
            self.parallelism.labels(job, vertex.name).set(vertex.parallelism)
        self.cause.clear()
        self.confidence.clear()
        for cause in report.root_causes or ():
            self.cause.labels(job, cause.vertex, cause.kind).info(
                {"confidence": f"{cause.confidence:.2f}"}
            )
            self.confidence.labels(job, cause.vertex, cause.kind).set(cause.confidence)
        self.causes.labels(job).set(len(report.root_causes or ()))
        window = report.window
        self.job["bpmon_window_samples"].labels(job).set(window.samples)
        self.job["bpmon_window_interval_seconds"].labels(job).set(window.interval_ms / 1000)
        self.job["bpmon_window_jitter_p99_seconds"].labels(job).set(
            (window.jitter_ms_p99 or 0) / 1e3
        )
        self.job["bpmon_report_timestamp_seconds"].labels(job).set(window.end.timestamp())
        self.job["bpmon_report_age_seconds"].labels(job).set_to_current_time()
        self.report_info.labels(job).info(
            {"run_id": report.run_id, "source": report.source, "levels_from": report.levels_from}
        )
        self.bursts.inc()


def _ms(action: Callable[[], object]) -> float:
    """CPU milliseconds of this thread spent in ``action``."""
    started = time.thread_time()
    action()
    return (time.thread_time() - started) * 1000


def _render_into(size: dict[str, int], way: str, render: Callable[[], bytes]) -> None:
    size[way] = len(render())


def _series(text: bytes) -> set[tuple[str, tuple[tuple[str, str], ...]]]:
    """The (name, labels) of every sample, to check both ways expose the same series."""
    return {
        (s.name, tuple(sorted(s.labels.items())))
        for family in text_string_to_metric_families(text.decode())
        for s in family.samples
        if not s.name.endswith("_created") and s.name != "bpmon_build_info"
    }


def _summary(values: list[float]) -> dict[str, float]:
    ordered = sorted(values)
    p95 = ordered[min(len(ordered) - 1, round(0.95 * (len(ordered) - 1)))]
    return {"median_ms": round(statistics.median(ordered), 3), "p95_ms": round(p95, 3)}


def main() -> None:
    """Measure both ways, print a table and the JSON figures."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--subtasks", type=int, default=1000)
    parser.add_argument("--vertices", type=int, default=10)
    parser.add_argument("--rounds", type=int, default=30)
    args = parser.parse_args()
    rng = random.Random(7)
    reports = [synthetic_report(args.subtasks, args.vertices, rng, b) for b in range(args.rounds)]

    holder = [reports[0]]
    collector = make_registry(lambda: holder, lambda: ServiceCounters(bursts=1), now=lambda: END)
    gauges = GaugeExporter()
    gauges.update(reports[0])
    series = _series(generate_latest(collector))
    assert series == _series(generate_latest(gauges.registry)), "the two ways differ"

    def swap(report: Report) -> None:
        holder[0] = report

    renders: dict[str, Callable[[], bytes]] = {
        "collector": lambda: exposition(collector),
        "collector+generate_latest": lambda: generate_latest(collector),
        "gauges": lambda: generate_latest(gauges.registry),
    }
    updates: dict[str, Callable[[Report], None]] = {
        "collector": swap,
        "collector+generate_latest": swap,
        "gauges": gauges.update,
    }
    update: dict[str, list[float]] = {way: [] for way in renders}
    scrape: dict[str, list[float]] = {way: [] for way in renders}
    size: dict[str, int] = {}
    for report in reports:  # interleaved, so every way sees the same machine load
        for way, render in renders.items():
            update[way].append(_ms(partial(updates[way], report)))
            scrape[way].append(_ms(partial(_render_into, size, way, render)))

    figures: dict[str, object] = {"subtasks": args.subtasks, "series": len(series),
                                  "rounds": args.rounds, "goal_scrape_ms": GOAL_MS}  # fmt: skip
    print(f"{args.subtasks} subtasks, {len(series)} series, {args.rounds} rounds (CPU ms)")
    print(f"{'way':<26} {'update median/p95':>20} {'scrape median/p95':>20} {'bytes':>8}")
    for way in renders:
        up, sc = _summary(update[way]), _summary(scrape[way])
        figures[way] = {"update": up, "scrape": sc, "bytes": size[way]}
        print(f"{way:<26} {up['median_ms']:>9.3f} / {up['p95_ms']:<8.3f}"
              f"{sc['median_ms']:>9.3f} / {sc['p95_ms']:<8.3f} {size[way]:>8}")  # fmt: skip
    bpmon_scrape = _summary(scrape["collector"])["median_ms"]
    figures["goal_met"] = bpmon_scrape <= GOAL_MS
    print(f"bpmon's scrape: median {bpmon_scrape:.1f} ms against a goal of {GOAL_MS:.0f} ms")
    print(json.dumps(figures))


if __name__ == "__main__":
    main()
