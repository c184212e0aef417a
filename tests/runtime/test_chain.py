"""Operator chaining: a chain is one task (a thread per subtask) whose members run nested; records
per member, the chain's capacity, and the member the stack samples find working."""

from __future__ import annotations

import re
import time

import pytest

from bpmon.model.errors import ScenarioError
from bpmon.model.values import Report, RootCause
from bpmon.runtime.job import Job
from bpmon.runtime.metrics import counters, window_metrics
from bpmon.scenario import parse_scenario
from bpmon.scenario.chained import chained_scenario
from bpmon.service.facade import Settings, drain, run_scenario
from tests.runtime.jobs import StopJob
from tests.waiting import wait_until

CHAINED = """
name = "chained"
chaining = true
[monitor]
warmup_s = 0.8
samples = 20
interval_ms = 20
[[operators]]
name = "source"
kind = "source"
parallelism = 2
rate = 1000
records = {records}
[[operators]]
name = "parse"
kind = "map"
parallelism = 2
cost_us = 50
inputs = [{{ from = "source" }}]
[[operators]]
name = "enrich"
kind = "map"
parallelism = 2
cost_us = 1500
inputs = [{{ from = "parse", partitioner = "rebalance" }}]
[[operators]]
name = "check"
kind = "filter"
parallelism = 2
selectivity = 0.5
cost_us = 100
inputs = [{{ from = "enrich" }}]
[[operators]]
name = "sink"
kind = "sink"
inputs = [{{ from = "check", partitioner = "rebalance" }}]
"""


def test_a_chained_scenario_has_one_operator_per_task() -> None:
    tasks = chained_scenario(parse_scenario(CHAINED.format(records=100)))
    assert [op.name for op in tasks.operators] == ["source -> parse", "enrich -> check", "sink"]
    head, middle, sink = tasks.operators
    assert (head.kind, head.rate, head.records) == ("source", 1000, 100)
    assert [m.name for m in middle.members] == ["enrich", "check"]
    assert [(e.source, e.partitioner) for e in middle.inputs] == [("source -> parse", "rebalance")]
    assert [e.source for e in sink.inputs] == ["enrich -> check"]
    assert not tasks.chaining and sink.members == ()


def test_a_chain_runs_as_one_thread_and_counts_records_per_member(stop_job: StopJob) -> None:
    job = Job(parse_scenario(CHAINED.format(records=300)))
    try:
        assert [t.name for t in job.all_tasks()] == [
            "source -> parse (1/2)",
            "source -> parse (2/2)",
            "enrich -> check (1/2)",
            "enrich -> check (2/2)",
            "sink (1/1)",
        ]
        job.start()
        deadline = time.monotonic() + 30
        while not job.finished and time.monotonic() < deadline:
            job.wait(0.05)
        assert job.finished
        totals = [t.chain.totals() for t in job.tasks["enrich -> check"] if t.chain is not None]
        enrich_in = sum(member[0][1] for member in totals)
        check_out = sum(member[1][2] for member in totals)
        assert enrich_in == 600  # every record of the two sources
        assert check_out == sum(t.records_in.total for t in job.tasks["sink"]) == 300  # half pass
        assert [[name for name, _, _ in t] for t in totals] == [["enrich", "check"]] * 2
    finally:
        stop_job(job)


def test_window_metrics_report_each_member(stop_job: StopJob) -> None:
    job = Job(parse_scenario(CHAINED.format(records=100000)))
    try:
        job.start()
        chain = job.tasks["enrich -> check"]
        wait_until(
            lambda: [t.name for t in chain if not t.records_out.total],
            "records out of every subtask of the chain",
            until=lambda waiting: not waiting,
        )
        start = counters(job.tasks)
        time.sleep(0.5)  # the window measured
        metrics = window_metrics(start, counters(job.tasks))["enrich -> check"][0]
        names = [op.name for op in metrics.operators]
        assert names == ["enrich", "check"]
        enrich, check = metrics.operators
        assert enrich.records_out_per_s > 0
        assert check.records_out_per_s == pytest.approx(enrich.records_out_per_s / 2, rel=0.2)
        extra = metrics.as_flink()
        assert not [k for k in extra if k.endswith("busyTimeMsPerSecond") and "operator" in k]
    finally:
        stop_job(job)


def test_a_failure_inside_a_chain_is_refused_at_load() -> None:
    text = CHAINED.format(records=10).replace(
        "cost_us = 100\n", "cost_us = 100\nfail = { after_records = 3 }\n"
    )
    with pytest.raises(ScenarioError, match='operator "check" has "fail" inside the chain'):
        parse_scenario(text)


def three_members(costs_us: tuple[int, int, int], parallelism: int = 1) -> str:
    """A job whose three maps chain into one task, fed through a rebalance by a source with
    no rate limit, so the chain is always busy."""
    names = ("parse", "enrich", "check")
    ops = "".join(
        f"""
[[operators]]
name = "{name}"
kind = "map"
parallelism = {parallelism}
cost_us = {cost}
inputs = [{{ from = "{"source" if i == 0 else names[i - 1]}"{
            ', partitioner = "rebalance"' if i == 0 else ""
        } }}]
"""
        for i, (name, cost) in enumerate(zip(names, costs_us, strict=True))
    )
    return f"""
name = "three"
chaining = true
[[operators]]
name = "source"
kind = "source"
rate = 0
{ops}
[[operators]]
name = "sink"
kind = "sink"
inputs = [{{ from = "check", partitioner = "rebalance" }}]
"""


def test_a_nested_chain_handles_what_its_members_costs_allow(stop_job: StopJob) -> None:
    # 400 + 900 + 600 us a record: at most 1e6 / 1900 = 526 records/s. Nesting must not let
    # one member's service count as another's (the chain would run faster), nor lose much to
    # the hand-overs (slower).
    job = Job(parse_scenario(three_members((400, 900, 600))))
    try:
        job.start()
        time.sleep(1.0)
        start = counters(job.tasks)
        time.sleep(2.0)
        chain = window_metrics(start, counters(job.tasks))["parse -> enrich -> check"][0]
        assert 526 * 0.85 < chain.records_in_per_s < 526 * 1.03, chain.records_in_per_s
        assert chain.busy_ms_per_s > 950
    finally:
        stop_job(job)


PIPELINE = """
[[operators]]
name = "{p}_source"
kind = "source"
rate = 1200
record_bytes = 1000
[[operators]]
name = "{p}_parse"
kind = "map"
parallelism = 2
cost_us = {costs[0]}
inputs = [{{ from = "{p}_source", partitioner = "rebalance" }}]
[[operators]]
name = "{p}_enrich"
kind = "map"
parallelism = 2
cost_us = {costs[1]}
inputs = [{{ from = "{p}_parse" }}]
[[operators]]
name = "{p}_check"
kind = "map"
parallelism = 2
cost_us = {costs[2]}
inputs = [{{ from = "{p}_enrich" }}]
[[operators]]
name = "{p}_sink"
kind = "sink"
inputs = [{{ from = "{p}_check", partitioner = "rebalance" }}]
"""
COSTS = {"mid": (400, 3200, 400), "last": (400, 400, 3200), "even": (1320, 1320, 1320)}
"""Each pipeline's chain: ~250 records/s a subtask, two subtasks, its source offering 1,200 a
second: the chain is the bottleneck of its pipeline, and the costs say where its time goes
(10/80/10, 10/10/80, a third each).

The sources have a rate, not none: a source without one asks for all the interpreter can give,
so on a busy machine the runtime rightly counts itself saturated and names no cause (three
workers on two cores did that to these tests). Records of 1,000 bytes fill the buffers between
source and chain within the warm-up at this rate."""


@pytest.fixture(scope="module")
def chains_report(tmp_path_factory: pytest.TempPathFactory) -> Report:
    """One run of three independent pipelines, each a source, a three-member chain, a sink
    (one run shared by the tests: 200 samples a subtask, 400 a chain)."""
    text = "[monitor]\nwarmup_s = 2.0\nsettle_s = 0\nsamples = 200\ninterval_ms = 15\n" + "".join(
        PIPELINE.format(p=p, costs=costs) for p, costs in COSTS.items()
    )
    scenario = parse_scenario('name = "chains"\nchaining = true\n' + text)
    runs = tmp_path_factory.mktemp("chains")
    # a window the runtime counts as saturated (the figures describe a busy machine, not the
    # job: seen in CI) is taken again, as the benchmark does
    for _ in range(TRIES):
        ended = drain(run_scenario(scenario, Settings(runs_dir=runs), duration_s=5.2))
        assert ended.leaks == ()
        report = ended.reports[0]
        if not any(f.kind == "runtime-saturated" for f in report.findings):
            break
    return report


TRIES = 3
"""Runs of the chains job before its report is taken as it is (saturated or not)."""


def cause_at(report: Report, pipeline: str) -> RootCause:
    vertex = f"{pipeline}_parse -> {pipeline}_enrich -> {pipeline}_check"
    found = [c for c in report.root_causes or () if c.vertex == vertex]
    assert found, (report.root_causes, [(f.kind, f.detail) for f in report.findings])
    return found[0]


def evidence_figures(cause: RootCause) -> tuple[str, list[tuple[str, int]], int]:
    """What the chain's evidence line says: the operator named, each share, the busy samples."""
    line = next(e.text for e in cause.evidence if e.text.startswith("inside the chain"))
    found = re.search(r"\((?P<shares>[^;]+); (?P<busy>\d+) busy samples\)", line)
    assert found, line
    shares = [(n, int(pct)) for n, pct in re.findall(r"(\w+) (\d+)%", found["shares"])]
    return line, shares, int(found["busy"])


@pytest.mark.slow
@pytest.mark.parametrize(("pipeline", "slow"), [("mid", 1), ("last", 2)])
def test_the_slow_member_of_a_chain_is_named_from_the_samples(
    chains_report: Report, pipeline: str, slow: int
) -> None:
    cause = cause_at(chains_report, pipeline)
    share = cause.in_chain
    assert share is not None
    names = [f"{pipeline}_{n}" for n in ("parse", "enrich", "check")]
    assert (share.operator, share.position) == (names[slow], slow)
    expected = [0.8 if i == slow else 0.1 for i in range(3)]  # the costs' proportions
    assert [n for n, _ in share.shares] == names
    for (_, got), want in zip(share.shares, expected, strict=True):
        assert abs(got - want) <= 0.10, share.shares
    line, shown, busy = evidence_figures(cause)
    assert busy == share.busy_samples >= 300
    assert shown == [(n, round(s * 100)) for n, s in share.shares]
    assert f"{share.operator} is on the stack in {round(100 * share.samples / busy)}%" in line
    assert f"{share.operator} is the operator to make cheaper" in line


@pytest.mark.slow
def test_a_chain_whose_members_cost_the_same_names_none_to_fix(chains_report: Report) -> None:
    cause = cause_at(chains_report, "even")
    share = cause.in_chain
    assert share is not None
    assert all(abs(s - 1 / 3) <= 0.12 for _, s in share.shares), share.shares
    line, shown, busy = evidence_figures(cause)
    assert busy == share.busy_samples
    assert shown == [(n, round(s * 100)) for n, s in share.shares]
    assert "no operator dominates" in line and "operator to make cheaper" not in line
