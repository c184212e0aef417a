"""Flink's flame graphs and cluster settings, parsed: a recording of a real Flink 2.3 cluster
(``fixtures/flamegraph-slow-map.json``: the ``slow-map`` job with ``rest.flamegraph.enabled``,
every vertex's graph, ``enrich``'s per subtask, and a cached graph served while a new one was
being sampled), and the answers Flink gives instead of a graph."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from bpmon.collectors.flink.config import DEFAULTS, config_of
from bpmon.collectors.flink.dumps import Tally
from bpmon.collectors.flink.flame import flame_graph, frame_of
from bpmon.collectors.profile import StackClassifier, load_profile
from bpmon.model.durations import duration_ms
from bpmon.model.errors import CollectorError

FIXTURE = Path(__file__).with_name("fixtures") / "flamegraph-slow-map.json"


@pytest.fixture(scope="module")
def answers() -> dict[str, Any]:
    recorded: dict[str, Any] = json.loads(FIXTURE.read_text())["answers"]
    return recorded


def test_a_subtask_graph_is_its_samples_stack_by_stack(answers: dict[str, Any]) -> None:
    """enrich sleeps 1 ms a record, 2 subtasks: each of its 100 samples is in Thread.sleep."""
    graph = flame_graph(answers["enrich[1]"], "enrich[1]")
    assert graph.state == "graph" and graph.end_ms == 1795721159691
    assert graph.samples == 100
    [(frames, count)] = graph.stacks
    assert count == 100
    assert frames[0] == "java.lang.Thread.sleep"  # innermost first, as a thread dump
    assert frames[-1] == "java.lang.Thread.run"
    assert "BpmonFlinkJobs$SlowMap.map" in frames


def test_the_vertex_graph_merges_its_subtasks(answers: dict[str, Any]) -> None:
    whole = flame_graph(answers["enrich"], "enrich")
    parts = [flame_graph(answers[f"enrich[{i}]"], "enrich") for i in (0, 1)]
    assert whole.samples == 200 == sum(p.samples for p in parts)
    assert {p.end_ms for p in parts} == {whole.end_ms}  # filed per subtask from one run


def test_the_profile_reads_flink_samples_as_it_reads_thread_dumps(answers: dict[str, Any]) -> None:
    """The source is suspended in its mailbox 99 times of 100 (backpressured by enrich, which
    its stack cannot tell from idle), busy once; enrich is busy in every sample."""
    classifier = StackClassifier(load_profile("flink-jvm"))
    tally = Tally(classifier, {})
    for key, name in ((("src", 0), "Source: numbers -> parse"), (("enrich", 1), "enrich[1]")):
        for frames, count in flame_graph(answers[name], name).stacks:
            tally.add_stack(key, frames, count)
    assert tally.suspended(("src", 0)) == 99
    source = tally.counts(("src", 0), soft_share=1.0)
    assert (source.backpressured, source.idle, source.busy) == (99, 0, 1)
    enrich = tally.counts(("enrich", 1), soft_share=None)
    assert (enrich.busy, enrich.backpressured, enrich.idle) == (100, 0, 0)


def test_a_cached_graph_is_older_than_the_fresh_one(answers: dict[str, Any]) -> None:
    """Asked while a new sample ran, Flink served its cached graph, ended 212 s earlier."""
    cached = flame_graph(answers["enrich (while sampling)"], "enrich")
    fresh = flame_graph(answers["enrich"], "enrich")
    assert cached.end_ms is not None and fresh.end_ms is not None
    assert fresh.end_ms - cached.end_ms == 212031


@pytest.mark.parametrize(
    ("answer", "state"),
    [
        ({"endTimestamp": -1}, "terminated"),
        ({"endTimestamp": -2}, "disabled"),
        ({"endTimestamp": -3}, "waiting"),
    ],
)
def test_flinks_placeholders(answer: dict[str, Any], state: str) -> None:
    graph = flame_graph(answer, "GET x")
    assert graph.state == state and graph.stacks == () and graph.end_ms is None


@pytest.mark.parametrize(
    ("answer", "says"),
    [
        ({"data": {}}, "without an integer endTimestamp"),
        ([], "without an integer endTimestamp"),
        ({"endTimestamp": -7}, "endTimestamp -7"),
        ({"endTimestamp": 5, "data": {"name": "root", "value": "x"}}, "is not a count"),
        (
            {
                "endTimestamp": 5,
                "data": {"name": "root", "value": 1, "children": [{"name": "a.B.c:1", "value": 2}]},
            },
            "count more samples",
        ),
        (
            {"endTimestamp": 5, "data": {"name": "root", "value": 1, "children": [{"value": 1}]}},
            "has no name",
        ),
        ({"endTimestamp": 5, "data": {"name": "root", "value": 1, "children": 3}}, "not a list"),
    ],
)
def test_a_malformed_graph_is_one_line(answer: Any, says: str) -> None:
    with pytest.raises(CollectorError, match=says) as err:
        flame_graph(answer, "GET /jobs/j/vertices/v/flamegraph")
    assert "\n" not in str(err.value)


def test_a_deep_stack_is_read_without_recursion() -> None:
    node: dict[str, Any] = {"name": "x.Y.z:9", "value": 3, "children": []}
    for depth in range(5000):
        node = {"name": f"x.Y.f{depth}:1", "value": 3, "children": [node]}
    graph = flame_graph(
        {"endTimestamp": 1, "data": {"name": "root", "value": 3, "children": [node]}}, "deep"
    )
    [(frames, count)] = graph.stacks
    assert (len(frames), count, frames[0]) == (5001, 3, "x.Y.z")


def test_frame_names_lose_their_line_only() -> None:
    assert frame_of("java.lang.Thread.sleep:-2") == "java.lang.Thread.sleep"
    assert frame_of("a.B$$Lambda$0/0x0.accept:12") == "a.B$$Lambda$0/0x0.accept"
    assert frame_of("root") == "root"


def test_the_cluster_settings_and_flinks_defaults() -> None:
    recorded = [
        {"key": "rest.flamegraph.enabled", "value": "true"},
        {"key": "rest.flamegraph.refresh-interval", "value": "2 s"},
        {"key": "rest.flamegraph.delay-between-samples", "value": "PT0.02S"},
        {"key": "rest.flamegraph.num-samples", "value": "x"},
        {"key": "metrics.fetcher.update-interval", "value": "1000"},
    ]
    config = config_of(recorded)
    assert config.flamegraph and config.read
    assert (config.flame_refresh_s, config.flame_delay_ms) == (2.0, 20.0)
    assert config.flame_samples == 100  # unreadable: Flink's default
    assert config.fetch_interval_s == 1.0
    assert config_of([]) == DEFAULTS and not DEFAULTS.flamegraph
    assert not config_of({"errors": ["x"]}).read


@pytest.mark.parametrize(
    ("text", "ms"),
    [
        ("50 ms", 50.0),
        ("1 min", 60e3),
        ("PT1M", 60e3),
        ("500", 500.0),
        ("2s", 2e3),
        ("1 h", 3600e3),
        ("P1DT1S", 86401e3),
        ("ten", None),
        ("5 parsecs", None),
        ("P", None),
    ],
)
def test_durations_as_flink_writes_them(text: str, ms: float | None) -> None:
    assert duration_ms(text) == ms
