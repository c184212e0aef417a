"""The Job page's checkpoint panel: how long the newest checkpoint took over the recent bursts,
where its time went per vertex, and what holds it up, tied to the root cause.

A job whose newest report has ``checkpoints`` (``docs/report.md``) gets the panel; one without
gets nothing, and nothing is computed for it (:func:`parts` returns at once).

- **Durations**: one point per burst, the ``checkpoints.last.duration_ms`` of its stored report
  (no new checkpoint may end between two bursts: the hover names the checkpoint), on the series'
  time axis (:func:`bpmon.web.charts.time_axis`), each run apart. A failed checkpoint is a red
  cross and a completed one a blue dot: the status is told by the shape, not by colour alone.
- **Phases**: the newest checkpoint's start delay, alignment, sync and async per vertex (its
  slowest subtask, as the report keeps them), stacked bars in milliseconds after the trigger with
  the checkpoint's duration marked; the same figures in a table, an en dash where a phase is not
  known (a subtask the barrier never reached), with how many subtasks acknowledged.
- **What holds it up**: the report's checkpoint findings. ``checkpoint-backpressure`` reads
  "97% of checkpoint 5 was barriers waiting behind the backpressure from enrich", the vertex a
  link to the root cause on the page (``#root-cause-N``: :func:`bpmon.web.markup.cause_panel`),
  with the finding's remedies in order; ``checkpoint-slow`` reads as a checkpoint slow for its own
  reasons, not backpressure, with its remedies; ``checkpoint-failed`` and ``checkpoint-skew`` as
  the report words them.

The waiting share alone blames nothing (a healthy job's 5 ms checkpoint is barriers in flight
most of its time too): only a finding ties the checkpoint to a cause. Every figure is the
report's own, formatted by :mod:`bpmon.model.numbers`; names reach plotly escaped
(:func:`~bpmon.web.figures.label_text`) and the page through the templates' autoescaping.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from markupsafe import Markup

from bpmon.model.checkpoints import CheckpointReport, LastCheckpoint
from bpmon.model.numbers import NULL, milliseconds, percent
from bpmon.model.values import Finding, Report
from bpmon.service.reports import StoredBurst
from bpmon.web import formats
from bpmon.web.charts import plot_time, time_axis
from bpmon.web.figures import EDGE_INK, Figure, label_text
from bpmon.web.markup import PageFigure
from bpmon.web.templating import macro

PHASES = (
    # (field of CheckpointPhases, name, colour): waiting for barriers in warm hues, the
    # snapshot's own work in blues
    ("start_delay_ms", "start delay", "#ef6c00"),
    ("alignment_ms", "alignment", "#f9a825"),
    ("sync_ms", "sync", "#1e88e5"),
    ("async_ms", "async", "#3949ab"),
)
STATUS_MARKS = {
    "completed": {"symbol": "circle", "color": "#1e88e5", "size": 9},
    "failed": {"symbol": "x", "color": "#c62828", "size": 12},
}
"""How a burst's checkpoint is marked on the durations: by shape as well as colour."""
KINDS = ("checkpoint-backpressure", "checkpoint-slow", "checkpoint-failed", "checkpoint-skew")
"""The findings the panel says, in this order."""
REMEDIES = ("remedies, in order: ", "remedies: ")
"""Where a checkpoint finding's ``detail`` lists its remedies, ``; `` between two
(:mod:`bpmon.rules.checkpoints`)."""
DURATIONS, PHASES_FIGURE = "checkpoint-durations", "checkpoint-phases"


@dataclass(frozen=True, slots=True)
class PhaseRow:
    """A vertex of the newest checkpoint: its slowest subtask's phases and the acknowledged."""

    vertex: str
    cells: tuple[str, ...]
    acked: str
    waiting: bool
    """Not every subtask acknowledged."""


@dataclass(frozen=True, slots=True)
class Note:
    """A checkpoint finding as the panel says it: ``lead``, the vertex (a link to ``#anchor``,
    the root cause on the page, when there is one), ``tail``; its remedies, in order."""

    kind: str
    vertex: str
    lead: str
    tail: str
    anchor: str | None = None
    remedies: tuple[str, ...] = ()
    ordered: bool = False


@dataclass(frozen=True, slots=True)
class CheckpointPanel:
    """What the panel shows (``templates/checkpoints.html``)."""

    newest: str
    failure: str | None
    waiting: str
    counts: str
    mode: str
    notes: tuple[Note, ...]
    rows: tuple[PhaseRow, ...]
    durations: PageFigure
    phases: PageFigure | None
    phases_title: str

    @property
    def held(self) -> bool:
        """The checkpoint is held up by the backpressure of a root cause."""
        return any(n.kind == "checkpoint-backpressure" for n in self.notes)


def parts(report: Report | None, points: Sequence[StoredBurst]) -> tuple[Markup, dict[str, Figure]]:
    """The panel's HTML and its figures by element id; nothing when the newest report has no
    checkpoints."""
    panel = panel_of(report, points) if report is not None else None
    if panel is None:
        return Markup(""), {}
    drawn = {panel.durations.name: panel.durations.figure}
    if panel.phases is not None:
        drawn[panel.phases.name] = panel.phases.figure
    return macro("checkpoints.html", "panel", panel), drawn


def panel_of(report: Report, points: Sequence[StoredBurst]) -> CheckpointPanel | None:
    """The panel of ``report`` (the newest) over ``points`` (the recent bursts, oldest first);
    None when the report has no checkpoints."""
    checkpoints = report.checkpoints
    if checkpoints is None:
        return None
    last = checkpoints.last
    phases = phases_figure(checkpoints)
    every = f", every {milliseconds(checkpoints.interval_ms)}" if checkpoints.interval_ms else ""
    return CheckpointPanel(
        newest="no checkpoint has ended yet" if last is None else _ended(last),
        failure=last.failure if last is not None and last.status == "failed" else None,
        waiting=_waiting(last),
        counts=f"{checkpoints.completed:,} completed, {checkpoints.failed:,} failed",
        mode=checkpoints.mode + every,
        notes=tuple(_notes(report, checkpoints)),
        rows=tuple(_rows(checkpoints)),
        durations=PageFigure(DURATIONS, durations_figure(points), "checkpoint duration by burst"),
        phases=None if phases is None else PageFigure(PHASES_FIGURE, phases, "phases by vertex"),
        phases_title="" if last is None else _phases_title(last),
    )


def _ended(last: LastCheckpoint) -> str:
    if last.status == "failed":
        return f"checkpoint {last.id} failed after {milliseconds(last.duration_ms)}"
    return f"checkpoint {last.id} completed in {milliseconds(last.duration_ms)}"


def _phases_title(last: LastCheckpoint) -> str:
    ended = "failed at" if last.status == "failed" else "completed at"
    return f"Checkpoint {last.id} by vertex ({ended} {milliseconds(last.duration_ms)}: dashed)"


def _waiting(last: LastCheckpoint | None) -> str:
    if last is None or last.waiting_share is None:
        return NULL
    longest = milliseconds(last.barrier_wait_ms)
    return f"{percent(last.waiting_share)} of it ({longest}, the longest one subtask waited)"


def _rows(checkpoints: CheckpointReport) -> list[PhaseRow]:
    return [
        PhaseRow(
            v.name,
            tuple(milliseconds(getattr(v, key)) for key, _, _ in PHASES),
            f"{v.acknowledged}/{v.parallelism}",
            v.acknowledged < v.parallelism,
        )
        for v in checkpoints.vertices
    ]


# ---------------------------------------------------------------------------------- findings


def _notes(report: Report, checkpoints: CheckpointReport) -> list[Note]:
    found = [f for f in report.findings if f.kind in KINDS]
    found.sort(key=lambda f: KINDS.index(f.kind))
    return [_note(f, report, checkpoints) for f in found]


def _note(finding: Finding, report: Report, checkpoints: CheckpointReport) -> Note:
    last = checkpoints.last
    which = "the newest checkpoint" if last is None else f"checkpoint {last.id}"
    share = None if last is None else last.waiting_share
    if finding.kind == "checkpoint-backpressure":
        causes = enumerate(report.root_causes or (), 1)
        rank, cause = next(((n, c) for n, c in causes if c.vertex == finding.vertex), (None, None))
        lead = f"{percent(share)} of {which}" if share is not None else which.capitalize()
        return Note(
            finding.kind,
            finding.vertex,
            lead + " was barriers waiting behind the backpressure from ",
            "" if cause is None else f", the root cause ({cause.kind})",
            anchor=None if rank is None else f"root-cause-{rank}",
            remedies=remedies(finding.detail),
            ordered=True,
        )
    if finding.kind == "checkpoint-slow":
        only = "" if share is None else f": only {percent(share)} of it was barriers waiting"
        row = next((v for v in checkpoints.vertices if v.name == finding.vertex), None)
        return Note(
            finding.kind,
            finding.vertex,
            f"{which.capitalize()} was slow for its own reasons, not backpressure{only}; "
            "its longest snapshot upload is that of ",
            "" if row is None else f" (async {milliseconds(row.async_ms)})",
            remedies=remedies(finding.detail),
        )
    return Note(finding.kind, finding.vertex, f"{finding.kind} at ", f": {finding.detail}")


def remedies(detail: str) -> tuple[str, ...]:
    """The remedies a checkpoint finding's ``detail`` lists, in order (none when it lists none).

    The detail puts ``; `` between two remedies, and each remedy opens with its name and a colon
    (``buffer debloating (...): less data in flight``); a remedy may hold a ``; `` of its own,
    inside brackets or not, so a piece is a new remedy only when it is outside brackets and has a
    colon outside them. Joined with ``; `` again, they are the detail's text.
    """
    for marker in REMEDIES:
        at = detail.rfind(marker)
        if at >= 0:
            items: list[str] = []
            for piece in _pieces(detail[at + len(marker) :]):
                if items and not _named(piece):
                    items[-1] += "; " + piece
                else:
                    items.append(piece)
            return tuple(items)
    return ()


def _pieces(text: str) -> list[str]:
    """``text`` split at each ``; `` outside brackets and backquotes."""
    pieces, start = [], 0
    for i, depth in _depths(text):
        if depth == 0 and text.startswith("; ", i):
            pieces.append(text[start:i])
            start = i + 2
    pieces.append(text[start:])
    return pieces


def _named(piece: str) -> bool:
    """The piece opens a remedy: it has a colon outside brackets and backquotes."""
    return any(depth == 0 and piece.startswith(": ", i) for i, depth in _depths(piece))


def _depths(text: str) -> list[tuple[int, int]]:
    """Each character's place and how deep in brackets it is (-1 inside backquotes)."""
    out, depth, quoted = [], 0, False
    for i, char in enumerate(text):
        if char == "`":
            quoted = not quoted
        elif not quoted and char in "([":
            depth += 1
        elif not quoted and char in ")]":
            depth = max(0, depth - 1)
        out.append((i, -1 if quoted else depth))
    return out


# ----------------------------------------------------------------------------------- figures


def durations_figure(points: Sequence[StoredBurst]) -> Figure:
    """The newest checkpoint's duration burst by burst, on the series' time axis: a line
    broken between runs, each burst marked by its checkpoint's status."""
    xs: list[str] = []
    ys: list[float | None] = []
    labels: list[str] = []
    said: list[str] = []
    statuses: list[str | None] = []
    for i, p in enumerate(points):
        if i and p.run_id != points[i - 1].run_id:  # break the line between two runs
            xs.append(plot_time(p.report.window.start))
            ys.append(None)
            labels.append("")
            said.append("")
            statuses.append(None)
        checkpoints = p.report.checkpoints
        last = checkpoints.last if checkpoints is not None else None
        xs.append(plot_time(p.time))
        ys.append(None if last is None else formats.rounded(last.duration_ms, 1))
        labels.append(f"{p.run_id}/{p.burst} ({formats.when(p.time)})")
        said.append("" if last is None else label_text(_hover(last)))
        statuses.append(None if last is None else last.status)
    line = {
        "type": "scatter",
        "mode": "lines",
        "name": "duration",
        "x": xs,
        "y": ys,
        "line": {"color": EDGE_INK, "width": 1.5},
        "connectgaps": False,
        "hoverinfo": "skip",
        "showlegend": False,
    }
    marks = [_marks(status, xs, ys, labels, said, statuses) for status in STATUS_MARKS]
    axis = time_axis(points)
    layout: dict[str, Any] = {
        "height": 240,
        "margin": {"l": 8, "r": 8, "t": 30, "b": 8},
        "hovermode": "closest",
        "showlegend": True,
        "legend": {"orientation": "h", "x": 0, "y": 1.02, "yanchor": "bottom"},
        "xaxis": {
            "type": "date",
            "automargin": True,
            "range": axis["xaxis.range"],
            "hoverformat": "%H:%M:%S",
            "title": {"text": "UTC", "font": {"size": 10}},
        },
        "yaxis": {
            "title": {"text": "duration (ms)", "font": {"size": 11}},
            "rangemode": "tozero",
            "fixedrange": True,
            "automargin": True,
        },
        "shapes": axis["shapes"],
        "meta": {"kind": DURATIONS, "statuses": statuses},
    }
    if all(y is None for y in ys):
        note = {"text": "no checkpoint has ended yet", "showarrow": False, "x": 0.5, "y": 0.5}
        layout["annotations"] = [note | {"xref": "paper", "yref": "paper"}]
    return {"data": [line, *marks], "layout": layout}


def _hover(last: LastCheckpoint) -> str:
    text = _ended(last)
    return f"{text} ({last.failure})" if last.status == "failed" and last.failure else text


def _marks(
    status: str,
    xs: list[str],
    ys: list[float | None],
    labels: list[str],
    said: list[str],
    statuses: list[str | None],
) -> dict[str, Any]:
    """The bursts whose newest checkpoint ended ``status``, as markers."""
    at = [i for i, s in enumerate(statuses) if s == status]
    return {
        "type": "scatter",
        "mode": "markers",
        "name": status,
        "x": [xs[i] for i in at],
        "y": [ys[i] for i in at],
        "customdata": [labels[i] for i in at],
        "text": [said[i] for i in at],
        "marker": STATUS_MARKS[status],
        "hovertemplate": "burst %{customdata}<br>%{text}<extra></extra>",
        "showlegend": bool(at),
        "meta": status,
    }


def phases_figure(checkpoints: CheckpointReport) -> Figure | None:
    """The newest checkpoint's phases per vertex as stacked bars, its duration marked; None
    when no checkpoint has ended or it has no vertices."""
    last = checkpoints.last
    rows = checkpoints.vertices
    if last is None or not rows:
        return None
    names = [label_text(v.name) for v in rows]
    traces = [
        {
            "type": "bar",
            "orientation": "h",
            "name": title,
            "y": names,
            "x": [formats.rounded(getattr(v, key), 1) for v in rows],
            "customdata": [milliseconds(getattr(v, key)) for v in rows],
            "marker": {"color": colour},
            "hovertemplate": f"%{{y}}: {title} %{{customdata}}<extra></extra>",
            "meta": key,
        }
        for key, title, colour in PHASES
    ]
    end = formats.rounded(last.duration_ms, 1)
    mark: dict[str, Any] = {"type": "line", "xref": "x", "yref": "paper", "y0": 0, "y1": 1}
    mark |= {"x0": end, "x1": end}
    mark |= {"line": {"color": EDGE_INK, "width": 1.5, "dash": "dash"}, "name": "duration"}
    return {
        "data": traces,
        "layout": {
            "barmode": "stack",
            "height": max(170, 28 * len(rows) + 110),
            "margin": {"l": 8, "r": 8, "t": 30, "b": 8},
            "showlegend": True,
            "legend": {
                "orientation": "h",
                "traceorder": "normal",
                "x": 0,
                "y": 1.02,
                "yanchor": "bottom",
            },
            "xaxis": {
                "title": {"text": "ms after the trigger", "font": {"size": 10}},
                "rangemode": "tozero",
                "fixedrange": True,
                "automargin": True,
            },
            "yaxis": {
                "type": "category",
                "autorange": "reversed",
                "fixedrange": True,
                "automargin": True,
            },
            "shapes": [mark],
            "meta": {
                "kind": PHASES_FIGURE,
                "checkpoint": last.id,
                "vertices": [v.name for v in rows],
            },
        },
    }
