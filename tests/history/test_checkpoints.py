"""Checkpoints in the history: each window's row carries its report's checkpoints, and ``bpmon
analyze`` gives each job's checkpoint durations, failures and barrier wait run by run.

The stored columns are checked against the reports' own fields, on real runs of the shipped
``checkpoint-timeouts`` and ``healthy`` examples (``checkpointed_runs``: as appended by the run, and
as ``bpmon history import`` rebuilds them from the report.json files) and on hand-made reports. The
trend is checked against figures this module computes from the stored reports themselves (each
checkpoint once by id, nearest-rank percentiles, the counts' growth from the first window to the
last), on the real runs and on hand-made runs of two jobs whose planted slowdowns are, or are not,
regressions.
"""

from __future__ import annotations

import json
import math
import shutil
import statistics
from collections import defaultdict
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from datetime import timedelta
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq
import pytest
from typer.testing import CliRunner

from bpmon.cli.commands import app
from bpmon.history.runs import RunStore
from bpmon.history.schema import CHECKPOINT_COLUMNS
from bpmon.history.store import HistoryStore
from bpmon.model.analysis import Analysis, RunCheckpoints, analysis_to_json
from bpmon.model.checkpoints import CheckpointPhases, CheckpointStatus
from bpmon.model.values import Report
from bpmon.render.analysis import render_analysis_markdown, render_analysis_text
from bpmon.service.facade import Settings
from bpmon.service.history import analyze_history, write_analysis_tables
from tests.history.conftest import CheckpointedRuns
from tests.history.reports import T0, checkpoints, window_report, with_checkpoints

LAST = {
    "checkpoint_id": "id",
    "checkpoint_status": "status",
    "checkpoint_duration_ms": "duration_ms",
    "checkpoint_start_delay_ms": "start_delay_ms",
    "checkpoint_alignment_ms": "alignment_ms",
    "checkpoint_sync_ms": "sync_ms",
    "checkpoint_async_ms": "async_ms",
    "checkpoint_barrier_wait_ms": "barrier_wait_ms",
    "checkpoint_state_bytes": "state_bytes",
    "checkpoint_persisted_bytes": "persisted_bytes",
}
"""The window's columns of the newest checkpoint, and the report field each holds."""
COUNTS = {"checkpoints_completed": "completed", "checkpoints_failed": "failed"}
PHASES = {
    "checkpoint_vertex_start_delay_ms": "start_delay_ms",
    "checkpoint_vertex_alignment_ms": "alignment_ms",
    "checkpoint_vertex_sync_ms": "sync_ms",
    "checkpoint_vertex_async_ms": "async_ms",
    "checkpoint_vertex_acknowledged": "acknowledged",
}
"""A vertex's columns, and the field of its ``checkpoints.vertices`` entry each holds."""


def test_the_columns_are_every_checkpoint_column() -> None:
    assert sorted({**LAST, **COUNTS, **PHASES}) == sorted(CHECKPOINT_COLUMNS)


def window_expected(report: Report) -> dict[str, Any]:
    """The window's checkpoint columns as the report's fields say them."""
    c = report.checkpoints
    counts = {col: None if c is None else getattr(c, f) for col, f in COUNTS.items()}
    last = None if c is None else c.last
    figures = {col: None if last is None else getattr(last, f) for col, f in LAST.items()}
    return {**counts, **figures}


def vertex_expected(report: Report, vertex: str) -> dict[str, Any]:
    """A vertex's checkpoint columns as the report's ``checkpoints.vertices`` says them."""
    c = report.checkpoints
    listed = {} if c is None or c.last is None else {v.name: v for v in c.vertices}
    phases: CheckpointPhases | None = listed.get(vertex)
    return {col: None if phases is None else getattr(phases, f) for col, f in PHASES.items()}


def stored(row: dict[str, Any], columns: dict[str, str]) -> dict[str, Any]:
    return {col: row[col] for col in columns}


def windows_of(store: HistoryStore) -> dict[tuple[str, int], list[dict[str, Any]]]:
    """The subtask rows of ``store`` by window."""
    out: dict[tuple[str, int], list[dict[str, Any]]] = defaultdict(list)
    for row in store.read("subtasks").to_pylist():
        out[(row["run_id"], row["burst"])].append(row)
    return out


def assert_rows_hold(rows: list[dict[str, Any]], report: Report) -> None:
    """Every row of a window holds its report's checkpoints, and its vertex's phases."""
    assert len(rows) == sum(max(1, len(v.subtasks)) for v in report.vertices)
    for row in rows:
        assert row["window_start"] == report.window.start
        assert {**stored(row, COUNTS), **stored(row, LAST)} == window_expected(report)
        assert stored(row, PHASES) == vertex_expected(report, row["vertex"]), row["vertex"]


def stored_reports(runs_dir: Path, run_id: str) -> list[Report]:
    """A run's reports as its report.json files hold them, in burst order."""
    return [report for _, report in RunStore(runs_dir).bursts(run_id)]


# -------------------------------------------------------------------------- the stored columns


def test_a_window_stores_its_reports_checkpoints_and_none_as_nulls(tmp_path: Path) -> None:
    store = HistoryStore(tmp_path)
    quick = checkpoints((3, "completed", 12.5, 2.0), completed=2, failed=1)
    made = [
        window_report(0),  # checkpointing off: every column null
        with_checkpoints(window_report(1), checkpoints(None, completed=0, failed=0)),  # none yet
        with_checkpoints(window_report(2), checkpoints((1, "failed", 4000.5, 4000.5), completed=0,
                                                       failed=1)),
        with_checkpoints(window_report(3), checkpoints((2, "completed", 80.25, 60.0), completed=1,
                                                       failed=1)),
        with_checkpoints(window_report(4), replace(quick, vertices=quick.vertices[:1])),  # no sink
    ]  # fmt: skip
    for burst, report in enumerate(made):
        store.append(report, burst)
    windows = windows_of(store)
    for burst, report in enumerate(made):
        assert_rows_hold(windows[(report.run_id, burst)], report)
    assert {r[c] for r in windows[(made[0].run_id, 0)] for c in CHECKPOINT_COLUMNS} == {None}
    pending = windows[(made[1].run_id, 1)][0]
    assert (pending["checkpoints_completed"], pending["checkpoint_id"]) == (0, None)
    failed = {r["vertex"]: r for r in windows[(made[2].run_id, 2)]}
    assert failed["sink"]["checkpoint_vertex_acknowledged"] == 0
    assert failed["sink"]["checkpoint_vertex_sync_ms"] is None  # not known: null, not 0
    assert failed["source"]["checkpoint_vertex_async_ms"] == 1.0
    unlisted = {r["vertex"]: r for r in windows[(made[4].run_id, 4)]}
    assert {unlisted["sink"][c] for c in PHASES} == {None}
    assert unlisted["sink"]["checkpoint_id"] == 3 and unlisted["source"]["checkpoint_id"] == 3


@pytest.mark.slow
def test_every_window_of_the_real_runs_stores_its_reports_checkpoints(
    checkpointed_runs: CheckpointedRuns,
) -> None:
    windows = windows_of(HistoryStore.in_runs_dir(checkpointed_runs.runs_dir))
    assert len(windows) == sum(len(r) for r in checkpointed_runs.reports.values())
    for name, reports in checkpointed_runs.reports.items():
        for burst, report in enumerate(reports):
            assert report.checkpoints is not None and report.checkpoints.last is not None, name
            assert_rows_hold(windows[(report.run_id, burst)], report)
    statuses = {
        name: {r.checkpoints.last.status for r in reports if r.checkpoints and r.checkpoints.last}
        for name, reports in checkpointed_runs.reports.items()
    }
    assert "failed" in statuses["checkpoint-timeouts"]  # (its first may complete, on a busy host)
    assert statuses["healthy"] == {"completed"}


@pytest.mark.slow
def test_history_import_fills_the_checkpoint_columns_from_the_report_files(
    checkpointed_runs: CheckpointedRuns, tmp_path: Path
) -> None:
    source = checkpointed_runs.runs_dir
    done = CliRunner().invoke(app, ["history", "import", str(source), "--runs-dir", str(tmp_path)])
    assert done.exit_code == 0, done.output
    imported = windows_of(HistoryStore.in_runs_dir(tmp_path))
    appended = windows_of(HistoryStore.in_runs_dir(source))
    assert set(imported) == set(appended)
    for run_id in checkpointed_runs.run_ids.values():
        for burst, report in enumerate(stored_reports(source, run_id)):
            rows = imported[(run_id, burst)]
            assert_rows_hold(rows, report)  # exactly the files' figures
            for new, old in zip(rows, appended[(run_id, burst)], strict=True):
                for column in CHECKPOINT_COLUMNS:  # and the run's, but the files' rounding
                    if isinstance(old[column], float):
                        assert new[column] == pytest.approx(old[column], abs=0.05), column
                    else:
                        assert new[column] == old[column], column


# --------------------------------------------------------------------------------- the trend


@dataclass(frozen=True)
class Expected:
    """A run's checkpoint figures, computed here from its reports."""

    windows: int
    checkpoints: int
    duration_p50: float | None
    duration_p95: float | None
    failed: int
    failed_during: int | None
    completed_during: int | None
    barrier_wait_share: float | None


def nearest_rank(values: Sequence[float], p: float) -> float | None:
    ordered = sorted(values)
    return ordered[max(0, math.ceil(p * len(ordered)) - 1)] if ordered else None


def expected_run(reports: Sequence[Report]) -> Expected | None:
    """What ``bpmon analyze`` should say of one run's checkpoints (None: it observed none)."""
    seen = [r.checkpoints for r in reports if r.checkpoints is not None]
    if not seen:
        return None
    newest = {c.last.id: c.last for c in seen if c.last is not None}  # each checkpoint once
    durations = [last.duration_ms for last in newest.values()]
    timed = [
        (min(last.barrier_wait_ms, last.duration_ms), last.duration_ms)
        for last in newest.values()
        if last.barrier_wait_ms is not None and last.duration_ms > 0
    ]

    def growth(first: int, last: int) -> int | None:
        return last - first if len(seen) > 1 and last >= first else None

    return Expected(
        windows=len(seen),
        checkpoints=len(newest),
        duration_p50=nearest_rank(durations, 0.5),
        duration_p95=nearest_rank(durations, 0.95),
        failed=sum(last.status == "failed" for last in newest.values()),
        failed_during=growth(seen[0].failed, seen[-1].failed),
        completed_during=growth(seen[0].completed, seen[-1].completed),
        barrier_wait_share=sum(w for w, _ in timed) / sum(d for _, d in timed) if timed else None,
    )


def assert_point(point: RunCheckpoints, want: Expected, ms: float = 1e-6) -> None:
    """``point`` is ``want``: counts exactly, durations within ``ms``."""
    assert (point.windows, point.checkpoints, point.failed) == (
        want.windows,
        want.checkpoints,
        want.failed,
    )
    assert (point.failed_during, point.completed_during) == (
        want.failed_during,
        want.completed_during,
    )
    for got, expected in (
        (point.duration_p50, want.duration_p50),
        (point.duration_p95, want.duration_p95),
    ):
        assert (got is None) == (expected is None)
        if expected is not None:
            assert got == pytest.approx(expected, abs=ms)
    if want.barrier_wait_share is None:
        assert point.barrier_wait_share is None
    else:
        assert point.barrier_wait_share == pytest.approx(want.barrier_wait_share, abs=1e-3)


@pytest.mark.slow
def test_the_real_runs_trend_is_what_their_reports_say(
    analysis: Analysis, checkpointed_runs: CheckpointedRuns
) -> None:
    """Against the reports the runs stored in the history (their report.json files round
    durations to 0.1 ms, a few percent of a healthy job's checkpoint: the import test reads
    those)."""
    by_job = {c.job: c for c in analysis.checkpoints}
    points = {}
    for name, reports in checkpointed_runs.reports.items():
        history = by_job[reports[0].job]
        (point,) = history.by_run
        assert point.run_id == checkpointed_runs.run_ids[name]
        assert (history.runs, history.duration_trend) == (1, None)
        want = expected_run(reports)
        assert want is not None
        assert_point(point, want)
        points[name] = point
    # what the examples are made to show
    timeouts, healthy = points["checkpoint-timeouts"], points["healthy"]
    assert timeouts.checkpoints >= 2 and timeouts.failed >= 1
    assert timeouts.failed_during is not None and timeouts.failed_during >= 1
    assert timeouts.duration_p95 is not None and timeouts.duration_p95 >= 4000  # the timeout
    assert timeouts.barrier_wait_share is not None and timeouts.barrier_wait_share > 0.5
    assert (healthy.failed, healthy.failed_during) == (0, 0)
    assert healthy.completed_during is not None and healthy.completed_during >= 1
    assert healthy.duration_p95 is not None and healthy.duration_p95 < 1000
    real = {reports[0].job for reports in checkpointed_runs.reports.values()}
    assert sorted(c.job for c in analysis.checkpoints) == sorted({*real, *MADE})
    assert not [r for r in analysis.regressions if r.job in real]  # single runs


def timeline(job: str, plan: Sequence[Sequence[Any]]) -> list[list[Report]]:
    """Runs of ``job`` an hour apart, one report per window: each window ``None`` (checkpointing
    off), ``(completed, failed)`` (none ended yet) or ``(completed, failed, id, status, duration,
    barrier wait)``."""
    runs = []
    for i, windows in enumerate(plan):
        start = T0 + timedelta(hours=i)
        run_id = f"{start:%Y%m%dT%H%M%SZ}-{job}-{i:04d}"
        reports = []
        for burst, window in enumerate(windows):
            report = window_report(burst, run_id=run_id, job=job, start=start)
            if window is not None:
                done, failed, *newest = window
                last: tuple[int, CheckpointStatus, float, float] | None = None
                if newest:
                    number, status, duration, wait = newest
                    last = (number, status, duration, wait)
                report = with_checkpoints(report, checkpoints(last, completed=done, failed=failed))
            reports.append(report)
        runs.append(reports)
    return runs


SLOWING = timeline(
    "slowing",
    [
        [(1, 0, 1, "completed", 400.0, 200.0), (2, 0, 2, "completed", 420.0, 210.0),
         (3, 0, 3, "completed", 410.0, 205.0)],
        # counts since the job started, not the run; checkpoint 12 seen by two windows, once
        [(11, 2, 11, "completed", 1400.0, 1300.0), (11, 3, 12, "failed", 1600.0, 1600.0),
         (11, 3, 12, "failed", 1600.0, 1600.0), (12, 3, 13, "completed", 1500.0, 1000.0)],
        [(20, 3, 21, "completed", 1650.0, 1500.0), (21, 3, 22, "completed", 1600.0, 1400.0),
         (22, 3, 23, "completed", 1700.0, 1500.0)],  # +10%: under the threshold
        # none ended yet in the first window; the job restarted (its counts began again)
        [(30, 5), (1, 0, 1, "completed", 2100.0, 100.0), (2, 0, 2, "completed", 2200.0, 100.0)],
        [None, None],  # checkpointing off
        [(1, 0, 1, "completed", 5000.0, 4000.0), (2, 0, 2, "completed", 5200.0, 4000.0)],
    ],
)  # fmt: skip
"""Run 1 is 266% slower than run 0 and run 3 27% slower than run 2: regressions. Run 5 is slower
still, but the run before it had no checkpoints: nothing to compare with."""
QUICK = timeline(
    "quick",
    [
        # checkpoint 2's wait is reported longer than it took (other clocks): counted up to 4 ms
        [(1, 0, 1, "completed", 3.0, 2.0), (2, 0, 2, "completed", 4.0, 6.0),
         (3, 0, 3, "completed", 3.0, 2.0)],
        [(9, 0, 9, "completed", 9.0, 1.0)],  # three times as long, but 9 ms: no regression
    ],
)  # fmt: skip


MADE = ("quick", "slowing")
"""The jobs of the hand-made runs."""


@pytest.fixture(scope="module")
def analysis(
    spark: Any, checkpointed_runs: CheckpointedRuns, tmp_path_factory: pytest.TempPathFactory
) -> Analysis:
    """One analysis of the real runs and the hand-made ones together (one Spark job)."""
    runs_dir = tmp_path_factory.mktemp("checkpoint-analysis") / "runs"
    shutil.copytree(checkpointed_runs.runs_dir, runs_dir)
    store = HistoryStore.in_runs_dir(runs_dir)
    for reports in (*SLOWING, *QUICK):
        for burst, report in enumerate(reports):
            assert store.append(report, burst)
    return analyze_history(Settings(runs_dir=runs_dir), master="local[2]")


@pytest.mark.slow
def test_each_runs_figures_are_what_its_reports_say(analysis: Analysis) -> None:
    by_job = {c.job: c for c in analysis.checkpoints}
    for job, runs in (("slowing", SLOWING), ("quick", QUICK)):
        wanted = [(r[0].run_id, expected_run(r)) for r in runs]
        observed = [(run_id, want) for run_id, want in wanted if want is not None]
        history = by_job[job]
        assert [p.run_id for p in history.by_run] == [run_id for run_id, _ in observed]
        assert history.runs == len(observed)
        for point, (_, want) in zip(history.by_run, observed, strict=True):
            assert_point(point, want)
    slowing = {p.run_id: p for p in by_job["slowing"].by_run}
    second, restarted = slowing[SLOWING[1][0].run_id], slowing[SLOWING[3][0].run_id]
    assert (second.windows, second.checkpoints, second.failed) == (4, 3, 1)
    assert (second.failed_during, second.completed_during) == (1, 1)
    assert (restarted.failed_during, restarted.duration_p50) == (None, 2100.0)  # the shorter


@pytest.mark.slow
def test_the_duration_trend_is_the_slope_of_the_medians(analysis: Analysis) -> None:
    (slowing,) = [c for c in analysis.checkpoints if c.job == "slowing"]
    order = {reports[0].run_id: seq for seq, reports in enumerate(SLOWING, 1)}
    medians = [(order[r[0].run_id], expected_run(r)) for r in SLOWING]
    x = [float(seq) for seq, want in medians if want is not None]
    y = [want.duration_p50 for _, want in medians if want is not None and want.duration_p50]
    slope = statistics.linear_regression(x, y).slope
    assert slowing.duration_trend == pytest.approx(slope / statistics.mean(y))


@pytest.mark.slow
def test_a_median_slower_by_more_than_the_threshold_is_a_regression(analysis: Analysis) -> None:
    found = [r for r in analysis.regressions if r.kind == "checkpoint-slower"]
    runs = [reports[0].run_id for reports in SLOWING]
    assert [(r.job, r.vertex, r.before_run, r.after_run) for r in found] == [
        ("slowing", "", runs[0], runs[1]),
        ("slowing", "", runs[2], runs[3]),
    ]
    first, second = found
    assert (first.before, first.after) == (410.0, 1500.0)
    assert first.change == pytest.approx(1500 / 410 - 1)
    assert (second.before, second.after) == (1650.0, 2100.0)
    assert first.detail.startswith(
        f"checkpoints took 1,500 ms (the median of 3 checkpoints) in run {runs[1]}, +266% "
        f"against the 410 ms of run {runs[0]} (threshold 20%); "
    )
    assert "87% of their time waiting for barriers (was 50%)" in first.detail  # 3,900 / 4,500 ms
    assert "1 checkpoint failed during the run" in first.detail
    assert "5% of their time waiting for barriers" in second.detail  # slow for its own reasons
    assert analysis.thresholds.checkpoint_slow_ms == 1000.0


@pytest.mark.slow
def test_the_checkpoints_render_as_a_table_lines_and_json(
    analysis: Analysis, fits: Callable[..., str]
) -> None:
    for width in (80, 120):
        out = fits(lambda console: render_analysis_text(analysis, console), width)
        flat = " ".join(out.split())
        assert "Checkpoints per run" in flat
        assert "barrier wait: the share of their time spent waiting for barriers" in flat
        assert "slowing checkpoint-slower: 410 ms -> 1,500 ms (+266%)" in flat
    markdown = render_analysis_markdown(analysis)
    assert "## Checkpoints per run" in markdown
    assert "| slowing | checkpoint-slower | – |" in markdown
    assert "| slowing | 2026-11-22 11:15 | 3 | 1,500 ms | 1,600 ms | 1 | +1 | 87% |" in markdown
    doc = json.loads(analysis_to_json(analysis))
    (quick,) = [c for c in doc["checkpoints"] if c["job"] == "quick"]
    assert [p["duration_p50"] for p in quick["by_run"]] == [3.0, 9.0]
    assert quick["by_run"][1]["failed_during"] is None  # a single window
    assert quick["by_run"][0]["barrier_wait_share"] == 0.8  # (2 + 4 + 2) / (3 + 4 + 3)
    assert doc["thresholds"]["checkpoint_slow_ms"] == 1000.0


@pytest.mark.slow
def test_the_checkpoint_runs_table_is_written_with_the_aggregates(
    analysis: Analysis, tmp_path: Path
) -> None:
    write_analysis_tables(analysis, tmp_path)
    rows = pq.read_table(tmp_path / "checkpoint_runs.parquet").to_pylist()
    points = [(c.job, p) for c in analysis.checkpoints for p in c.by_run]
    assert [(r["job"], r["run_id"], r["duration_p50"], r["failed_during"]) for r in rows] == [
        (job, p.run_id, p.duration_p50, p.failed_during) for job, p in points
    ]
