"""The dashboard's plotly figures, as the JSON plotly.js draws: the job graph, the subtask heat map.

Figures are built as plain dicts in plotly's figure schema (``{"data": [...], "layout": {...}}``)
rather than through ``plotly.graph_objects``: the page embeds them as JSON and plotly.js (served
from the installed plotly package) draws them, so a request costs a dict and a ``json.dumps``, not
plotly's validation of every property. The tests hold every figure to plotly's schema by loading
it into ``plotly.graph_objects.Figure``.

- **Job graph**: one box per vertex, left to right in topological order, filled with its level's
  colour and carrying the level's word (never colour alone), its ratio and busy share; arrows
  labelled with partitioner and exchange; the root cause framed thick in blue with a "ROOT CAUSE"
  tag naming the kind; victims (backpressured upstream of the root cause) say so.
- **Heat map**: vertices × subtasks, backpressure ratio or busy share (one trace each, the page
  switches between them), where skew and a slow instance stand out.

Colours are the same in light and dark mode; text without an explicit colour takes the layout's
font colour, which the page sets from its theme. The series and trends are in
:mod:`bpmon.web.charts`.
"""

from __future__ import annotations

import html
from typing import Any

from bpmon.model import Edge, Level, Report, VertexStatus
from bpmon.web import numbers
from bpmon.web.topology import culprits, layout, victims

Figure = dict[str, Any]

LEVEL_FILL: dict[Level | None, str] = {
    "OK": "#2e7d32",
    "LOW": "#f9a825",
    "HIGH": "#c62828",
    None: "#6b7280",
}
"""A level's colour (green, amber, red; grey for no level): readable on light and dark pages."""
LEVEL_INK: dict[Level | None, str] = {"OK": "#ffffff", "LOW": "#1a1a1a", "HIGH": "#ffffff"}
LEVEL_INK[None] = "#ffffff"
ROOT_FRAME = "#1e88e5"
"""The frame around a root cause: a hue no level uses."""
EDGE_INK = "#8a8f98"
GAP_PX = 80
"""Room between two columns of boxes for an arrow and its label; narrower, the page scrolls."""
ROW_PX = 96
NAME_CHARS = 22
"""Longer vertex names are cut on the graph (the full name is in the hover and the tables)."""
HEAT_RATIO = [[0, "#e8f5e9"], [0.1, "#c8e6c9"], [0.3, "#ffe082"], [0.5, "#ffa726"]]
HEAT_RATIO += [[0.75, "#e53935"], [1, "#8e0000"]]
"""Backpressure from pale green (none) through amber to deep red (all of the time)."""
HEAT_BUSY = [[0, "#e3f2fd"], [0.5, "#64b5f6"], [1, "#0d47a1"]]
HEAT_TEXT_CELLS = 600
"""Heat maps up to this many cells print each value in its cell."""


def short(name: str) -> str:
    """``name`` cut to NAME_CHARS characters with an ellipsis."""
    return name if len(name) <= NAME_CHARS else name[: NAME_CHARS - 1] + "…"


def label_text(text: str) -> str:
    """``text`` escaped for a plotly label (plotly reads ``<b>``, ``<br>`` and entities)."""
    return html.escape(text, quote=False)


def _box_half_width(lines: list[str]) -> float:
    """About half the pixel width of a node box with these lines (12 px font, ~6.6 px a char)."""
    return max(len(line) for line in lines) * 3.3 + 8


def _node_lines(v: VertexStatus, culprit: bool, victim: bool) -> list[str]:
    word = numbers.LEVEL_WORDS[v.level]
    status = word if v.ratio is None else f"{word} {numbers.ratio(v.ratio)}"
    busy = f"busy {numbers.ratio(v.metrics.busy_ratio)}"
    role = " · root cause" if culprit else " · victim" if victim else ""
    return [("★ " if culprit else "") + short(v.name), status, busy + role]


def job_graph(report: Report) -> Figure:
    """The job graph of ``report`` (see the module's docstring)."""
    place = layout(report.vertices)
    blamed = culprits(report)
    hit = victims(report)
    kinds = {c.vertex: c.kind for c in reversed(report.root_causes or ())}
    half: dict[str, float] = {}
    notes: list[dict[str, Any]] = []
    meta: dict[str, Any] = {}
    for v in report.vertices:
        p = place[v.name]
        lines = _node_lines(v, v.name in blamed, v.name in hit)
        half[v.name] = _box_half_width(lines)
        notes.append(_node(v, lines, p.column, p.y, v.name in blamed))
        if v.name in blamed:
            notes.append(_tag(p.column, p.y, kinds[v.name], blamed.index(v.name)))
        meta[v.name] = {
            "level": v.level,
            "root_cause": v.name in blamed,
            "victim": v.name in hit,
        }
    edges: list[dict[str, Any]] = []
    for v in report.vertices:
        for e in v.inputs:
            if e.source not in place:
                continue
            a, b = place[e.source], place[v.name]
            edges.append(_arrow(a.column, a.y, b.column, b.y, half[e.source], half[v.name]))
            edges.append(
                _edge_label(e, a.column, a.y, b.column, b.y, half[e.source] - half[v.name])
            )
    width = max((p.column for p in place.values()), default=0) + 1
    rows = _rows(place)
    widest: dict[int, float] = {}
    for name, p in place.items():
        widest[p.column] = max(widest.get(p.column, 0.0), 2 * half[name])
    min_width = int(sum(widest.values()) + GAP_PX * width)
    focus = next((place[n].column for n in blamed if n in place), None)
    data = [_hover_points(report.vertices, place)]
    span = (rows - 1) / 2
    return {
        "data": data,
        "layout": {
            "annotations": edges + notes,
            "xaxis": _hidden(-0.6, width - 0.4),
            "yaxis": _hidden(-span - 0.65, span + 0.85),
            "margin": {"l": 8, "r": 8, "t": 8, "b": 8},
            "height": rows * ROW_PX + 60,
            "showlegend": False,
            "hovermode": "closest",
            "dragmode": False,
            "meta": {
                "kind": "graph",
                "min_width": min_width,
                "columns": width,
                "focus_column": focus,
                "vertices": meta,
            },
        },
    }


def _rows(place: dict[str, Any]) -> int:
    counts: dict[int, int] = {}
    for p in place.values():
        counts[p.column] = counts.get(p.column, 0) + 1
    return max(counts.values(), default=1)


def _hidden(low: float, high: float) -> dict[str, Any]:
    return {"visible": False, "range": [low, high], "fixedrange": True, "zeroline": False}


def _node(v: VertexStatus, lines: list[str], x: float, y: float, culprit: bool) -> dict[str, Any]:
    first, *rest = (label_text(line) for line in lines)
    return {
        "x": x,
        "y": y,
        "xref": "x",
        "yref": "y",
        "text": "<br>".join([f"<b>{first}</b>", *rest]),
        "showarrow": False,
        "align": "center",
        "bgcolor": LEVEL_FILL[v.level],
        "bordercolor": ROOT_FRAME if culprit else LEVEL_FILL[v.level],
        "borderwidth": 4 if culprit else 1,
        "borderpad": 5,
        "font": {"color": LEVEL_INK[v.level], "size": 12},
        "captureevents": True,
        "name": f"vertex:{v.name}",
    }


def _tag(x: float, y: float, kind: str, rank: int) -> dict[str, Any]:
    """The "ROOT CAUSE" label above a culprit's box (numbered when there are several)."""
    title = "ROOT CAUSE" if rank == 0 else f"ROOT CAUSE {rank + 1}"
    return {
        "x": x,
        "y": y,
        "xref": "x",
        "yref": "y",
        "yshift": 42,
        "text": f"<b>{title}</b> · {label_text(kind)}",
        "showarrow": False,
        "font": {"size": 12},
        "name": "root-cause-tag",
    }


def _arrow(x0: float, y0: float, x1: float, y1: float, h0: float, h1: float) -> dict[str, Any]:
    return {
        "x": x1,
        "y": y1,
        "ax": x0,
        "ay": y0,
        "xref": "x",
        "yref": "y",
        "axref": "x",
        "ayref": "y",
        "text": "",
        "showarrow": True,
        "arrowhead": 2,
        "arrowsize": 1.2,
        "arrowwidth": 1.5,
        "arrowcolor": EDGE_INK,
        "standoff": h1 + 2,
        "startstandoff": h0 + 2,
    }


def _edge_label(
    edge: Edge, x0: float, y0: float, x1: float, y1: float, skew: float
) -> dict[str, Any]:
    """The partitioner and exchange, in the middle of the gap between the two boxes.

    The centres' midpoint is shifted by half the difference of the boxes' widths (in pixels,
    whatever the figure's scale), so a wide box never covers its edge's label.
    """
    return {
        "x": (x0 + x1) / 2,
        "y": (y0 + y1) / 2,
        "xref": "x",
        "yref": "y",
        "xshift": skew / 2,
        "yshift": 16,
        "text": f"{label_text(edge.partitioner)}<br>{label_text(edge.exchange)}",
        "showarrow": False,
        "font": {"size": 10},
        "name": "edge",
    }


def _hover_points(vertices: tuple[VertexStatus, ...], place: dict[str, Any]) -> dict[str, Any]:
    """Invisible points under the boxes: the hover details and the click target of a vertex."""
    texts = []
    for v in vertices:
        m = v.metrics
        texts.append(
            "<br>".join(
                [
                    f"<b>{label_text(v.name)}</b> (parallelism {v.parallelism})",
                    f"level {numbers.LEVEL_WORDS[v.level]}, ratio {numbers.ratio(v.ratio)}",
                    f"busy {numbers.ratio(m.busy_ratio)}, idle {numbers.ratio(m.idle_ratio)}",
                    f"out pool {numbers.ratio(m.out_pool_usage)}, "
                    f"in pool {numbers.ratio(m.in_pool_usage)}",
                    f"records/s in {numbers.rate(m.records_in_per_s)}, "
                    f"out {numbers.rate(m.records_out_per_s)}",
                ]
            )
        )
    return {
        "type": "scatter",
        "mode": "markers",
        "x": [place[v.name].column for v in vertices],
        "y": [place[v.name].y for v in vertices],
        "customdata": [v.name for v in vertices],
        "hovertext": texts,
        "hoverinfo": "text",
        "marker": {"size": 44, "symbol": "square", "opacity": 0},
        "showlegend": False,
        "name": "vertices",
    }


def ordered(report: Report) -> list[VertexStatus]:
    """The vertices in reading order: by column, top to bottom within one."""
    place = layout(report.vertices)
    return sorted(report.vertices, key=lambda v: (place[v.name].column, -place[v.name].y))


def heat_map(report: Report) -> Figure:
    """Vertices × subtasks: backpressure ratio (shown) and busy share (hidden) as two traces."""
    rows = ordered(report)
    width = max((len(v.subtasks) for v in rows), default=0)
    width = max(width, max((s.index + 1 for v in rows for s in v.subtasks), default=0))
    names = [v.name for v in rows]
    cells = len(rows) * width
    traces = []
    for key, title, scale in (("ratio", "backpressure", HEAT_RATIO), ("busy", "busy", HEAT_BUSY)):
        z: list[list[float | None]] = []
        words: list[list[str]] = []
        for v in rows:
            line: list[float | None] = [None] * width
            said = [""] * width
            for s in v.subtasks:
                value = s.ratio if key == "ratio" else s.metrics.busy_ratio
                line[s.index] = numbers.rounded(value)
                said[s.index] = numbers.LEVEL_WORDS[s.level]
            z.append(line)
            words.append(said)
        trace: dict[str, Any] = {
            "type": "heatmap",
            "name": title,
            "z": z,
            "x": [f"[{i}]" for i in range(width)],
            "y": [label_text(n) for n in names],
            "customdata": words,
            "zmin": 0,
            "zmax": 1,
            "colorscale": scale,
            "xgap": 2,
            "ygap": 2,
            "visible": key == "ratio",
            "hovertemplate": f"%{{y}}%{{x}}: {title} %{{z:.2f}} (%{{customdata}})<extra></extra>",
            "colorbar": {"title": {"text": title}, "thickness": 12, "len": 0.9},
        }
        if cells <= HEAT_TEXT_CELLS:
            trace["texttemplate"] = "%{z:.2f}"
        traces.append(trace)
    return {
        "data": traces,
        "layout": {
            "xaxis": {"title": {"text": "subtask"}, "side": "top", "fixedrange": True},
            "yaxis": {"autorange": "reversed", "fixedrange": True, "automargin": True},
            "margin": {"l": 8, "r": 8, "t": 48, "b": 8},
            "height": max(160, 26 * len(rows) + 70),
            "meta": {"kind": "heatmap", "vertices": names, "subtasks": width},
        },
    }
