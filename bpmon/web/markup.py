"""HTML fragments of a report: level badges, the root-cause panel, the vertex table, findings.

Everything taken from a report or a request is escaped here (:func:`esc`); fragments are plain
strings the page templates put together. The content is that of ``bpmon diagnose``: the header
(job, run, source, window), one row per vertex with its subtasks beneath it, the root causes with
their evidence and recommendation, then the findings; a value the source could not give is an en
dash. Figures travel as JSON in ``<script type="application/json">`` blocks (:func:`json_block`).
"""

from __future__ import annotations

import html
import json
from typing import Any
from urllib.parse import quote

from bpmon.model.values import Level, Report, RootCause, SubtaskStatus, VertexStatus
from bpmon.service.comparison import capacity_of_vertex
from bpmon.web import numbers

NO_BACKPRESSURE = "No backpressure: every vertex is OK."
NO_DIAGNOSIS = "No diagnosis yet: the report holds metrics only."
DISAGREEMENT_NOTE = "* the sampled ratio and the time accounting of this subtask disagree"


def esc(text: object) -> str:
    """``text`` escaped for HTML text and attribute values."""
    return html.escape(str(text), quote=True)


def path_part(text: str) -> str:
    """``text`` quoted for one segment of a URL path."""
    return quote(text, safe="")


def json_block(element_id: str, value: Any) -> str:
    """``value`` as JSON in a script block no text inside can close or break out of."""
    text = json.dumps(value, separators=(",", ":"), allow_nan=False)
    text = text.replace("<", "\\u003c").replace(">", "\\u003e").replace("&", "\\u0026")
    return f'<script type="application/json" id="{esc(element_id)}">{text}</script>'


def level_badge(level: Level | None) -> str:
    """The level's word on its colour (``no level`` in grey)."""
    css = (level or "none").lower()
    return f'<span class="level level-{css}">{esc(numbers.LEVEL_WORDS[level])}</span>'


def state_badge(state: str) -> str:
    """A job's state: running, ended, failed or stored."""
    return f'<span class="state state-{esc(state)}" data-state="{esc(state)}">{esc(state)}</span>'


def no_cause_line(report: Report) -> str:
    """What a diagnosed report without a root cause says (as ``bpmon diagnose`` does)."""
    above = [v for v in report.vertices if v.level in ("LOW", "HIGH")]
    if above:
        named = ", ".join(f"{v.name} is {v.level} ({numbers.ratio(v.ratio)})" for v in above)
        return f"Backpressure without a root cause: {named}; the findings say why."
    unknown = [v.name for v in report.vertices if v.level is None]
    if unknown:
        return f"No backpressure seen, but {', '.join(unknown)} gave no figures to tell."
    return NO_BACKPRESSURE


def cause_title(cause: RootCause) -> str:
    """``slow-operator at geo-lookup, subtasks 0, 1``."""
    title = f"{cause.kind} at {cause.vertex}"
    if cause.subtasks:
        title += ", subtask" + ("s " if len(cause.subtasks) > 1 else " ")
        title += ", ".join(str(i) for i in cause.subtasks)
    return title


def cause_panel(report: Report, job_link: bool = False) -> str:
    """The root-cause panel: the top cause in full (kind, subtasks, confidence, capacity,
    evidence, recommendation), the others by title."""
    if report.root_causes is None:
        return f'<p class="muted">{esc(NO_DIAGNOSIS)}</p>'
    if not report.root_causes:
        line = no_cause_line(report)
        css = "good" if line == NO_BACKPRESSURE else "warn"
        return f'<p class="no-cause {css}">{esc(line)}</p>'
    top, *others = report.root_causes
    parts = [_cause_detail(top, report, rank=1)]
    if others:
        parts.append('<h3>Other causes</h3><ol start="2">')
        parts += [f"<li>{_cause_summary(c)}</li>" for c in others]
        parts.append("</ol>")
    return "".join(parts)


def _cause_summary(cause: RootCause) -> str:
    return f"<b>{esc(cause_title(cause))}</b> (confidence {numbers.ratio(cause.confidence)})"


def _cause_detail(cause: RootCause, report: Report, rank: int) -> str:
    vertex = next((v for v in report.vertices if v.name == cause.vertex), None)
    capacity = cause.capacity_per_subtask
    if capacity is None and vertex is not None:
        capacity = capacity_of_vertex(vertex)
    subtasks = ", ".join(str(i) for i in cause.subtasks) or "all"
    facts = [
        ("vertex", f'<b class="culprit-name">{esc(cause.vertex)}</b>'),
        ("kind", f'<span class="kind">{esc(cause.kind)}</span>'),
        ("subtasks", esc(subtasks)),
        ("confidence", _meter(cause.confidence)),
        ("capacity", f"{numbers.rate(capacity)} records/s per subtask at 100% busy"),
    ]
    if cause.offered_rate is not None:
        facts.append(("offered", f"{numbers.rate(cause.offered_rate)} records/s"))
    if cause.recommended_parallelism is not None:
        facts.append(("parallelism", f"{cause.recommended_parallelism} recommended"))
    rows = "".join(f"<dt>{esc(k)}</dt><dd>{v}</dd>" for k, v in facts)
    evidence = "".join(f"<li>{esc(line)}</li>" for line in cause.evidence)
    parts = [
        f'<p class="cause-title" data-rank="{rank}">Root cause: '
        f"<b>{esc(cause.kind)}</b> at <b>{esc(cause.vertex)}</b></p>",
        f'<dl class="facts">{rows}</dl>',
    ]
    if evidence:
        parts.append(f'<h3>Evidence</h3><ul class="evidence">{evidence}</ul>')
    if cause.recommendation:
        parts.append(
            f'<h3>Recommendation</h3><p class="recommendation">{esc(cause.recommendation)}</p>'
        )
    return "".join(parts)


def _meter(value: float) -> str:
    shown = numbers.ratio(value)
    return (
        f'<meter min="0" max="1" value="{value:.3f}" aria-label="confidence {shown}"></meter> '
        f"{shown}"
    )


def report_header(report: Report, burst: int | None = None) -> str:
    """The run, the source, the window and its sampling, as ``bpmon diagnose`` heads a report."""
    w = report.window
    jitter = "" if w.jitter_ms_p99 is None else f", p99 jitter {w.jitter_ms_p99:g} ms"
    which = "" if burst is None else f" · burst {burst}"
    return (
        '<p class="meta">'
        f"run <code>{esc(report.run_id)}</code>{esc(which)} · source {esc(report.source)}<br>"
        f"window {esc(numbers.when(w.start))} + {w.seconds:.2f} s · "
        f"{w.samples} samples every {w.interval_ms:g} ms{esc(jitter)} · levels from "
        f"{esc(report.levels_from)}</p>"
    )


_COLUMNS = ("vertex", "level", "ratio", "busy", "idle", "out pool", "in pool", "rec/s in")


def vertex_table(report: Report) -> str:
    """One row per vertex, its subtasks beneath it when it has more than one."""
    head = "".join(f'<th scope="col">{esc(c)}</th>' for c in (*_COLUMNS, "rec/s out"))
    named = {(c.vertex, i) for c in report.root_causes or () for i in c.subtasks}
    blamed = {c.vertex for c in report.root_causes or ()}
    rows = []
    for v in report.vertices:
        rows.append(_row(v.name, v, "vertex", v.name, v.name in blamed))
        if len(v.subtasks) > 1:
            rows += [
                _row(f"[{s.index}]", s, "subtask", v.name, (v.name, s.index) in named)
                for s in v.subtasks
            ]
    note = ""
    if any(s.disagreement for v in report.vertices for s in v.subtasks):
        note = f'<p class="muted">{esc(DISAGREEMENT_NOTE)}</p>'
    return (
        '<div class="table-wrap" tabindex="0" role="region" aria-label="vertices and subtasks">'
        f'<table class="vertices"><thead><tr>{head}</tr></thead>'
        f"<tbody>{''.join(rows)}</tbody></table></div>{note}"
    )


def _row(
    label: str, status: VertexStatus | SubtaskStatus, css: str, vertex: str, marked: bool
) -> str:
    """A table row; ``marked``: the root cause's vertex, or a subtask it names (starred)."""
    m = status.metrics
    disagree = isinstance(status, SubtaskStatus) and status.disagreement
    if isinstance(status, VertexStatus):
        disagree = any(s.disagreement for s in status.subtasks)
    level = level_badge(status.level) + ("*" if disagree else "")
    cells = [
        numbers.ratio(status.ratio),
        numbers.ratio(m.busy_ratio),
        numbers.ratio(m.idle_ratio),
        numbers.ratio(m.out_pool_usage),
        numbers.ratio(m.in_pool_usage),
        numbers.rate(m.records_in_per_s),
        numbers.rate(m.records_out_per_s),
    ]
    tds = "".join(f'<td class="num">{esc(c)}</td>' for c in cells)
    mark = ""
    if marked:
        what = "root cause" if isinstance(status, VertexStatus) else "named by the root cause"
        mark = (
            f'<span class="root-mark" title="{what}" aria-hidden="true">★</span>'
            f'<span class="visually-hidden"> ({what})</span>'
        )
        css += " culprit" if isinstance(status, VertexStatus) else " named"
    head = f'<th scope="row">{esc(label)}{mark}</th>'
    return f'<tr class="{css}" data-vertex="{esc(vertex)}">{head}<td>{level}</td>{tds}</tr>'


def causes_list(report: Report) -> str:
    """Every root cause with its evidence and recommendation (the Run page)."""
    if not report.root_causes:
        return cause_panel(report)
    items = []
    for n, cause in enumerate(report.root_causes, start=1):
        items.append(f'<section class="cause" aria-label="root cause {n}">')
        items.append(_cause_detail(cause, report, rank=n))
        items.append("</section>")
    return "".join(items)


def findings(report: Report, level: int = 2) -> str:
    """The findings as a list under an ``h<level>`` heading (empty text when there are none)."""
    if not report.findings:
        return ""
    items = "".join(
        f"<li><b>{esc(f.kind)}</b> at {esc(f.vertex)}: {esc(f.detail)}</li>"
        for f in report.findings
    )
    return f'<h{level}>Findings</h{level}><ul class="findings">{items}</ul>'


def figure_slot(
    name: str, figure: dict[str, Any], label: str, narrow: dict[str, Any] | None = None
) -> tuple[str, str]:
    """A figure's place on the page, and its JSON blocks (put last in the page).

    ``narrow`` is the same figure drawn for a narrow card (the job graph top to bottom): the
    page's script draws whichever fits the card (:mod:`bpmon.web.graph`). The place is sized
    from the figure's height so the page does not jump when plotly.js draws into it.
    """
    height = int(figure.get("layout", {}).get("height", 360))
    other = ""
    blocks = json_block(f"{name}-json", figure)
    if narrow is not None:
        other = f' data-narrow="{esc(name)}-down-json"'
        blocks += json_block(f"{name}-down-json", narrow)
    place = (
        f'<div class="figure" id="{esc(name)}" data-figure="{esc(name)}-json"{other} role="img" '
        f'aria-label="{esc(label)}" style="height:{height}px"></div>'
    )
    return place, blocks


def graph_legend(ok_max: float, low_max: float, unconnected: bool = False) -> str:
    """What the job graph's colours and marks mean, with the level thresholds in force."""
    fills = "".join(
        f'<span class="fill-swatch fill-{css}"></span>{esc(word)} ' for css, word in _FILLS
    )
    items = [
        f"<li>{fills}<span>blended by share of time, as in Flink's web UI (the busiest "
        "subtask's figures)</span></li>",
        '<li><span class="root-swatch">★</span> root cause: amber frame, '
        "<b>ROOT CAUSE</b> tag above its box</li>",
        f"<li>level in words: OK ratio ≤ {ok_max:.2f}, LOW ≤ {low_max:.2f}, HIGH above</li>",
        "<li><b>victim</b>: backpressured because the root cause downstream is too slow</li>",
    ]
    if unconnected:
        items.append(
            '<li class="unconnected">no topology: the stages are not connected (bpmon monitor '
            "--topology FILE draws the edges); they are ordered from the most backpressured "
            "to the most idle, as data most likely flows</li>"
        )
    return f'<ul class="legend graph-legend">{"".join(items)}</ul>'


_FILLS = (("busy", "busy"), ("backpressured", "backpressured"), ("idle", "idle"))
