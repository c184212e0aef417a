"""A job short of slots on a real Flink 2.3 whose scheduler gives up waiting and restarts it.

With ``slot.request.timeout`` shorter than bpmon's :data:`STARVED_AFTER_S` (here 3 s, as some
clusters set it to fail fast) and a restart strategy, the job never waits 10 s at a stretch: it
fails with ``NoResourceAvailableException`` and waits again, over and over. The waits alone look
like a failover; the job's exception history says what it is, and bpmon reads it.

Its own cluster (one TaskManager of 2 slots), for the short timeout: the corpus job
``short-of-slots`` asks for 4.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from bpmon.collectors.flink.placement import STARVED_AFTER_S

from .cluster import Cluster
from .conftest import started_cluster
from .corpus import case, run_case

pytestmark = pytest.mark.slow

FAIL_FAST = {
    "slot.request.timeout": "3 s",
    "restart-strategy.type": "fixed-delay",
    "restart-strategy.fixed-delay.attempts": "1000",
    "restart-strategy.fixed-delay.delay": "1 s",
}


@pytest.fixture(scope="module")
def fail_fast_cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    with started_cluster(
        tmp_path_factory, "flink-fail-fast", task_managers=1, slots=2, config=FAIL_FAST
    ) as cluster:
        yield cluster


def test_a_job_failing_for_want_of_slots_is_resource_starved(fail_fast_cluster: Cluster) -> None:
    assert float(FAIL_FAST["slot.request.timeout"].split()[0]) < STARVED_AFTER_S
    done = run_case(case("short-of-slots"), fail_fast_cluster)
    assert done.report is not None, done.error
    [cause, *_] = done.report.root_causes or [None]
    assert cause is not None, done.report
    assert (cause.vertex, cause.kind) == ("work", "resource-starved")
    [line] = [e.text for e in cause.evidence if "gave up" in e.text]
    assert line.endswith("(NoResourceAvailableException in its exception history)")
    [work] = [v for v in done.report.vertices if v.name == "work"]
    waits = [s.metrics.scheduling for s in work.subtasks]
    assert all(w is not None and w.waiting and w.slot_failures >= 1 for w in waits), waits
    assert max(w.waited_s or 0.0 for w in waits if w) < STARVED_AFTER_S  # never waits 10 s
    assert cause.recommended_parallelism == 2  # the cluster's 2 slots
