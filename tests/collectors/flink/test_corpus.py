"""A few jobs of the real-Flink corpus (``corpus.py``), each diagnosed as built: the bottleneck's
vertex and kind named, and nothing on a healthy job.

The cases are the robust ones, each with margin: a bottleneck offered twice its capacity (a
chain with its cost in the middle, a sink that writes in batches, one slow subtask among four),
a healthy job at half its capacity. The whole corpus, with the baselines beside bpmon, is
``tests/benchmarks/bench_flink_diagnosis.py``. One window each (40 samples), on the session's
cluster (``conftest.py``: skipped without Flink, a failure in CI).
"""

from __future__ import annotations

from dataclasses import replace

import pytest

from .cluster import Cluster
from .corpus import CaseRun, case, run_case

pytestmark = pytest.mark.slow

BOTTLENECK_LOAD = 2.0
HEALTHY_LOAD = 0.5


def run(name: str, cluster: Cluster) -> CaseRun:
    done = run_case(case(name).at(BOTTLENECK_LOAD), cluster)
    assert done.report is not None, done.error
    return done


@pytest.mark.every_flink
def test_a_slow_operator_in_the_middle_of_a_chain_is_named_on_its_chain(
    flink_cluster: Cluster,
) -> None:
    """enrich takes 800 of the chain's 1000 us of CPU a record; the chain is one vertex."""
    done = run("long-chain", flink_cluster)
    assert done.report is not None
    cause = (done.report.root_causes or ())[0]
    assert (cause.vertex, cause.kind) == done.case.expected[0], cause
    # the samples may be too few to name one operator, but never a wrong one
    assert cause.in_chain is None or cause.in_chain.operator == "enrich", cause.in_chain


def test_a_sink_that_writes_in_batches_is_a_slow_sink(flink_cluster: Cluster) -> None:
    done = run("batch-sink", flink_cluster)
    assert done.report is not None
    cause = (done.report.root_causes or ())[0]
    assert (cause.vertex, cause.kind) == ("warehouse: Writer", "slow-sink"), cause


@pytest.mark.every_flink
def test_one_slow_subtask_of_four_is_a_slow_subtask(flink_cluster: Cluster) -> None:
    done = run("slow-instance", flink_cluster)
    assert done.report is not None
    cause = (done.report.root_causes or ())[0]
    enrich = next(v for v in done.report.vertices if v.name == "enrich")
    shown = [(s.index, s.metrics.busy_ratio, s.metrics.records_in_per_s) for s in enrich.subtasks]
    assert (cause.vertex, cause.kind, cause.subtasks) == ("enrich", "slow-subtask", (2,)), (
        cause,
        shown,
    )


def test_a_healthy_job_has_no_cause(flink_cluster: Cluster) -> None:
    done = run_case(replace(case("healthy"), load=HEALTHY_LOAD), flink_cluster)
    assert done.report is not None, done.error
    assert done.report.root_causes == (), done.report.root_causes
    assert {v.level for v in done.report.vertices} == {"OK"}


@pytest.mark.every_flink
def test_a_source_chained_with_its_bottleneck_is_named_without_pending_records(
    flink_cluster: Cluster,
) -> None:
    """source-chained with its source reporting no pendingRecords (as Flink's DataGen, a file
    source): the chain is busy all the time and nothing is backpressured; bpmon names the chain
    as the limit, says its lag is unknown, and sizes nothing."""
    done = run_case(case("source-chained").at(BOTTLENECK_LOAD), flink_cluster, pending=False)
    assert done.report is not None, done.error
    assert done.truth is not None and done.truth["pending"] == 0
    [cause, *_] = done.report.root_causes or ()
    assert (cause.vertex, cause.kind) == done.case.expected[0], done.report.root_causes
    assert cause.offered_rate is None and cause.recommended_parallelism is None, cause
    assert any("reports no pendingRecords" in e.text for e in cause.evidence), cause.evidence
