"""A report's ``checkpoints`` as JSON (``docs/report.md``): written and read back.

Its key names follow ``docs/report.md``: ``{"mode", "interval_ms", "completed", "failed", "last":
{...}, "vertices": [...]}``; ``null`` as a whole when no checkpoint was observed. Durations are in
milliseconds with one decimal, sizes in bytes. Stdlib only: the model layer.
"""

from __future__ import annotations

from typing import Any, get_args

from bpmon.model.checkpoints import (
    CheckpointChange,
    CheckpointMode,
    CheckpointPhases,
    CheckpointReport,
    CheckpointStatus,
    LastCheckpoint,
)
from bpmon.model.json_fields import Fields

MODES: tuple[CheckpointMode, ...] = get_args(CheckpointMode)
STATUSES: tuple[CheckpointStatus, ...] = get_args(CheckpointStatus)
_MS_DIGITS = 1


def _ms(value: float | None) -> float | None:
    return None if value is None else round(value, _MS_DIGITS)


def checkpoints_to_dict(report: CheckpointReport) -> dict[str, Any]:
    """The report's ``checkpoints``, keys in the documented order."""
    return {
        "mode": report.mode,
        "interval_ms": _ms(report.interval_ms),
        "completed": report.completed,
        "failed": report.failed,
        "last": None if report.last is None else _last_to_dict(report.last),
        "vertices": [_phases_to_dict(v) for v in report.vertices],
    }


def _last_to_dict(last: LastCheckpoint) -> dict[str, Any]:
    return {
        "id": last.id,
        "status": last.status,
        "duration_ms": _ms(last.duration_ms),
        "start_delay_ms": _ms(last.start_delay_ms),
        "alignment_ms": _ms(last.alignment_ms),
        "sync_ms": _ms(last.sync_ms),
        "async_ms": _ms(last.async_ms),
        "state_bytes": last.state_bytes,
        "persisted_bytes": last.persisted_bytes,
        "barrier_wait_ms": _ms(last.barrier_wait_ms),
        "failure": last.failure,
    }


def _phases_to_dict(row: CheckpointPhases) -> dict[str, Any]:
    return {
        "name": row.name,
        "start_delay_ms": _ms(row.start_delay_ms),
        "alignment_ms": _ms(row.alignment_ms),
        "sync_ms": _ms(row.sync_ms),
        "async_ms": _ms(row.async_ms),
        "acknowledged": row.acknowledged,
        "parallelism": row.parallelism,
    }


def checkpoints_from(f: Fields) -> CheckpointReport:
    """A report's ``checkpoints`` read back (HistoryError names a bad field)."""
    last = f.doc.get("last")
    return CheckpointReport(
        mode=f.choice("mode", MODES),
        interval_ms=f.optional_number("interval_ms"),
        completed=f.get("completed", int),
        failed=f.get("failed", int),
        last=None if last is None else _last_from(f.child("last")),
        vertices=tuple(_phases_from(v) for v in f.children("vertices")),
    )


def _last_from(f: Fields) -> LastCheckpoint:
    return LastCheckpoint(
        id=f.get("id", int),
        status=f.choice("status", STATUSES),
        duration_ms=f.number("duration_ms"),
        start_delay_ms=f.optional_number("start_delay_ms"),
        alignment_ms=f.optional_number("alignment_ms"),
        sync_ms=f.optional_number("sync_ms"),
        async_ms=f.optional_number("async_ms"),
        state_bytes=f.get("state_bytes", int),
        persisted_bytes=f.get("persisted_bytes", int),
        barrier_wait_ms=f.optional_number("barrier_wait_ms"),
        failure=f.optional("failure", str),
    )


def _phases_from(f: Fields) -> CheckpointPhases:
    return CheckpointPhases(
        name=f.get("name", str),
        start_delay_ms=f.optional_number("start_delay_ms"),
        alignment_ms=f.optional_number("alignment_ms"),
        sync_ms=f.optional_number("sync_ms"),
        async_ms=f.optional_number("async_ms"),
        acknowledged=f.get("acknowledged", int),
        parallelism=f.get("parallelism", int),
    )


def checkpoint_change_to_dict(change: CheckpointChange) -> dict[str, Any]:
    """A what-if's ``checkpoints``: each figure as ``{"before", "after"}``."""

    def pair(values: tuple[Any, Any], ms: bool = False) -> dict[str, Any]:
        before, after = (_ms(v) if ms else v for v in values)
        return {"before": before, "after": after}

    return {
        "duration_ms": pair(change.duration_ms, ms=True),
        "start_delay_ms": pair(change.start_delay_ms, ms=True),
        "barrier_wait_ms": pair(change.barrier_wait_ms, ms=True),
        "status": pair(change.status),
        "completed": pair(change.completed),
        "failed": pair(change.failed),
    }
