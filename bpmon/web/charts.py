"""The dashboard's charts over time: a vertex's series over the job's bursts, a job's level trend.

- **Series**: for one vertex, four panels sharing the time axis: backpressure ratio (points in
  their level's colour), busy and idle shares, out and in pool usage, records per second in and
  out. The page holds the series of every vertex (:func:`series_data`) and swaps the panels'
  values when another vertex is chosen, so the figure is built once, here.
- **Trend**: a job's worst level burst by burst (stored runs and the watch's own bursts), the
  root cause in the hover and a mark where it moved.

Plain dicts in plotly's figure schema, as in :mod:`bpmon.web.figures`.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from bpmon.model import Level, Report
from bpmon.stored import BurstSummary
from bpmon.web import numbers
from bpmon.web.figures import LEVEL_FILL, Figure, label_text

TICKS = 8
"""The most time labels on the series' axis."""
SERIES_KEYS = ("ratio", "busy", "idle", "out_pool", "in_pool", "records_in", "records_out")
"""The order of the series' traces (the page swaps their ``y`` in this order)."""
PANELS = (
    # (key, trace name, y axis, dash)
    ("ratio", "backpressure ratio", "y", "solid"),
    ("busy", "busy", "y2", "solid"),
    ("idle", "idle", "y2", "dot"),
    ("out_pool", "out pool", "y3", "solid"),
    ("in_pool", "in pool", "y3", "dot"),
    ("records_in", "records/s in", "y4", "dot"),
    ("records_out", "records/s out", "y4", "solid"),
)
COLOURS = {"ratio": "#c62828", "busy": "#1e88e5", "idle": "#7e57c2", "out_pool": "#00897b"}
COLOURS |= {"in_pool": "#8d6e63", "records_in": "#f4511e", "records_out": "#3949ab"}
_LEVEL_Y: dict[Level | None, int | None] = {"OK": 0, "LOW": 1, "HIGH": 2, None: None}


@dataclass(frozen=True, slots=True)
class Point:
    """One burst of a job: its label (``run/burst``), when its window ended, and its report."""

    label: str
    time: datetime
    report: Report


def series_data(points: Sequence[Point]) -> dict[str, Any]:
    """Every vertex's values burst by burst: ``{"x", "labels", "vertices": {name: {key: [...]}}}``.

    A vertex missing from a burst (the job changed) has gaps (None) there.
    """
    names: list[str] = []
    for p in points:
        names += [v.name for v in p.report.vertices if v.name not in names]
    vertices: dict[str, dict[str, list[Any]]] = {
        n: {k: [] for k in (*SERIES_KEYS, "level")} for n in names
    }
    for p in points:
        found = {v.name: v for v in p.report.vertices}
        for name, columns in vertices.items():
            v = found.get(name)
            m = v.metrics if v is not None else None
            values = (
                (None, None, None, None, None, None, None)
                if v is None or m is None
                else (
                    v.ratio,
                    m.busy_ratio,
                    m.idle_ratio,
                    m.out_pool_usage,
                    m.in_pool_usage,
                    m.records_in_per_s,
                    m.records_out_per_s,
                )
            )
            for key, value in zip(SERIES_KEYS, values, strict=True):
                columns[key].append(numbers.rounded(value, 1 if key.startswith("rec") else 3))
            columns["level"].append(None if v is None else v.level)
    return {
        "x": list(range(len(points))),
        "labels": [f"{p.label} ({numbers.when(p.time)})" for p in points],
        "axis": _time_axis(points),
        "vertices": vertices,
        "colours": {str(k): c for k, c in LEVEL_FILL.items()},
    }


def _time_axis(points: Sequence[Point]) -> dict[str, Any]:
    """The x axis of the series as plotly's relayout takes it: bursts evenly spaced, up to
    TICKS times of day as ticks, a dotted line where a new run starts."""
    n = len(points)
    step = max(1, -(-n // TICKS))
    same_day = n == 0 or points[0].time.date() == points[-1].time.date()
    shown = "%H:%M:%S" if same_day else "%m-%d %H:%M"
    values = list(range(0, n, step))
    starts = [
        i for i in range(1, n) if points[i].label.split("/")[0] != points[i - 1].label.split("/")[0]
    ]
    shapes = [
        {
            "type": "line",
            "xref": "x",
            "yref": "paper",
            "x0": i - 0.5,
            "x1": i - 0.5,
            "y0": 0,
            "y1": 1,
            "line": {"color": "#8a8f98", "width": 1, "dash": "dot"},
        }
        for i in starts
    ]
    return {
        "xaxis.tickvals": values,
        "xaxis.ticktext": [points[i].time.strftime(shown) for i in values],
        "xaxis.range": [-0.5, max(n - 0.5, 0.5)],
        "shapes": shapes,
    }


def series_figure(data: dict[str, Any], vertex: str | None) -> Figure:
    """The four panels of ``vertex`` (empty panels when it is None or not in ``data``)."""
    values = data["vertices"].get(vertex) if vertex is not None else None
    ticks = data["axis"]
    traces = []
    for key, name, axis, dash in PANELS:
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
            "hovertemplate": f"{name} %{{y}}<extra></extra>",
        }
        if key == "ratio":
            levels = values["level"] if values else []
            trace["marker"] = {"size": 9, "color": [LEVEL_FILL[lv] for lv in levels]}
            trace["text"] = [numbers.LEVEL_WORDS[lv] for lv in levels]
            trace["hovertemplate"] = (
                "burst %{customdata}<br>backpressure %{y} (%{text})<extra></extra>"
            )
        traces.append(trace)
    return {
        "data": traces,
        "layout": {
            "height": 520,
            "margin": {"l": 8, "r": 8, "t": 8, "b": 8},
            "hovermode": "x unified",
            "showlegend": False,
            "xaxis": {
                "anchor": "y4",
                "automargin": True,
                "tickvals": ticks["xaxis.tickvals"],
                "ticktext": ticks["xaxis.ticktext"],
                "range": ticks["xaxis.range"],
            },
            "shapes": ticks["shapes"],
            "yaxis": _panel(0.79, 1.0, "backpressure", [0, 1.05]),
            "yaxis2": _panel(0.53, 0.74, "busy / idle", [0, 1.05]),
            "yaxis3": _panel(0.27, 0.48, "pool usage", [0, 1.1]),
            "yaxis4": _panel(0.0, 0.22, "records/s", None),
            "meta": {"kind": "series", "vertex": vertex, "keys": list(SERIES_KEYS)},
        },
    }


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
            said = f"{cause.kind} at {cause.vertex} ({numbers.ratio(cause.confidence)})"
        xs.append(numbers.iso(burst.time))
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
            "xaxis": {"type": "date", "automargin": True},
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
