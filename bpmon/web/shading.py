"""A vertex's fill on the job graph, coloured the way Flink's web UI taught its users.

Flink's job graph paints a vertex from its busiest subtask: red when busy, black when
backpressured, blue when idle, and shades in between. Here a vertex's fill is the blend of three
anchors weighted by its shares of time: busy (its ``busy_ratio``), backpressured (its ``ratio``)
and idle (what remains of the time). A vertex's figures are those of its worst subtask, as
Flink's graph shows the maximum over subtasks, so a vertex with one hot subtask reads red.

The blend never reaches a level's colour: the level (OK, LOW, HIGH) is written in the box as a
word, and the fill says where the time goes. So the root cause of backpressure, busy and not
backpressured itself, reads red, never the green of "OK". A vertex that gave no figures is grey;
one whose busy share is unknown blends its backpressure with that grey, not with idle blue.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from bpmon.model.values import VertexStatus

Rgb = tuple[int, int, int]

BUSY: Rgb = (211, 47, 47)
"""Busy: red (#d32f2f)."""
BACKPRESSURED: Rgb = (22, 24, 29)
"""Backpressured: near black (#16181d)."""
IDLE: Rgb = (47, 111, 179)
"""Idle: blue (#2f6fb3), dark enough for white text."""
UNKNOWN: Rgb = (107, 114, 128)
"""No figures: grey (#6b7280)."""
DARK_INK = "#111111"
LIGHT_INK = "#ffffff"


@dataclass(frozen=True, slots=True)
class Shares:
    """Where a vertex's time goes, as weights that add up to 1 (``rest`` is idle, or unknown
    when the busy share is)."""

    busy: float
    backpressured: float
    rest: float
    rest_known: bool


def shares(vertex: VertexStatus) -> Shares | None:
    """The vertex's busy, backpressured and remaining shares; None when it gave neither."""
    busy = vertex.metrics.busy_ratio
    pressed = vertex.ratio
    if pressed is None:
        pressed = vertex.metrics.backpressured_time_ratio
    if busy is None and pressed is None:
        return None
    b = _unit(busy)
    p = _unit(pressed)
    if b + p > 1:  # maxima of different subtasks: keep their proportion
        b, p = b / (b + p), p / (b + p)
    return Shares(b, p, 1 - b - p, busy is not None)


def _unit(value: float | None) -> float:
    return 0.0 if value is None or math.isnan(value) else min(max(value, 0.0), 1.0)


def fill(vertex: VertexStatus) -> str:
    """The vertex's fill colour (``#rrggbb``)."""
    share = shares(vertex)
    if share is None:
        return _hex(UNKNOWN)
    rest = IDLE if share.rest_known else UNKNOWN
    weights = ((BUSY, share.busy), (BACKPRESSURED, share.backpressured), (rest, share.rest))
    blended = tuple(round(sum(colour[i] * w for colour, w in weights)) for i in range(3))
    return _hex((blended[0], blended[1], blended[2]))


def ink(background: str) -> str:
    """White or near-black text, whichever contrasts more with ``background`` (``#rrggbb``)."""
    light = luminance(background)
    on_dark = 1.05 / (light + 0.05)
    on_light = (light + 0.05) / (luminance(DARK_INK) + 0.05)
    return LIGHT_INK if on_dark >= on_light else DARK_INK


def luminance(colour: str) -> float:
    """The relative luminance of ``#rrggbb`` (WCAG 2)."""
    channels = [int(colour[i : i + 2], 16) / 255 for i in (1, 3, 5)]
    linear = [c / 12.92 if c <= 0.04045 else ((c + 0.055) / 1.055) ** 2.4 for c in channels]
    return 0.2126 * linear[0] + 0.7152 * linear[1] + 0.0722 * linear[2]


def _hex(rgb: Rgb) -> str:
    return "#{:02x}{:02x}{:02x}".format(*rgb)
