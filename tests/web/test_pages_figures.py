"""The dashboard's figures: plotly's own schema accepts them, and they say what the report says.

Every figure is loaded into ``plotly.graph_objects.Figure``, which refuses a property plotly does
not know or a value of the wrong type, so the JSON the page hands to plotly.js is valid plotly.
"""

from __future__ import annotations

import random
from datetime import UTC, datetime, timedelta

import plotly.graph_objects as go
import pytest

from bpmon.model import (
    Edge,
    Level,
    Metrics,
    Report,
    RootCause,
    SubtaskStatus,
    VertexStatus,
    Window,
)
from bpmon.stored import BurstSummary
from bpmon.web import charts, figures
from bpmon.web.topology import columns, layout, victims

START = datetime(2026, 11, 23, 12, 0, tzinfo=UTC)
LEVELS: tuple[Level, ...] = ("OK", "LOW", "HIGH")


def synthetic(vertices: int, parallelism: int, seed: int = 3, burst: int = 0) -> Report:
    """A job of ``vertices`` vertices in a layered DAG (fan-in and fan-out), every value set."""
    rng = random.Random(seed)
    statuses = []
    for i in range(vertices):
        inputs = ()
        if i > 0:
            sources = {rng.randrange(max(0, i - 6), i) for _ in range(rng.choice((1, 1, 2)))}
            inputs = tuple(Edge(f"v{s:03d}", rng.choice(("hash", "rebalance"))) for s in sources)
        subtasks = tuple(
            SubtaskStatus(k, rng.choice(LEVELS), rng.random(), Metrics(busy_ratio=rng.random()))
            for k in range(parallelism)
        )
        worst = max(subtasks, key=lambda s: s.ratio or 0.0)
        metrics = Metrics(busy_ratio=rng.random(), records_in_per_s=rng.uniform(0, 1e4))
        statuses.append(
            VertexStatus(
                f"v{i:03d}", parallelism, worst.level, worst.ratio, metrics, inputs, subtasks
            )
        )
    end = START + timedelta(seconds=10 * burst)
    window = Window(end - timedelta(seconds=5), end, 100, 50.0)
    cause = RootCause(f"v{vertices - 2:03d}", "slow-operator", (0,), 0.9)
    return Report("run-a", "big", "runtime", window, tuple(statuses), (cause,))


@pytest.mark.parametrize("size", [(1, 1), (5, 2), (50, 8)])
def test_every_figure_is_valid_plotly(size: tuple[int, int]) -> None:
    reports = [synthetic(*size, burst=b) for b in range(3)]
    points = [charts.Point(f"run-a/{b}", r.window.end, r) for b, r in enumerate(reports)]
    data = charts.series_data(points)
    history = [BurstSummary.of("run-a", b, r) for b, r in enumerate(reports)]
    for figure in (
        figures.job_graph(reports[-1]),
        figures.heat_map(reports[-1]),
        charts.series_figure(data, "v000"),
        charts.level_trend("big", history),
    ):
        go.Figure(figure)  # raises on anything plotly does not know


def test_a_fifty_vertex_graph_has_one_box_per_vertex_with_its_level_word() -> None:
    report = synthetic(50, 8)
    graph = figures.job_graph(report)
    boxes = [a for a in graph["layout"]["annotations"] if a.get("name", "").startswith("vertex:")]
    assert [b["name"] for b in boxes] == [f"vertex:{v.name}" for v in report.vertices]
    for box, vertex in zip(boxes, report.vertices, strict=True):
        assert f"<br>{vertex.level} " in box["text"]
        assert box["bgcolor"] == figures.LEVEL_FILL[vertex.level]
    culprit = next(b for b in boxes if b["name"] == "vertex:v048")
    assert culprit["bordercolor"] == figures.ROOT_FRAME and culprit["borderwidth"] == 4
    assert culprit["text"].startswith("<b>★ v048</b>")
    tags = [a for a in graph["layout"]["annotations"] if a.get("name") == "root-cause-tag"]
    assert len(tags) == 1 and "slow-operator" in tags[0]["text"]
    arrows = [a for a in graph["layout"]["annotations"] if a.get("showarrow")]
    assert len(arrows) == sum(len(v.inputs) for v in report.vertices)


def test_the_graph_reads_left_to_right_in_topological_order() -> None:
    report = synthetic(50, 2, seed=11)
    column = columns(report.vertices)
    for v in report.vertices:
        for edge in v.inputs:
            assert column[edge.source] < column[v.name]
    placed = layout(report.vertices)
    seen = {(p.column, p.y) for p in placed.values()}
    assert len(seen) == len(report.vertices)  # no two boxes on one spot


def test_a_cycle_does_not_stop_the_layout() -> None:
    a = VertexStatus("a", 1, inputs=(Edge("c"),))
    b = VertexStatus("b", 1, inputs=(Edge("a"),))
    c = VertexStatus("c", 1, inputs=(Edge("b"),))
    src = VertexStatus("src", 1)
    assert set(columns([src, a, b, c])) == {"src", "a", "b", "c"}


def test_victims_are_the_backpressured_vertices_upstream_of_the_root_cause() -> None:
    window = Window(START, START + timedelta(seconds=5), 100, 50.0)
    chain = (
        VertexStatus("src", 1, "HIGH", 0.9),
        VertexStatus("side", 1, "HIGH", 0.8),
        VertexStatus("map", 1, "HIGH", 0.9, inputs=(Edge("src"),)),
        VertexStatus("slow", 1, "OK", 0.0, inputs=(Edge("map"),)),
        VertexStatus("sink", 1, "OK", 0.0, inputs=(Edge("slow"), Edge("side"))),
    )
    report = Report("r", "j", "runtime", window, chain, (RootCause("slow", "slow-operator"),))
    assert victims(report) == {"src", "map"}  # side is HIGH but not behind the root cause
    no_cause = Report("r", "j", "runtime", window, chain, ())
    assert victims(no_cause) == set()


def test_the_heat_map_has_a_cell_per_subtask_and_gaps_elsewhere() -> None:
    report = synthetic(5, 3)
    narrow = VertexStatus("narrow", 1, "OK", 0.0, subtasks=(SubtaskStatus(0, "OK", 0.25),))
    report = Report(report.run_id, report.job, report.source, report.window,
                    (*report.vertices, narrow), report.root_causes)  # fmt: skip
    heat = figures.heat_map(report)
    ratio, busy = heat["data"]
    assert ratio["visible"] is True and busy["visible"] is False
    row = ratio["z"][ratio["y"].index("narrow")]
    assert row == [0.25, None, None]
    assert len(ratio["z"]) == 6 and all(len(r) == 3 for r in ratio["z"])
