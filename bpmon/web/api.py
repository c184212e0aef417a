"""bpmon's JSON API under ``/api/v1``: jobs (watched and stored), runs, and live events.

- ``GET /jobs``: every job with its state, latest level and root cause, and what Flink's
  autoscaler would do about it;
- ``POST /jobs`` (``{"scenario": "demo"}``) starts watching a shipped example, ``DELETE
  /jobs/{job}`` stops a watch;
- ``GET /jobs/{job}``: the latest report and the history of the job's bursts;
- ``GET /jobs/{job}/events``: server-sent events, one per new report, and how the watch ended
  (:mod:`bpmon.web.stream`);
- ``GET /runs``: the stored runs, newest first; ``GET /runs/{run_id}``: one stored report,
  byte for byte what ``bpmon diagnose RUN --format json`` prints.

Errors are ``{"detail": "<one line naming the problem>"}`` with a 4xx status: 404 for an unknown
job or run, 422 for a stored report that cannot be read (the file is left as it is).
"""

from __future__ import annotations

from typing import Annotated, Any
from urllib.parse import quote

from fastapi import APIRouter, HTTPException, Query, Request, Response
from fastapi.responses import JSONResponse, StreamingResponse
from pydantic import BaseModel, ConfigDict, Field
from starlette.concurrency import run_in_threadpool

from bpmon.model.errors import HistoryError
from bpmon.model.report_json import report_to_dict, report_to_json
from bpmon.model.values import worst_level
from bpmon.service import facade
from bpmon.service.scenarios import resolve_scenario, shipped_examples
from bpmon.service.stored import RECENT_BURSTS, BurstSummary, find_run, is_run_id
from bpmon.service.watching import JobView, Watches
from bpmon.web.autoscaler import autoscaler_summary
from bpmon.web.runs import (
    CORRUPT_STATUS,
    cause_to_dict,
    inside,
    no_job,
    public_message,
    run_to_dict,
    timestamp,
    watches_of,
)
from bpmon.web.schemas import JobDetail, JobList, JobSummary, Problem, RunList
from bpmon.web.stream import is_over, job_events

router = APIRouter(prefix="/api/v1", tags=["bpmon"])

NOT_A_JOB = "GET /api/v1/jobs lists the jobs"
NOT_A_RUN = "GET /api/v1/runs lists the runs"
PROBLEM: dict[str, Any] = {"model": Problem, "description": "One line naming the problem."}


class StartWatch(BaseModel):
    """What to watch: a shipped example scenario, a burst every ``every_s`` seconds."""

    model_config = ConfigDict(extra="forbid")

    scenario: str = Field(max_length=100, description="A shipped example (`bpmon examples`).")
    every_s: float | None = Field(
        default=None, gt=0, le=86400, description="Seconds between bursts (default: --every)."
    )


def _no_job(job: str, watches: Watches) -> str:
    return f"{no_job(job, watches)} ({NOT_A_JOB})"


def job_summary(view: JobView) -> dict[str, Any]:
    """One job in short: its state, the latest level and root cause, what Flink's autoscaler
    would do about it (:func:`~bpmon.web.autoscaler.autoscaler_summary`, None without an
    opinion), when it was last seen."""
    latest = view.latest
    causes = None if latest is None else latest.root_causes
    return {
        "job": view.job,
        "state": view.state,
        "watched": view.watched,
        "source": view.source,
        "run_id": view.run_id,
        "level": None if latest is None else worst_level(latest),
        "root_cause": cause_to_dict(causes[0]) if causes else None,
        "autoscaler": autoscaler_summary(latest),
        "diagnosed": causes is not None,
        "updated": None if latest is None else timestamp(latest.window.end),
        "error": view.error,
    }


def burst_to_dict(burst: BurstSummary) -> dict[str, Any]:
    """One burst of a job's history: when, each vertex's level, the main root cause."""
    causes = burst.root_causes
    return {
        "run_id": burst.run_id,
        "burst": burst.burst,
        "time": timestamp(burst.time),
        "levels": dict(burst.levels),
        "root_cause": cause_to_dict(causes[0]) if causes else None,
    }


@router.get(
    "/jobs", summary="Every job, watched or stored, with its latest level", response_model=JobList
)
def list_jobs(request: Request) -> JSONResponse:
    """Watched jobs (``running``, ``ended``, ``failed``) and jobs only in the runs directory
    (``stored``); ``errors`` names the stored runs that could not be read."""
    watches = watches_of(request)
    jobs = [job_summary(v) for v in watches.jobs()]
    errors = [public_message(e, watches.settings) for e in watches.stored.errors]
    return JSONResponse({"jobs": jobs, "errors": errors})


@router.post(
    "/jobs",
    status_code=201,
    summary="Start watching a shipped example scenario",
    response_model=JobSummary,
    responses={400: PROBLEM, 409: PROBLEM},
)
def start_job(body: StartWatch, request: Request) -> JSONResponse:
    """Run the example on bpmon's runtime and diagnose a burst every ``every_s`` seconds until
    stopped (409 when that job is watched already)."""
    examples = shipped_examples()
    if body.scenario not in examples:
        known = ", ".join(examples)
        raise HTTPException(400, f"scenario {body.scenario!r} is not a shipped example: {known}")
    watches = watches_of(request)
    job = watches.start_scenario(resolve_scenario(body.scenario), every_s=body.every_s)
    view = watches.job(job)
    assert view is not None  # just started
    headers = {"Location": f"/api/v1/jobs/{quote(job, safe='')}"}
    return JSONResponse(job_summary(view), status_code=201, headers=headers)


@router.get(
    "/jobs/{job}",
    summary="A job's latest report and the history of its bursts",
    response_model=JobDetail,
    responses={404: PROBLEM},
)
def get_job(
    job: str,
    request: Request,
    limit: Annotated[int, Query(ge=1, le=RECENT_BURSTS, description="Newest bursts shown.")] = 100,
) -> JSONResponse:
    """The job's summary, its latest report (``docs/report.md``) and its last ``limit`` bursts,
    oldest first."""
    watches = watches_of(request)
    view = watches.job(job)
    if view is None:
        raise HTTPException(404, _no_job(job, watches))
    doc = job_summary(view)
    doc["leaks"] = list(view.leaks)
    doc["latest"] = None if view.latest is None else report_to_dict(view.latest)
    doc["history"] = [burst_to_dict(b) for b in view.recent_bursts[-limit:]]
    return JSONResponse(doc)


@router.delete(
    "/jobs/{job}",
    summary="Stop watching a job",
    response_model=JobSummary,
    responses={404: PROBLEM},
)
def stop_job(job: str, request: Request) -> JSONResponse:
    """Stop the watch (a burst in progress is dropped; the reports saved stay); the job stays
    listed as ``ended``."""
    view = watches_of(request).stop(job)
    if view is None:
        raise HTTPException(404, f"job {job!r} is not watched by this server; {NOT_A_JOB}")
    return JSONResponse(job_summary(view))


@router.get(
    "/jobs/{job}/events",
    summary="Server-sent events: one per new report of the job",
    response_class=StreamingResponse,
    responses={
        204: {"description": "The job's last event was seen already: do not reconnect."},
        404: PROBLEM,
    },
)
async def stream_job(job: str, request: Request) -> Response:
    """``text/event-stream``: ``event: report`` with each new report, keep-alive comments in
    between, and ``event: state`` when the watch ends (or at once when it has ended, or when the
    job is only stored), then the stream ends. A reconnect that saw that last event gets 204."""
    watches = watches_of(request)
    view = await run_in_threadpool(watches.job, job)
    if view is None:
        raise HTTPException(404, await run_in_threadpool(_no_job, job, watches))
    if is_over(view, request.headers.get("last-event-id")):
        return Response(status_code=204)
    stream = job_events(watches, job, request.app.state.keepalive_s)
    headers = {"Cache-Control": "no-store", "X-Accel-Buffering": "no"}
    return StreamingResponse(stream, media_type="text/event-stream", headers=headers)


@router.get("/runs", summary="The stored runs, newest first", response_model=RunList)
def list_runs(request: Request, job: str | None = None) -> JSONResponse:
    """Every run in the runs directory (only those of ``job`` if given); ``errors`` names the
    runs whose report cannot be read, which are left as they are."""
    settings = watches_of(request).settings
    errors: list[str] = []
    runs = facade.stored_runs(settings, on_corrupt=lambda e: errors.append(str(e)))
    listed = [run_to_dict(r) for r in runs if inside(r, settings) and job in (None, r.job)]
    messages = [public_message(e, settings) for e in errors]
    return JSONResponse({"runs": listed, "errors": messages})


@router.get(
    "/runs/{run_id}",
    summary="One stored report, as `bpmon diagnose RUN --format json` prints it",
    response_class=Response,
    responses={
        200: {"content": {"application/json": {}}, "description": "The report (docs/report.md)."},
        400: PROBLEM,
        404: PROBLEM,
        CORRUPT_STATUS: PROBLEM,
    },
)
def get_run(
    run_id: str,
    request: Request,
    burst: Annotated[int, Query(ge=0, description="Which burst of the run (0 first).")] = 0,
) -> Response:
    """The report document of ``docs/report.md``, byte-identical to ``bpmon diagnose``'s."""
    settings = watches_of(request).settings
    if not is_run_id(run_id):
        raise HTTPException(
            400, f"{run_id[:80]!r} is not a run id (letters, digits, '.', '_', '-'); {NOT_A_RUN}"
        )
    path = find_run(run_id, settings)
    if path is None:
        raise HTTPException(404, f"no run {run_id!r}; {NOT_A_RUN}")
    try:
        report = facade.load_report(str(path), settings, burst=burst)
    except HistoryError as exc:
        raise HTTPException(CORRUPT_STATUS, public_message(str(exc), settings)) from None
    return Response(report_to_json(report) + "\n", media_type="application/json")
