"""Branching chains in the runtime: members run nested, each branch writes its own outputs, and the
stack samples name the slow member; a source chained with its bottleneck is source-limited."""

from __future__ import annotations

import sys
from collections.abc import Sequence

import pytest

from bpmon.model.values import Report, RootCause, VertexObservation
from bpmon.runtime.chain import Chain
from bpmon.scenario import parse_scenario
from bpmon.scenario.chained import chained_scenario
from bpmon.service.facade import Settings, drain, run_scenario

TREE = """
name = "tree"
chaining = true
[[operators]]
name = "a"
kind = "source"
rate = 100
[[operators]]
name = "b"
kind = "map"
cost_us = 200
inputs = [{ from = "a" }]
[[operators]]
name = "c"
kind = "filter"
selectivity = 0.5
cost_us = 300
inputs = [{ from = "a" }]
[[operators]]
name = "d"
kind = "map"
cost_us = 400
inputs = [{ from = "b" }]
[[operators]]
name = "out_c"
kind = "sink"
inputs = [{ from = "c", partitioner = "rebalance" }]
[[operators]]
name = "out_d"
kind = "sink"
inputs = [{ from = "d", partitioner = "rebalance" }]
"""


def test_each_member_works_under_as_many_hop_frames_as_its_position() -> None:
    # "a -> (b -> d, c)": members a, b, c, d (each after the one it is chained to). A stack
    # sample of member k must show k hand-over frames, so b (1) and its sibling c (2) differ.
    [spec] = [op for op in chained_scenario(parse_scenario(TREE)).operators if op.members]
    assert spec.name == "a -> (b -> d, c)"
    clock = [0.0]
    served: list[tuple[int, float]] = []  # (hop frames on the stack, seconds) per service
    emitted: list[tuple[int, int]] = []  # (member position, records)

    def sleep(seconds: float) -> None:
        frame, hops = sys._getframe(), 0
        while frame is not None:
            hops += frame.f_code.co_name == "_hand_over"
            frame = frame.f_back
        served.append((hops, round(seconds * 1e6)))
        clock[0] += seconds

    def emit(position: int, records: Sequence[object]) -> None:
        emitted.append((position, len(records)))

    chain = Chain(spec, 0, emit, [2, 3], now=lambda: clock[0], sleep=sleep)
    chain.from_source(list(range(10)))
    # nested: b works, d inside b's hand-over, then c; each costs 10 records x its cost_us
    assert served == [(1, 2000), (3, 4000), (2, 3000)]
    assert emitted == [(3, 10), (2, 5)]  # d's ten records, then c's five that passed
    assert chain.totals() == (("a", 0, 10), ("b", 10, 10), ("c", 10, 5), ("d", 10, 10))


JOB = """
name = "branching"
chaining = true
[monitor]
warmup_s = 1.5
settle_s = 0
samples = 100
interval_ms = 20

# a branching chain whose slow member is in one branch: parse -> (enrich, audit) serves
# 100 + 2,000 + 200 us a record, ~435 records/s a subtask, ~870 for two, offered 1,500
[[operators]]
name = "events"
kind = "source"
rate = 1500
record_bytes = 2000           # fills the buffers in front of the chain within the warm-up
[[operators]]
name = "parse"
kind = "map"
parallelism = 2
cost_us = 100
inputs = [{ from = "events", partitioner = "rebalance" }]
[[operators]]
name = "enrich"
kind = "map"
parallelism = 2
cost_us = 2000
record_bytes = 400
inputs = [{ from = "parse" }]
[[operators]]
name = "audit"
kind = "filter"
parallelism = 2
selectivity = 0.5
cost_us = 200
inputs = [{ from = "parse" }]
[[operators]]
name = "store"
kind = "sink"
inputs = [{ from = "enrich", partitioner = "rebalance" }]
[[operators]]
name = "log"
kind = "sink"
inputs = [{ from = "audit", partitioner = "rebalance" }]

# a rate-limited source chained with a slow operator: 1,000 records/s a subtask offered, the
# chain serves 60 + 1,500 us a record: ~641 records/s, 64% of what it is offered
[[operators]]
name = "clicks"
kind = "source"
parallelism = 2
rate = 1000
[[operators]]
name = "decode"
kind = "map"
parallelism = 2
cost_us = 60
inputs = [{ from = "clicks" }]
[[operators]]
name = "lookup"
kind = "map"
parallelism = 2
cost_us = 1500
inputs = [{ from = "decode" }]
[[operators]]
name = "sessions"
kind = "sink"
inputs = [{ from = "lookup", partitioner = "rebalance" }]
"""
BRANCHING = "parse -> (enrich, audit)"
CHAINED_SOURCE = "clicks -> decode -> lookup"


@pytest.fixture(scope="module")
def report(tmp_path_factory: pytest.TempPathFactory) -> Report:
    """One run of both jobs (one scenario, two pipelines), shared by the tests."""
    runs = tmp_path_factory.mktemp("branching")
    ended = drain(run_scenario(parse_scenario(JOB), Settings(runs_dir=runs), duration_s=4.6))
    assert ended.leaks == ()
    return ended.reports[0]


def cause_at(report: Report, vertex: str) -> RootCause:
    found = [c for c in report.root_causes or () if c.vertex == vertex]
    assert found, report.root_causes
    return found[0]


def vertex(report: Report, name: str) -> VertexObservation:
    [found] = [v for v in report.vertices if v.name == name]
    return found


@pytest.mark.slow
def test_a_slow_member_in_one_branch_is_named_from_the_samples(report: Report) -> None:
    cause = cause_at(report, BRANCHING)
    share = cause.in_chain
    assert share is not None
    assert [n for n, _ in share.shares] == ["parse", "enrich", "audit"]
    assert share.operator == "enrich"
    assert share.samples / share.busy_samples >= 0.6  # 2,000 of 2,300 us: ~87%
    assert vertex(report, "events").level == "HIGH"  # held back by the chain


@pytest.mark.slow
def test_each_branch_writes_its_own_output(report: Report) -> None:
    store = vertex(report, "store").metrics.records_in_per_s
    log = vertex(report, "log").metrics.records_in_per_s
    assert store is not None and log is not None and store > 0
    assert 0.35 <= log / store <= 0.65  # audit passes half of what enrich maps one to one


@pytest.mark.slow
def test_a_source_chained_with_a_slow_operator_is_source_limited(report: Report) -> None:
    cause = cause_at(report, CHAINED_SOURCE)
    assert cause.kind == "source-limited"
    assert vertex(report, CHAINED_SOURCE).level == "OK"  # nothing holds the chain back
    share = cause.in_chain
    assert share is not None and share.operator == "lookup"
    assert cause.offered_rate is not None and 1600 <= cause.offered_rate <= 2400  # 2 x 1,000
