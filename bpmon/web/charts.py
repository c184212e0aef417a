"""The dashboard's charts over time: a vertex's series over the job's bursts, a job's level trend.

- **Series**: for one vertex, up to four panels sharing a real time axis (a burst sits at the end
  of its window, so bursts five minutes apart are further apart than bursts ten seconds apart):
  backpressure ratio (points in their level's colour), busy and idle shares, out and in pool
  usage, records per second in and out. Only the lines some vertex has figures for are drawn (a
  process watched with py-spy has no pools and no record rates). The page holds the series of
  every vertex (:func:`series_data`) and swaps the panels' values when another vertex is chosen,
  so the figure is built once, here.
- **Runs** are kept apart: the lines break between two runs, and a dotted line labelled with the
  run marks where each new run starts (a long watch goes on in a new run now and then; a stored
  job's runs are its ``bpmon run``, ``whatif`` and watch runs, each its own).
- **Trend**: a job's worst level burst by burst (stored runs and the watch's own bursts), the
  root cause in the hover and a mark where it moved.

An axis spans at least :data:`MIN_SPAN_S`, so one burst alone is not drawn on a scale of
milliseconds. Times are UTC. Plain dicts in plotly's figure schema, as in
:mod:`bpmon.web.figures`.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime, timedelta
from typing import Any

from bpmon.model.clock import as_utc
from bpmon.model.values import Level
from bpmon.service.reports import StoredBurst
from bpmon.service.stored import BurstSummary
from bpmon.web import formats
from bpmon.web.figures import EDGE_INK, LEVEL_FILL, Figure, label_text

SERIES_KEYS = ("ratio", "busy", "idle", "out_pool", "in_pool", "records_in", "records_out")
"""Every line the series may have, in order."""
PANELS = (
    # (key, trace name, panel, dash)
    ("ratio", "backpressure ratio", 0, "solid"),
    ("busy", "busy", 1, "solid"),
    ("idle", "idle", 1, "dot"),
    ("out_pool", "out pool", 2, "solid"),
    ("in_pool", "in pool", 2, "dot"),
    ("records_in", "records/s in", 3, "dot"),
    ("records_out", "records/s out", 3, "solid"),
)
PANEL_AXES = (
    ("backpressure", [0, 1.05]),
    ("busy / idle", [0, 1.05]),
    ("pool usage", [0, 1.1]),
    ("records/s", None),
)
COLOURS = {"ratio": "#c62828", "busy": "#1e88e5", "idle": "#7e57c2", "out_pool": "#00897b"}
COLOURS |= {"in_pool": "#8d6e63", "records_in": "#f4511e", "records_out": "#3949ab"}
MIN_SPAN_S = 30.0
"""The shortest time a chart's axis spans."""
RUN_LABELS = 6
"""Runs are named on the series up to this many; more, and only their boundaries are drawn."""
_LEVEL_Y: dict[Level | None, int | None] = {"OK": 0, "LOW": 1, "HIGH": 2, None: None}


def plot_time(moment: datetime) -> str:
    """A time as plotly's date axes read it: UTC, no zone suffix, milliseconds."""
    return as_utc(moment).strftime("%Y-%m-%d %H:%M:%S.%f")[:-3]


def series_data(points: Sequence[StoredBurst]) -> dict[str, Any]:
    """Every vertex's values burst by burst, a gap (None) between two runs.

    ``{"x", "labels", "vertices": {name: {key: [...], "level": [...]}}, "keys", "axis",
    "colours"}``: ``keys`` are the lines some vertex has a value for; a vertex missing from a
    burst (the job changed) has gaps there too.
    """
    names: list[str] = []
    for p in points:
        names += [v.name for v in p.report.vertices if v.name not in names]
    vertices: dict[str, dict[str, list[Any]]] = {
        n: {k: [] for k in (*SERIES_KEYS, "level")} for n in names
    }
    xs: list[str] = []
    labels: list[str] = []
    for i, p in enumerate(points):
        if i and p.run_id != points[i - 1].run_id:  # break the lines between two runs
            xs.append(plot_time(p.report.window.start))
            labels.append("")
            for columns in vertices.values():
                for values in columns.values():
                    values.append(None)
        xs.append(plot_time(p.time))
        labels.append(f"{p.run_id}/{p.burst} ({formats.when(p.time)})")
        found = {v.name: v for v in p.report.vertices}
        for name, columns in vertices.items():
            for key, value in _values(found.get(name)).items():
                columns[key].append(value)
    keys = ["ratio"] + [
        k for k in SERIES_KEYS[1:] if any(v is not None for c in vertices.values() for v in c[k])
    ]
    return {
        "x": xs,
        "labels": labels,
        "vertices": vertices,
        "keys": keys,
        "axis": time_axis(points),
        "colours": {str(k): c for k, c in LEVEL_FILL.items()},
    }


def _values(v: Any) -> dict[str, Any]:
    """One vertex's values in one burst (all None when the vertex is not in it)."""
    if v is None:
        return dict.fromkeys((*SERIES_KEYS, "level"))
    m = v.metrics
    raw = (
        v.ratio,
        m.busy_ratio,
        m.idle_ratio,
        m.out_pool_usage,
        m.in_pool_usage,
        m.records_in_per_s,
        m.records_out_per_s,
    )
    out = {
        key: formats.rounded(value, 1 if key.startswith("rec") else 3)
        for key, value in zip(SERIES_KEYS, raw, strict=True)
    }
    return out | {"level": v.level}


def time_range(first: datetime, last: datetime) -> list[str]:
    """An axis range from ``first`` to ``last``, padded, at least :data:`MIN_SPAN_S` wide: a
    shorter one reaches further back, so the newest burst stays at the right."""
    span = max((last - first).total_seconds(), MIN_SPAN_S)
    pad = timedelta(seconds=span * 0.04)
    return [plot_time(last - timedelta(seconds=span) - pad), plot_time(last + pad)]


def time_axis(points: Sequence[StoredBurst]) -> dict[str, Any]:
    """The series' x axis as plotly's relayout takes it: its range, and a labelled dotted line
    where each run after the first starts (the checkpoint durations share it)."""
    if not points:
        return {"xaxis.range": None, "shapes": [], "annotations": []}
    starts = [p for i, p in enumerate(points) if i == 0 or p.run_id != points[i - 1].run_id]
    shapes, notes = [], []
    for n, p in enumerate(starts):
        at = plot_time(p.report.window.start)
        if n:
            line = {"color": EDGE_INK, "width": 1, "dash": "dot"}
            shapes.append(
                {"type": "line", "xref": "x", "yref": "paper", "x0": at, "x1": at, "y0": 0}
                | {"y1": 1, "line": line, "name": "run-start"}
            )
        if len(starts) <= RUN_LABELS:
            notes.append(_run_label(at, p.run_id))
    return {
        "xaxis.range": time_range(points[0].report.window.start, points[-1].time),
        "shapes": shapes,
        "annotations": notes,
    }


def _run_label(at: str, run_id: str) -> dict[str, Any]:
    """The name of a run above the series, where its first burst starts (the id's last part;
    the whole id in the hover)."""
    return {
        "x": at,
        "y": 1,
        "xref": "x",
        "yref": "paper",
        "xanchor": "left",
        "yanchor": "bottom",
        "text": f"run …{label_text(run_id[-4:])}",
        "hovertext": label_text(run_id),
        "showarrow": False,
        "font": {"size": 10, "color": EDGE_INK},
        "name": "run-label",
    }


def series_figure(data: dict[str, Any], vertex: str | None) -> Figure:
    """The panels of ``vertex`` (empty lines when it is None or not in ``data``): one panel per
    group of lines that has figures."""
    values = data["vertices"].get(vertex) if vertex is not None else None
    keys = data["keys"]
    panels = sorted({panel for key, _, panel, _ in PANELS if key in keys})
    axis_of = {panel: "y" if i == 0 else f"y{i + 1}" for i, panel in enumerate(panels)}
    traces = [
        _line(key, name, axis_of[panel], dash, values, data)
        for key, name, panel, dash in PANELS
        if key in keys
    ]
    axes = data["axis"]
    layout: dict[str, Any] = {
        "height": 50 + 125 * len(panels),
        "margin": {"l": 8, "r": 8, "t": 22, "b": 8},
        "hovermode": "x unified",
        "showlegend": False,
        "xaxis": {
            "type": "date",
            "anchor": axis_of[panels[-1]],
            "automargin": True,
            "range": axes["xaxis.range"],
            "hoverformat": "%H:%M:%S",
            "title": {"text": "UTC", "font": {"size": 10}},
        },
        "shapes": axes["shapes"],
        "annotations": axes["annotations"],
        "meta": {"kind": "series", "vertex": vertex, "keys": [t["meta"] for t in traces]},
    }
    step = 1 / len(panels)
    for i, panel in enumerate(panels):
        title, span = PANEL_AXES[panel]
        top = 1 - i * step
        name = "yaxis" if i == 0 else f"yaxis{i + 1}"
        layout[name] = _panel(max(top - step + 0.05, 0.0), top, title, span)
    return {"data": traces, "layout": layout}


def _line(
    key: str, name: str, axis: str, dash: str, values: dict[str, Any] | None, data: dict[str, Any]
) -> dict[str, Any]:
    trace: dict[str, Any] = {
        "type": "scatter",
        "mode": "lines+markers",
        "name": name,
        "x": data["x"],
        "y": values[key] if values else [],
        "customdata": data["labels"],
        "xaxis": "x",
        "yaxis": axis,
        "line": {"color": COLOURS[key], "dash": dash, "width": 2},
        "marker": {"size": 5},
        "connectgaps": False,
        "hovertemplate": f"{name} %{{y}}<extra></extra>",
        "meta": key,
    }
    if key == "ratio":
        levels = values["level"] if values else []
        trace["marker"] = {"size": 9, "color": [LEVEL_FILL[lv] for lv in levels]}
        trace["text"] = [formats.LEVEL_WORDS[lv] for lv in levels]
        trace["hovertemplate"] = "burst %{customdata}<br>backpressure %{y} (%{text})<extra></extra>"
    return trace


def _panel(low: float, high: float, title: str, span: list[float] | None) -> dict[str, Any]:
    axis: dict[str, Any] = {
        "domain": [low, high],
        "title": {"text": title, "font": {"size": 11}},
        "automargin": True,
        "rangemode": "tozero",
        "fixedrange": True,
    }
    if span is not None:
        axis["range"] = span
    return axis


def level_trend(job: str, history: Sequence[BurstSummary]) -> Figure:
    """``job``'s worst level burst by burst; the hover names the root cause of each burst."""
    xs, ys, colours, hover = [], [], [], []
    moves_x, moves_y, moves_text = [], [], []
    previous: str | None = None
    for burst in history:
        levels = [lv for _, lv in burst.levels if lv is not None]
        worst = max(levels, key=lambda lv: _LEVEL_Y[lv] or 0) if levels else None
        cause = burst.root_causes[0] if burst.root_causes else None
        said = "not diagnosed" if burst.root_causes is None else "no root cause"
        if cause is not None:
            said = f"{cause.kind} at {cause.vertex} ({formats.ratio(cause.confidence)})"
        xs.append(plot_time(burst.time))
        ys.append(_LEVEL_Y[worst])
        colours.append(LEVEL_FILL[worst])
        hover.append(label_text(f"{burst.run_id}/{burst.burst}: {said}"))
        where = cause.vertex if cause is not None else None
        if where is not None and previous is not None and where != previous:
            moves_x.append(xs[-1])
            moves_y.append(ys[-1])
            moves_text.append(label_text(f"moved to {where}"))
        previous = where if where is not None else previous
    data: list[dict[str, Any]] = [
        {
            "type": "scatter",
            "mode": "lines+markers",
            "name": label_text(job),
            "x": xs,
            "y": ys,
            "line": {"shape": "hv", "color": "#8a8f98", "width": 1.5},
            "marker": {"size": 8, "color": colours},
            "hovertext": hover,
            "hoverinfo": "x+text",
        }
    ]
    if moves_x:
        data.append(
            {
                "type": "scatter",
                "mode": "markers+text",
                "name": "bottleneck moved",
                "x": moves_x,
                "y": moves_y,
                "text": moves_text,
                "textposition": "top center",
                "marker": {"size": 14, "symbol": "diamond-open", "color": "#1e88e5"},
                "hoverinfo": "text",
            }
        )
    return {
        "data": data,
        "layout": {
            "height": 190,
            "margin": {"l": 8, "r": 8, "t": 16, "b": 8},
            "showlegend": False,
            "xaxis": {
                "type": "date",
                "automargin": True,
                "range": _trend_range(history),
                "hoverformat": "%Y-%m-%d %H:%M:%S",
                "title": {"text": "UTC", "font": {"size": 10}},
            },
            "yaxis": {
                "tickvals": [0, 1, 2],
                "ticktext": ["OK", "LOW", "HIGH"],
                "range": [-0.4, 2.6],
                "fixedrange": True,
                "automargin": True,
            },
            "meta": {"kind": "trend", "job": job},
        },
    }


def _trend_range(history: Sequence[BurstSummary]) -> list[str] | None:
    """The trend's time axis: from the first burst's window start to the last one's end."""
    if not history:
        return None
    return time_range(history[0].start or history[0].time, history[-1].time)
