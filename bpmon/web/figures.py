"""The dashboard's plotly figures, as the JSON plotly.js draws: the subtask heat map, and what
every figure shares (the job graph is in :mod:`bpmon.web.graph`, series and trends in
:mod:`bpmon.web.charts`).

Figures are built as plain dicts in plotly's figure schema (``{"data": [...], "layout": {...}}``)
rather than through ``plotly.graph_objects``: the page embeds them as JSON and plotly.js (served
from the installed plotly package) draws them, so a request costs a dict and a ``json.dumps``, not
plotly's validation of every property. The tests hold every figure to plotly's schema by loading
it into ``plotly.graph_objects.Figure``.

**Heat map**: vertices × subtasks, backpressure ratio or busy share (one trace each, the page
switches between them), where skew and a slow instance stand out. It opens on what shows the
top root cause: busy share when the cause is a vertex short of capacity (a slow operator, a hot
key, a slow subtask or sink, spilling: the backpressure ratio of such a vertex is 0 in every
subtask), backpressure otherwise. The subtasks a root cause names are framed in amber and
starred, and a root cause's row is starred.

Colours are the same in light and dark mode; text without an explicit colour takes the layout's
font colour, which the page sets from its theme.
"""

from __future__ import annotations

import html
from dataclasses import dataclass
from typing import Any

from bpmon.model.values import Level, Report, VertexStatus
from bpmon.web import formats
from bpmon.web.topology import culprits, layout

Figure = dict[str, Any]

LEVEL_FILL: dict[Level | None, str] = {
    "OK": "#2e7d32",
    "LOW": "#f9a825",
    "HIGH": "#c62828",
    None: "#6b7280",
}
"""A level's colour (green, amber, red; grey for no level): readable on light and dark pages."""
ROOT_FRAME = "#ffb300"
"""The frame around a root cause and the subtasks it names: amber, a hue no fill takes."""
EDGE_INK = "#8a8f98"
NAME_CHARS = 22
"""Longer vertex names are cut on the graph (the full name is in the hover and the tables)."""
HEAT_RATIO = [[0, "#e8f5e9"], [0.1, "#c8e6c9"], [0.3, "#ffe082"], [0.5, "#ffa726"]]
HEAT_RATIO += [[0.75, "#e53935"], [1, "#8e0000"]]
"""Backpressure from pale green (none) through amber to deep red (all of the time)."""
HEAT_BUSY = [[0, "#f3f4f6"], [0.5, "#ef9a9a"], [1, "#b71c1c"]]
"""Busy from pale grey (never) to red (all of the time), red as on the graph."""
HEAT_TEXT_CELLS = 600
"""Heat maps up to this many cells print each value in its cell."""
BUSY_KINDS = frozenset({"slow-operator", "data-skew", "slow-subtask", "slow-sink", "spilling"})
"""Root causes that are a vertex short of capacity: busy, and not backpressured itself."""
STAR = "★ "


def short(name: str) -> str:
    """``name`` cut to NAME_CHARS characters with an ellipsis."""
    return name if len(name) <= NAME_CHARS else name[: NAME_CHARS - 1] + "…"


def label_text(text: str) -> str:
    """``text`` escaped for a plotly label (plotly reads ``<b>``, ``<br>`` and entities)."""
    return html.escape(text, quote=False)


def ordered(report: Report) -> list[VertexStatus]:
    """The vertices in reading order: by column, top to bottom within one."""
    place = layout(report.vertices)
    return sorted(report.vertices, key=lambda v: (place[v.name].column, -place[v.name].y))


def heat_map(report: Report) -> Figure:
    """Vertices × subtasks, backpressure ratio and busy share as two traces, the one that shows
    the top root cause visible (the module's docstring); named subtasks framed."""
    rows = ordered(report)
    blamed = set(culprits(report))
    grid = _Grid(
        rows=rows,
        labels=[label_text((STAR if v.name in blamed else "") + v.name) for v in rows],
        width=max((s.index + 1 for v in rows for s in v.subtasks), default=0),
        named=_named_cells(report, rows),
    )
    shown = 1 if report.root_causes and report.root_causes[0].kind in BUSY_KINDS else 0
    traces = [
        _heat_trace(grid, key, title, scale, visible=i == shown)
        for i, (key, title, scale) in enumerate(
            (("ratio", "backpressure", HEAT_RATIO), ("busy", "busy", HEAT_BUSY))
        )
    ]
    frames = [_frame(column, row) for row, column in grid.named]
    return {
        "data": traces,
        "layout": {
            "xaxis": {"title": {"text": "subtask"}, "side": "top", "fixedrange": True},
            "yaxis": {"autorange": "reversed", "fixedrange": True, "automargin": True},
            "margin": {"l": 8, "r": 8, "t": 48, "b": 8},
            "height": max(160, 26 * len(rows) + 70),
            "shapes": frames,
            "meta": {
                "kind": "heatmap",
                "vertices": [v.name for v in rows],
                "subtasks": grid.width,
                "shown": shown,
                "named": [[rows[row].name, column] for row, column in grid.named],
            },
        },
    }


def _named_cells(report: Report, rows: list[VertexStatus]) -> list[tuple[int, int]]:
    """``(row, subtask)`` of every subtask a root cause names, each once."""
    index = {v.name: i for i, v in enumerate(rows)}
    cells: list[tuple[int, int]] = []
    for cause in report.root_causes or ():
        for subtask in cause.subtasks:
            cell = (index[cause.vertex], subtask) if cause.vertex in index else None
            if cell is not None and cell not in cells:
                cells.append(cell)
    return cells


@dataclass(frozen=True, slots=True)
class _Grid:
    """The heat map's rows (vertices in reading order) and their labels, its width in subtasks,
    and the ``(row, subtask)`` cells a root cause names."""

    rows: list[VertexStatus]
    labels: list[str]
    width: int
    named: list[tuple[int, int]]


def _heat_trace(
    grid: _Grid, key: str, title: str, scale: list[list[Any]], visible: bool
) -> dict[str, Any]:
    """One view of the heat map: ``ratio`` or ``busy`` per subtask, each value in its cell."""
    rows, width, named = grid.rows, grid.width, grid.named
    z: list[list[float | None]] = []
    words: list[list[str]] = []
    texts: list[list[str]] = []
    for r, v in enumerate(rows):
        line: list[float | None] = [None] * width
        said, shown = [""] * width, [""] * width
        for s in v.subtasks:
            value = formats.rounded(s.ratio if key == "ratio" else s.metrics.busy_ratio)
            line[s.index] = value
            said[s.index] = formats.LEVEL_WORDS[s.level]
            star = STAR if (r, s.index) in named else ""
            shown[s.index] = star + ("–" if value is None else f"{value:.2f}")
        z.append(line)
        words.append(said)
        texts.append(shown)
    trace: dict[str, Any] = {
        "type": "heatmap",
        "name": title,
        "z": z,
        "x": [f"[{i}]" for i in range(width)],
        "y": grid.labels,
        "customdata": words,
        "zmin": 0,
        "zmax": 1,
        "colorscale": scale,
        "xgap": 2,
        "ygap": 2,
        "visible": visible,
        "hovertemplate": f"%{{y}}%{{x}}: {title} %{{z:.2f}} (%{{customdata}})<extra></extra>",
        "colorbar": {"title": {"text": title}, "thickness": 12, "len": 0.9},
    }
    if len(rows) * width <= HEAT_TEXT_CELLS:
        trace["text"] = texts
        trace["texttemplate"] = "%{text}"
    return trace


def _frame(column: int, row: int) -> dict[str, Any]:
    """An amber frame around the heat map's cell of subtask ``column`` in row ``row``."""
    return {
        "type": "rect",
        "xref": "x",
        "yref": "y",
        "x0": column - 0.5,
        "x1": column + 0.5,
        "y0": row - 0.5,
        "y1": row + 0.5,
        "line": {"color": ROOT_FRAME, "width": 3},
        "name": "named-subtask",
    }
