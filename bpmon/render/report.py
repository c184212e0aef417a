"""Show a report to people: rich text for a terminal, GitHub Markdown, or the JSON of the spec.

All three renderings carry the same content: the header (job, run, source, window), one row per
vertex (with its subtasks beneath it when it has more than one), the root causes with their
evidence and recommendation, the checkpoints (:mod:`bpmon.render.checkpoints`), then the
findings. A value the source could not give shows as an en
dash. Every table fits the console's width without breaking a word (:mod:`bpmon.render.fit`): at
80 columns the least needed columns leave, and long names wrap between words.
A surface: it imports rich, and nothing below the surfaces imports it.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass

from rich.console import Console
from rich.table import Table
from rich.text import Text

from bpmon.model import numbers
from bpmon.model.clock import format_timestamp
from bpmon.model.numbers import NULL
from bpmon.model.report_json import report_to_json
from bpmon.model.values import Level, Report, RootCause, SubtaskStatus, VertexStatus
from bpmon.render import checkpoints
from bpmon.render.autoscaler import TITLE as AUTOSCALER_TITLE
from bpmon.render.autoscaler import opinion_lines
from bpmon.render.fit import Col, fit_table

NO_BACKPRESSURE = "No backpressure: every vertex is OK."
NO_ROOT_CAUSE = "Backpressure without a root cause: {vertices}; the findings say why."
NO_LEVELS = "No backpressure seen, but {vertices} gave no figures to tell."
NO_DIAGNOSIS = "Root causes: no diagnosis yet (the report holds metrics only)."
DISAGREEMENT_NOTE = "* the sampled ratio and the time accounting of this subtask disagree"

LEVEL_STYLES: dict[Level, str] = {"OK": "green", "LOW": "yellow", "HIGH": "bold red"}
COLUMNS = (
    "vertex",
    "level",
    "ratio",
    "busy",
    "idle",
    "out pool",
    "in pool",
    "rec/s in",
    "rec/s out",
)
"""The table's columns; in the terminal, two-word names stack on two lines to stay narrow."""

VERTEX_COLUMNS = (
    Col(COLUMNS[0]),
    Col(COLUMNS[1], wrap=False),
    Col(COLUMNS[2], "right", wrap=False),
    Col(COLUMNS[3], "right", wrap=False),
    Col(COLUMNS[4], "right", wrap=False, drop=3),
    Col("out\npool", "right", wrap=False, drop=2),
    Col("in\npool", "right", wrap=False, drop=1),
    Col("rec/s\nin", "right", wrap=False, drop=4),
    Col("rec/s\nout", "right", wrap=False),
)
"""The vertex table in the terminal: what leaves first when it is too narrow is highest."""

NARROW_NOTE = "(too narrow for: {columns}; --json has them)"
"""Under a vertex table that left columns out."""

MAX_NOTE = (
    "A vertex's busy, idle and pools are its largest subtask's (as Flink's web UI shows them), "
    "its rec/s the sum of its subtasks'."
)


# ------------------------------------------------------------------------------------ formatting


@dataclass(frozen=True, slots=True)
class _Row:
    """One line of the vertex table: a vertex, or one of its subtasks (label ``[i]``)."""

    vertex: str
    label: str
    level: Level | None
    disagreement: bool
    cells: tuple[str, ...]
    subtask: bool


def _metric_cells(status: VertexStatus | SubtaskStatus) -> tuple[str, ...]:
    return (
        numbers.ratio(status.ratio),
        numbers.ratio(status.metrics.busy_ratio),
        numbers.ratio(status.metrics.idle_ratio),
        numbers.ratio(status.metrics.out_pool_usage),
        numbers.ratio(status.metrics.in_pool_usage),
        numbers.rate(status.metrics.records_in_per_s),
        numbers.rate(status.metrics.records_out_per_s),
    )


def _rows(vertices: Sequence[VertexStatus]) -> Iterator[_Row]:
    """The vertex rows, each followed by its subtask rows when it has more than one subtask."""
    for vertex in vertices:
        disagree = any(s.disagreement for s in vertex.subtasks)
        yield _Row(
            vertex.name, vertex.name, vertex.level, disagree, _metric_cells(vertex), subtask=False
        )
        if len(vertex.subtasks) > 1:
            for s in vertex.subtasks:
                yield _Row(
                    vertex.name,
                    f"[{s.index}]",
                    s.level,
                    s.disagreement,
                    _metric_cells(s),
                    subtask=True,
                )


def _level_label(row: _Row) -> str:
    return (row.level or NULL) + ("*" if row.disagreement else "")


def _cause_title(cause: RootCause) -> str:
    """``data-skew at enrich, subtasks 0, 3 (confidence 0.92)``."""
    where = f"{cause.kind} at {cause.vertex}"
    if cause.subtasks:
        where += ", subtask" + ("s " if len(cause.subtasks) > 1 else " ")
        where += ", ".join(str(i) for i in cause.subtasks)
    return f"{where} (confidence {numbers.ratio(cause.confidence)})"


def _header_lines(report: Report) -> tuple[str, tuple[str, ...]]:
    """The title, and the short lines naming the run, its window and its sampling."""
    w = report.window
    seconds = (w.end - w.start).total_seconds()
    jitter = "" if w.jitter_ms_p99 is None else f", p99 jitter {w.jitter_ms_p99:g} ms"
    return f"Backpressure report: {report.job}", (
        f"run {report.run_id} · source {report.source}",
        f"window {format_timestamp(w.start)} + {seconds:.2f} s",
        f"{w.samples} samples every {w.interval_ms:g} ms{jitter}",
    )


def no_cause_line(report: Report) -> tuple[str, str]:
    """What to say (and in which style) when a diagnosed report names no root cause.

    "No backpressure" only when every vertex is OK: a vertex above OK with no cause is named
    with its level (the rules add an ``unexplained`` finding for it), and one without a level is
    not silently called OK.
    """
    above = [v for v in report.vertices if v.level in ("LOW", "HIGH")]
    if above:
        named = ", ".join(f"{v.name} is {v.level} ({numbers.ratio(v.ratio)})" for v in above)
        return NO_ROOT_CAUSE.format(vertices=named), "bold yellow"
    unknown = [v.name for v in report.vertices if v.level is None]
    if unknown:
        return NO_LEVELS.format(vertices=", ".join(unknown)), "yellow"
    return NO_BACKPRESSURE, "green"


def _any_disagreement(report: Report) -> bool:
    return any(s.disagreement for v in report.vertices for s in v.subtasks)


# ------------------------------------------------------------------------------------- rich text


def render_text(report: Report, console: Console) -> None:
    """Print the report on ``console``: header, vertex table, root causes, findings."""
    title, details = _header_lines(report)
    console.print(Text(title, style="bold"))
    console.print(Text("\n".join(details), style="dim"))
    console.print(vertex_table(report.vertices, console.width))
    if _several_subtasks(report):
        console.print(Text(MAX_NOTE, style="dim"))
    if _any_disagreement(report):
        console.print(Text(DISAGREEMENT_NOTE, style="dim"))
    _print_causes(report, console)
    if report.checkpoints is not None:
        console.print(Text("Checkpoints", style="bold"))
        console.print(Text(checkpoints.checkpoint_line(report.checkpoints)))
        if report.checkpoints.vertices:
            console.print(checkpoints.phase_table(report.checkpoints, console.width))
    if report.autoscaler is not None and (lines := opinion_lines(report.autoscaler)):
        console.print(Text(AUTOSCALER_TITLE, style="bold"))
        grid = _bullet_grid()
        for line in lines:
            grid.add_row("•", Text(line))
        console.print(grid)
    if report.findings:
        console.print(Text("Findings", style="bold"))
        grid = _bullet_grid()
        for f in report.findings:
            grid.add_row("•", Text.assemble((f.kind, "bold"), f" at {f.vertex}: {f.detail}"))
        console.print(grid)


def vertex_table(vertices: Sequence[VertexStatus], width: int, subtasks: bool = True) -> Table:
    """The vertex rows (with their subtasks beneath, when ``subtasks``), fitted to ``width``."""
    rows: list[list[str | Text]] = []
    for row in _rows(vertices):
        if row.subtask and not subtasks:
            continue
        label = Text("  " + row.label, style="dim") if row.subtask else Text(row.label)
        level = Text(_level_label(row), style=LEVEL_STYLES[row.level] if row.level else "")
        rows.append([label, level, *row.cells])
    table, kept = fit_table(VERTEX_COLUMNS, rows, width)
    gone = [c.header.replace("\n", " ") for c in VERTEX_COLUMNS if c not in kept]
    if gone:
        table.caption = NARROW_NOTE.format(columns=", ".join(gone))
        table.caption_justify = "left"
    return table


def _several_subtasks(report: Report) -> bool:
    return any(len(v.subtasks) > 1 for v in report.vertices)


def _bullet_grid() -> Table:
    """A two-column grid so that wrapped lines hang under the text, not under the bullet."""
    grid = Table.grid(padding=(0, 1))
    grid.add_column(justify="right", min_width=4, no_wrap=True)
    grid.add_column(overflow="fold")
    return grid


def _print_causes(report: Report, console: Console) -> None:
    if report.root_causes is None:
        console.print(Text(NO_DIAGNOSIS, style="dim"))
        return
    if not report.root_causes:
        line, style = no_cause_line(report)
        console.print(Text(line, style=style))
        return
    console.print(Text("Root causes (most likely first)", style="bold"))
    for n, cause in enumerate(report.root_causes, start=1):
        grid = _bullet_grid()
        grid.add_row(f"{n}.", Text(_cause_title(cause), style="bold"))
        for evidence in cause.evidence:
            grid.add_row("•", Text(evidence.text))
        if cause.recommendation:
            grid.add_row("→", Text(cause.recommendation, style="cyan"))
        console.print(grid)


# -------------------------------------------------------------------------------------- markdown


def render_markdown(report: Report) -> str:
    """The report as GitHub-flavoured Markdown: a heading, a vertex table and lists."""
    title, details = _header_lines(report)
    lines = [f"## {_md(title)}", "", "  \n".join(_md(d) for d in details), ""]
    lines.append("| " + " | ".join(COLUMNS) + " |")
    lines.append("|:--|:--|" + "--:|" * (len(COLUMNS) - 2))
    for row in _rows(report.vertices):
        label = f"↳ {_md(row.vertex + row.label)}" if row.subtask else f"**{_md(row.label)}**"
        lines.append("| " + " | ".join((label, _md(_level_label(row)), *row.cells)) + " |")
    if _several_subtasks(report):
        lines += ["", _md(MAX_NOTE)]
    if _any_disagreement(report):
        lines += ["", _md(DISAGREEMENT_NOTE)]
    lines += ["", *_md_causes(report)]
    if report.checkpoints is not None:
        lines += ["", "### Checkpoints", "", _md(checkpoints.checkpoint_line(report.checkpoints))]
        if report.checkpoints.vertices:
            lines += ["", "| " + " | ".join(checkpoints.PHASE_HEADERS) + " |"]
            lines.append("|:--|" + "--:|" * (len(checkpoints.PHASE_HEADERS) - 1))
            lines += [
                "| " + " | ".join(_md(c) for c in row) + " |"
                for row in checkpoints.phase_rows(report.checkpoints)
            ]
    if report.autoscaler is not None and (opinion := opinion_lines(report.autoscaler)):
        lines += ["", f"### {_md(AUTOSCALER_TITLE)}", "", *(f"- {_md(o)}" for o in opinion)]
    if report.findings:
        lines += ["", "### Findings", ""]
        lines += [
            f"- **{_md(f.kind)}** at {_md(f.vertex)}: {_md(f.detail)}" for f in report.findings
        ]
    return "\n".join(lines) + "\n"


def _md_causes(report: Report) -> list[str]:
    if report.root_causes is None:
        return [_md(NO_DIAGNOSIS)]
    if not report.root_causes:
        return [_md(no_cause_line(report)[0])]
    lines = ["### Root causes", ""]
    for n, cause in enumerate(report.root_causes, start=1):
        lines.append(f"{n}. **{_md(_cause_title(cause))}**")
        lines += [f"   - {_md(e.text)}" for e in cause.evidence]
        if cause.recommendation:
            lines.append(f"   - *Recommendation:* {_md(cause.recommendation)}")
    return lines


_MD_SPECIAL = str.maketrans({c: "\\" + c for c in "\\`*_[]<>|#"})


def _md(text: str) -> str:
    """``text`` with the characters Markdown (and table cells) would interpret escaped."""
    return text.translate(_MD_SPECIAL)


# ------------------------------------------------------------------------------------------ json


def render_json(report: Report) -> str:
    """The report as the JSON document of ``docs/report.md`` (two-space indent)."""
    return report_to_json(report, indent=2)


# ------------------------------------------------------------------------------------- listings


def level_text(level: Level | None) -> Text:
    return Text(level or NULL, style=LEVEL_STYLES[level] if level else "")


def top_cause(causes: Sequence[RootCause] | None) -> str:
    if causes is None:
        return "not diagnosed"
    if not causes:
        return "none"
    top = causes[0]
    more = f" (+{len(causes) - 1})" if len(causes) > 1 else ""
    return f"{top.kind} at {top.vertex} ({numbers.ratio(top.confidence)}){more}"


# ------------------------------------------------------------------------------------ comparison


COMPARISON_COLUMNS = (
    Col("vertex"),
    *(Col(c, "right") for c in ("p", "level", "ratio", "busy", "rec/s out")),
)
"""Each cell reads ``before → after``; when too narrow, it wraps after the arrow."""


def comparison_table(before: Report, after: Report, width: int) -> Table:
    """Two reports of the same job side by side: each cell reads ``before → after``."""
    later = {v.name: v for v in after.vertices}
    rows: list[list[str | Text]] = []
    for v in before.vertices:
        w = later.get(v.name)
        cells: list[str | Text] = [v.name]
        for pick in (_parallelism, _level_of, _ratio_of, _busy_of, _rate_of):
            cells.append(Text.assemble(pick(v), " → ", pick(w) if w is not None else NULL))
        rows.append(cells)
    return fit_table(COMPARISON_COLUMNS, rows, width)[0]


def render_comparison(before: Report, after: Report, change: str, console: Console) -> None:
    """``bpmon whatif``: the table of both runs, then each run's root causes."""
    console.print(Text(f"What if: {before.job} with {change}", style="bold"))
    console.print(Text(f"before: run {before.run_id}\nafter:  run {after.run_id}", style="dim"))
    console.print(comparison_table(before, after, console.width))
    for label, report in (("before", before), ("after", after)):
        console.print(Text(f"Root causes {label}: {top_cause(report.root_causes)}"))
    for line in checkpoints.comparison_lines(before, after):
        console.print(Text(line))


def _parallelism(v: VertexStatus) -> str:
    return str(v.parallelism)


def _level_of(v: VertexStatus) -> Text:
    return level_text(v.level)


def _ratio_of(v: VertexStatus) -> str:
    return numbers.ratio(v.ratio)


def _busy_of(v: VertexStatus) -> str:
    return numbers.ratio(v.metrics.busy_ratio)


def _rate_of(v: VertexStatus) -> str:
    return numbers.rate(v.metrics.records_out_per_s)
