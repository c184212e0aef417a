"""Fidelity: the runtime shows what a real Flink cluster shows, on every example scenario.

On a Flink cluster, source -> slow operator -> sink shows the source at ``outPoolUsage`` 1.0 and
``backPressuredTimeMsPerSecond`` ~980, the slow operator at ``busyTimeMsPerSecond`` 1,000 and the
sink at ``idleTimeMsPerSecond`` 1,000. Each example scenario must show its own version of that
pattern, as its comment describes: the bottleneck busy, everything upstream of it backpressured,
everything downstream idle; a hot or slow subtask busy while its siblings idle; a flatmap of big
records finishing each on overdraft buffers instead of blocking; under TCP flow control an
unrelated pipeline backpressured by the shared connection; in a healthy job nothing backpressured.

Which vertices play which part is read from the scenario graph and its ``[expect]`` table, so the
same checks run on the shipped examples (``bpmon/scenarios``) and on the acceptance cases
(``tests/scenarios``), whose files use other names and numbers.

All jobs of a corpus run at once and share one warm-up: with 32 KiB buffers, credit and a 100 ms
flusher a slow operator needs a few seconds before every buffer upstream of it is full, and the
metrics average over 3 s. Thresholds leave room for a loaded 2-core machine (busy >= 800 rather
than 1,000) but sit far from what a swapped root cause or a broken time accounting would give.
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from bpmon.runtime.job import Job, JobResult
from bpmon.runtime.metrics import TaskMetrics, job_metrics
from bpmon.scenario import (
    Expectation,
    Scenario,
    example_names,
    example_path,
    load_expectation,
    load_scenario,
    parse_scenario,
)

StartJob = Callable[[Scenario], Job]
StopJob = Callable[[Job], JobResult]

CASES = Path(__file__).resolve().parents[1] / "scenarios"
WARMUP_S = 5.0
"""Before the outPoolUsage samples; the metrics snapshot follows one second later."""

BUSY = 800.0  # the bottleneck: Flink shows 1,000
IDLE = 700.0  # downstream of the bottleneck: Flink shows 1,000
HIGH = 500.0  # Flink's HIGH backpressure level starts above 50 %
LOW = 100.0  # Flink's LOW level starts at 10 %; below is OK


@dataclass(frozen=True)
class Run:
    """One scenario after the warm-up: its metrics, and what a second of samples saw."""

    name: str
    scenario: Scenario
    expect: Expectation
    metrics: dict[str, list[TaskMetrics]]
    peak_out_pool: dict[str, list[float]]
    """Per vertex and subtask, the highest outPoolUsage of ten samples over the last second (an
    instantaneous gauge, unlike the time shares that average three seconds)."""
    contrast: Run | None = field(default=None)
    """The same scenario under credit-based flow control (TCP scenarios only)."""


def _credit_variant(scenario: Scenario) -> Scenario:
    network = dataclasses.replace(scenario.network, flow_control="credit")
    return dataclasses.replace(scenario, name=f"{scenario.name}@credit", network=network)


def _run_all(
    scenarios: dict[str, tuple[Scenario, Expectation]], start: StartJob, stop: StopJob
) -> dict[str, Run]:
    """Start every scenario (and a credit twin of each TCP one), warm up once, snapshot, stop."""
    jobs = {name: start(scenario) for name, (scenario, _) in scenarios.items()}
    twins = {
        name: start(_credit_variant(scenario))
        for name, (scenario, _) in scenarios.items()
        if scenario.network.flow_control == "tcp"
    }
    time.sleep(WARMUP_S)
    peaks: dict[str, dict[str, list[float]]] = {name: {} for name in jobs}
    for _ in range(10):
        for name, job in jobs.items():
            for vertex, ms in job_metrics(job.tasks).items():
                usage = [m.out_pool_usage or 0.0 for m in ms]
                seen = peaks[name].get(vertex, usage)
                peaks[name][vertex] = [max(a, b) for a, b in zip(seen, usage, strict=True)]
        time.sleep(0.1)
    snapshot = {name: job_metrics(job.tasks) for name, job in jobs.items()}
    twin_snapshot = {name: job_metrics(job.tasks) for name, job in twins.items()}
    for job in [*jobs.values(), *twins.values()]:
        stop(job)
    runs = {}
    for name, (scenario, expect) in scenarios.items():
        contrast = None
        if name in twins:
            contrast = Run(f"{name}@credit", twins[name].scenario, expect, twin_snapshot[name], {})
        runs[name] = Run(name, scenario, expect, snapshot[name], peaks[name], contrast)
    return runs


def _load(path: Path) -> tuple[Scenario, Expectation]:
    expect = load_expectation(path)
    assert expect is not None, f"{path} has no [expect] table"
    return load_scenario(path), expect


# -- the parts vertices play ------------------------------------------------------------------


def _ancestors(scenario: Scenario, name: str) -> set[str]:
    found: set[str] = set()
    todo = [name]
    while todo:
        for op in scenario.upstream(todo.pop()):
            if op.name not in found:
                found.add(op.name)
                todo.append(op.name)
    return found


def _descendants(scenario: Scenario, name: str) -> set[str]:
    found: set[str] = set()
    todo = [name]
    while todo:
        for op in scenario.downstream(todo.pop()):
            if op.name not in found:
                found.add(op.name)
                todo.append(op.name)
    return found


def _is_source(run: Run, vertex: str) -> bool:
    return run.scenario.operator(vertex).kind == "source"


def _show(ms: list[TaskMetrics]) -> str:
    return ", ".join(
        f"{m.thread}: busy {m.busy_ms_per_s:.0f} idle {m.idle_ms_per_s:.0f} "
        f"bp {m.backpressured_ms_per_s:.0f} (hard {m.hard_backpressured_ms_per_s:.0f}) "
        f"outPool {m.out_pool_usage}"
        for m in ms
    )


# -- the checks -------------------------------------------------------------------------------


def check_bottleneck_vertex(run: Run) -> None:
    """The root cause busy and not backpressured; upstream backpressured; downstream idle."""
    root = run.expect.root_cause
    roots = run.metrics[root]
    assert all(m.busy_ms_per_s >= BUSY for m in roots), _show(roots)
    assert all(m.backpressured_ms_per_s <= LOW for m in roots), _show(roots)
    for vertex in _ancestors(run.scenario, root):
        ms = run.metrics[vertex]
        if _is_source(run, vertex):
            # Flink shows ~980 here; see test_a_rate_limited_source_is_backpressured_like_flink
            assert all(m.backpressured_ms_per_s >= 500 for m in ms), _show(ms)
        else:
            assert all(m.backpressured_ms_per_s >= HIGH for m in ms), _show(ms)
        peaks = run.peak_out_pool[vertex]
        assert all(peak >= 0.5 for peak in peaks), f"{vertex}: outPoolUsage peaks {peaks}"
    for vertex in _descendants(run.scenario, root):
        ms = run.metrics[vertex]
        assert all(m.idle_ms_per_s >= IDLE for m in ms), _show(ms)


def check_hot_subtasks(run: Run) -> None:
    """The named subtasks busy, their siblings idle, upstream HIGH, downstream idle."""
    root, hot = run.expect.root_cause, set(run.expect.subtasks)
    assert hot, f"{run.name}: [expect] names no subtasks"
    for m in run.metrics[root]:
        if m.index in hot:
            assert m.busy_ms_per_s >= BUSY, _show([m])
        else:
            assert m.idle_ms_per_s >= IDLE, _show([m])
    for producer in run.scenario.upstream(root):
        ms = run.metrics[producer.name]
        assert max(m.backpressured_ms_per_s for m in ms) >= HIGH, _show(ms)
    for vertex in _descendants(run.scenario, root):
        ms = run.metrics[vertex]
        assert all(m.idle_ms_per_s >= IDLE for m in ms), _show(ms)


def check_fan_in(run: Run) -> None:
    """Several sources feed the bottleneck; every one of them is backpressured by it."""
    sources = [v for v in _ancestors(run.scenario, run.expect.root_cause) if _is_source(run, v)]
    assert len(sources) >= 2, sources
    for source in sources:
        ms = run.metrics[source]
        assert all(m.backpressured_ms_per_s >= LOW for m in ms), _show(ms)


def check_overdraft(run: Run) -> None:
    """The flatmap feeding the bottleneck, whose every record needs several buffers, waits for
    output space without ever blocking inside a buffer request: overdraft buffers let it finish
    the record it is writing (FLIP-227)."""
    for producer in run.scenario.upstream(run.expect.root_cause):
        assert producer.kind == "flatmap"
        ms = run.metrics[producer.name]
        assert all(m.soft_backpressured_ms_per_s >= HIGH for m in ms), _show(ms)
        assert all(m.hard_backpressured_ms_per_s < LOW for m in ms), _show(ms)


def check_head_of_line(run: Run) -> None:
    """Under TCP, a pipeline that shares the connection but not the bottleneck is backpressured
    too (LOW is enough) while its own sink idles; under credit it is not backpressured at all."""
    assert run.scenario.network.flow_control == "tcp"
    assert run.contrast is not None
    root = run.expect.root_cause
    involved = {root} | _ancestors(run.scenario, root) | _descendants(run.scenario, root)
    collateral = [op.name for op in run.scenario.operators if op.name not in involved]
    sources = [v for v in collateral if _is_source(run, v)]
    sinks = [v for v in collateral if run.scenario.operator(v).kind == "sink"]
    assert sources and sinks, f"{run.name}: no second pipeline"
    for sink in sinks:
        ms = run.metrics[sink]
        assert all(m.busy_ms_per_s <= 300 and m.idle_ms_per_s >= 600 for m in ms), _show(ms)
    for source in sources:
        ms = run.metrics[source]
        assert max(m.backpressured_ms_per_s for m in ms) >= LOW, _show(ms)
        twin = run.contrast.metrics[source]
        assert all(m.backpressured_ms_per_s < 50 for m in twin), "under credit: " + _show(twin)
    twin_roots = run.contrast.metrics[root]
    assert all(m.busy_ms_per_s >= BUSY for m in twin_roots), "under credit: " + _show(twin_roots)


def check_healthy(run: Run) -> None:
    """Nothing backpressured, nothing more than half busy."""
    for ms in run.metrics.values():
        assert all(m.backpressured_ms_per_s < LOW for m in ms), _show(ms)
        assert all(m.busy_ms_per_s <= 500 for m in ms), _show(ms)


BY_KIND: dict[str | None, Callable[[Run], None]] = {
    None: check_healthy,
    "slow-operator": check_bottleneck_vertex,
    "slow-sink": check_bottleneck_vertex,
    "data-skew": check_hot_subtasks,
    "slow-subtask": check_hot_subtasks,
}
BY_SHAPE: dict[str, Callable[[Run], None]] = {
    "fan-in": check_fan_in,
    "flatmap-overdraft": check_overdraft,
    "tcp-head-of-line": check_head_of_line,
}
"""Checks beyond the kind's, for the examples whose comment promises more (by file name)."""


def check(run: Run, stem: str) -> None:
    """Every check that applies to the scenario file ``stem``."""
    kind_check = BY_KIND.get(run.expect.kind)
    if kind_check is None:
        pytest.fail(f"{run.name}: no fidelity check for kind {run.expect.kind!r}; add one")
    kind_check(run)
    if stem in BY_SHAPE:
        BY_SHAPE[stem](run)


# -- the shipped examples ---------------------------------------------------------------------

REFERENCE = """
name = "flink-reference"

[network]
task_managers = 1

[[operators]]
name = "source"
kind = "source"
rate = {rate}

[[operators]]
name = "slow"
kind = "map"
cost_us = 1000
inputs = [{{ from = "source" }}]

[[operators]]
name = "sink"
kind = "sink"
inputs = [{{ from = "slow" }}]
"""
"""Flink's own picture: a source twice (or 1.5 times) as fast as the operator after it."""


@pytest.fixture(scope="module")
def shipped(start_module_job: StartJob, stop_job: StopJob) -> dict[str, Run]:
    """Every shipped example plus the two reference jobs, after one shared warm-up."""
    scenarios = {name: _load(example_path(name)) for name in example_names()}
    for label, rate in (("unlimited", 0), ("rate-limited", 1500)):
        reference = parse_scenario(REFERENCE.format(rate=rate), f"<reference {label}>")
        scenarios[f"reference/{label}"] = (reference, Expectation("slow", "slow-operator"))
    return _run_all(scenarios, start_module_job, stop_job)


@pytest.mark.slow
@pytest.mark.parametrize("stem", example_names())
def test_shipped_example_shows_its_pattern(shipped: dict[str, Run], stem: str) -> None:
    check(shipped[stem], stem)


@pytest.mark.slow
def test_source_slow_operator_sink_looks_as_on_flink(shipped: dict[str, Run]) -> None:
    """The issue's reference: outPoolUsage 1.0 and ~980 backpressured, busy 1,000, idle 1,000."""
    metrics = shipped["reference/unlimited"].metrics
    (source,), (slow,), (sink,) = metrics["source"], metrics["slow"], metrics["sink"]
    assert shipped["reference/unlimited"].peak_out_pool["source"] == [1.0]
    assert source.backpressured_ms_per_s >= 700
    assert slow.busy_ms_per_s >= BUSY
    assert slow.records_in_per_s == pytest.approx(1000, rel=0.15)
    assert sink.idle_ms_per_s >= IDLE


@pytest.mark.slow
def test_a_rate_limited_source_is_backpressured_like_flink(shipped: dict[str, Run]) -> None:
    """1,500 records/s into 1,000/s of capacity: on Flink the source waits for buffers ~98 %."""
    metrics = shipped["reference/rate-limited"].metrics
    (source,), (slow,) = metrics["source"], metrics["slow"]
    assert slow.busy_ms_per_s >= BUSY
    assert source.backpressured_ms_per_s >= 700, _show([source])
    assert shipped["reference/rate-limited"].peak_out_pool["source"] == [1.0]


# -- the acceptance cases (tests/scenarios) ---------------------------------------------------

CASE_STEMS = sorted(p.stem for p in CASES.glob("*.toml"))


@pytest.fixture(scope="module")
def cases(start_module_job: StartJob, stop_job: StopJob) -> Iterator[dict[str, Run]]:
    """Every acceptance case, after one shared warm-up."""
    scenarios = {stem: _load(CASES / f"{stem}.toml") for stem in CASE_STEMS}
    yield _run_all(scenarios, start_module_job, stop_job)


@pytest.mark.slow
@pytest.mark.parametrize("stem", CASE_STEMS)
def test_acceptance_case_shows_its_pattern(cases: dict[str, Run], stem: str) -> None:
    check(cases[stem], stem)
