"""Fidelity: the runtime shows what a real Flink cluster shows, on every example scenario.

On a Flink cluster, source -> slow operator -> sink shows the source at ``outPoolUsage`` 1.0 and
``backPressuredTimeMsPerSecond`` ~980, the slow operator at ``busyTimeMsPerSecond`` 1,000 and the
sink at ``idleTimeMsPerSecond`` 1,000. Each example scenario must show its own version of that
pattern, as its comment describes: the bottleneck busy, everything upstream of it backpressured,
everything downstream idle; a hot or slow subtask busy while its siblings idle; a flatmap of big
records finishing each on overdraft buffers instead of blocking; under TCP flow control a
sub-pipeline backpressured because its channel shares a stalled connection with the bottleneck's
(one exchange), while a pipeline on other exchanges runs free (Flink before 1.5 had a connection per
exchange); a job whose waits form a cycle moving nothing; in a healthy job nothing backpressured.

Which vertices play which part is read from the scenario graph and its ``[expect]`` table, so the
same checks run on the shipped examples (``bpmon/scenarios``) and on the acceptance cases
(``tests/scenarios``), whose files use other names and numbers.

All jobs of a corpus run at once and share one warm-up: with 32 KiB buffers, credit and Flink's
flushing (a flush publishes the bytes written so far; the writer keeps filling the buffer) a slow
operator needs several seconds, up to a quarter of a minute, before every buffer upstream of it is
full. The metrics then cover exactly the three seconds during which the output pools are sampled
(``window_metrics``): a backpressured rate-limited source catches up in bursts of up to a second of
records, so a shorter span may catch it between two bursts. An example whose shared run misses
its pattern (a loaded machine may deschedule one job's threads for long) is run again on its own.

What is asserted survives a loaded 2-core machine: which state each subtask spent most of that
span in (busy, idle or backpressured), whether a healthy source kept its schedule,
whether an output pool filled, orderings between subtasks and between the TCP and credit
twins, and service never faster than its cost. Flink's own figures (busy ~1,000, backpressured
~980) are measured, with their targets, by ``tests/benchmarks/bench_fidelity.py``.
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from bpmon.runtime.job import Job
from bpmon.runtime.metrics import Counters, TaskMetrics, counters, job_metrics, window_metrics
from bpmon.runtime.pacing import Schedule
from bpmon.runtime.scheduler import TaskState
from bpmon.scenario import (
    Expectation,
    Scenario,
    example_names,
    example_path,
    load_expectation,
    load_scenario,
    parse_scenario,
)
from bpmon.scenario.rates import offered_total
from tests.runtime.jobs import StartJob, StopJob, dominant

CASES = Path(__file__).resolve().parents[1] / "scenarios"
WARMUP_S = 20.0
"""Before the measured span: with Flink's flushing, the slowest example to build (a slow subtask
with a small excess) has its source HIGH after about 16 s."""
BOUNDED_WARMUP_S = 5.0
"""The warm-up of a job whose sources are bounded: started later, so it still runs in the span."""
POOL_SAMPLES = 30
"""outPoolUsage samples 100 ms apart: the measured span."""


@dataclass(frozen=True)
class Run:
    """One scenario after the warm-up: its metrics, and what the measured span saw."""

    name: str
    scenario: Scenario
    expect: Expectation
    metrics: dict[str, list[TaskMetrics]]
    """Every subtask's metrics over exactly the measured span."""
    peak_out_pool: dict[str, list[float]]
    """Per vertex and subtask, the highest outPoolUsage sampled over that span."""
    schedules: dict[str, list[tuple[Schedule, Schedule]]]
    """Per rate-limited source and subtask, its schedule at the start and end of that span."""
    contrast: Run | None = field(default=None)
    """The same scenario under credit-based flow control (TCP scenarios only)."""


def _credit_variant(scenario: Scenario) -> Scenario:
    network = dataclasses.replace(scenario.network, flow_control="credit")
    return dataclasses.replace(scenario, name=f"{scenario.name}@credit", network=network)


Reading = tuple[Counters, dict[str, list[Schedule | None]]]


def _read(job: Job) -> Reading:
    schedules = {
        vertex: [t.limiter.schedule() for t in tasks if t.limiter is not None]
        for vertex, tasks in job.tasks.items()
    }
    return counters(job.tasks), schedules


def _pairs(
    first: dict[str, list[Schedule | None]], last: dict[str, list[Schedule | None]]
) -> dict[str, list[tuple[Schedule, Schedule]]]:
    """The (start, end) schedules of every rate-limited source subtask."""
    pairs: dict[str, list[tuple[Schedule, Schedule]]] = {}
    for vertex, readings in first.items():
        both = [(a, b) for a, b in zip(readings, last[vertex], strict=True) if a and b]
        if both:
            pairs[vertex] = both
    return pairs


def _run_all(
    scenarios: dict[str, tuple[Scenario, Expectation]], start: StartJob, stop: StopJob
) -> dict[str, Run]:
    """Start every scenario (and a credit twin of each TCP one), warm up once, measure one
    span (counters at both ends, pools sampled in between), stop."""
    short = {name for name, (scenario, _) in scenarios.items() if _bounded(scenario)}
    jobs = {name: start(scenario) for name, (scenario, _) in scenarios.items() if name not in short}
    twins = {
        name: start(_credit_variant(scenario))
        for name, (scenario, _) in scenarios.items()
        if scenario.network.flow_control == "tcp"
    }
    time.sleep(WARMUP_S - BOUNDED_WARMUP_S)
    jobs |= {name: start(scenarios[name][0]) for name in short}
    time.sleep(BOUNDED_WARMUP_S)
    first = {name: _read(job) for name, job in jobs.items()}
    twin_first = {name: _read(job) for name, job in twins.items()}
    peaks: dict[str, dict[str, list[float]]] = {name: {} for name in jobs}
    for _ in range(POOL_SAMPLES):
        for name, job in jobs.items():
            for vertex, ms in job_metrics(job.tasks).items():
                usage = [m.out_pool_usage or 0.0 for m in ms]
                seen = peaks[name].get(vertex, usage)
                peaks[name][vertex] = [max(a, b) for a, b in zip(seen, usage, strict=True)]
        time.sleep(0.1)
    last = {name: _read(job) for name, job in jobs.items()}
    twin_last = {name: _read(job) for name, job in twins.items()}
    for job in [*jobs.values(), *twins.values()]:
        stop(job)
    runs = {}
    for name, (scenario, expect) in scenarios.items():
        contrast = None
        if name in twins:
            (a, sa), (b, sb) = twin_first[name], twin_last[name]
            twin = twins[name].scenario
            contrast = Run(f"{name}@credit", twin, expect, window_metrics(a, b), {}, _pairs(sa, sb))
        (a, sa), (b, sb) = first[name], last[name]
        metrics = window_metrics(a, b)
        runs[name] = Run(name, scenario, expect, metrics, peaks[name], _pairs(sa, sb), contrast)
    return runs


def _bounded(scenario: Scenario) -> bool:
    """Whether a source of the job is bounded and would finish during the full warm-up."""
    return any(
        op.records is not None and (not op.rate or op.records / op.rate < 2 * WARMUP_S)
        for op in scenario.operators
        if op.kind == "source"
    )


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


def mostly(run: Run, vertex: str, state: str) -> None:
    """Every subtask of ``vertex`` spent most of the measured span in ``state``."""
    ms = run.metrics[vertex]
    assert all(dominant(m) == state for m in ms), f"{run.name}: {vertex} not {state}: " + _show(ms)


def kept_schedule(run: Run, source: str) -> bool:
    """Whether every subtask of a rate-limited source dropped nothing from its schedule during
    the span: it was never held back longer than its one second of catch-up.

    (The converse is no test of backpressure: a source held back by less than a second's worth
    over the span catches up in bursts and looks on schedule.)"""
    return all(last.forgiven == first.forgiven for first, last in run.schedules[source])


# -- the checks -------------------------------------------------------------------------------


def check_bottleneck_vertex(run: Run) -> None:
    """The root cause busy; everything upstream backpressured with its output pools filling;
    everything downstream idle."""
    root = run.expect.root_cause
    mostly(run, root, "busy")
    for vertex in _ancestors(run.scenario, root):
        mostly(run, vertex, "bp")
        peaks = run.peak_out_pool[vertex]
        assert all(peak >= 0.5 for peak in peaks), f"{vertex}: outPoolUsage peaks {peaks}"
    for vertex in _descendants(run.scenario, root):
        mostly(run, vertex, "idle")


def check_hot_subtasks(run: Run) -> None:
    """The named subtasks busy, their siblings idle, a producer backpressured, downstream idle."""
    root, hot = run.expect.root_cause, set(run.expect.subtasks)
    assert hot, f"{run.name}: [expect] names no subtasks"
    for m in run.metrics[root]:
        assert dominant(m) == ("busy" if m.index in hot else "idle"), _show([m])
    for producer in run.scenario.upstream(root):
        ms = run.metrics[producer.name]
        assert any(dominant(m) == "bp" for m in ms), _show(ms)
    for vertex in _descendants(run.scenario, root):
        mostly(run, vertex, "idle")


def check_fan_in(run: Run) -> None:
    """Several sources feed the bottleneck; every subtask of every one of them had to wait for
    output buffers during the span."""
    sources = [v for v in _ancestors(run.scenario, run.expect.root_cause) if _is_source(run, v)]
    assert len(sources) >= 2, sources
    for source in sources:
        ms = run.metrics[source]
        assert all(m.backpressured_ms_per_s > 0 for m in ms), _show(ms)


def check_overdraft(run: Run) -> None:
    """The flatmap feeding the bottleneck, whose every record needs several buffers, waits for
    output space rather than blocking inside a buffer request: overdraft buffers let it finish
    the record it is writing (FLIP-227)."""
    for producer in run.scenario.upstream(run.expect.root_cause):
        assert producer.kind == "flatmap"
        ms = run.metrics[producer.name]
        assert all(dominant(m) == "bp" for m in ms), _show(ms)
        assert all(m.soft_backpressured_ms_per_s > m.hard_backpressured_ms_per_s for m in ms), (
            _show(ms)
        )


def check_head_of_line_in_one_exchange(run: Run) -> None:
    """Under TCP, a sub-pipeline whose channel crosses the bottleneck subtask's stalled
    connection is backpressured though nothing in it is slow, and under credit the same
    subtasks idle: some subtask upstream of the root, outside the hot ones, is mostly
    backpressured under TCP and mostly idle under credit."""
    assert run.scenario.network.flow_control == "tcp"
    assert run.contrast is not None
    twin, hot = run.contrast, set(run.expect.subtasks)
    upstream = sorted(_ancestors(run.scenario, run.expect.root_cause))
    collateral = [
        (vertex, m.index)
        for vertex in upstream
        for m in run.metrics[vertex]
        if m.index not in hot and dominant(m) == "bp"
    ]
    assert collateral, "; ".join(_show(run.metrics[v]) for v in upstream)
    for vertex, index in collateral:
        assert dominant(twin.metrics[vertex][index]) == "idle", _show(twin.metrics[vertex])


def check_stalled(run: Run) -> None:
    """The job's waits form a cycle: no subtask moves a record over the whole span."""
    for vertex, ms in run.metrics.items():
        for m in ms:
            assert m.records_in_per_s == m.records_out_per_s == 0, f"{vertex}: {_show([m])}"


def check_starved(run: Run) -> None:
    """The root's region never started: its subtasks SCHEDULED, moving nothing; the rest runs."""
    region = {run.expect.root_cause, *_descendants(run.scenario, run.expect.root_cause)}
    for vertex, ms in run.metrics.items():
        states = {m.state for m in ms}
        if vertex in region:
            assert states == {int(TaskState.SCHEDULED)}, f"{vertex}: states {states}"
            assert all(m.records_out_per_s == m.records_in_per_s == 0 for m in ms), _show(ms)
            assert all(m.slot_wait is not None and m.slot_wait.missing > 0 for m in ms)
        else:
            assert states == {int(TaskState.RUNNING)}, f"{vertex}: states {states}"


def check_spilling(run: Run) -> None:
    """The root spills and is never backpressured; its consumer over the hybrid edge is busy."""
    root = run.expect.root_cause
    ms = run.metrics[root]
    assert sum(m.spilled_bytes_per_s or 0.0 for m in ms) > 0, _show(ms)
    assert all(dominant(m) != "bp" for m in ms), _show(ms)
    consumers = [
        op.name
        for op in run.scenario.operators
        if any(e.source == root and e.exchange.startswith("hybrid") for e in op.inputs)
    ]
    assert consumers
    for consumer in consumers:
        mostly(run, consumer, "busy")


def check_source_limited(run: Run) -> None:
    """The source busy and emitting less than its rate; everything downstream mostly idle (no
    vertex waits for buffers: the source falls behind on its own)."""
    root = run.expect.root_cause
    mostly(run, root, "busy")
    op = run.scenario.operator(root)
    emitted = sum(m.records_out_per_s or 0.0 for m in run.metrics[root])
    offered = offered_total(op, run.scenario.duration_s)  # a profile's mean
    assert emitted < 0.9 * offered, _show(run.metrics[root])
    for vertex in run.metrics:
        if vertex != root:
            mostly(run, vertex, "idle")


def check_healthy(run: Run) -> None:
    """Every subtask mostly idle; every rate-limited source keeps its schedule."""
    for vertex in run.metrics:
        mostly(run, vertex, "idle")
    for source in run.schedules:
        assert kept_schedule(run, source), f"{run.name}: {source} fell behind its schedule"


BY_KIND: dict[str | None, Callable[[Run], None]] = {
    None: check_healthy,
    "slow-operator": check_bottleneck_vertex,
    "slow-sink": check_bottleneck_vertex,
    "data-skew": check_hot_subtasks,
    "slow-subtask": check_hot_subtasks,
    "stalled": check_stalled,
    "resource-starved": check_starved,
    "spilling": check_spilling,
    "source-limited": check_source_limited,
}
BY_SHAPE: dict[str, Callable[[Run], None]] = {
    "fan-in": check_fan_in,
    "flatmap-overdraft": check_overdraft,
    "tcp-head-of-line": check_head_of_line_in_one_exchange,
    "tcp-head-of-line-forward": check_head_of_line_in_one_exchange,
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


ALONE_TRIES = 2
"""Runs of one example on its own after its shared run missed the pattern."""


def check_or_run_alone(run: Run, stem: str, start: StartJob, stop: StopJob) -> None:
    """:func:`check` on the shared run; if it misses, on runs of the example alone.

    A corpus run at once keeps a 2-core machine saturated: on a loaded CI machine one example's
    shares may drift (a bottleneck's thread descheduled for long enough reads idle). The pattern
    must then hold with the example on its own: the runtime's fidelity is a claim about a job that
    gets the CPU it asks for, and a real defect fails every run.
    """
    for attempt in range(ALONE_TRIES + 1):
        try:
            check(run, stem)
            return
        except AssertionError:
            if attempt == ALONE_TRIES:
                raise
        run = _run_all({stem: (run.scenario, run.expect)}, start, stop)[stem]


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
def test_shipped_example_shows_its_pattern(
    shipped: dict[str, Run], stem: str, start_job: StartJob, stop_job: StopJob
) -> None:
    check_or_run_alone(shipped[stem], stem, start_job, stop_job)


@pytest.mark.slow
def test_source_slow_operator_sink_looks_as_on_flink(shipped: dict[str, Run]) -> None:
    """The issue's reference: the source's output pool full and the source backpressured, the
    slow operator busy serving at most 1,000 records/s, the sink idle."""
    run = shipped["reference/unlimited"]
    assert run.peak_out_pool["source"] == [1.0]
    mostly(run, "source", "bp")
    mostly(run, "slow", "busy")
    mostly(run, "sink", "idle")
    (slow,) = run.metrics["slow"]
    # service time: never more than 1,000 records/s (plus a 20 ms lag allowance and a chunk)
    assert slow.records_out_per_s <= 1000 * (1 + 0.02 + 0.002) + 2, _show([slow])


@pytest.mark.slow
def test_a_rate_limited_source_is_backpressured_like_flink(shipped: dict[str, Run]) -> None:
    """1,500 records/s into 1,000/s of capacity: on Flink the source waits for buffers ~98 %;
    here too it is mostly backpressured with its output pool full."""
    run = shipped["reference/rate-limited"]
    mostly(run, "slow", "busy")
    mostly(run, "source", "bp")
    assert run.peak_out_pool["source"] == [1.0]


# -- the acceptance cases (tests/scenarios) and the runtime's own (tests/runtime/scenarios) ----

RUNTIME_CASES = Path(__file__).resolve().parent / "scenarios"
"""Jobs only the runtime's tests run: a stall, head-of-line blocking within one exchange."""
CASE_PATHS = {p.stem: p for folder in (CASES, RUNTIME_CASES) for p in folder.glob("*.toml")}
CASE_STEMS = sorted(CASE_PATHS)


@pytest.fixture(scope="module")
def cases(start_module_job: StartJob, stop_job: StopJob) -> Iterator[dict[str, Run]]:
    """Every acceptance case and runtime case, after one shared warm-up."""
    scenarios = {stem: _load(CASE_PATHS[stem]) for stem in CASE_STEMS}
    yield _run_all(scenarios, start_module_job, stop_job)


@pytest.mark.slow
@pytest.mark.parametrize("stem", CASE_STEMS)
def test_acceptance_case_shows_its_pattern(
    cases: dict[str, Run], stem: str, start_job: StartJob, stop_job: StopJob
) -> None:
    check_or_run_alone(cases[stem], stem, start_job, stop_job)
