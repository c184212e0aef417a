"""The dashboard's pages about jobs: the Jobs list, a Job, and one stored Run in full.

Pages are rendered on the server (:mod:`bpmon.web.markup`, :mod:`bpmon.web.figures`) and read
the same registry as the API (:class:`~bpmon.service.watching.Watches`). A Job page stays current
without reloading: its script listens to the job's event stream (``/api/v1/jobs/{job}/events``) and,
on each new report, fetches ``/job/{job}/live.json`` (the same fragments and figures this module
renders) and redraws in place. The Compare and History pages are in :mod:`bpmon.web.review`.
"""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, FastAPI, Query, Request
from fastapi.responses import HTMLResponse, JSONResponse
from starlette.concurrency import run_in_threadpool

from bpmon.model.errors import BpmonError
from bpmon.model.values import Level, Report, worst_level
from bpmon.service import facade, scenarios
from bpmon.service.watching import JobView, Watches
from bpmon.web import charts, figures, graph, markup, numbers, review, shell, topology
from bpmon.web.bursts import SERIES_BURSTS, BurstReports
from bpmon.web.markup import esc, path_part
from bpmon.web.runs import RUN_ID, find_run, public_message

router = APIRouter(include_in_schema=False)

EMPTY_REPORT_NOTE = "Waiting for the first burst: the page fills in as soon as it is diagnosed."


def mount(app: FastAPI) -> None:
    """Add the dashboard to ``app``: its pages, its static files and its cache of reports."""
    watches: Watches = app.state.watches
    app.state.bursts = BurstReports(watches.settings)
    app.include_router(shell.router)
    app.include_router(router)
    app.include_router(review.router)


def _watches(request: Request) -> Watches:
    watches: Watches = request.app.state.watches
    return watches


# ----------------------------------------------------------------------------------------- jobs


@router.get("/", response_class=HTMLResponse)
def jobs_page(request: Request) -> HTMLResponse:
    """Every job, watched or stored: state, latest level, root cause, when last seen."""
    watches = _watches(request)
    views = watches.jobs()
    running = any(v.state == "running" for v in views)
    examples = "".join(
        f'<option value="{esc(n)}">{esc(n)}</option>' for n in scenarios.shipped_examples()
    )
    errors = [public_message(e, watches.settings) for e in watches.stored.errors]
    main = (
        '<div class="page-head"><h1>Jobs</h1>'
        '<form id="start-example" class="inline-form" aria-label="Run a shipped example">'
        '<label for="example">Run a shipped example</label>'
        f'<select id="example" name="scenario">{examples}</select>'
        '<button type="submit">Run it</button>'
        '<output id="start-result" role="status" aria-live="polite"></output></form></div>'
        f'<div id="jobs">{jobs_table(views)}</div>{_problems(errors)}'
    )
    attributes = {"data-running": "yes" if running else "no"}
    return shell.page("Jobs", "jobs", main, attributes=attributes)


def jobs_table(views: list[JobView]) -> str:
    """The Jobs table (the Jobs page refreshes it in place while a job runs)."""
    if not views:
        return (
            '<p class="empty">No job yet. Run a shipped example above, or start '
            "<code>bpmon serve --run SCENARIO</code>; stored runs in the runs directory show "
            "here too.</p>"
        )
    head = ("job", "state", "level", "root cause", "kind", "confidence", "last seen")
    rows = []
    for v in views:
        cause = v.latest.root_causes[0] if v.latest and v.latest.root_causes else None
        level = markup.level_badge(_worst(v.latest)) if v.latest else "–"
        if v.latest is None and v.state == "running":
            level = '<span class="muted">first burst…</span>'
        said = "–" if v.latest is None or v.latest.root_causes is None else "none"
        rows.append(
            f'<tr data-job="{esc(v.job)}">'
            f'<th scope="row"><a href="/job/{path_part(v.job)}">{esc(v.job)}</a></th>'
            f'<td data-label="state">{markup.state_badge(v.state)}</td>'
            f'<td data-label="level">{level}</td>'
            f'<td data-label="root cause">{esc(cause.vertex) if cause else said}</td>'
            f'<td data-label="kind">{esc(cause.kind) if cause else "–"}</td>'
            f'<td data-label="confidence">{numbers.ratio(cause.confidence) if cause else "–"}</td>'
            f'<td data-label="last seen">{_seen(v.latest)}</td></tr>'
        )
    ths = "".join(f'<th scope="col">{esc(h)}</th>' for h in head)
    return (
        '<div class="table-wrap" tabindex="0" role="region" aria-label="jobs">'
        f'<table class="jobs"><thead><tr>{ths}</tr></thead><tbody>{"".join(rows)}</tbody>'
        "</table></div>"
    )


def _worst(report: Report | None) -> Level | None:
    return None if report is None else worst_level(report)


def _seen(report: Report | None) -> str:
    if report is None:
        return "–"
    end = report.window.end
    return f'<time datetime="{numbers.iso(end)}">{esc(numbers.when(end))}</time>'


def _problems(errors: list[str]) -> str:
    if not errors:
        return ""
    items = "".join(f"<li>{esc(e)}</li>" for e in errors)
    return f'<section class="problems"><h2>Runs that cannot be read</h2><ul>{items}</ul></section>'


# ------------------------------------------------------------------------------------------ job


@router.get("/job/{job}", response_class=HTMLResponse)
def job_page(job: str, request: Request) -> HTMLResponse:
    """One job: graph, root cause, series, heat map and latest report, live while it runs."""
    view = _watches(request).job(job)
    if view is None:
        return shell.error_page(404, f"no job {job!r}; the Jobs page lists them")
    live = live_parts(view, request.app.state.bursts)
    slots = [
        markup.figure_slot("graph", live["graph"], f"job graph of {job}", live["graph_down"]),
        markup.figure_slot("series", live["series_figure"], "series of the chosen vertex"),
        markup.figure_slot("heatmap", live["heatmap"], "subtasks heat map"),
    ]
    (graph_place, series, heat) = (s[0] for s in slots)
    data = markup.json_block("series-data", live["series"])
    levels = _watches(request).settings.rules().levels
    unconnected = bool(live["graph"]["layout"].get("meta", {}).get("unconnected"))
    legend = markup.graph_legend(levels.ok_max, levels.low_max, unconnected)
    shown = live["heatmap"]["layout"].get("meta", {}).get("shown", 0)
    stop = ""
    if view.state == "running":
        stop = '<button type="button" id="stop-job" class="secondary">Stop watching</button>'
    main = f"""
<div class="page-head"><h1><span class="muted">Job</span> {esc(job)}</h1>
<div id="job-head">{live["head"]}</div>{stop}</div>
<div class="grid">
<div class="column">
<section class="card graph-card" aria-labelledby="h-graph"><h2 id="h-graph">Job graph</h2>
<div class="scroll-x" id="graph-scroll">{graph_place}</div>{legend}</section>
<section class="card heat-card" aria-labelledby="h-heat"><h2 id="h-heat">Subtasks</h2>
{_heat_switch(shown)}
<div class="scroll-x">{heat}</div></section>
</div>
<section class="card cause-card" aria-labelledby="h-cause" aria-live="polite">
<h2 id="h-cause">Root cause</h2><div id="cause-panel">{live["cause"]}</div></section>
</div>
<section class="card" aria-labelledby="h-series"><h2 id="h-series">Over the last bursts</h2>
<div class="series-head"><label class="inline">Vertex <select id="series-vertex">{
        live["options"]
    }</select></label><div id="series-legend">{live["series_legend"]}</div></div>
{series}</section>
<section class="card" aria-labelledby="h-table"><h2 id="h-table">Latest report</h2>
<div id="latest-table">{live["table"]}</div></section>
"""
    blocks = "".join(s[1] for s in slots) + data
    attributes = {"data-job": job, "data-state": view.state}
    return shell.page(job, "job", main, figures=blocks, plotly=True, attributes=attributes)


def _heat_switch(shown: int) -> str:
    """The heat map's two views, the one that shows the root cause checked."""
    choices = (("0", "backpressure ratio"), ("1", "busy share"))
    radios = "".join(
        f'<label><input type="radio" name="heat" value="{value}"'
        f"{' checked' if int(value) == shown else ''}> {text}</label>"
        for value, text in choices
    )
    return f'<fieldset class="switch"><legend>Show</legend>{radios}</fieldset>'


@router.get("/job/{job}/live.json")
def job_live(job: str, request: Request) -> JSONResponse:
    """What the Job page redraws when a new report arrives (fragments and figures)."""
    view = _watches(request).job(job)
    if view is None:
        return JSONResponse({"detail": f"no job {job!r}"}, status_code=404)
    parts = live_parts(view, request.app.state.bursts)
    return JSONResponse(parts, headers={"Cache-Control": "no-store"})


def live_parts(view: JobView, bursts: BurstReports) -> dict[str, Any]:
    """The Job page's changing parts: head, cause panel, table, figures, series of every vertex."""
    report = view.latest
    points = bursts.recent(view, SERIES_BURSTS)
    data = charts.series_data(points)
    chosen = _default_vertex(report)
    names = [v.name for v in figures.ordered(report)] if report else list(data["vertices"])
    options = "".join(
        f'<option value="{esc(n)}"{" selected" if n == chosen else ""}>{esc(n)}</option>'
        for n in names
    )
    empty = _waiting_figure()
    return {
        "state": view.state,
        "latest": _latest_key(view),
        "head": _head(view),
        "cause": (
            markup.cause_panel(report) + markup.findings(report, level=3)
            if report
            else f"<p>{EMPTY_REPORT_NOTE}</p>"
        ),
        "table": markup.vertex_table(report) if report else "",
        "graph": graph.job_graph(report) if report else empty,
        "graph_down": graph.job_graph(report, "down") if report else empty,
        "heatmap": figures.heat_map(report) if report else empty,
        "series": data,
        "series_figure": charts.series_figure(data, chosen),
        "series_legend": _series_legend(data["keys"], len(data["axis"]["shapes"]) > 0),
        "vertex": chosen,
        "options": options,
    }


def _waiting_figure() -> dict[str, Any]:
    """An empty figure saying it waits for the first burst (no axes, no grid)."""
    hidden = {"visible": False}
    note = {"text": "waiting for the first burst…", "showarrow": False, "x": 0.5, "y": 0.5}
    note |= {"xref": "paper", "yref": "paper", "font": {"size": 14}}
    layout = {"height": 160, "xaxis": hidden, "yaxis": hidden, "annotations": [note]}
    return {"data": [], "layout": layout | {"meta": {"kind": "empty"}}}


def _latest_key(view: JobView) -> str | None:
    return f"{view.history[-1].run_id}/{view.history[-1].burst}" if view.history else None


def _default_vertex(report: Report | None) -> str | None:
    """The series first show the top root cause, else the most backpressured vertex."""
    if report is None or not report.vertices:
        return None
    if report.root_causes:
        return report.root_causes[0].vertex
    return max(report.vertices, key=lambda v: v.ratio or 0.0).name


def _head(view: JobView) -> str:
    report = view.latest
    if report is None or not view.history:
        return f"<p>{markup.state_badge(view.state)} {esc(EMPTY_REPORT_NOTE)}</p>"
    last = view.history[-1]
    run = f"/run/{path_part(last.run_id)}?burst={last.burst}"
    count = len(view.history)
    return (
        f"<p>{markup.state_badge(view.state)} {markup.level_badge(_worst(report))} "
        f'<span id="latest" data-latest="{esc(_latest_key(view))}">burst {last.burst} of run '
        f'<a href="{run}">{esc(last.run_id)}</a>, window ended '
        f"{_seen(report)}</span> · {count} burst{'s' if count != 1 else ''} in the history"
        f' · <a href="/compare?job={path_part(view.job)}">compare runs</a></p>'
    )


def _series_legend(keys: list[str], runs: bool) -> str:
    """The lines drawn (only those with figures) and, when there are several runs, the mark of
    a new run."""
    items = "".join(
        f'<li><span class="swatch {dash}" style="border-color:{charts.COLOURS[key]}"></span>'
        f"{esc(name)}</li>"
        for key, name, _, dash in charts.PANELS
        if key in keys
    )
    if runs:
        items += '<li><span class="run-swatch"></span>a new run starts (its id above)</li>'
    return f'<ul class="legend series-legend" aria-label="lines">{items}</ul>'


# ------------------------------------------------------------------------------------------ run


@router.get("/run/{run_id}", response_class=HTMLResponse)
async def run_page(
    run_id: str, request: Request, burst: Annotated[int, Query(ge=0)] = 0
) -> HTMLResponse:
    """One stored report in full, as ``bpmon diagnose RUN --burst K`` shows it."""
    return await run_in_threadpool(_run_page, run_id, burst, _watches(request))


def _run_page(run_id: str, burst: int, watches: Watches) -> HTMLResponse:
    path = find_run(run_id, watches.settings) if RUN_ID.fullmatch(run_id) else None
    if path is None:
        return shell.error_page(404, f"no run {run_id[:80]!r}; the History page lists the runs")
    try:
        report = facade.load_report(str(path), watches.settings, burst=burst)
    except BpmonError as exc:
        status = 404 if "has no burst" in str(exc) else 422
        return shell.error_page(status, public_message(str(exc), watches.settings))
    view = watches.job(report.job)
    numbers_seen = sorted({b.burst for b in view.history if b.run_id == run_id}) if view else []
    tabs = "".join(
        f'<a href="/run/{path_part(run_id)}?burst={b}"'
        f"{' aria-current=page' if b == burst else ''}>{b}</a>"
        for b in numbers_seen
    )
    many = len(numbers_seen) > 1
    place, blocks = markup.figure_slot(
        "graph", graph.job_graph(report), "job graph", graph.job_graph(report, "down")
    )
    levels = watches.settings.rules().levels
    unconnected = topology.unconnected(report.vertices)
    legend = markup.graph_legend(levels.ok_max, levels.low_max, unconnected)
    json_url = f"/api/v1/runs/{path_part(run_id)}?burst={burst}"
    main = f"""
<div class="page-head"><h1>Backpressure report: <a href="/job/{path_part(report.job)}">{
        esc(report.job)
    }</a></h1>
<p><a href="{json_url}" download>JSON of this report</a>
· <a href="/compare?job={path_part(report.job)}&amp;after={path_part(run_id)}">compare</a></p></div>
{markup.report_header(report, burst)}
{f'<nav class="bursts" aria-label="Bursts of this run">Bursts: {tabs}</nav>' if many else ""}
<section class="card graph-card" aria-labelledby="h-graph"><h2 id="h-graph">Job graph</h2>
<div class="scroll-x" id="graph-scroll">{place}</div>{legend}</section>
<section class="card cause-card"><h2>Root causes</h2>{markup.causes_list(report)}</section>
<section class="card"><h2>Vertices</h2>{markup.vertex_table(report)}</section>
{markup.findings(report)}
"""
    return shell.page(f"Run {run_id}", "run", main, figures=blocks, plotly=True)
