"""Flink's backpressure endpoint, mirrored: tools written against Flink's REST API can read bpmon.

``GET /jobs/{job}/vertices/{vertex}/backpressure`` answers with the keys, types and meaning of
Flink 1.20's ``JobVertexBackPressureInfo`` (``JobVertexBackPressureHandler``):

- ``status``: ``ok``, or ``deprecated`` (alone) while there are no figures yet;
- ``backpressureLevel`` and its older spelling ``backpressure-level`` (both are sent, as Flink
  does since FLINK-29503): the level of the vertex's highest subtask ratio;
- ``end-timestamp``: when the figures were taken, in milliseconds since the epoch (the end of
  the report's window; Flink sends its metric fetcher's last update);
- ``subtasks``, by index: ``subtask``, both level keys, ``ratio``, ``idleRatio`` and
  ``busyRatio``. As in Flink, ``ratio`` is the backpressured share of time
  (``backPressuredTimeMsPerSecond / 1000``); a target without time accounting (py-spy) gives
  its sampled share instead. A value the report does not have is 0.0, as Flink sends for a
  missing metric. ``attempt-number`` and ``other-concurrent-attempts`` are left out, as Flink
  leaves them out when a subtask has one attempt (bpmon never runs more).

Levels are Flink's, from the ratio sent beside them: ``ok`` up to 0.10, ``low`` up to 0.50,
``high`` above, whatever ``[levels]`` bpmon's own report uses. ``{job}`` is a job name (its
latest report) or a run id (that run's last burst); ``{vertex}`` is the vertex name, where Flink
uses an id. Errors follow Flink's shape: ``{"errors": ["..."]}`` with a 4xx status.
"""

from __future__ import annotations

import math
from typing import Any

from fastapi import APIRouter, Request
from fastapi.responses import JSONResponse

from bpmon.model.errors import BpmonError
from bpmon.model.values import Report, SubtaskStatus, VertexStatus, level_by_flink
from bpmon.service.stored import find_run
from bpmon.service.watching import Watches
from bpmon.web.runs import CORRUPT_STATUS, last_burst, no_job, public_message

router = APIRouter(tags=["Flink-compatible"])


def backpressure_info(report: Report, vertex: VertexStatus) -> dict[str, Any]:
    """Flink's ``JobVertexBackPressureInfo`` of one vertex of ``report``."""
    subtasks = sorted(vertex.subtasks, key=lambda s: s.index)
    ratios = [_ratio(s) for s in subtasks]
    if all(r is None for r in ratios):
        return {"status": "deprecated"}  # Flink's answer before any metric was fetched
    level = level_by_flink(max(_double(r) for r in ratios)).lower()
    return {
        "status": "ok",
        "backpressure-level": level,
        "backpressureLevel": level,
        "end-timestamp": int(report.window.end.timestamp() * 1000),
        "subtasks": [_subtask_info(s, _double(r)) for s, r in zip(subtasks, ratios, strict=True)],
    }


def _ratio(subtask: SubtaskStatus) -> float | None:
    """The backpressured share of time, else the sampled share (a py-spy target)."""
    timed = subtask.metrics.backpressured_time_ratio
    return timed if timed is not None and math.isfinite(timed) else subtask.ratio


def _subtask_info(subtask: SubtaskStatus, ratio: float) -> dict[str, Any]:
    level = level_by_flink(ratio).lower()
    return {
        "subtask": subtask.index,
        "backpressure-level": level,
        "backpressureLevel": level,
        "ratio": ratio,
        "idleRatio": _double(subtask.metrics.idle_ratio),
        "busyRatio": _double(subtask.metrics.busy_ratio),
    }


def _double(value: float | None) -> float:
    """A Java double as Flink writes it for these fields: 0.0 when missing."""
    return float(value) if value is not None and math.isfinite(value) else 0.0


def _error(status: int, message: str) -> JSONResponse:
    return JSONResponse({"errors": [message]}, status_code=status)


@router.get(
    "/jobs/{job}/vertices/{vertex}/backpressure",
    summary="Backpressure of a vertex, as Flink 1.20's REST API gives it",
    response_description="Flink's JobVertexBackPressureInfo",
)
def vertex_backpressure(job: str, vertex: str, request: Request) -> JSONResponse:
    """Flink's ``/jobs/:jobid/vertices/:vertexid/backpressure``: ``job`` is a job name or run id,
    ``vertex`` a vertex name; the figures are those of the job's latest report."""
    watches: Watches = request.app.state.watches
    view = watches.job(job)
    report = view.latest if view is not None else None
    if report is None:
        try:
            run = find_run(job, watches.settings)
            report = last_burst(run, watches.settings) if run is not None else None
        except BpmonError as exc:
            return _error(
                CORRUPT_STATUS, f"job {job!r}: {public_message(str(exc), watches.settings)}"
            )
    if report is None:
        return _error(404, f"Job not found: {no_job(job, watches)}; or a run id.")
    for status in report.vertices:
        if status.name == vertex:
            return JSONResponse(backpressure_info(report, status))
    names = ", ".join(v.name for v in report.vertices)
    return _error(404, f"Vertex {vertex!r} not found in job {job!r}; its vertices: {names}.")
