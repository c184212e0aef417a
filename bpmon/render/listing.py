"""The listings of the CLI: the stored runs, the bursts of one run, the shipped examples.

Each as a terminal table fitted to the console (:mod:`bpmon.render.fit`) and as JSON for
``--json`` (a list of objects whose field names are documented in docs/history.md and README.md
and kept stable: fields are only ever added).
A surface: it imports rich.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from datetime import datetime
from typing import Any

from rich.table import Table
from rich.text import Text

from bpmon.model.clock import format_timestamp
from bpmon.model.report_json import root_cause_to_dict
from bpmon.model.values import Report, RootCause, RunInfo, worst_level
from bpmon.render.fit import Col, fit_table
from bpmon.render.report import level_text, top_cause
from bpmon.service.scenarios import ShippedExample

RUN_COLUMNS = (
    Col("run", wrap=False),
    Col("source", drop=1),
    Col("bursts", "right", wrap=False),
    Col("worst", wrap=False),
    Col("root cause (first burst)"),
)
BURST_COLUMNS = (
    Col("burst", "right", wrap=False),
    Col("window start", wrap=False),
    Col("seconds", "right", wrap=False, drop=2),
    Col("samples", "right", wrap=False, drop=1),
    Col("worst", wrap=False),
    Col("root cause"),
)


def runs_table(runs: Sequence[RunInfo], width: int) -> Table:
    """``bpmon history``: one row per stored run, newest first, fitted to ``width``."""
    rows: list[list[str | Text]] = [
        [
            run.run_id,
            run.source,
            str(run.bursts),
            level_text(run.worst_level),
            top_cause(run.root_causes),
        ]
        for run in runs
    ]
    return fit_table(RUN_COLUMNS, rows, width)[0]


def bursts_table(bursts: Sequence[tuple[int, Report]], width: int) -> Table:
    """``bpmon history RUN``: one row per burst of the run (``bpmon diagnose RUN --burst K``)."""
    rows: list[list[str | Text]] = [
        [
            str(number),
            format_timestamp(report.window.start),
            f"{report.window.seconds:.2f}",
            str(report.window.samples),
            level_text(worst_level(report)),
            top_cause(report.root_causes),
        ]
        for number, report in bursts
    ]
    return fit_table(BURST_COLUMNS, rows, width)[0]


def run_started(run: RunInfo) -> datetime:
    """When the run started: the moment its id begins with (``20261126T095259Z-...``, taken as
    the job started), else its first window's start (an id written by hand)."""
    try:
        return datetime.strptime(run.run_id[:16], "%Y%m%dT%H%M%SZ").replace(tzinfo=run.start.tzinfo)
    except ValueError:
        return run.start


def _causes(causes: Sequence[RootCause] | None) -> list[dict[str, Any]] | None:
    return None if causes is None else [root_cause_to_dict(c) for c in causes]


def runs_json(runs: Sequence[RunInfo]) -> str:
    """``bpmon history --json``: one object per stored run, newest first."""
    return json.dumps(
        [
            {
                "run_id": run.run_id,
                "job": run.job,
                "source": run.source,
                "started": format_timestamp(run_started(run)),
                "window_start": format_timestamp(run.start),
                "bursts": run.bursts,
                "worst_level": run.worst_level,
                "root_causes": _causes(run.root_causes),
            }
            for run in runs
        ],
        indent=2,
    )


def bursts_json(bursts: Sequence[tuple[int, Report]]) -> str:
    """``bpmon history RUN --json``: one object per burst of the run."""
    return json.dumps(
        [
            {
                "run_id": report.run_id,
                "burst": number,
                "window_start": format_timestamp(report.window.start),
                "seconds": round(report.window.seconds, 3),
                "samples": report.window.samples,
                "worst_level": worst_level(report),
                "root_causes": _causes(report.root_causes),
            }
            for number, report in bursts
        ],
        indent=2,
    )


EXAMPLE_COLUMNS = (Col("example", wrap=False), Col("job"), Col("what it shows"))


def examples_table(examples: Sequence[ShippedExample], width: int) -> Table:
    """``bpmon examples``: each example with its job's name and what it shows."""
    rows: list[list[str | Text]] = [[e.name, e.job, e.shows] for e in examples]
    return fit_table(EXAMPLE_COLUMNS, rows, width)[0]


def examples_json(examples: Sequence[ShippedExample]) -> str:
    """``bpmon examples --json``: ``[{"name", "job", "shows"}]``."""
    return json.dumps(
        [{"name": e.name, "job": e.job, "shows": e.shows} for e in examples], indent=2
    )
