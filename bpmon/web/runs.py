"""Stored runs named in a URL: a run id reaches its folder in the runs directory and nothing else.

A run id from a request is first held to the pattern run ids are made with (letters, digits,
``.``, ``_`` and ``-``, starting with a letter or digit: no separator, no ``..``), then its path
is resolved (symbolic links followed) and must be a folder directly inside the runs directory.
Only that resolved path is handed to the service, never the text of the request.
"""

from __future__ import annotations

import re
from datetime import datetime
from pathlib import Path
from typing import Any

from bpmon import service
from bpmon.model import Report, RootCause, RunInfo
from bpmon.report_json import format_timestamp

RUN_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,199}")
"""What a run id looks like (``bpmon.history.runs`` makes them); anything else is refused."""
CORRUPT_STATUS = 422
"""The HTTP status of a stored report that cannot be read (the file is left untouched)."""


def find_run(run_id: str, settings: service.Settings) -> Path | None:
    """The folder of run ``run_id`` inside the runs directory; None when there is none.

    None as well for any text that is not a run id, or whose folder (links followed) is not
    directly inside the runs directory.
    """
    if not RUN_ID.fullmatch(run_id):
        return None
    root = settings.runs_dir.resolve()
    path = (root / run_id).resolve()
    return path if path.parent == root and path.is_dir() else None


def last_burst(run: Path, settings: service.Settings) -> Report:
    """The report of the last burst of the run in folder ``run`` (HistoryError if unreadable)."""
    bursts = service.run_bursts(str(run), settings)
    return bursts[-1][1]


def inside(run: RunInfo, settings: service.Settings) -> bool:
    """True when a listed run's folder (links followed) lies directly in the runs directory."""
    return run.path.resolve().parent == settings.runs_dir.resolve()


def public_message(message: str, settings: service.Settings) -> str:
    """An error line without the server's own path to the runs directory."""
    for root in {str(settings.runs_dir.resolve()), str(settings.runs_dir)}:
        message = message.replace(root.rstrip("/") + "/", "")
    return message


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
