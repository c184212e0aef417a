"""The dashboard's pages that look back: Compare two runs of a job, and the History of every job.

- **Compare** shows the last burst of two runs of one job side by side: what changed first (a
  bottleneck that moved, a capacity that dropped, a level that worsened; the reading is
  :func:`bpmon.service.comparison.compare`), then both graphs, then every
  vertex's level, ratio and capacity per subtask before and after.
- **History** is read from the stored runs directly: per job its worst level burst by burst and
  its runs. When ``bpmon analyze --format html --out RUNS_DIR/analysis`` has written the Spark
  analytics' HTML report, the page links to it (served from that folder only).
"""

from __future__ import annotations

import re
from collections.abc import Callable
from pathlib import Path

from fastapi import APIRouter, Request
from fastapi.responses import HTMLResponse
from starlette.concurrency import run_in_threadpool

from bpmon.model.errors import BpmonError
from bpmon.model.values import Report, RunInfo, VertexStatus
from bpmon.service import facade
from bpmon.service.comparison import CAPACITY_DROP, Comparison, VertexChange, compare
from bpmon.service.watching import Watches
from bpmon.service.whatif import tried_on
from bpmon.web import charts, graph, markup, numbers, shell
from bpmon.web.markup import esc, path_part
from bpmon.web.runs import inside, public_message

router = APIRouter(include_in_schema=False)

ANALYSIS_DIR = "analysis"
"""Where, inside the runs directory, the History page looks for the analytics' HTML reports."""
ANALYSIS_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,120}\.html")
RUNS_SHOWN = 20
"""Runs listed per job on the History page (the newest)."""


def _watches(request: Request) -> Watches:
    watches: Watches = request.app.state.watches
    return watches


def _runs(watches: Watches) -> tuple[list[RunInfo], list[str]]:
    errors: list[str] = []
    runs = facade.stored_runs(watches.settings, on_corrupt=lambda e: errors.append(str(e)))
    runs = [r for r in runs if inside(r, watches.settings)]
    return runs, [public_message(e, watches.settings) for e in errors]


def _last_burst(run: RunInfo, watches: Watches) -> Report:
    return facade.load_report(str(run.path), watches.settings, burst=max(run.bursts - 1, 0))


# -------------------------------------------------------------------------------------- compare


@router.get("/compare", response_class=HTMLResponse)
async def compare_page(
    request: Request, job: str | None = None, before: str | None = None, after: str | None = None
) -> HTMLResponse:
    """Two runs of one job side by side (by default the job's two newest runs)."""
    return await run_in_threadpool(_compare_page, _watches(request), job, before, after)


def _compare_page(
    watches: Watches, job: str | None, before: str | None, after: str | None
) -> HTMLResponse:
    runs, _ = _runs(watches)
    by_id = {r.run_id: r for r in runs}
    picked = [by_id[r] for r in (after, before) if r is not None and r in by_id]
    if job is None:
        job = picked[0].job if picked else _busiest(runs)
    own = [r for r in runs if job is not None and tried_on(r.job, job)]  # with its what-ifs
    new = by_id.get(after or "") if after in {r.run_id for r in own} else None
    new = new or (own[0] if own else None)
    old = by_id.get(before or "") if before in {r.run_id for r in own} else None
    if old is None and new is not None:
        old = next((r for r in own if r.start < new.start), None)
    form = _compare_form(runs, job, old, new)
    if old is None or new is None or old.run_id == new.run_id:
        note = "Pick two different runs of one job."
        if len(own) < 2:
            note = (
                f"Job {job!r} has fewer than two stored runs: run it again (or `bpmon whatif`) "
                "to compare."
                if job
                else "No stored runs yet."
            )
        main = f'<h1>Compare runs</h1>{form}<p class="empty">{esc(note)}</p>'
        return shell.page("Compare", "compare", main)
    try:
        rules = watches.settings.rules()  # the capacity and the drop the report and analyze use
        result = compare(
            _last_burst(old, watches),
            _last_burst(new, watches),
            rules.history.capacity_drop,
            rules.capacity.min_busy,
        )
    except BpmonError as exc:
        return shell.error_page(422, public_message(str(exc), watches.settings))
    return _comparison(result, form, old, new, rules.capacity.min_busy)


def _busiest(runs: list[RunInfo]) -> str | None:
    """The job of the newest run among jobs with two runs or more (else of the newest run)."""
    counts: dict[str, int] = {}
    for r in runs:
        counts[r.job] = counts.get(r.job, 0) + 1
    return next((r.job for r in runs if counts[r.job] > 1), runs[0].job if runs else None)


def _compare_form(
    runs: list[RunInfo], job: str | None, old: RunInfo | None, new: RunInfo | None
) -> str:
    jobs = sorted({r.job for r in runs})
    job_options = "".join(
        f'<option value="{esc(j)}"{" selected" if j == job else ""}>{esc(j)}</option>' for j in jobs
    )

    def options(chosen: RunInfo | None) -> str:
        return "".join(
            f'<option value="{esc(r.run_id)}"{" selected" if r is chosen else ""}>'
            f"{esc(r.run_id)} · {esc(r.worst_level or 'no level')}"
            f"{esc(' · ' + r.job) if r.job != job else ''}</option>"
            for r in runs
            if job is not None and tried_on(r.job, job)
        )

    return (
        '<form class="compare-form" method="get" action="/compare">'
        f'<label>Job <select name="job" id="compare-job">{job_options}</select></label>'
        f'<label>Before <select name="before">{options(old)}</select></label>'
        f'<label>After <select name="after">{options(new)}</select></label>'
        '<button type="submit">Compare</button></form>'
    )


def _comparison(
    result: Comparison, form: str, old: RunInfo, new: RunInfo, min_busy: float
) -> HTMLResponse:
    items = "".join(
        f'<li class="change change-{esc(c.kind)}" data-kind="{esc(c.kind)}">{esc(c.detail)}</li>'
        for c in result.changes
    )
    changes = f'<ul class="changes">{items}</ul>' if items else f"<p>{esc(_unchanged(result))}</p>"
    blocks, sides = [], []
    for label, run, report in (("Before", old, result.before), ("After", new, result.after)):
        key = label.lower()
        place, block = markup.figure_slot(
            f"graph-{key}", graph.job_graph(report), label, graph.job_graph(report, "down")
        )
        blocks.append(block)
        sides.append(
            f'<section class="card side" id="{key}" aria-labelledby="h-{key}">'
            f'<h2 id="h-{key}">{label}: <a href="/run/{path_part(run.run_id)}?burst='
            f'{max(run.bursts - 1, 0)}">{esc(run.run_id)}</a></h2>'
            f'<p class="muted">{esc(numbers.when(run.start))}</p>'
            f'<div class="side-cause">{_cause_line(report)}</div>'
            f'<div class="scroll-x">{place}</div></section>'
        )
    main = (
        f"<h1>Compare runs of {esc(result.after.job)}</h1>{form}"
        f'<section class="card" aria-labelledby="h-changed"><h2 id="h-changed">What changed</h2>'
        f"{changes}</section>"
        f'<div class="sides">{"".join(sides)}</div>'
        f'<section class="card"><h2>Vertex by vertex</h2>{_table(result.vertices)}'
        f'<p class="muted">Capacity per subtask: the records/s one subtask handles at 100% busy; '
        f"– where the vertex was too idle (busy under {min_busy:.0%}) to tell.</p></section>"
    )
    return shell.page("Compare", "compare", main, figures="".join(blocks), plotly=True)


def _unchanged(result: Comparison) -> str:
    causes = result.after.root_causes
    where = (
        f"the root cause is still {causes[0].kind} at {causes[0].vertex}"
        if causes
        else "neither run names a root cause"
    )
    return f"Nothing changed: {where}, every vertex keeps its level, no capacity dropped."


def _cause_line(report: Report) -> str:
    if not report.root_causes:
        return markup.cause_panel(report)
    top = report.root_causes[0]
    return (
        f'<p class="cause-title">Root cause: <b>{esc(top.kind)}</b> at <b>{esc(top.vertex)}</b>'
        f" (confidence {numbers.ratio(top.confidence)})</p>"
    )


def _table(rows: tuple[VertexChange, ...]) -> str:
    head = ("vertex", "parallelism", "level", "ratio", "busy", "capacity / subtask", "change")
    body = []
    for row in rows:
        a, b = row.before, row.after
        change = row.capacity_change
        shown = "–" if change is None else f"{change:+.0%}"
        css = " drop" if change is not None and change < -CAPACITY_DROP else ""
        cells = [
            _pair(_of(a, lambda v: str(v.parallelism)), _of(b, lambda v: str(v.parallelism))),
            f"{_badge(a)} → {_badge(b)}",
            _pair(
                _of(a, lambda v: numbers.ratio(v.ratio)), _of(b, lambda v: numbers.ratio(v.ratio))
            ),
            _pair(_of(a, _busy), _of(b, _busy)),
            _pair(numbers.rate(row.capacity_before), numbers.rate(row.capacity_after)),
            f'<span class="delta{css}">{esc(shown)}</span>',
        ]
        tds = "".join(f"<td>{c}</td>" for c in cells)
        body.append(
            f'<tr data-vertex="{esc(row.name)}"><th scope="row">{esc(row.name)}</th>{tds}</tr>'
        )
    ths = "".join(f'<th scope="col">{esc(h)}</th>' for h in head)
    return (
        '<div class="table-wrap" tabindex="0" role="region" aria-label="vertex by vertex">'
        f'<table class="compare"><thead><tr>{ths}</tr></thead><tbody>{"".join(body)}</tbody>'
        "</table></div>"
    )


def _of(vertex: VertexStatus | None, pick: Callable[[VertexStatus], str]) -> str | None:
    return None if vertex is None else pick(vertex)


def _busy(vertex: VertexStatus) -> str:
    return numbers.ratio(vertex.metrics.busy_ratio)


def _badge(vertex: VertexStatus | None) -> str:
    return "–" if vertex is None else markup.level_badge(vertex.level)


def _pair(before: str | None, after: str | None) -> str:
    return f"{esc(before or '–')} → {esc(after or '–')}"


# -------------------------------------------------------------------------------------- history


@router.get("/history", response_class=HTMLResponse)
async def history_page(request: Request) -> HTMLResponse:
    """Every job's level burst by burst and its runs; a link to the analytics' report if any."""
    return await run_in_threadpool(_history_page, _watches(request))


def _history_page(watches: Watches) -> HTMLResponse:
    runs, errors = _runs(watches)
    sections, blocks = [], []
    for n, view in enumerate(v for v in watches.jobs() if v.history):
        place, block = markup.figure_slot(
            f"trend-{n}", charts.level_trend(view.job, view.history), f"level trend of {view.job}"
        )
        blocks.append(block)
        own = [r for r in runs if r.job == view.job]
        sections.append(
            f'<section class="card" aria-labelledby="h-job-{n}">'
            f'<h2 id="h-job-{n}"><a href="/job/{path_part(view.job)}">{esc(view.job)}</a></h2>'
            f'<p class="muted">{numbers.counted(len(view.history), "burst")} in '
            f"{numbers.counted(len(own), 'stored run')}</p>"
            f"{place}{_runs_table(own[:RUNS_SHOWN])}</section>"
        )
    if not sections:
        sections.append('<p class="empty">No stored runs yet.</p>')
    problems = "".join(f"<li>{esc(e)}</li>" for e in errors)
    if problems:
        problems = f'<section class="problems"><h2>Runs that cannot be read</h2><ul>{problems}</ul>'
        problems += "</section>"
    main = f"<h1>History</h1>{_analysis_links(watches.settings.runs_dir)}"
    main += "".join(sections) + problems
    return shell.page("History", "history", main, figures="".join(blocks), plotly=bool(blocks))


def _runs_table(runs: list[RunInfo]) -> str:
    rows = []
    for i, r in enumerate(runs):
        cause = r.root_causes[0] if r.root_causes else None
        said = (
            f"{cause.kind} at {cause.vertex}"
            if cause
            else ("none" if r.root_causes is not None else "–")
        )
        previous = runs[i + 1] if i + 1 < len(runs) else None
        link = (
            f'<a href="/compare?job={path_part(r.job)}&amp;before={path_part(previous.run_id)}'
            f'&amp;after={path_part(r.run_id)}">with previous</a>'
            if previous
            else "–"
        )
        rows.append(
            f'<tr><th scope="row"><a href="/run/{path_part(r.run_id)}">{esc(r.run_id)}</a></th>'
            f"<td>{esc(numbers.when(r.start))}</td><td class=num>{r.bursts}</td>"
            f"<td>{markup.level_badge(r.worst_level)}</td><td>{esc(said)}</td><td>{link}</td></tr>"
        )
    head = ("run", "started", "bursts", "worst (first burst)", "root cause", "compare")
    ths = "".join(f'<th scope="col">{esc(h)}</th>' for h in head)
    return (
        '<div class="table-wrap" tabindex="0" role="region" aria-label="runs">'
        f'<table class="runs"><thead><tr>{ths}</tr></thead><tbody>{"".join(rows)}</tbody>'
        "</table></div>"
    )


def analysis_reports(runs_dir: Path) -> list[Path]:
    """The analytics' HTML reports in ``RUNS_DIR/analysis``, newest first."""
    folder = runs_dir / ANALYSIS_DIR
    try:
        found = [p for p in folder.iterdir() if ANALYSIS_NAME.fullmatch(p.name) and p.is_file()]
    except OSError:
        return []
    return sorted(found, key=lambda p: p.stat().st_mtime, reverse=True)


def _analysis_links(runs_dir: Path) -> str:
    reports = analysis_reports(runs_dir)
    if not reports:
        return (
            '<p class="muted">Trends from the stored runs. For the Spark analytics (capacity '
            "trends, regressions, chronic bottlenecks), run <code>bpmon analyze --format html "
            f"--out {esc(runs_dir / ANALYSIS_DIR)}</code>; this page then links to it.</p>"
        )
    links = "".join(
        f'<li><a href="/history/analysis/{path_part(p.name)}">{esc(p.name)}</a></li>'
        for p in reports
    )
    return f'<section class="card"><h2>Analytics</h2><ul>{links}</ul></section>'


@router.get("/history/analysis/{name}", response_class=HTMLResponse)
def analysis_report(name: str, request: Request) -> HTMLResponse:
    """One HTML report of the analytics, from ``RUNS_DIR/analysis`` and nowhere else."""
    folder = (_watches(request).settings.runs_dir / ANALYSIS_DIR).resolve()
    path = (folder / name).resolve() if ANALYSIS_NAME.fullmatch(name) else None
    if path is None or path.parent != folder or not path.is_file():
        return shell.error_page(404, f"no analytics report {name[:80]!r}")
    return HTMLResponse(path.read_text(encoding="utf-8", errors="replace"))
