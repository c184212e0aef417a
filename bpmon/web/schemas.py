"""The shapes of the JSON API's answers, as pydantic models: FastAPI's ``response_model`` of each
route, so ``/docs`` and ``/openapi.json`` show every field.

The routes build their answers as plain dicts and return them as they are (a ``JSONResponse``
is not validated again on the way out: one report is hundreds of fields, and a scrape-rate API
should not pay for checking its own output). What keeps these models true is
``tests/web/test_api.py``: every answer a real server gives is validated against its model, and
the models forbid fields they do not name, so a field added to a route and not here fails
there. The report itself (``latest``) is the document of ``docs/report.md``, described there.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from bpmon.model.values import Level, Source


class _Shape(BaseModel):
    model_config = ConfigDict(extra="forbid")


class CauseSummary(_Shape):
    """A root cause in short."""

    vertex: str
    kind: str = Field(description="One of the root-cause kinds of docs/report.md.")
    confidence: float = Field(ge=0, le=1)
    subtasks: list[int]


class AutoscalerOpinion(_Shape):
    """What Flink's autoscaler would decide for one vertex, against bpmon."""

    vertex: str
    verdict: str = Field(description="agrees, scales-ineffectively, misses... (docs/report.md).")
    parallelism: int | None
    recommended_parallelism: int | None
    detail: str


class AutoscalerSummary(_Shape):
    """The autoscaler's opinion of the job's latest window, in short."""

    acts: bool = Field(description="It would rescale some vertex.")
    root_cause: AutoscalerOpinion | None = Field(
        description="Its verdict at the top root cause's vertex."
    )
    disagreements: list[AutoscalerOpinion]


class JobSummary(_Shape):
    """One job: its state, latest level and root cause."""

    job: str
    state: Literal["running", "ended", "failed", "stored"]
    watched: bool
    source: Source | None
    run_id: str | None
    level: Level | None
    root_cause: CauseSummary | None
    autoscaler: AutoscalerSummary | None
    diagnosed: bool = Field(description="The latest report was diagnosed (has root_causes).")
    updated: str | None = Field(description="The end of the latest report's window (ISO 8601).")
    error: str | None


class JobList(_Shape):
    """``GET /api/v1/jobs``."""

    jobs: list[JobSummary]
    errors: list[str] = Field(description="Stored runs that could not be read, one line each.")


class Burst(_Shape):
    """One burst of a job's history."""

    run_id: str
    burst: int
    time: str
    levels: dict[str, Level] = Field(description="Each vertex's level.")
    root_cause: CauseSummary | None


class JobDetail(JobSummary):
    """``GET /api/v1/jobs/{job}``."""

    leaks: list[str] = Field(description="What did not end cleanly when the watch stopped.")
    latest: dict[str, Any] | None = Field(
        description="The latest report: the document of docs/report.md."
    )
    history: list[Burst] = Field(description="The newest bursts, oldest first.")


class RunSummary(_Shape):
    """One stored run."""

    run_id: str
    job: str
    source: Source
    start: str
    end: str
    bursts: int
    worst_level: Level | None
    root_cause: CauseSummary | None
    diagnosed: bool


class RunList(_Shape):
    """``GET /api/v1/runs``."""

    runs: list[RunSummary]
    errors: list[str] = Field(description="Runs whose report cannot be read, one line each.")


class Health(_Shape):
    """``GET /healthz``: the names only for a caller with the token (or a server without one)."""

    status: Literal["ok", "stuck"]
    version: str
    watches: int
    stuck: int
    watching: list[str] | None = None
    stuck_watches: list[str] | None = Field(
        default=None, description='Each stuck watch with why ("job: no sign of life for 61 s").'
    )


class Problem(_Shape):
    """An error: one line naming the problem (and, where it helps, the fix)."""

    detail: str
