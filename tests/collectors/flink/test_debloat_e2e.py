"""Buffer debloating on a real Flink 2.3 (``taskmanager.network.memory.buffer-debloat.enabled``):
every verdict as with it off, and the report says debloating was on, with the buffer sizes Flink
chose.

Debloating keeps the buffer counts and shrinks the buffers, so pool usages count smaller
buffers; bpmon's levels come from the stack samples and the time accounting, which it leaves as
they are. Three corpus jobs of different kinds, each offered twice its capacity (margin for a
loaded machine), on a cluster of their own with debloating on: a slow sink, a hot key and a
chain with its cost in the middle. The sizes the finding quotes are checked against Flink's own
``debloatedBufferSize``, read from its REST API beside bpmon.
"""

from __future__ import annotations

import re
import time
from collections.abc import Iterator

import pytest

from .cluster import Cluster
from .conftest import started_cluster
from .corpus import ENTRY, SAMPLES, WARMUP_S, case, job_args, run_case, window_of

pytestmark = pytest.mark.slow

DEBLOAT = {"taskmanager.network.memory.buffer-debloat.enabled": "true"}
LOAD = 2.0
SEGMENT = 32 * 1024
"""Flink's default ``taskmanager.memory.segment-size``: the most a debloated buffer can be."""


@pytest.fixture(scope="module")
def debloat_cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    with started_cluster(tmp_path_factory, "flink-debloat", task_managers=1, config=DEBLOAT) as c:
        yield c


@pytest.mark.parametrize("name", ["hot-key", "long-chain"])
def test_a_debloated_job_keeps_its_verdict_and_says_debloating_was_on(
    debloat_cluster: Cluster, name: str
) -> None:
    c = case(name).at(LOAD)
    done = run_case(c, debloat_cluster)
    assert done.report is not None, done.error
    [top, *_] = done.report.root_causes or ()
    assert (top.vertex, top.kind) == c.expected[0], done.report.root_causes
    [finding] = [f for f in done.report.findings if f.kind == "debloating"]
    assert "about 1,000 ms" in finding.detail, finding.detail
    sizes = re.search(r"now ([\d,]+)(?:-([\d,]+))? bytes", finding.detail)
    assert sizes is not None, finding.detail
    quoted = [int(g.replace(",", "")) for g in sizes.groups() if g is not None]
    assert 256 <= min(quoted) <= max(quoted) <= SEGMENT, quoted
    assert min(quoted) < SEGMENT, quoted  # a gate behind backpressure keeps less than 32 KiB


def test_a_debloated_slow_sink_is_named_and_the_size_quoted_is_one_flink_shows(
    debloat_cluster: Cluster,
) -> None:
    """The slow sink named as with debloating off; the finding's smallest size, at the vertex
    it names, against Flink's own ``debloatedBufferSize`` of that vertex read from the REST API
    just after the window: the sizes move every 200 ms with the throughput, so within a factor
    of two."""
    c = case("slow-sink").at(LOAD)
    job = debloat_cluster.submit(c.name, args=job_args(c, debloat_cluster), entry=ENTRY)
    try:
        time.sleep(WARMUP_S)
        report, error = window_of(debloat_cluster.url, job, SAMPLES)
        assert report is not None, error
        [top, *_] = report.root_causes or ()
        assert (top.vertex, top.kind) == c.expected[0], report.root_causes  # as with it off
        vertices = {v["name"]: v["id"] for v in debloat_cluster.get(f"/jobs/{job}")["vertices"]}
        [finding] = [f for f in report.findings if f.kind == "debloating"]
        named = re.search(r"the smallest at (.+?)\)", finding.detail)
        sizes = re.search(r"now ([\d,]+)", finding.detail)
        assert named is not None and sizes is not None, finding.detail
        vertex = vertices[named[1]]
        listed = debloat_cluster.get(f"/jobs/{job}/vertices/{vertex}/metrics")
        ids = [m["id"] for m in listed if m["id"].endswith(".debloatedBufferSize")]
        answer = debloat_cluster.get(f"/jobs/{job}/vertices/{vertex}/metrics?get={','.join(ids)}")
        flink = min(float(m["value"]) for m in answer)
        quoted = float(sizes[1].replace(",", ""))
        assert flink / 2 <= quoted <= flink * 2, (quoted, flink, answer)
    finally:
        debloat_cluster.cancel(job)
