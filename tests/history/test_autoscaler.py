"""The autoscaler's verdicts in the history: each window's rows carry its report's decision, and
``bpmon analyze`` says per job how often the autoscaler would have been wrong, and how.

The stored columns are checked against the reports' own fields: hand-made reports appended, the
same reports saved as report.json files and brought in by ``bpmon history import``, and two real
runs of the tiny scenario (``real_runs``, appended by the run). The analysis is checked, on a real
local Spark session, against figures worked out by hand from the hand-made runs below (written
next to them), in every output: the values, the terminal, Markdown, JSON (``bpmon analyze
--json``) and the Parquet aggregates.
"""

from __future__ import annotations

import json
import shutil
from collections import defaultdict
from collections.abc import Callable, Sequence
from dataclasses import replace
from datetime import timedelta
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq
import pytest
from typer.testing import CliRunner

from bpmon.cli.commands import app
from bpmon.history.compaction import compact
from bpmon.history.runs import RunStore
from bpmon.history.schema import AUTOSCALER_COLUMNS
from bpmon.history.store import HistoryStore
from bpmon.model.analysis import Analysis, AutoscalerHistory, VerdictTally, analysis_to_json
from bpmon.model.autoscaler import AutoscalerReport, VerdictKind
from bpmon.model.values import Metrics, Report, SubtaskStatus, VertexStatus
from bpmon.render.analysis import render_analysis_markdown, render_analysis_text
from bpmon.service.facade import Settings
from bpmon.service.history import analyze_history, write_analysis_tables
from tests.history.reports import T0, autoscaler, window_report, with_autoscaler

# ------------------------------------------------------------------------------ the stored columns


def expected_columns(report: Report, vertex: str) -> dict[str, Any]:
    """A vertex's autoscaler columns as the report's ``autoscaler`` says them."""
    decision = report.autoscaler
    if decision is None:
        return dict.fromkeys(AUTOSCALER_COLUMNS)
    asked = {v.name: v.recommended_parallelism for v in decision.vertices}
    return {
        "autoscaler_acts": decision.acts,
        "autoscaler_recommended_parallelism": asked.get(vertex),
        "autoscaler_verdicts": [v.verdict for v in decision.verdicts if v.vertex == vertex],
    }


def windows_of(store: HistoryStore) -> dict[tuple[str, int], list[dict[str, Any]]]:
    """The subtask rows of ``store`` by window."""
    out: dict[tuple[str, int], list[dict[str, Any]]] = defaultdict(list)
    for row in store.read("subtasks").to_pylist():
        out[(row["run_id"], row["burst"])].append(row)
    return out


def assert_rows_hold(rows: list[dict[str, Any]], report: Report) -> None:
    """Every row of a window holds its report's decision, and its vertex's part of it."""
    assert len(rows) == sum(max(1, len(v.subtasks)) for v in report.vertices)
    for row in rows:
        got = {c: row[c] for c in AUTOSCALER_COLUMNS}
        assert got == expected_columns(report, row["vertex"]), (row["burst"], row["vertex"])


STORED = [
    window_report(0),  # no decision: every column null
    with_autoscaler(window_report(1), autoscaler({"source": (2, 2), "sink": (1, 1)}, acts=False)),
    with_autoscaler(
        window_report(2),
        autoscaler(
            {"source": (2, 1), "sink": (1, 3)},
            (("sink", "agrees"), ("sink", "scales-ineffectively")),  # two causes at the sink
        ),
    ),
    # the source not evaluated, yet judged (a report.json may say so)
    with_autoscaler(window_report(3), autoscaler({"sink": (1, 2)}, (("source", "misses"),))),
]
"""Bursts of a watch with every shape of decision."""


def test_a_window_stores_its_reports_decision_and_none_as_nulls(tmp_path: Path) -> None:
    store = HistoryStore(tmp_path)
    for burst, report in enumerate(STORED):
        store.append(report, burst)
    windows = windows_of(store)
    for burst, report in enumerate(STORED):
        assert_rows_hold(windows[(report.run_id, burst)], report)
    by_vertex = [{r["vertex"]: r for r in windows[(STORED[0].run_id, b)]} for b in range(4)]
    assert {by_vertex[0]["sink"][c] for c in AUTOSCALER_COLUMNS} == {None}
    assert by_vertex[1]["source"]["autoscaler_verdicts"] == []  # decided: empty, not null
    assert by_vertex[1]["sink"]["autoscaler_acts"] is False
    assert by_vertex[2]["sink"]["autoscaler_verdicts"] == ["agrees", "scales-ineffectively"]
    assert by_vertex[2]["sink"]["autoscaler_recommended_parallelism"] == 3
    assert by_vertex[2]["source"]["autoscaler_recommended_parallelism"] == 1
    assert by_vertex[3]["source"]["autoscaler_recommended_parallelism"] is None
    assert by_vertex[3]["source"]["autoscaler_verdicts"] == ["misses"]


def test_history_import_fills_the_autoscaler_columns_from_the_report_files(
    tmp_path: Path,
) -> None:
    source, target = tmp_path / "saved", tmp_path / "imported"
    runs = RunStore(source)
    for burst, report in enumerate(STORED):
        runs.save(report, burst)
    done = CliRunner().invoke(app, ["history", "import", str(source), "--runs-dir", str(target)])
    assert done.exit_code == 0, done.output
    windows = windows_of(HistoryStore.in_runs_dir(target))
    assert len(windows) == len(STORED)
    for burst, report in runs.bursts(STORED[0].run_id):
        assert report.autoscaler == STORED[burst].autoscaler  # the file keeps the decision
        assert_rows_hold(windows[(report.run_id, burst)], STORED[burst])


@pytest.mark.slow
def test_every_window_of_real_runs_stores_its_reports_decision(real_runs: Any) -> None:
    windows = windows_of(HistoryStore.in_runs_dir(real_runs.runs_dir))
    decided = 0
    for run_id in (real_runs.fast, real_runs.slow):
        for burst, report in RunStore(real_runs.runs_dir).bursts(run_id):
            assert_rows_hold(windows[(run_id, burst)], report)
            decided += report.autoscaler is not None and bool(report.autoscaler.verdicts)
    assert decided  # the runtime gives the rates the autoscaler decides from, and it judges


# ------------------------------------------------------------------------------------ the analysis

Window = tuple[tuple[str, VerdictKind], ...] | None
"""A window of a hand-made run: None (no decision), or the verdicts ``(vertex, verdict)``."""


def three_vertices(burst: int, run_id: str, job: str, start: Any) -> Report:
    """:func:`window_report` with a third vertex between source and sink: ``aggregate``."""
    report = window_report(burst, run_id=run_id, job=job, start=start)
    busy = Metrics(busy_ratio=1.0, records_in_per_s=500.0)
    aggregate = VertexStatus(
        "aggregate", 2, "OK", 0.0, subtasks=(SubtaskStatus(0, "OK", 0.0, busy),) * 2
    )
    source, sink = report.vertices
    return replace(report, vertices=(source, aggregate, sink))


def timeline(job: str, plan: Sequence[Sequence[Window]]) -> list[list[Report]]:
    """Runs of ``job`` an hour apart, one report per window of ``plan``."""
    runs = []
    for i, windows in enumerate(plan):
        start = T0 + timedelta(hours=i)
        run_id = f"{start:%Y%m%dT%H%M%SZ}-{job}-{i:04d}"
        reports = []
        for burst, window in enumerate(windows):
            report = three_vertices(burst, run_id, job, start)
            decision: AutoscalerReport | None = None
            if window is not None:
                sizes = {"source": (2, 2), "aggregate": (2, 6), "sink": (1, 1)}
                decision = autoscaler(sizes, window)
            reports.append(with_autoscaler(report, decision))
        runs.append(reports)
    return runs


SCALED = timeline(
    "scaled",
    [
        [
            (("aggregate", "scales-ineffectively"),),
            (("aggregate", "scales-ineffectively"), ("sink", "scales-wrong-vertex")),
            (("aggregate", "agrees"),),
            None,  # no decision: counts nowhere
        ],
        [
            (("aggregate", "scales-ineffectively"), ("aggregate", "scales-ineffectively")),
            (),  # a decision, nothing judged: not an opinion
            (("sink", "misses"), ("aggregate", "agrees")),  # one wrong verdict makes it wrong
            (("source", "scales-wrong-vertex"),),
        ],
    ],
)
"""Worked out by hand: 7 windows with a decision (3 + 4); 6 judged (all but run 1's second); 5
wrong (run 0's first two, run 1's first, third and fourth). scales-ineffectively in 3 windows, all
at aggregate (run 1's first counts once); agrees in 2 (aggregate); scales-wrong-vertex in 2, once
at the sink and once at the source (the sink first by name); misses in 1 (the sink)."""
CALM = timeline("calm", [[(), (), ()]])
"""3 windows with a decision, none judged."""
BLIND = timeline("blind", [[None, None]])
"""No decision at all: not in the autoscaler's figures."""


@pytest.fixture(scope="module")
def runs_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("autoscaler-analysis") / "runs"
    store = HistoryStore.in_runs_dir(folder)
    for reports in (*SCALED, *CALM, *BLIND):
        for burst, report in enumerate(reports):
            assert store.append(report, burst)
    return folder


@pytest.fixture(scope="module")
def analysis(spark: Any, runs_dir: Path) -> Analysis:
    """One analysis of the hand-made runs (one Spark job)."""
    return analyze_history(Settings(runs_dir=runs_dir), master="local[2]")


WANTED = (
    AutoscalerHistory("calm", windows=3, judged=0, wrong=0, verdicts=()),
    AutoscalerHistory(
        "scaled",
        windows=7,
        judged=6,
        wrong=5,
        verdicts=(
            VerdictTally("scales-ineffectively", 3, "aggregate", 3),
            VerdictTally("agrees", 2, "aggregate", 2),  # equal windows: in the verdicts' order
            VerdictTally("scales-wrong-vertex", 2, "sink", 1),
            VerdictTally("misses", 1, "sink", 1),
        ),
    ),
)
"""What ``bpmon analyze`` should say of the hand-made runs (see :data:`SCALED`)."""


@pytest.mark.slow
def test_the_verdicts_per_job_are_the_hand_counted_ones(analysis: Analysis) -> None:
    assert analysis.autoscaler == WANTED
    assert {j.job for j in analysis.jobs} == {"blind", "calm", "scaled"}


@pytest.mark.slow
def test_the_verdicts_render_as_a_table_in_text_and_markdown(
    analysis: Analysis, fits: Callable[..., str]
) -> None:
    for width in (80, 120):
        out = fits(lambda console: render_analysis_text(analysis, console), width)
        flat = " ".join(out.split())
        assert "The autoscaler's decisions judged against bpmon's causes" in flat
        assert "would be wrong: with a verdict other than agrees" in flat
    markdown = render_analysis_markdown(analysis)
    assert "## The autoscaler's decisions judged against bpmon's causes (windows)" in markdown
    assert (
        "| scaled | 6 of 7 | 5 of 6 (83%) | scales-ineffectively 3 (aggregate), "
        "scales-wrong-vertex 2 (sink 1), misses 1 (sink) |"
    ) in markdown
    assert "| calm | 0 of 3 | 0 of 0 | – |" in markdown
    assert "| blind |" not in markdown.split("## The autoscaler")[1].split("\n## ")[0]


WANTED_JSON: list[dict[str, Any]] = [
    {"job": "calm", "windows": 3, "judged": 0, "wrong": 0, "verdicts": []},
    {
        "job": "scaled",
        "windows": 7,
        "judged": 6,
        "wrong": 5,
        "verdicts": [
            {"verdict": "scales-ineffectively", "windows": 3, "vertex": "aggregate",
             "vertex_windows": 3},
            {"verdict": "agrees", "windows": 2, "vertex": "aggregate", "vertex_windows": 2},
            {"verdict": "scales-wrong-vertex", "windows": 2, "vertex": "sink",
             "vertex_windows": 1},
            {"verdict": "misses", "windows": 1, "vertex": "sink", "vertex_windows": 1},
        ],
    },
]  # fmt: skip


@pytest.mark.slow
def test_the_json_has_the_same_figures(analysis: Analysis) -> None:
    assert json.loads(analysis_to_json(analysis))["autoscaler"] == WANTED_JSON


@pytest.mark.slow
def test_analyze_json_for_one_job_gives_its_figures(spark: Any, runs_dir: Path) -> None:
    args = ["analyze", "--runs-dir", str(runs_dir), "--master", "local[2]", "--json"]
    done = CliRunner().invoke(app, [*args, "--job", "scaled"])
    assert done.exit_code == 0, done.output
    assert json.loads(done.stdout)["autoscaler"] == WANTED_JSON[1:]


@pytest.mark.slow
def test_the_autoscaler_tables_are_written_with_the_aggregates(
    analysis: Analysis, tmp_path: Path
) -> None:
    write_analysis_tables(analysis, tmp_path)
    jobs = pq.read_table(tmp_path / "autoscaler.parquet").to_pylist()
    assert jobs == [{k: v for k, v in row.items() if k != "verdicts"} for row in WANTED_JSON]
    verdicts = pq.read_table(tmp_path / "autoscaler_verdicts.parquet").to_pylist()
    assert verdicts == [{"job": "scaled", **v} for v in WANTED_JSON[1]["verdicts"]]


def test_compaction_keeps_the_verdicts(runs_dir: Path, tmp_path: Path) -> None:
    """Compacted (appends compact too, from 32 parts; here every job-day at once), each row keeps
    its decision."""
    folder = tmp_path / "runs"
    shutil.copytree(runs_dir, folder)
    store = HistoryStore.in_runs_dir(folder)
    before = sorted(store.read("subtasks").to_pylist(), key=lambda r: (r["run_id"], r["burst"]))
    done = compact(pq, store.root, today=None)
    assert done.problems == [] and done.merged == 8 + 3 + 2  # a part per window
    after = sorted(store.read("subtasks").to_pylist(), key=lambda r: (r["run_id"], r["burst"]))
    assert after == before
    windows = windows_of(store)
    for reports in (*SCALED, *CALM, *BLIND):
        for burst, report in enumerate(reports):
            assert_rows_hold(windows[(report.run_id, burst)], report)
