"""Flink's backpressure endpoint, mirrored: tools written against Flink's REST API can read bpmon.

``GET /jobs/{job}/vertices/{vertex}/backpressure`` answers with the keys, types and meaning of
Flink 1.20's ``JobVertexBackPressureInfo`` (``JobVertexBackPressureHandler``):

- ``status``: ``ok``, or ``deprecated`` (alone) while there are no figures yet;
- ``backpressureLevel`` and its older spelling ``backpressure-level`` (both are sent, as Flink
  does since FLINK-29503): the vertex's level, from its highest subtask ratio;
- ``end-timestamp``: when the figures were taken, in milliseconds since the epoch (the end of
  the report's window; Flink sends its metric fetcher's last update);
- ``subtasks``, by index: ``subtask``, both level keys, ``ratio`` (backpressured share of the
  window), ``idleRatio`` and ``busyRatio``; a value the report does not have is 0.0, as Flink
  sends for a missing metric. ``attempt-number`` and ``other-concurrent-attempts`` are left out,
  as Flink leaves them out when a subtask has one attempt (bpmon never runs more).

Levels are Flink's strings (``ok``/``low``/``high``); bpmon's default thresholds are Flink's
(``ratio <= 0.10`` ok, ``<= 0.50`` low, else high). ``{job}`` is a job name (its latest report)
or a run id (that run's last burst); ``{vertex}`` is the vertex name, where Flink uses an id.
Errors follow Flink's shape: ``{"errors": ["..."]}`` with a 4xx status.
"""

from __future__ import annotations

import math
from typing import Any

from fastapi import APIRouter, Request
from fastapi.responses import JSONResponse

from bpmon.errors import BpmonError
from bpmon.model import Level, Report, SubtaskStatus, VertexStatus
from bpmon.watching import Watches
from bpmon.web.runs import CORRUPT_STATUS, find_run, last_burst

router = APIRouter(tags=["Flink-compatible"])

FLINK_LEVELS: dict[Level, str] = {"OK": "ok", "LOW": "low", "HIGH": "high"}


def backpressure_info(report: Report, vertex: VertexStatus) -> dict[str, Any]:
    """Flink's ``JobVertexBackPressureInfo`` of one vertex of ``report``."""
    subtasks = sorted(vertex.subtasks, key=lambda s: s.index)
    if not any(s.ratio is not None for s in subtasks):
        return {"status": "deprecated"}  # Flink's answer before any metric was fetched
    level = _flink_level(vertex.level or _worst(subtasks))
    return {
        "status": "ok",
        "backpressure-level": level,
        "backpressureLevel": level,
        "end-timestamp": int(report.window.end.timestamp() * 1000),
        "subtasks": [_subtask_info(s) for s in subtasks],
    }


def _subtask_info(subtask: SubtaskStatus) -> dict[str, Any]:
    level = _flink_level(subtask.level)
    return {
        "subtask": subtask.index,
        "backpressure-level": level,
        "backpressureLevel": level,
        "ratio": _double(subtask.ratio),
        "idleRatio": _double(subtask.metrics.idle_ratio),
        "busyRatio": _double(subtask.metrics.busy_ratio),
    }


def _worst(subtasks: list[SubtaskStatus]) -> Level | None:
    known = [s for s in subtasks if s.ratio is not None]
    return max(known, key=lambda s: s.ratio or 0.0).level if known else None


def _flink_level(level: Level | None) -> str:
    """Flink's string; a subtask without a level counts as ``ok`` (Flink reads it as 0)."""
    return FLINK_LEVELS[level] if level is not None else "ok"


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
            return _error(CORRUPT_STATUS, f"job {job!r}: {exc}")
    if report is None:
        return _error(404, f"Job {job!r} not found: no watched job, stored job or run so named.")
    for status in report.vertices:
        if status.name == vertex:
            return JSONResponse(backpressure_info(report, status))
    names = ", ".join(v.name for v in report.vertices)
    return _error(404, f"Vertex {vertex!r} not found in job {job!r}; its vertices: {names}.")
