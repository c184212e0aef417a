"""Show a report to people: rich text for a terminal, GitHub Markdown, or the JSON of the spec.

All three renderings carry the same content: the header (job, run, source, window), one row per
vertex (with its subtasks beneath it when it has more than one), the root causes with their
evidence and recommendation, then the findings. A value the source could not give shows as an en
dash. The text fits an 80-column terminal (rich wraps long names and evidence) and uses a 120-column
one.
A surface: it imports rich, and nothing below the surfaces imports it.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass

from rich import box
from rich.console import Console
from rich.table import Table
from rich.text import Text

from bpmon import numbers
from bpmon.model import Level, Report, RootCause, RunInfo, SubtaskStatus, VertexStatus, worst_level
from bpmon.numbers import NULL
from bpmon.report_json import format_timestamp, report_to_json

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


def _rows(report: Report) -> Iterator[_Row]:
    """The vertex rows, each followed by its subtask rows when it has more than one subtask."""
    for vertex in report.vertices:
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
    console.print(_vertex_table(report))
    if _any_disagreement(report):
        console.print(Text(DISAGREEMENT_NOTE, style="dim"))
    _print_causes(report, console)
    if report.findings:
        console.print(Text("Findings", style="bold"))
        grid = _bullet_grid()
        for f in report.findings:
            grid.add_row("•", Text.assemble((f.kind, "bold"), f" at {f.vertex}: {f.detail}"))
        console.print(grid)


def _vertex_table(report: Report) -> Table:
    table = Table(box=box.SIMPLE_HEAD, pad_edge=False, padding=(0, 1))
    table.add_column(COLUMNS[0], overflow="fold", min_width=8)
    table.add_column(COLUMNS[1], no_wrap=True)
    for name in COLUMNS[2:]:
        table.add_column(name.replace(" ", "\n"), justify="right", no_wrap=True)
    for row in _rows(report):
        label = Text("  " + row.label, style="dim") if row.subtask else Text(row.label)
        level = Text(_level_label(row), style=LEVEL_STYLES[row.level] if row.level else "")
        table.add_row(label, level, *row.cells)
    return table


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
        for line in cause.evidence:
            grid.add_row("•", Text(line))
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
    for row in _rows(report):
        label = f"↳ {_md(row.vertex + row.label)}" if row.subtask else f"**{_md(row.label)}**"
        lines.append("| " + " | ".join((label, _md(_level_label(row)), *row.cells)) + " |")
    if _any_disagreement(report):
        lines += ["", _md(DISAGREEMENT_NOTE)]
    lines += ["", *_md_causes(report)]
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
        lines += [f"   - {_md(e)}" for e in cause.evidence]
        if cause.recommendation:
            lines.append(f"   - *Recommendation:* {_md(cause.recommendation)}")
    return lines


_MD_SPECIAL = str.maketrans({c: "\\" + c for c in "\\`*_[]<>|#"})


def _md(text: str) -> str:
    """``text`` with the characters Markdown (and table cells) would interpret escaped."""
    return text.translate(_MD_SPECIAL)


# ------------------------------------------------------------------------------------------ json


def render_json(report: Report) -> str:
    """The report as the JSON document of ``spec/report.md`` (two-space indent)."""
    return report_to_json(report, indent=2)


# ------------------------------------------------------------------------------------- listings


def runs_table(runs: Sequence[RunInfo]) -> Table:
    """``bpmon history``: one row per stored run, newest first."""
    table = Table(box=box.SIMPLE_HEAD, pad_edge=False, padding=(0, 1))
    table.add_column("run", no_wrap=True)
    for column in ("source", "bursts", "worst", "root cause (first burst)"):
        table.add_column(column, overflow="fold")
    for run in runs:
        table.add_row(
            run.run_id,
            run.source,
            str(run.bursts),
            _level_text(run.worst_level),
            _top_cause(run.root_causes),
        )
    return table


def bursts_table(bursts: Sequence[tuple[int, Report]]) -> Table:
    """``bpmon history RUN``: one row per burst of the run (``bpmon diagnose RUN --burst K``)."""
    table = Table(box=box.SIMPLE_HEAD, pad_edge=False, padding=(0, 1))
    table.add_column("burst", no_wrap=True)
    table.add_column("window start", no_wrap=True)
    for column in ("seconds", "samples", "worst", "root cause"):
        table.add_column(column, overflow="fold")
    for number, report in bursts:
        w = report.window
        table.add_row(
            str(number),
            format_timestamp(w.start),
            f"{w.seconds:.2f}",
            str(w.samples),
            _level_text(worst_level(report)),
            _top_cause(report.root_causes),
        )
    return table


def _level_text(level: Level | None) -> Text:
    return Text(level or NULL, style=LEVEL_STYLES[level] if level else "")


def _top_cause(causes: Sequence[RootCause] | None) -> str:
    if causes is None:
        return "not diagnosed"
    if not causes:
        return "none"
    top = causes[0]
    more = f" (+{len(causes) - 1})" if len(causes) > 1 else ""
    return f"{top.kind} at {top.vertex} ({numbers.ratio(top.confidence)}){more}"


# ------------------------------------------------------------------------------------ comparison


def comparison_table(before: Report, after: Report) -> Table:
    """Two reports of the same job side by side: each cell reads ``before → after``."""
    table = Table(box=box.SIMPLE_HEAD, pad_edge=False, padding=(0, 1))
    table.add_column("vertex", overflow="fold", min_width=8)
    for column in ("p", "level", "ratio", "busy", "rec/s out"):
        table.add_column(column, justify="right", no_wrap=True)
    later = {v.name: v for v in after.vertices}
    for v in before.vertices:
        w = later.get(v.name)
        cells: list[str | Text] = [v.name]
        for pick in (_parallelism, _level_of, _ratio_of, _busy_of, _rate_of):
            cells.append(Text.assemble(pick(v), " → ", pick(w) if w is not None else NULL))
        table.add_row(*cells)
    return table


def render_comparison(before: Report, after: Report, change: str, console: Console) -> None:
    """``bpmon whatif``: the table of both runs, then each run's root causes."""
    console.print(Text(f"What if: {before.job} with {change}", style="bold"))
    console.print(Text(f"before: run {before.run_id}\nafter:  run {after.run_id}", style="dim"))
    console.print(comparison_table(before, after))
    for label, report in (("before", before), ("after", after)):
        console.print(Text(f"Root causes {label}: {_top_cause(report.root_causes)}"))


def _parallelism(v: VertexStatus) -> str:
    return str(v.parallelism)


def _level_of(v: VertexStatus) -> Text:
    return _level_text(v.level)


def _ratio_of(v: VertexStatus) -> str:
    return numbers.ratio(v.ratio)


def _busy_of(v: VertexStatus) -> str:
    return numbers.ratio(v.metrics.busy_ratio)


def _rate_of(v: VertexStatus) -> str:
    return numbers.rate(v.metrics.records_out_per_s)
