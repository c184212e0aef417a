"""Fragments of a report, as values for the templates and as HTML for the Job page's live parts.

The content is that of ``bpmon diagnose``: the header (job, run, source, window), one row per
vertex with its subtasks beneath it, the root causes with their evidence and recommendation (and
beside it what Flink's autoscaler would do: :mod:`bpmon.web.autoscaler`), then the findings; a
value the source could not give is an en dash. This module decides what a fragment says
(:class:`CausePanel`, :class:`VertexTable`, :class:`PageFigure`); the macros of
``templates/report.html`` and ``templates/figures.html`` write it, escaping every value. The
functions returning HTML are for the parts the Job page fetches again (``live.json``).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from markupsafe import Markup

from bpmon.model.values import Level, Report, RootCause, SubtaskStatus, VertexStatus
from bpmon.render.report import COLUMNS, DISAGREEMENT_NOTE, NO_BACKPRESSURE, no_cause_line
from bpmon.service.comparison import capacity_of_vertex
from bpmon.web import formats
from bpmon.web.autoscaler import AutoscalerView, Opinion, cause_opinions
from bpmon.web.templating import macro

NO_DIAGNOSIS = "No diagnosis yet: the report holds metrics only."


@dataclass(frozen=True, slots=True)
class ShownCause:
    """A root cause as the panel shows it: its rank, title, subtasks and capacity, and what
    Flink's autoscaler would do to its vertex (None: no opinion there)."""

    cause: RootCause
    rank: int
    title: str
    subtasks: str
    capacity: float | None
    autoscaler: Opinion | None = None


@dataclass(frozen=True, slots=True)
class CausePanel:
    """The root causes of a report; without one, the line saying why and its CSS class; the
    autoscaler's opinion beyond the causes' own verdicts (None: the report has none)."""

    causes: tuple[ShownCause, ...]
    line: str = ""
    css: str = ""
    autoscaler: AutoscalerView | None = None

    def autoscaler_beyond(self, shown: int) -> tuple[Opinion, ...]:
        """The autoscaler's disagreements a panel showing its first ``shown`` causes in full
        has not said with them: those at the other causes, then at vertices no cause names."""
        if self.autoscaler is None:
            return ()
        rest = [c.autoscaler for c in self.causes[shown:] if c.autoscaler is not None]
        return tuple(o for o in (*rest, *self.autoscaler.others) if not o.agrees)


@dataclass(frozen=True, slots=True)
class VertexRow:
    """A row of the vertex table; ``mark``: why it is starred (None: it is not)."""

    label: str
    css: str
    vertex: str
    level: Level | None
    disagree: bool
    cells: tuple[str, ...]
    mark: str | None


@dataclass(frozen=True, slots=True)
class VertexTable:
    """The vertex table: its columns, its rows, and the note under it (empty: none)."""

    columns: tuple[str, ...]
    rows: tuple[VertexRow, ...]
    note: str


@dataclass(frozen=True, slots=True)
class PageFigure:
    """A figure of a page: its name (the element's id), plotly's figure, its label for screen
    readers, and ``narrow``: the same figure drawn for a narrow card (the page's script draws
    whichever fits the card, :mod:`bpmon.web.graph`)."""

    name: str
    figure: dict[str, Any]
    label: str
    narrow: dict[str, Any] | None = None

    @property
    def height(self) -> int:
        """The height the figure's place keeps before plotly.js draws into it."""
        return int(self.figure.get("layout", {}).get("height", 360))


def cause_title(cause: RootCause) -> str:
    """``slow-operator at geo-lookup, subtasks 0, 1``."""
    title = f"{cause.kind} at {cause.vertex}"
    if cause.subtasks:
        title += ", subtask" + ("s " if len(cause.subtasks) > 1 else " ")
        title += ", ".join(str(i) for i in cause.subtasks)
    return title


def cause_panel_of(report: Report) -> CausePanel:
    """The root-cause panel's values: every cause ranked, or the line a report without one says."""
    causes = report.root_causes or ()
    opinions: tuple[Opinion | None, ...] = (None,) * len(causes)
    view = None
    if report.autoscaler is not None:
        opinions, view = cause_opinions(report.autoscaler, causes)
    if report.root_causes is None:
        return CausePanel((), NO_DIAGNOSIS, "muted")
    if not report.root_causes:
        line, _ = no_cause_line(report)  # as bpmon diagnose says it
        css = "no-cause " + ("good" if line == NO_BACKPRESSURE else "warn")
        return CausePanel((), line, css, view)
    by_name = {v.name: v for v in report.vertices}
    return CausePanel(
        tuple(
            _shown(c, by_name.get(c.vertex), rank, opinion)
            for rank, (c, opinion) in enumerate(zip(causes, opinions, strict=True), 1)
        ),
        autoscaler=view,
    )


def _shown(
    cause: RootCause, vertex: VertexStatus | None, rank: int, opinion: Opinion | None
) -> ShownCause:
    capacity = cause.capacity_per_subtask
    if capacity is None and vertex is not None:
        capacity = capacity_of_vertex(vertex)
    subtasks = ", ".join(str(i) for i in cause.subtasks) or "all"
    return ShownCause(cause, rank, cause_title(cause), subtasks, capacity, opinion)


def vertex_table_of(report: Report) -> VertexTable:
    """One row per vertex, its subtasks beneath it when it has more than one."""
    named = {(c.vertex, i) for c in report.root_causes or () for i in c.subtasks}
    blamed = {c.vertex for c in report.root_causes or ()}
    rows = []
    for v in report.vertices:
        rows.append(_row(v.name, v, v.name, v.name in blamed))
        if len(v.subtasks) > 1:
            rows += [
                _row(f"[{s.index}]", s, v.name, (v.name, s.index) in named) for s in v.subtasks
            ]
    disagree = any(s.disagreement for v in report.vertices for s in v.subtasks)
    return VertexTable(COLUMNS, tuple(rows), DISAGREEMENT_NOTE if disagree else "")


def _row(label: str, status: VertexStatus | SubtaskStatus, vertex: str, marked: bool) -> VertexRow:
    """A table row; ``marked``: the root cause's vertex, or a subtask it names (starred)."""
    m = status.metrics
    is_vertex = isinstance(status, VertexStatus)
    if isinstance(status, VertexStatus):
        disagree = any(s.disagreement for s in status.subtasks)
    else:
        disagree = status.disagreement
    cells = (
        formats.ratio(status.ratio),
        formats.ratio(m.busy_ratio),
        formats.ratio(m.idle_ratio),
        formats.ratio(m.out_pool_usage),
        formats.ratio(m.in_pool_usage),
        formats.rate(m.records_in_per_s),
        formats.rate(m.records_out_per_s),
    )
    css = "vertex" if is_vertex else "subtask"
    mark = None
    if marked:
        mark = "root cause" if is_vertex else "named by the root cause"
        css += " culprit" if is_vertex else " named"
    return VertexRow(label, css, vertex, status.level, disagree, cells, mark)


def cause_panel(report: Report) -> Markup:
    """The Job page's root-cause panel: the top cause in full, the others by title, each cause
    ``#root-cause-RANK`` (the checkpoint panel links to the one it blames)."""
    return macro("report.html", "cause_panel", cause_panel_of(report), anchors=True)


def findings(report: Report, level: int = 2) -> Markup:
    """The findings as a list under an ``h<level>`` heading (empty when there are none)."""
    return macro("report.html", "findings", report, level)


def vertex_table_html(report: Report) -> Markup:
    """The vertex table of ``report`` (the Job page redraws it on each report)."""
    return macro("report.html", "vertex_table", vertex_table_of(report))
