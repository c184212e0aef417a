"""The dashboard's pages that look back: Compare two runs of a job, and the History of every job.

- **Compare** shows the last burst of two runs of one job side by side: what changed first (a
  bottleneck that moved, a capacity that dropped, a level that worsened; the reading is
  :func:`bpmon.service.comparison.compare`), then both graphs, then every
  vertex's level, ratio and capacity per subtask before and after.
- **History** is read from the stored runs directly: per job its worst level burst by burst and
  its runs. When ``bpmon analyze --format html --out RUNS_DIR/analysis`` has written the Spark
  analytics' HTML report, the page links to it (served from that folder only).

Both are ``templates/compare.html`` and ``templates/history.html``, rendered with the values made
here (:class:`ComparePickers`, :class:`CompareSide`, :class:`HistoryCard`).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

from fastapi import APIRouter, Request
from fastapi.responses import HTMLResponse
from starlette.concurrency import run_in_threadpool

from bpmon.model.errors import BpmonError
from bpmon.model.values import Report, RunInfo
from bpmon.service import facade
from bpmon.service.comparison import CAPACITY_DROP, Comparison, compare
from bpmon.service.watching import Watches
from bpmon.service.whatif import tried_on
from bpmon.web import charts, graph, shell
from bpmon.web.markup import CausePanel, PageFigure, cause_panel_of
from bpmon.web.runs import inside, public_message, watches_of

router = APIRouter(include_in_schema=False)

ANALYSIS_DIR = "analysis"
"""Where, inside the runs directory, the History page looks for the analytics' HTML reports."""
ANALYSIS_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,120}\.html")
RUNS_SHOWN = 20
"""Runs listed per job on the History page (the newest)."""


def _runs(watches: Watches) -> tuple[list[RunInfo], list[str]]:
    errors: list[str] = []
    runs = facade.stored_runs(watches.settings, on_corrupt=lambda e: errors.append(str(e)))
    runs = [r for r in runs if inside(r, watches.settings)]
    return runs, [public_message(e, watches.settings) for e in errors]


def _last_burst(run: RunInfo, watches: Watches) -> Report:
    return facade.load_report(str(run.path), watches.settings, burst=max(run.bursts - 1, 0))


# -------------------------------------------------------------------------------------- compare


@router.get("/compare", response_class=HTMLResponse)
async def compare_page(
    request: Request, job: str | None = None, before: str | None = None, after: str | None = None
) -> HTMLResponse:
    """Two runs of one job side by side (by default the job's two newest runs)."""
    return await run_in_threadpool(_compare_page, watches_of(request), job, before, after)


def _compare_page(
    watches: Watches, job: str | None, before: str | None, after: str | None
) -> HTMLResponse:
    runs, _ = _runs(watches)
    by_id = {r.run_id: r for r in runs}
    picked = [by_id[r] for r in (after, before) if r is not None and r in by_id]
    if job is None:
        job = picked[0].job if picked else _busiest(runs)
    own = [r for r in runs if job is not None and tried_on(r.job, job)]  # with its what-ifs
    new = by_id.get(after or "") if after in {r.run_id for r in own} else None
    new = new or (own[0] if own else None)
    old = by_id.get(before or "") if before in {r.run_id for r in own} else None
    if old is None and new is not None:
        old = next((r for r in own if r.start < new.start), None)
    pickers = ComparePickers(sorted({r.job for r in runs}), job, own, old, new)
    if old is None or new is None or old.run_id == new.run_id:
        note = "Pick two different runs of one job."
        if len(own) < 2:
            note = (
                f"Job {job!r} has fewer than two stored runs: run it again (or `bpmon whatif`) "
                "to compare."
                if job
                else "No stored runs yet."
            )
        return shell.page(
            "compare.html", "Compare", "compare", result=None, note=note, sides=[], pickers=pickers
        )
    try:
        rules = watches.settings.rules()  # the capacity and the drop the report and analyze use
        result = compare(
            _last_burst(old, watches),
            _last_burst(new, watches),
            rules.history.capacity_drop,
            rules.capacity.min_busy,
        )
    except BpmonError as exc:
        return shell.error_page(422, public_message(str(exc), watches.settings))
    sides = [_side("Before", old, result.before), _side("After", new, result.after)]
    return shell.page(
        "compare.html",
        "Compare",
        "compare",
        plotly=True,
        result=result,
        note=_unchanged(result),
        sides=sides,
        drop=CAPACITY_DROP,
        min_busy=rules.capacity.min_busy,
        pickers=pickers,
    )


@dataclass(frozen=True, slots=True)
class ComparePickers:
    """The Compare page's form: every job, the one shown, its runs (with its what-ifs), the two
    picked (None: none to pick)."""

    jobs: list[str]
    job: str | None
    choices: list[RunInfo]
    old: RunInfo | None
    new: RunInfo | None


@dataclass(frozen=True, slots=True)
class CompareSide:
    """One run on the Compare page: its label, the run, its graph, its causes, its last burst."""

    label: str
    run: RunInfo
    figure: PageFigure
    panel: CausePanel
    burst: int


def _side(label: str, run: RunInfo, report: Report) -> CompareSide:
    figure = PageFigure(
        f"graph-{label.lower()}", graph.job_graph(report), label, graph.job_graph(report, "down")
    )
    return CompareSide(label, run, figure, cause_panel_of(report), max(run.bursts - 1, 0))


def _busiest(runs: list[RunInfo]) -> str | None:
    """The job of the newest run among jobs with two runs or more (else of the newest run)."""
    counts: dict[str, int] = {}
    for r in runs:
        counts[r.job] = counts.get(r.job, 0) + 1
    return next((r.job for r in runs if counts[r.job] > 1), runs[0].job if runs else None)


def _unchanged(result: Comparison) -> str:
    causes = result.after.root_causes
    where = (
        f"the root cause is still {causes[0].kind} at {causes[0].vertex}"
        if causes
        else "neither run names a root cause"
    )
    return f"Nothing changed: {where}, every vertex keeps its level, no capacity dropped."


# -------------------------------------------------------------------------------------- history


@router.get("/history", response_class=HTMLResponse)
async def history_page(request: Request) -> HTMLResponse:
    """Every job's level burst by burst and its runs; a link to the analytics' report if any."""
    return await run_in_threadpool(_history_page, watches_of(request))


@dataclass(frozen=True, slots=True)
class HistoryCard:
    """One job on the History page: its name, its bursts, its level trend, its stored runs."""

    job: str
    bursts: int
    trend: PageFigure
    runs: list[RunInfo]


def _history_page(watches: Watches) -> HTMLResponse:
    runs, errors = _runs(watches)
    jobs = [
        HistoryCard(
            view.job,
            len(view.recent_bursts),
            PageFigure(
                f"trend-{n}",
                charts.level_trend(view.job, view.recent_bursts),
                f"level trend of {view.job}",
            ),
            [r for r in runs if r.job == view.job],
        )
        for n, view in enumerate(v for v in watches.jobs() if v.recent_bursts)
    ]
    runs_dir = watches.settings.runs_dir
    return shell.page(
        "history.html",
        "History",
        "history",
        plotly=bool(jobs),
        jobs=jobs,
        runs_shown=RUNS_SHOWN,
        analyses=[p.name for p in analysis_reports(runs_dir)],
        analysis_dir=str(runs_dir / ANALYSIS_DIR),
        errors=errors,
    )


def analysis_reports(runs_dir: Path) -> list[Path]:
    """The analytics' HTML reports in ``RUNS_DIR/analysis``, newest first."""
    folder = runs_dir / ANALYSIS_DIR
    try:
        found = [p for p in folder.iterdir() if ANALYSIS_NAME.fullmatch(p.name) and p.is_file()]
    except OSError:
        return []
    return sorted(found, key=lambda p: p.stat().st_mtime, reverse=True)


@router.get("/history/analysis/{name}", response_class=HTMLResponse)
def analysis_report(name: str, request: Request) -> HTMLResponse:
    """One HTML report of the analytics, from ``RUNS_DIR/analysis`` and nowhere else."""
    folder = (watches_of(request).settings.runs_dir / ANALYSIS_DIR).resolve()
    path = (folder / name).resolve() if ANALYSIS_NAME.fullmatch(name) else None
    if path is None or path.parent != folder or not path.is_file():
        return shell.error_page(404, f"no analytics report {name[:80]!r}")
    return HTMLResponse(path.read_text(encoding="utf-8", errors="replace"))
