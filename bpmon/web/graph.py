"""The job graph as a plotly figure: a box per vertex and an arrow per edge, in two directions.

- **across** (wide screens): left to right in topological order, a column per depth
  (:mod:`bpmon.web.topology`); **down** (narrow screens): the same order top to bottom. The page
  draws whichever fits its card without scrolling, ``across`` first, else the narrower one.
- **Positions are pixels** at the figure's narrowest (``meta.min_width``): each column is as wide
  as its widest box plus room for an arrow and its label, so no two boxes overlap at any width the
  page gives the figure; wider, the columns spread out. The height is exact, so a box's pixel
  size is the same in both directions.
- **A box** is filled with the colours of Flink's web UI (busy red, backpressured dark, idle blue,
  blended by share: :mod:`bpmon.web.shading`) and says its name, its level as a word with its
  ratio, its busy share and its parallelism; a victim (backpressured upstream of the root cause)
  says so. Text is white or near black, whichever reads better on the fill.
- **The root cause** is marked three ways, none of them a colour alone: a star before its name, a
  thick amber frame (a hue no fill takes) and a ``ROOT CAUSE · kind`` tag above the box.

Plain dicts in plotly's figure schema, as in :mod:`bpmon.web.figures`.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Literal

from bpmon.model.values import Edge, Report, VertexStatus
from bpmon.web import formats, shading
from bpmon.web.figures import EDGE_INK, ROOT_FRAME, Figure, label_text, short
from bpmon.web.topology import culprits, layout, unconnected, victims

Direction = Literal["across", "down"]

CHAR_PX = 6.2
"""About the width of a character of the boxes' 12 px font, with a little to spare (chromium's
system-ui font measures 6.0; a bold one is ~8% wider)."""
LINE_PX = 15.0
PAD_PX = 5
"""Room between a box's text and its frame (plotly's ``borderpad``)."""
GAP_PX = 64
"""Across: room between two columns for an arrow and its label (``rebalance`` is 52 px)."""
ROW_PX = 96
"""Across: from one box's middle to the next one's in a column."""
SIDE_GAP_PX = 24
"""Down: room between two boxes side by side."""
LEVEL_PX = 124
"""Down: from one depth's middle to the next one's: an arrow with its label just below the upper
box, and room for a tag above a root cause's box."""
TAG_PX = 30
"""Room above a root cause's box for its tag."""
TAG_LINE_PX = 18
"""The height of the tag's line: down, an arrow into a root cause stops above its tag."""
MARGIN_PX = 4


@dataclass(frozen=True, slots=True)
class Box:
    """A vertex's box: its text, its size in pixels, its colours and its role."""

    vertex: VertexStatus
    lines: tuple[str, ...]
    width: float
    height: float
    culprit: bool
    victim: bool
    fill: str
    tag: str
    """A root cause's tag (``ROOT CAUSE · kind``, numbered from the second); empty otherwise."""
    reach: float
    """Half the width the box takes with its tag (a root cause's tag may be wider)."""


def boxes(report: Report) -> dict[str, Box]:
    """Every vertex's box, by name."""
    blamed = culprits(report)
    kinds = {c.vertex: c.kind for c in reversed(report.root_causes or ())}
    hit = victims(report)
    made = {}
    for v in report.vertices:
        lines = _lines(v, v.name in blamed, v.name in hit)
        width = max(len(line) * CHAR_PX * (1.08 if i == 0 else 1) for i, line in enumerate(lines))
        border = 4 if v.name in blamed else 1
        extra = 2 * (PAD_PX + border)
        height = len(lines) * LINE_PX + extra
        tag = _tag_text(kinds[v.name], blamed.index(v.name)) if v.name in blamed else ""
        reach = max(width + extra, len(tag) * CHAR_PX * 1.04) / 2
        made[v.name] = Box(
            v,
            lines,
            width + extra,
            height,
            v.name in blamed,
            v.name in hit,
            shading.fill(v),
            tag,
            reach,
        )
    return made


def _lines(v: VertexStatus, culprit: bool, victim: bool) -> tuple[str, ...]:
    word = formats.LEVEL_WORDS[v.level]
    status = word if v.ratio is None else f"{word} {formats.ratio(v.ratio)}"
    busy = f"busy {formats.ratio(v.metrics.busy_ratio)}"
    role = " · victim" if victim else ""
    name = ("★ " if culprit else "") + short(v.name)
    return (name, f"{status} · {busy}", f"parallelism {v.parallelism}{role}")


def job_graph(report: Report, direction: Direction = "across") -> Figure:
    """The job graph of ``report`` drawn ``across`` or ``down`` (see the module's docstring)."""
    made = boxes(report)
    centre = (_across if direction == "across" else _down)(report, made)
    notes: list[dict[str, Any]] = []
    for name, box in made.items():
        x, y = centre[name]
        notes.append(_node(box, x, y))
        if box.tag:
            notes.append(_tag(x, y + box.height / 2, box.tag))
    edges: list[dict[str, Any]] = []
    for v in report.vertices:
        for e in v.inputs:
            if e.source in made:
                edges += _edge(e, made[e.source], made[v.name], centre, direction)
    low, high = _height_span(made, centre)
    left = min((centre[n][0] - b.reach for n, b in made.items()), default=0.0) - 2
    right = max((centre[n][0] + b.reach for n, b in made.items()), default=0.0) + 2
    blamed = culprits(report)
    focus = next(((centre[n][0] - left) / (right - left) for n in blamed if n in centre), None)
    return {
        "data": [_hover_points(made, centre)],
        "layout": {
            "annotations": edges + notes,
            "xaxis": _hidden(left, right),
            "yaxis": _hidden(low, high),
            "margin": {"l": MARGIN_PX, "r": MARGIN_PX, "t": MARGIN_PX, "b": MARGIN_PX},
            "height": math.ceil(high - low) + 2 * MARGIN_PX,
            "showlegend": False,
            "hovermode": "closest",
            "dragmode": False,
            "meta": {
                "kind": "graph",
                "direction": direction,
                "min_width": math.ceil(right - left + 2 * MARGIN_PX),
                "focus": focus,
                "unconnected": unconnected(report.vertices),
                "vertices": {name: _facts(b) for name, b in made.items()},
            },
        },
    }


def _height_span(
    made: dict[str, Box], centre: dict[str, tuple[float, float]]
) -> tuple[float, float]:
    """The lowest and highest y any box reaches (a root cause's tag above its box included)."""
    low = min((centre[n][1] - b.height / 2 for n, b in made.items()), default=0.0)
    high = max(
        (centre[n][1] + b.height / 2 + (TAG_PX if b.culprit else 0) for n, b in made.items()),
        default=0.0,
    )
    return low - 4, high + 4


def _facts(box: Box) -> dict[str, Any]:
    """What the figure's ``meta`` says of a vertex (for the page's script and the tests)."""
    return {
        "level": box.vertex.level,
        "root_cause": box.culprit,
        "victim": box.victim,
        "fill": box.fill,
        "parallelism": box.vertex.parallelism,
    }


def _across(report: Report, made: dict[str, Box]) -> dict[str, tuple[float, float]]:
    """Box centres left to right (x from 0, y 0 in the middle)."""
    place = layout(report.vertices)
    widest: dict[int, float] = {}
    for name, p in place.items():
        widest[p.column] = max(widest.get(p.column, 0.0), made[name].width)
    left: dict[int, float] = {}
    edge = 0.0
    for column in sorted(widest):
        left[column] = edge
        edge += widest[column] + GAP_PX
    return {
        name: (left[p.column] + widest[p.column] / 2, p.y * ROW_PX) for name, p in place.items()
    }


def _down(report: Report, made: dict[str, Box]) -> dict[str, tuple[float, float]]:
    """Box centres top to bottom (a depth per level, side by side within one, centred)."""
    place = layout(report.vertices)
    levels: dict[int, list[str]] = {}
    for name, p in sorted(place.items(), key=lambda item: -item[1].y):
        levels.setdefault(p.column, []).append(name)
    spans = {
        k: sum(made[n].width for n in names) + SIDE_GAP_PX * (len(names) - 1)
        for k, names in levels.items()
    }
    widest = max(spans.values(), default=0.0)
    centre: dict[str, tuple[float, float]] = {}
    for k, names in levels.items():
        x = (widest - spans[k]) / 2
        for name in names:
            centre[name] = (x + made[name].width / 2, -k * LEVEL_PX)
            x += made[name].width + SIDE_GAP_PX
    return centre


def _hidden(low: float, high: float) -> dict[str, Any]:
    return {"visible": False, "range": [low, high], "fixedrange": True, "zeroline": False}


def _node(box: Box, x: float, y: float) -> dict[str, Any]:
    first, *rest = (label_text(line) for line in box.lines)
    return {
        "x": x,
        "y": y,
        "xref": "x",
        "yref": "y",
        "text": "<br>".join([f"<b>{first}</b>", *rest]),
        "showarrow": False,
        "align": "center",
        "bgcolor": box.fill,
        "bordercolor": ROOT_FRAME if box.culprit else EDGE_INK,
        "borderwidth": 4 if box.culprit else 1,
        "borderpad": PAD_PX,
        "font": {"color": shading.ink(box.fill), "size": 12},
        "captureevents": True,
        "name": f"vertex:{box.vertex.name}",
    }


def _tag(x: float, top: float, text: str) -> dict[str, Any]:
    """The "ROOT CAUSE · kind" label just above a culprit's box."""
    title, _, rest = text.partition(" · ")
    return {
        "x": x,
        "y": top,
        "xref": "x",
        "yref": "y",
        "yanchor": "bottom",
        "yshift": 2,
        "text": f"<b>{title}</b> · {label_text(rest)}",
        "showarrow": False,
        "font": {"size": 12},
        "name": "root-cause-tag",
    }


def _tag_text(kind: str, rank: int) -> str:
    """``ROOT CAUSE · kind`` for the top root cause, ``ROOT CAUSE 2 · kind`` for the next."""
    return ("ROOT CAUSE" if rank == 0 else f"ROOT CAUSE {rank + 1}") + f" · {kind}"


def _edge(
    edge: Edge,
    a: Box,
    b: Box,
    centre: dict[str, tuple[float, float]],
    direction: Direction,
) -> list[dict[str, Any]]:
    """An arrow from box ``a`` to box ``b``, and its partitioner and exchange beside it."""
    (x0, y0), (x1, y1) = centre[a.vertex.name], centre[b.vertex.name]
    arrow = {
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
        "standoff": _to_frame(b, x0 - x1, y0 - y1) + 2 + _over_tag(b, direction),
        "startstandoff": _to_frame(a, x1 - x0, y1 - y0) + 2,
    }
    label = {
        "x": (x0 + x1) / 2,
        "y": (y0 + y1) / 2,
        "xref": "x",
        "yref": "y",
        "text": f"{label_text(edge.partitioner)}<br>{label_text(edge.exchange)}",
        "showarrow": False,
        "font": {"size": 10},
        "name": "edge",
    }
    if direction == "across":  # centred in the gap, above the arrow
        label |= {"xshift": (a.width - b.width) / 4, "yshift": 16}
    else:  # beside the arrow, just below the upper box (a root cause's tag sits lower)
        label |= {"x": x0 + (x1 - x0) / 4, "y": y0 - a.height / 2}
        label |= {"xanchor": "left", "yanchor": "top", "xshift": 6, "yshift": -2}
    return [arrow, label]


def _over_tag(box: Box, direction: Direction) -> float:
    """Down, an arrow into a root cause stops above its tag rather than crossing it."""
    return TAG_LINE_PX if direction == "down" and box.culprit else 0.0


def _to_frame(box: Box, dx: float, dy: float) -> float:
    """How far from the box's middle its frame is, towards ``(dx, dy)`` (pixels)."""
    if dx == 0 and dy == 0:
        return 0.0
    reach = min(
        (box.width / 2) / abs(dx) if dx else math.inf,
        (box.height / 2) / abs(dy) if dy else math.inf,
    )
    return reach * math.hypot(dx, dy)


def _hover_points(made: dict[str, Box], centre: dict[str, tuple[float, float]]) -> dict[str, Any]:
    """Invisible points under the boxes: the hover details and the click target of a vertex."""
    texts = []
    for box in made.values():
        v, m = box.vertex, box.vertex.metrics
        texts.append(
            "<br>".join(
                [
                    f"<b>{label_text(v.name)}</b> (parallelism {v.parallelism})",
                    f"level {formats.LEVEL_WORDS[v.level]}, ratio {formats.ratio(v.ratio)}",
                    f"busy {formats.ratio(m.busy_ratio)}, idle {formats.ratio(m.idle_ratio)}",
                    f"out pool {formats.ratio(m.out_pool_usage)}, "
                    f"in pool {formats.ratio(m.in_pool_usage)}",
                    f"records/s in {formats.rate(m.records_in_per_s)}, "
                    f"out {formats.rate(m.records_out_per_s)}",
                ]
            )
        )
    return {
        "type": "scatter",
        "mode": "markers",
        "x": [centre[name][0] for name in made],
        "y": [centre[name][1] for name in made],
        "customdata": list(made),
        "hovertext": texts,
        "hoverinfo": "text",
        "marker": {"size": 44, "symbol": "square", "opacity": 0},
        "showlegend": False,
        "name": "vertices",
    }
