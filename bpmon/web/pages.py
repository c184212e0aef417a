"""The dashboard's pages about jobs: the Jobs list, a Job, and one stored Run in full.

Pages are rendered on the server from ``templates/jobs.html``, ``job.html`` and ``run.html``
(:mod:`bpmon.web.templating`; the figures' JSON from :mod:`bpmon.web.figures`) and read the same
registry as the API (:class:`~bpmon.service.watching.Watches`). A Job page stays current
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
from bpmon.model.values import Report
from bpmon.service import facade, scenarios
from bpmon.service.reports import SERIES_BURSTS, BurstReports
from bpmon.service.stored import find_run
from bpmon.service.watching import JobView, Watches
from bpmon.web import charts, checkpoints, figures, graph, markup, review, shell, topology
from bpmon.web.markup import PageFigure
from bpmon.web.runs import public_message, watches_of
from bpmon.web.templating import macro

router = APIRouter(include_in_schema=False)

EMPTY_REPORT_NOTE = "Waiting for the first burst: the page fills in as soon as it is diagnosed."


def mount(app: FastAPI) -> None:
    """Add the dashboard to ``app``: its pages, its static files and its cache of reports."""
    watches: Watches = app.state.watches
    app.state.bursts = BurstReports(watches.settings)
    app.include_router(shell.router)
    app.include_router(router)
    app.include_router(review.router)


# ----------------------------------------------------------------------------------------- jobs


@router.get("/", response_class=HTMLResponse)
def jobs_page(request: Request) -> HTMLResponse:
    """Every job, watched or stored: state, latest level, root cause, when last seen."""
    watches = watches_of(request)
    views = watches.jobs()
    running = any(v.state == "running" for v in views)
    return shell.page(
        "jobs.html",
        "Jobs",
        "jobs",
        attributes={"data-running": "yes" if running else "no"},
        views=views,
        examples=scenarios.shipped_examples(),
        errors=[public_message(e, watches.settings) for e in watches.stored.errors],
    )


# ------------------------------------------------------------------------------------------ job


@router.get("/job/{job}", response_class=HTMLResponse)
def job_page(job: str, request: Request) -> HTMLResponse:
    """One job: graph, root cause, series, checkpoints, heat map and latest report, live while
    it runs."""
    view = watches_of(request).job(job)
    if view is None:
        return shell.error_page(404, f"no job {job!r}; the Jobs page lists them")
    live = live_parts(view, request.app.state.bursts)
    return shell.page(
        "job.html",
        job,
        "job",
        plotly=True,
        attributes={"data-job": job, "data-state": view.state},
        job=job,
        live=live,
        running=view.state == "running",
        graph=PageFigure("graph", live["graph"], f"job graph of {job}", live["graph_down"]),
        series=PageFigure("series", live["series_figure"], "series of the chosen vertex"),
        heatmap=PageFigure("heatmap", live["heatmap"], "subtasks heat map"),
        checkpoint_figures=[
            PageFigure(name, figure, name) for name, figure in live["checkpoint_figures"].items()
        ],
        heat_shown=live["heatmap"]["layout"].get("meta", {}).get("shown", 0),
        levels=watches_of(request).settings.rules().levels,
        unconnected=bool(live["graph"]["layout"].get("meta", {}).get("unconnected")),
    )


@router.get("/job/{job}/live.json")
def job_live(job: str, request: Request) -> JSONResponse:
    """What the Job page redraws when a new report arrives (fragments and figures)."""
    view = watches_of(request).job(job)
    if view is None:
        return JSONResponse({"detail": f"no job {job!r}"}, status_code=404)
    parts = live_parts(view, request.app.state.bursts)
    return JSONResponse(parts, headers={"Cache-Control": "no-store"})


def live_parts(view: JobView, bursts: BurstReports) -> dict[str, Any]:
    """The Job page's changing parts: head, cause panel, table, figures, series of every vertex,
    the checkpoint panel and its figures (empty for a job without checkpoints)."""
    report = view.latest
    points = bursts.recent(view, SERIES_BURSTS)
    data = charts.series_data(points)
    chosen = _default_vertex(report)
    names = [v.name for v in figures.ordered(report)] if report else list(data["vertices"])
    empty = _waiting_figure()
    keys = data["keys"]
    drawn = [(name, dash, charts.COLOURS[k]) for k, name, _, dash in charts.PANELS if k in keys]
    runs = len(data["axis"]["shapes"]) > 0
    panel, drawn_checkpoints = checkpoints.parts(report, points)
    return {
        "state": view.state,
        "latest": _latest_key(view),
        "head": macro("job_parts.html", "head", view, EMPTY_REPORT_NOTE),
        "cause": (
            markup.cause_panel(report) + markup.findings(report, level=3)
            if report
            else macro("job_parts.html", "waiting", EMPTY_REPORT_NOTE)
        ),
        "table": markup.vertex_table_html(report) if report else "",
        "graph": graph.job_graph(report) if report else empty,
        "graph_down": graph.job_graph(report, "down") if report else empty,
        "heatmap": figures.heat_map(report) if report else empty,
        "series": data,
        "series_figure": charts.series_figure(data, chosen),
        "series_legend": macro("job_parts.html", "series_legend", drawn, runs),
        "vertex": chosen,
        "options": macro("job_parts.html", "options", names, chosen),
        "checkpoints": panel,
        "checkpoint_figures": drawn_checkpoints,
    }


def _waiting_figure() -> dict[str, Any]:
    """An empty figure saying it waits for the first burst (no axes, no grid)."""
    hidden = {"visible": False}
    note = {"text": "waiting for the first burst…", "showarrow": False, "x": 0.5, "y": 0.5}
    note |= {"xref": "paper", "yref": "paper", "font": {"size": 14}}
    layout = {"height": 160, "xaxis": hidden, "yaxis": hidden, "annotations": [note]}
    return {"data": [], "layout": layout | {"meta": {"kind": "empty"}}}


def _latest_key(view: JobView) -> str | None:
    last = view.recent_bursts[-1] if view.recent_bursts else None
    return None if last is None else f"{last.run_id}/{last.burst}"


def _default_vertex(report: Report | None) -> str | None:
    """The series first show the top root cause, else the most backpressured vertex."""
    if report is None or not report.vertices:
        return None
    if report.root_causes:
        return report.root_causes[0].vertex
    return max(report.vertices, key=lambda v: v.ratio or 0.0).name


# ------------------------------------------------------------------------------------------ run


@router.get("/run/{run_id}", response_class=HTMLResponse)
async def run_page(
    run_id: str, request: Request, burst: Annotated[int, Query(ge=0)] = 0
) -> HTMLResponse:
    """One stored report in full, as ``bpmon diagnose RUN --burst K`` shows it."""
    return await run_in_threadpool(_run_page, run_id, burst, watches_of(request))


def _run_page(run_id: str, burst: int, watches: Watches) -> HTMLResponse:
    path = find_run(run_id, watches.settings)
    if path is None:
        return shell.error_page(404, f"no run {run_id[:80]!r}; the History page lists the runs")
    try:
        report = facade.load_report(str(path), watches.settings, burst=burst)
    except BpmonError as exc:
        status = 404 if "has no burst" in str(exc) else 422
        return shell.error_page(status, public_message(str(exc), watches.settings))
    view = watches.job(report.job)
    bursts = sorted({b.burst for b in view.recent_bursts if b.run_id == run_id}) if view else []
    return shell.page(
        "run.html",
        f"Run {run_id}",
        "run",
        plotly=True,
        report=report,
        run_id=run_id,
        burst=burst,
        bursts=bursts,
        graph=PageFigure(
            "graph", graph.job_graph(report), "job graph", graph.job_graph(report, "down")
        ),
        levels=watches.settings.rules().levels,
        unconnected=topology.unconnected(report.vertices),
        panel=markup.cause_panel_of(report),
        table=markup.vertex_table_of(report),
    )
