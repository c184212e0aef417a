"""The dashboard's figures: plotly's own schema accepts them, and they say what the report says.

Every figure is loaded into ``plotly.graph_objects.Figure``, which refuses a property plotly does
not know or a value of the wrong type, so the JSON the page hands to plotly.js is valid plotly.
"""

from __future__ import annotations

import random
from dataclasses import replace
from datetime import UTC, datetime, timedelta

import plotly.graph_objects as go
import pytest

from bpmon.model.values import (
    Edge,
    Level,
    Metrics,
    Report,
    RootCause,
    SubtaskStatus,
    VertexStatus,
    Window,
)
from bpmon.service.reports import StoredBurst
from bpmon.service.stored import BurstSummary
from bpmon.web import charts, figures, graph
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
    points = [StoredBurst("run-a", b, r) for b, r in enumerate(reports)]
    data = charts.series_data(points)
    history = [BurstSummary.of("run-a", b, r) for b, r in enumerate(reports)]
    for figure in (
        graph.job_graph(reports[-1]),
        graph.job_graph(reports[-1], "down"),
        figures.heat_map(reports[-1]),
        charts.series_figure(data, "v000"),
        charts.level_trend("big", history),
    ):
        go.Figure(figure)  # raises on anything plotly does not know


@pytest.mark.parametrize("direction", ["across", "down"])
def test_a_fifty_vertex_graph_has_one_box_per_vertex_with_its_level_word(direction: str) -> None:
    report = synthetic(50, 8)
    drawn = graph.job_graph(report, direction)  # type: ignore[arg-type]
    notes = drawn["layout"]["annotations"]
    boxes = [a for a in notes if a.get("name", "").startswith("vertex:")]
    assert [b["name"] for b in boxes] == [f"vertex:{v.name}" for v in report.vertices]
    for box, vertex in zip(boxes, report.vertices, strict=True):
        assert f"<br>{vertex.level} " in box["text"]
        assert box["text"].endswith(f"parallelism {vertex.parallelism}") or "victim" in box["text"]
    culprit = next(b for b in boxes if b["name"] == "vertex:v048")
    assert culprit["bordercolor"] == figures.ROOT_FRAME and culprit["borderwidth"] == 4
    assert culprit["text"].startswith("<b>★ v048</b>")
    tags = [a for a in notes if a.get("name") == "root-cause-tag"]
    assert len(tags) == 1 and "slow-operator" in tags[0]["text"]
    arrows = [a for a in notes if a.get("showarrow")]
    assert len(arrows) == sum(len(v.inputs) for v in report.vertices)


def _vertex(
    name: str, busy: float | None, ratio: float | None, level: Level = "OK"
) -> VertexStatus:
    return VertexStatus(name, 2, level, ratio, Metrics(busy_ratio=busy))


def _rgb(colour: str) -> tuple[int, int, int]:
    return int(colour[1:3], 16), int(colour[3:5], 16), int(colour[5:7], 16)


def test_boxes_take_flinks_colours_so_a_busy_root_cause_never_reads_ok() -> None:
    """Busy red, backpressured near black, idle blue (Flink's web UI), whatever the level: a
    root cause that is busy and not backpressured (level OK) is red, not the OK green."""
    window = Window(START, START + timedelta(seconds=5), 100, 50.0)
    chain = (
        _vertex("src", 0.0, 1.0, "HIGH"),
        replace(_vertex("slow", 1.0, 0.0), inputs=(Edge("src"),)),
        replace(_vertex("sink", 0.02, 0.0), inputs=(Edge("slow"),)),
        replace(_vertex("blind", None, None, None), inputs=(Edge("slow"),)),
    )
    report = Report("r", "j", "runtime", window, chain, (RootCause("slow", "slow-operator"),))
    for direction in ("across", "down"):
        drawn = graph.job_graph(report, direction)  # type: ignore[arg-type]
        fill = {
            a["name"][7:]: a["bgcolor"]
            for a in drawn["layout"]["annotations"]
            if a.get("name", "").startswith("vertex:")
        }
        r, g, b = _rgb(fill["slow"])
        assert fill["slow"] != figures.LEVEL_FILL["OK"] and r > 2 * g and r > 2 * b
        assert max(_rgb(fill["src"])) < 48  # backpressured: near black
        r, g, b = _rgb(fill["sink"])
        assert b > r and b > g  # idle: blue
        grey = _rgb(fill["blind"])
        assert max(grey) - min(grey) < 32 and 64 < grey[0] < 192  # no figures: grey


def test_a_job_without_edges_reads_from_backpressured_to_idle_on_one_row() -> None:
    """A process watched without a topology: no edges, so the boxes go side by side, the stage
    blocked on its output first and the one waiting for input last, never stacked."""
    window = Window(START, START + timedelta(seconds=5), 100, 50.0)
    threads = (
        VertexStatus("main", 1, "OK", 0.0, Metrics(busy_ratio=0.0, idle_ratio=1.0)),
        VertexStatus("upload", 1, "OK", 0.0, Metrics(busy_ratio=1.0, idle_ratio=0.0)),
        VertexStatus("ingest", 1, "HIGH", 1.0, Metrics(busy_ratio=0.0, idle_ratio=0.0)),
    )
    report = Report("r", "p", "pyspy", window, threads, (RootCause("upload", "slow-operator"),))
    assert columns(threads) == {"ingest": 0, "upload": 1, "main": 2}
    across = graph.job_graph(report)
    assert across["layout"]["meta"]["unconnected"] is True
    boxes = [a for a in across["layout"]["annotations"] if a.get("name", "").startswith("vertex")]
    assert {b["y"] for b in boxes} == {0.0}
    assert [b["name"] for b in sorted(boxes, key=lambda b: b["x"])] == [
        "vertex:ingest",
        "vertex:upload",
        "vertex:main",
    ]
    assert not [a for a in across["layout"]["annotations"] if a.get("showarrow")]


def test_drawn_down_a_chain_is_narrower_than_across() -> None:
    report = synthetic(6, 2, seed=5)
    chain = tuple(
        replace(v, inputs=(Edge(report.vertices[i - 1].name),) if i else ())
        for i, v in enumerate(report.vertices)
    )
    report = replace(report, vertices=chain)
    across, down = graph.job_graph(report), graph.job_graph(report, "down")
    assert down["layout"]["meta"]["min_width"] * 3 < across["layout"]["meta"]["min_width"]
    assert down["layout"]["height"] > across["layout"]["height"]


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
    assert ratio["visible"] is False and busy["visible"] is True  # a slow operator: busy
    row = ratio["z"][heat["layout"]["meta"]["vertices"].index("narrow")]
    assert row == [0.25, None, None]
    assert len(ratio["z"]) == 6 and all(len(r) == 3 for r in ratio["z"])


def test_the_heat_map_opens_on_backpressure_when_the_cause_is_not_a_busy_vertex() -> None:
    report = synthetic(5, 3)
    cause = RootCause("v003", "network", (1,), 0.8)
    heat = figures.heat_map(replace(report, root_causes=(cause,)))
    assert [t["visible"] for t in heat["data"]] == [True, False]
    assert heat["layout"]["meta"]["named"] == [["v003", 1]]
    healthy = figures.heat_map(replace(report, root_causes=()))
    assert [t["visible"] for t in healthy["data"]] == [True, False]
    assert healthy["layout"]["shapes"] == []


def _points(runs: dict[str, list[int]]) -> list[StoredBurst]:
    """Bursts of one job in several runs, ``{run: [seconds after START of each burst's end]}``."""
    points = []
    for run, ends in runs.items():
        for burst, end in enumerate(ends):
            report = synthetic(3, 2, burst=0)
            at = START + timedelta(seconds=end)
            window = Window(at - timedelta(seconds=5), at, 100, 50.0)
            points.append(StoredBurst(run, burst, replace(report, run_id=run, window=window)))
    return points


def test_the_series_sit_on_a_real_time_axis_with_each_run_apart_and_named() -> None:
    data = charts.series_data(_points({"run-a-0001": [10, 20, 320], "run-b-0002": [330]}))
    assert data["x"][:3] == ["2026-11-23 12:00:10.000", "2026-11-23 12:00:20.000",
                             "2026-11-23 12:05:20.000"]  # fmt: skip
    assert data["x"][3] == "2026-11-23 12:05:25.000" and data["labels"][3] == ""  # the break
    assert data["vertices"]["v000"]["busy"][3] is None
    axis = data["axis"]
    assert [s["x0"] for s in axis["shapes"]] == ["2026-11-23 12:05:25.000"]
    assert [a["text"] for a in axis["annotations"]] == ["run …0001", "run …0002"]
    first, last = (datetime.fromisoformat(t) for t in axis["xaxis.range"])
    assert first < datetime(2026, 11, 23, 12, 0, 5) and last > datetime(2026, 11, 23, 12, 5, 30)


def test_one_burst_spans_half_a_minute_not_milliseconds() -> None:
    points = _points({"run-a-0001": [10]})
    for low, high in (
        charts.series_data(points)["axis"]["xaxis.range"],
        charts.level_trend("j", [BurstSummary.of("run-a-0001", 0, points[0].report)])["layout"][
            "xaxis"
        ]["range"],
    ):
        span = datetime.fromisoformat(high) - datetime.fromisoformat(low)
        assert span >= timedelta(seconds=charts.MIN_SPAN_S)


def test_the_series_draw_only_the_lines_some_vertex_has_figures_for() -> None:
    window = Window(START, START + timedelta(seconds=5), 100, 50.0)
    stacks_only = (VertexStatus("a", 1, "OK", 0.0, Metrics(busy_ratio=0.5, idle_ratio=0.5)),)
    report = Report("run-p", "p", "pyspy", window, stacks_only, ())
    data = charts.series_data([StoredBurst("run-p", 0, report)])
    assert data["keys"] == ["ratio", "busy", "idle"]
    figure = charts.series_figure(data, "a")
    assert [t["meta"] for t in figure["data"]] == ["ratio", "busy", "idle"]
    assert "yaxis3" not in figure["layout"]  # two panels: backpressure, busy / idle
    go.Figure(figure)
