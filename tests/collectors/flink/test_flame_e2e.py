"""Flink's own sampler on a real Flink cluster that enables it (``rest.flamegraph.enabled``,
graphs cached 1 s): every subtask sampled 100 times by Flink, the slow map still named, bursts
back to back each given a fresh graph; a job short of slots shown waiting. One cluster and one
``slow-map`` job for the module; CI runs the ``every_flink`` test on 1.20 too.
(A cluster that does not enable it is sampled by thread dumps: ``test_e2e.py`` checks the report
says so.)"""

from __future__ import annotations

import re
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from bpmon.collectors.flink.placement import STARVED_AFTER_S
from bpmon.collectors.flink.target import FlinkTarget

from .cluster import Cluster
from .conftest import started_cluster
from .test_e2e import WARMUP_S, monitor, vertex

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def flame_cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    """A cluster with Flink's sampler on; stopped at the end of the module."""
    with started_cluster(tmp_path_factory, "flink-flame", flamegraph=True) as cluster:
        yield cluster


@pytest.fixture(scope="module")
def slow_map(flame_cluster: Cluster) -> Iterator[str]:
    """The slow-map job, run until its backpressure built up; cancelled after the module."""
    job = flame_cluster.submit("slow-map")
    time.sleep(WARMUP_S)
    yield job
    flame_cluster.cancel(job)


@pytest.mark.every_flink
def test_flinks_sampler_samples_every_subtask_and_the_slow_map_is_named(
    flame_cluster: Cluster, slow_map: str, bpmon_bin: Path, tmp_path: Path
) -> None:
    report = monitor(bpmon_bin, flame_cluster, slow_map, tmp_path)
    [sampling] = [f for f in report["findings"] if f["kind"] == "sampling"]
    assert "samples taken by Flink's flame-graph sampler" in sampling["detail"], sampling
    # 4 subtasks x rest.flamegraph.num-samples (100), whatever --samples (40) says
    assert sampling["detail"].startswith("400 of 400 samples taken"), sampling
    assert vertex(report, "Source: numbers -> parse")["level"] == "HIGH"
    cause = report["root_causes"][0]
    assert (cause["vertex"], cause["kind"]) == ("enrich", "slow-operator")


def test_bursts_back_to_back_each_get_a_fresh_graph(flame_cluster: Cluster, slow_map: str) -> None:
    """Flink serves a graph from its cache for rest.flamegraph.refresh-interval: the second
    burst waits for a new one (newer than the first's) instead of taking the cached one."""
    target = FlinkTarget(flame_cluster.url, slow_map)
    # what is tested is that the second graph is a new one, not how late a busy TaskManager may
    # deliver it: on a loaded machine (the suite on four workers) a graph came later than the
    # 5 s of slack bpmon gives it before taking thread dumps instead
    target.bursts.flame.slack_s = 30.0
    target.start()
    windows = []
    for _ in range(2):
        observation = target.observe(100, 50.0)
        assert target.last_sampling is not None
        assert target.last_sampling.method == "flame-graph", observation.notes
        windows.append(observation.window)
        samples = {(v.name, s.index): s.samples for v in observation.vertices for s in v.subtasks}
        assert len(samples) == 4 and set(samples.values()) == {100}, samples
    assert windows[1].start >= windows[0].end
    # each subtask's state and the cluster's slots: 8, of which the job's 2 slots are taken
    states = {s.metrics.scheduling for v in observation.vertices for s in v.subtasks}
    assert {(t.state, t.slots_total, t.slots_free) for t in states if t} == {("RUNNING", 8, 6)}
    assert None not in states
    source = observation.vertex("Source: numbers -> parse").subtasks[0]
    assert source.metrics.backlog is None  # Flink's DataGen source reports no pendingRecords


def test_a_job_short_of_slots_is_resource_starved(
    flame_cluster: Cluster, slow_map: str, bpmon_bin: Path, tmp_path: Path
) -> None:
    """``healthy`` at parallelism 10 on the 6 slots slow-map leaves free: Flink takes them and
    waits for 4 more, every task SCHEDULED. Once they have waited STARVED_AFTER_S the window
    shows them waiting, with no free slot, instead of a gap."""
    job = flame_cluster.submit("healthy", wait=False, args=("10",))
    try:
        time.sleep(STARVED_AFTER_S + 3)
        report = monitor(bpmon_bin, flame_cluster, job, tmp_path)
    finally:
        flame_cluster.cancel(job)
    [sampling] = [f for f in report["findings"] if f["kind"] == "sampling"]
    assert sampling["detail"].startswith("nothing sampled: no task of the job runs"), sampling
    assert [v["parallelism"] for v in report["vertices"]] == [1, 10, 1]
    cause = report["root_causes"][0]
    assert (cause["vertex"], cause["kind"]) == ("enrich", "resource-starved"), cause
    # the 2 slots slow-map holds are not enrich's to take; the 6 others (some held by the
    # waiting job itself) are: lowered to 6, it fits
    assert cause["recommended_parallelism"] == 6, cause


# -- Flink SQL jobs, and a legacy source Flink's sampler cannot see ------------------------------


def watched_sql(cluster: Cluster, topology: str, bpmon_bin: Path, tmp_path: Path) -> dict[str, Any]:
    """The report of one burst on ``jobs/BpmonSqlJobs.java``'s ``topology``, then cancelled."""
    job = cluster.submit(topology, entry="BpmonSqlJobs")
    try:
        time.sleep(WARMUP_S)
        return monitor(bpmon_bin, cluster, job, tmp_path)
    finally:
        cluster.cancel(job)


def legacy_source(report: dict[str, Any], name: str) -> None:
    """``name`` is a legacy source read HIGH, its level decided as the finding says."""
    assert vertex(report, name)["level"] == "HIGH", vertex(report, name)
    [said] = [f for f in report["findings"] if f["kind"] == "flink-level"]
    assert said["vertex"] == name and "a legacy source" in said["detail"], said
    assert not [f for f in report["findings"] if f["kind"] == "flink-disagrees"], report["findings"]


@pytest.mark.parametrize(
    ("topology", "kind", "operator"),
    [
        ("sql-slow-udf", "slow-operator", r"Calc\[\d+\]"),  # the UDF runs in the Calc
        ("sql-slow-sink", "slow-sink", r".+: Writer"),
    ],
)
def test_a_slow_part_of_a_sql_chain_is_named_with_its_operator(
    topology: str, kind: str, operator: str, flame_cluster: Cluster, bpmon_bin: Path, tmp_path: Path
) -> None:
    """SQL's datagen is a legacy source (busy time NaN, its thread unseen by Flink's sampler):
    its level comes from its backpressured time, and the ``Calc -> Writer`` chain after it is
    the cause, its slow operator named by the samples: the Calc where a slow scalar UDF runs
    (a slow operator), or the writer of a slow sink connector (a slow sink)."""
    report = watched_sql(flame_cluster, topology, bpmon_bin, tmp_path)
    source, chain = (v["name"] for v in report["vertices"])
    assert source.startswith("Source: orders") and chain.startswith("Calc["), report["vertices"]
    legacy_source(report, source)
    cause = report["root_causes"][0]
    assert (cause["vertex"], cause["kind"]) == (chain, kind), cause
    assert re.fullmatch(operator, cause["in_chain"]["operator"]), cause["in_chain"]


def test_a_skewed_group_by_chained_with_its_sink_is_data_skew(
    flame_cluster: Cluster, bpmon_bin: Path, tmp_path: Path
) -> None:
    """``GroupAggregate -> Writer``: a chain ending in a sink, whose samples put the time in the
    aggregate, on the subtask the hot key hashes to: a hot key, not a slow external system."""
    report = watched_sql(flame_cluster, "sql-skew", bpmon_bin, tmp_path)
    cause = report["root_causes"][0]
    assert cause["vertex"].startswith("GroupAggregate["), cause
    assert cause["kind"] == "data-skew", cause
    assert len(cause["subtasks"]) == 1, cause


@pytest.mark.every_flink
def test_a_legacy_source_unseen_by_flinks_sampler_is_still_backpressured(
    flame_cluster: Cluster, bpmon_bin: Path, tmp_path: Path
) -> None:
    """Flink's sampler sees only the task thread of a SourceFunction, waiting for mail; the
    source's own backpressured time decides (thread dumps sample its thread: test_e2e.py)."""
    job = flame_cluster.submit("legacy-slow-map")
    try:
        time.sleep(WARMUP_S)
        report = monitor(bpmon_bin, flame_cluster, job, tmp_path)
    finally:
        flame_cluster.cancel(job)
    legacy_source(report, "Source: numbers -> parse")
    cause = report["root_causes"][0]
    assert (cause["vertex"], cause["kind"]) == ("enrich", "slow-operator"), cause
