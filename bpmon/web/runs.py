"""Stored runs as the web shows them: their last burst, messages without server paths, and
runs and causes as JSON.

A run id from a request reaches its folder through :func:`bpmon.service.stored.find_run` and
nothing else: held to the form of a run id, then resolved inside the runs directory.
"""

from __future__ import annotations

from datetime import datetime
from pathlib import Path
from typing import Any

from starlette.requests import Request

from bpmon.model.clock import format_timestamp
from bpmon.model.values import Report, RootCause, RunInfo
from bpmon.service import facade
from bpmon.service.scenarios import resolve_scenario, shipped_examples
from bpmon.service.watching import Watches

CORRUPT_STATUS = 422
"""The HTTP status of a stored report that cannot be read (the file is left untouched)."""


def last_burst(run: Path, settings: facade.Settings) -> Report:
    """The report of the last burst of the run in folder ``run`` (HistoryError if unreadable)."""
    bursts = facade.run_bursts(str(run), settings)
    return bursts[-1][1]


def inside(run: RunInfo, settings: facade.Settings) -> bool:
    """True when a listed run's folder (links followed) lies directly in the runs directory."""
    return run.path.resolve().parent == settings.runs_dir.resolve()


RUNS_DIR_SHOWN = "<runs-dir>/"
"""What stands for a runs directory given as an absolute path, which stays on the server."""


def public_message(message: str, settings: facade.Settings) -> str:
    """An error line without the server's own absolute paths: a path in the runs directory
    reads as the runs directory was given when that was relative (``bpmon-runs/RUN/...``, a
    path that exists from where the server started), else as ``<runs-dir>/RUN/...``."""
    given = settings.runs_dir
    shown = RUNS_DIR_SHOWN if given.is_absolute() else given.as_posix().rstrip("/") + "/"
    for root in sorted({str(given.resolve()), str(given.absolute())}, key=len, reverse=True):
        message = message.replace(root.rstrip("/") + "/", shown)
    return message


def unknown_job(job: str, known: list[str], examples: dict[str, str]) -> str:
    """A 404's line for job ``job``: the jobs there are, and the job's name when ``job`` is the
    name of a shipped example whose job is named otherwise (``hot-key`` runs ``hot-customer``)."""
    hint = ""
    if job in examples and examples[job] != job:
        hint = f"; the example {job!r} runs as job {examples[job]!r}"
    listed = ", ".join(known[:20]) + (f" and {len(known) - 20} more" if len(known) > 20 else "")
    return f"no job {job!r}{hint}; known jobs: {listed or 'none yet'}"


def watches_of(request: Request) -> Watches:
    """The server's watch registry (``app.state.watches``), for a route."""
    watches: Watches = request.app.state.watches
    return watches


def no_job(job: str, watches: Watches) -> str:
    """:func:`unknown_job` for the jobs ``watches`` knows and the shipped examples."""
    examples = {name: resolve_scenario(name).name for name in shipped_examples()}
    return unknown_job(job, [v.job for v in watches.jobs()], examples)


def timestamp(moment: datetime | None) -> str | None:
    """A time as the report writes it (``2026-11-22T10:15:02.000Z``), None for None."""
    return None if moment is None else format_timestamp(moment)


def run_to_dict(run: RunInfo) -> dict[str, Any]:
    """One stored run as ``/api/v1/runs`` lists it."""
    causes = run.root_causes
    return {
        "run_id": run.run_id,
        "job": run.job,
        "source": run.source,
        "start": timestamp(run.start),
        "end": timestamp(run.end),
        "bursts": run.bursts,
        "worst_level": run.worst_level,
        "root_cause": None if not causes else cause_to_dict(causes[0]),
        "diagnosed": causes is not None,
    }


def cause_to_dict(cause: RootCause) -> dict[str, Any]:
    """A root cause in short: where, what kind, how sure, which subtasks."""
    return {
        "vertex": cause.vertex,
        "kind": cause.kind,
        "confidence": round(cause.confidence, 3),
        "subtasks": list(cause.subtasks),
    }
