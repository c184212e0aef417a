"""A report's checkpoints for people: a summary line and a table of phases per vertex, and how
the checkpoints of two runs compare (``bpmon whatif``).

The table shows each vertex's slowest subtask (``docs/report.md``): its start delay, alignment,
sync and async phases and how many of its subtasks acknowledged; it fits the console's width as
the vertex table does (:mod:`bpmon.render.fit`).
"""

from __future__ import annotations

from rich.table import Table
from rich.text import Text

from bpmon.model import numbers
from bpmon.model.checkpoints import CheckpointReport, LastCheckpoint, checkpoint_change
from bpmon.model.numbers import NULL, counted, milliseconds
from bpmon.model.values import Report
from bpmon.render.fit import Col, fit_table

PHASE_COLUMNS = (
    Col("vertex"),
    Col("start\ndelay", "right", wrap=False),
    Col("align-\nment", "right", wrap=False),
    Col("sync", "right", wrap=False, drop=2),
    Col("async", "right", wrap=False),
    Col("acked", "right", wrap=False, drop=1),
)
"""The phases table in the terminal; what leaves first when it is too narrow is highest."""
PHASE_HEADERS = ("vertex", "start delay", "alignment", "sync", "async", "acked")


def checkpoint_line(checkpoints: CheckpointReport) -> str:
    """``checkpoint 5 failed after 4,001 ms (...); 2 completed, 3 failed; aligned, every
    1,000 ms``: the newest checkpoint, the counts and the mode."""
    every = (
        f", every {milliseconds(checkpoints.interval_ms)}"
        if checkpoints.interval_ms is not None
        else ""
    )
    counts = f"{checkpoints.completed:,} completed, {checkpoints.failed:,} failed"
    last = checkpoints.last
    if last is None:
        return f"no checkpoint has ended yet; {counts}; {checkpoints.mode}{every}"
    return f"{_newest(last)}; {counts}; {checkpoints.mode}{every}"


def _newest(last: LastCheckpoint) -> str:
    if last.status == "failed":
        why = f" ({last.failure})" if last.failure else ""
        head = f"checkpoint {last.id} failed after {milliseconds(last.duration_ms)}{why}"
    else:
        head = f"checkpoint {last.id} took {milliseconds(last.duration_ms)}"
    share = last.waiting_share
    if share is None:
        return head
    return f"{head}, {numbers.percent(share)} of it waiting for barriers"


def phase_rows(checkpoints: CheckpointReport) -> list[list[str]]:
    """One row per vertex of the newest checkpoint: its slowest subtask's phases."""
    return [
        [
            row.name,
            milliseconds(row.start_delay_ms),
            milliseconds(row.alignment_ms),
            milliseconds(row.sync_ms),
            milliseconds(row.async_ms),
            f"{row.acknowledged}/{row.parallelism}",
        ]
        for row in checkpoints.vertices
    ]


def phase_table(checkpoints: CheckpointReport, width: int) -> Table:
    """The phases table fitted to ``width``."""
    rows: list[list[str | Text]] = [list(r) for r in phase_rows(checkpoints)]
    return fit_table(PHASE_COLUMNS, rows, width)[0]


def comparison_lines(before: Report, after: Report) -> list[str]:
    """A line each for the newest checkpoint's duration, longest start delay and the failed
    checkpoints, before → after; none when neither run took a checkpoint."""
    change = checkpoint_change(before.checkpoints, after.checkpoints)
    if change is None:
        return []

    def duration(i: int) -> str:
        failed = " (failed)" if change.status[i] == "failed" else ""
        return milliseconds(change.duration_ms[i]) + failed

    def failures(i: int) -> str:
        failed, completed = change.failed[i], change.completed[i]
        if failed is None or completed is None:
            return NULL
        return f"{failed:,} of {counted(failed + completed, 'checkpoint')}"

    start = change.start_delay_ms
    return [
        f"checkpoint duration   {duration(0)} → {duration(1)}",
        f"longest start delay   {milliseconds(start[0])} → {milliseconds(start[1])}",
        f"failed checkpoints    {failures(0)} → {failures(1)}",
        _held(before, after),
    ]


def _held(before: Report, after: Report) -> str:
    def at(report: Report) -> str | None:
        held = [f.vertex for f in report.findings if f.kind == "checkpoint-backpressure"]
        return held[0] if held else None

    was, now = at(before), at(after)
    shown = ("yes, by " + was) if was else "no"
    return f"held by backpressure  {shown} → {('yes, by ' + now) if now else 'no'}"
