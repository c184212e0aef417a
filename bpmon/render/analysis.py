"""``bpmon analyze`` on a terminal and in Markdown: the history's findings as tables.

The same sections in both forms, in the order a reader asks: what was analysed, the chronic
bottlenecks, what regressed between runs, each vertex's levels, ratios, capacity and trend, each
job's checkpoints run by run, how often the autoscaler would have been wrong, and the subtasks
repeatedly hot. Numbers are formatted here once
(:func:`cells`), so the terminal and the Markdown never disagree.
"""

from __future__ import annotations

import textwrap
from collections.abc import Iterator

from rich.console import Console

from bpmon.model.analysis import Analysis, AutoscalerHistory, CheckpointHistory, Regression
from bpmon.model.numbers import NULL, counted, milliseconds, percent, ratio
from bpmon.render.fit import Col, fit_table

Section = tuple[str, list[str], list[list[str]]]
"""A titled table: title, header, rows of text cells."""


def summary_lines(analysis: Analysis) -> list[str]:
    """The lines above the tables: what was analysed, on what, how long it took, the notes."""
    a = analysis
    runs = sum(j.runs for j in a.jobs)
    windows = sum(j.windows for j in a.jobs)
    lines = [
        f"History analysis of {a.history}: {counted(len(a.jobs), 'job')}, "
        f"{counted(runs, 'run')}, {counted(windows, 'window')} from "
        f"{counted(a.subtask_rows, 'subtask row')}"
    ]
    scope = [
        f"job {a.job}" if a.job else "",
        f"since {a.since:%Y-%m-%d %H:%M} UTC" if a.since else "",
    ]
    if any(scope):
        lines.append("only " + ", ".join(s for s in scope if s))
    if a.master is not None:
        lines.append(f"spark {a.spark_version} on {a.master}, {a.seconds:.1f} s")
    synthetic = [j.job for j in a.jobs if j.synthetic]
    if synthetic:
        lines.append(
            f"SYNTHETIC rows (bpmon history synth) in: {', '.join(synthetic)}: not real runs"
        )
    lines += list(a.notes)
    return lines


def sections(analysis: Analysis) -> Iterator[Section]:
    """The tables of the analysis, empty ones left out."""
    a = analysis
    if a.chronic:
        yield (
            "Chronic bottlenecks (named root cause, weighted by confidence x time)",
            ["job", "#", "vertex", "kind", "score", "windows named", "runs"],
            [
                [c.job, str(c.rank), c.vertex, c.kind, f"{c.score:.2f}",
                 f"{c.windows:,} ({c.window_share:.0%})", f"{c.runs:,}"]
                for c in a.chronic
            ],
        )  # fmt: skip
    if a.regressions:
        yield (
            "Regressions between consecutive runs",
            ["job", "kind", "vertex", "before run", "after run", "before", "after", "change"],
            [_regression(r) for r in a.regressions],
        )
    elif a.jobs:
        yield ("Regressions between consecutive runs", ["none found"], [])
    if a.vertices:
        yield (
            "Vertices over every window",
            ["job", "vertex", "windows", "OK/LOW/HIGH", "ratio p50", "p95", "busy p50",
             "capacity/subtask", "trend/run"],
            [
                [v.job, v.vertex, f"{v.windows:,}",
                 f"{v.share_ok:.0%}/{v.share_low:.0%}/{v.share_high:.0%}",
                 ratio(v.ratio_p50), ratio(v.ratio_p95), ratio(v.busy_p50),
                 _rate(v.capacity_p50), _trend(v.capacity_trend)]
                for v in a.vertices
            ],
        )  # fmt: skip
    if a.checkpoints:
        yield (
            "Checkpoints per run (each checkpoint its windows saw as their newest, once)",
            ["job", "run", "checkpoints", "duration p50", "duration p95", "failed",
             "failed in run", "barrier wait"],
            [row for c in a.checkpoints for row in _checkpoint_rows(c)],
        )  # fmt: skip
    if a.autoscaler:
        yield (
            "The autoscaler's decisions judged against bpmon's causes (windows)",
            ["job", "judged", "would be wrong", "wrong verdicts"],
            [_autoscaler_row(h) for h in a.autoscaler],
        )
    if a.skew:
        yield (
            "Skew over time (a subtask repeatedly hot for its vertex)",
            ["job", "vertex", "subtask", "hot windows", "runs"],
            [
                [s.job, s.vertex, str(s.subtask),
                 f"{s.hot_windows:,}/{s.windows:,} ({s.share:.0%})", f"{s.runs:,}"]
                for s in a.skew
            ],
        )  # fmt: skip


TEXT_COLUMNS: dict[str, Col] = {
    "job": Col("job"),
    "#": Col("#", "right", wrap=False),
    "vertex": Col("vertex"),
    "kind": Col("kind"),
    "score": Col("score", "right", wrap=False),
    "windows named": Col("windows\nnamed", "right", wrap=False),
    "runs": Col("runs", "right", wrap=False),
    "windows": Col("windows", "right", wrap=False),
    "OK/LOW/HIGH": Col("OK/LOW/HIGH", "right", wrap=False),
    "ratio p50": Col("ratio\np50", "right", wrap=False),
    "p95": Col("ratio\np95", "right", wrap=False, drop=2),
    "busy p50": Col("busy\np50", "right", wrap=False, drop=1),
    "capacity/subtask": Col("capacity", "right", wrap=False),
    "trend/run": Col("trend\n/run", "right", wrap=False),
    "subtask": Col("subtask", "right", wrap=False),
    "hot windows": Col("hot\nwindows", "right", wrap=False),
    "run": Col("run started"),
    "checkpoints": Col("check-\npoints", "right", wrap=False),
    "duration p50": Col("duration\np50", "right", wrap=False),
    "duration p95": Col("duration\np95", "right", wrap=False, drop=2),
    "failed": Col("failed", "right", wrap=False),
    "failed in run": Col("failed\nin run", "right", wrap=False, drop=1),
    "barrier wait": Col("barrier\nwait", "right", wrap=False),
    "judged": Col("judged", "right", wrap=False),
    "would be wrong": Col("would be\nwrong", "right", wrap=False),
    "wrong verdicts": Col("wrong verdicts (vertex)"),
}
"""How each column of :func:`sections` shows on a terminal (stacked headers, what may go)."""

LEGENDS = {
    "capacity/subtask": "capacity: records/s one subtask handles at 100% busy (p50); "
    "trend: its change per run",
    "p95": "ratio p50, p95: the backpressure ratio's median and 95th percentile",
    "OK/LOW/HIGH": "OK/LOW/HIGH: the share of windows at each level",
    "checkpoints": "duration: of the checkpoints, p50 and p95 (a failed one's until it failed); "
    "failed: of them; failed in run: the growth of the job's failed count from the run's first "
    "window to its last; barrier wait: the share of their time spent waiting for barriers",
    "would be wrong": "judged: windows with a verdict, of those with the autoscaler's decision; "
    "would be wrong: with a verdict other than agrees; wrong verdicts: each one's windows and the "
    "vertex that got it most (its windows when fewer)",
}
"""The line under a table that explains its abbreviated headers."""


def render_analysis_text(analysis: Analysis, console: Console) -> None:
    """The analysis as terminal tables fitted to the console; regressions as lines (two run ids
    are wide). A table of a single job says the job in its title instead of a column."""
    for line in summary_lines(analysis):
        console.print(line, highlight=False, markup=False)
    for title, header, rows in sections(analysis):
        if title.startswith("Regressions"):
            continue
        _print_table(console, title, header, rows)
    if analysis.regressions:
        console.print()
        console.print("What changed", style="bold")
    elif any(j.runs > 1 for j in analysis.jobs):
        console.print()
        console.print("No regression between consecutive runs.", highlight=False)
    for r in analysis.regressions:
        before, after, change = _regression(r)[5:]
        detail = textwrap.fill(
            r.detail, console.width, initial_indent="    ", subsequent_indent="    ",
            break_long_words=False, break_on_hyphens=False,
        )  # fmt: skip
        what = f"  {r.job}  {r.kind}  {r.vertex}" if r.vertex else f"  {r.job}  {r.kind}"
        console.print(
            f"{what}: {before} -> {after} ({change})\n"
            f"    run {r.before_run}\n    ->  {r.after_run}\n{detail}",
            highlight=False,
            markup=False,
        )


def _print_table(console: Console, title: str, header: list[str], rows: list[list[str]]) -> None:
    """One section as a titled table fitted to the console, with the legend of its headers."""
    if header[0] == "job" and len({row[0] for row in rows}) == 1:
        title += f": job {rows[0][0]}"
        header, rows = header[1:], [row[1:] for row in rows]
    table, _ = fit_table([TEXT_COLUMNS[h] for h in header], rows, console.width)
    console.print()
    console.print(title, style="bold", highlight=False, markup=False)
    console.print(table)
    legend = "; ".join(LEGENDS[h] for h in header if h in LEGENDS)
    if legend:
        console.print(legend, style="dim", highlight=False, markup=False)


def render_analysis_markdown(analysis: Analysis) -> str:
    """The analysis as a Markdown document."""
    out = ["# bpmon history analysis", ""]
    out += [f"- {line}" for line in summary_lines(analysis)]
    for title, header, rows in sections(analysis):
        out += ["", f"## {title}", ""]
        if not rows:
            out.append(f"_{header[0]}_")
            continue
        out.append("| " + " | ".join(header) + " |")
        out.append("|" + "---|" * len(header))
        out += ["| " + " | ".join(_cell(c) for c in row) + " |" for row in rows]
    if analysis.regressions:
        out += ["", "### What changed", ""]
        out += [f"- {r.detail}" for r in analysis.regressions]
    if analysis.skipped:
        out += ["", "## Skipped files", ""] + [f"- {s}" for s in analysis.skipped]
    return "\n".join(out) + "\n"


def _checkpoint_rows(c: CheckpointHistory) -> list[list[str]]:
    return [
        [c.job, f"{p.start:%Y-%m-%d %H:%M}", f"{p.checkpoints:,}", _ms(p.duration_p50),
         _ms(p.duration_p95), f"{p.failed:,}",
         NULL if p.failed_during is None else f"{p.failed_during:+,}",
         percent(p.barrier_wait_share)]
        for p in c.by_run
    ]  # fmt: skip


def _autoscaler_row(h: AutoscalerHistory) -> list[str]:
    """judged of windows, wrong of judged, and ``scales-ineffectively 12 (aggregate), misses 2
    (enrich)``: the verdicts other than agrees, most windows first."""
    wrong = [
        f"{t.verdict} {t.windows:,} ({t.vertex}"
        + ("" if t.vertex_windows == t.windows else f" {t.vertex_windows:,}")
        + ")"
        for t in h.verdicts
        if t.verdict != "agrees"
    ]
    share = f" ({h.wrong / h.judged:.0%})" if h.judged else ""
    return [
        h.job,
        f"{h.judged:,} of {h.windows:,}",
        f"{h.wrong:,} of {h.judged:,}{share}",
        ", ".join(wrong) or NULL,
    ]


def _regression(r: Regression) -> list[str]:
    def value(v: float | str | None) -> str:
        if isinstance(v, float):
            if r.kind == "checkpoint-slower":
                return _ms(v)
            return _rate(v) if r.kind == "capacity-drop" else f"{v:.0%}"
        return NULL if v is None else v

    change = NULL if r.change is None else f"{r.change:+.0%}"
    return [
        r.job,
        r.kind,
        r.vertex or NULL,
        r.before_run,
        r.after_run,
        value(r.before),
        value(r.after),
        change,
    ]


def _rate(value: float | None) -> str:
    return NULL if value is None else f"{value:,.0f}"


def _ms(value: float | None) -> str:
    return NULL if value is None else milliseconds(value)


def _trend(value: float | None) -> str:
    return NULL if value is None else f"{value:+.1%}"


def _cell(text: str) -> str:
    return text.replace("|", "\\|")
