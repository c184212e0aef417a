"""bpmon analyze on a real local Spark session: planted facts are found, odd histories answered.

One history holds two real runs of the tiny scenario (the second with a four times slower sink),
a real run of a map whose subtasks differ in speed, two hand-made runs of a job rescaled between
them and a synthetic history of two jobs; it is analysed once and every finding is checked
against what was planted. Spark starts once per test session (``spark`` fixture), so each
analysis here costs seconds, not the start-up.
"""

from __future__ import annotations

import json
import shutil
import statistics
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq
import pytest
from typer.testing import CliRunner

from bpmon.cli.commands import app
from bpmon.history.store import HistoryStore
from bpmon.history.synth import (
    SynthPlan,
    planted_bottleneck,
    regression_run,
    run_id,
    skewed_vertex,
    synthesize,
)
from bpmon.model.analysis import Analysis, analysis_to_json
from bpmon.model.values import Metrics, Report, SubtaskStatus, VertexStatus, Window
from bpmon.render.analysis import render_analysis_text
from bpmon.scenario import parse_scenario
from bpmon.service.comparison import capacity_of_vertex
from bpmon.service.facade import Settings, drain, load_report, run_scenario
from bpmon.service.history import analyze_history

PLAN = SynthPlan(runs=4, jobs=2, start=datetime(2026, 1, 1, tzinfo=UTC), bursts=3, parallelism=3)

UNEVEN = """
name = "uneven"
duration_s = 5

[monitor]
warmup_s = 0.5
samples = 10
interval_ms = 10
settle_s = 0

[[operators]]
name = "src"
kind = "source"
rate = 0

[[operators]]
name = "work"
kind = "map"
parallelism = 3
cost_us = 1000
slow_subtasks = { 2 = 1.4 }
inputs = [{ from = "src", partitioner = "rebalance" }]

[[operators]]
name = "out"
kind = "sink"
inputs = [{ from = "work", partitioner = "rebalance" }]
"""
"""A source as fast as it can feeding a map whose subtask 2 is 40% slower than the others: all
three saturated, their capacities ~1,000, ~1,000 and ~710 records/s (the mean and the median
differ by 8-11%; with 15% slower, 1.3-4.7% were seen, and 0.3% once in CI on a loaded machine,
too close to tell the two apart)."""


def rescaled(run: int, parallelism: int, per_subtask: float, light: float) -> Report:
    """Run ``run`` of the hand-made job ``rescaled``: ``parse`` 90% busy handling
    ``per_subtask`` records/s in each of ``parallelism`` subtasks, and ``light`` 6% busy (under
    ``min_busy``), its records/s over busy reading ``light`` (issue 21 saw 17,831 -> 7,261 on a
    vertex a few percent busy called a regression)."""
    begin = datetime(2026, 3, 1, tzinfo=UTC) + timedelta(hours=run)

    def subtasks(n: int, busy: float, rate: float) -> tuple[SubtaskStatus, ...]:
        metrics = Metrics(busy_ratio=busy, records_in_per_s=rate, records_out_per_s=rate)
        return tuple(SubtaskStatus(i, "OK", 0.0, metrics) for i in range(n))

    vertices = (
        VertexStatus("light", 2, "OK", 0.0, subtasks=subtasks(2, 0.06, light * 0.06)),
        VertexStatus(
            "parse", parallelism, "OK", 0.0, subtasks=subtasks(parallelism, 0.9, per_subtask)
        ),
    )
    window = Window(begin, begin + timedelta(seconds=5), samples=10, interval_ms=50.0)
    name = f"20260301T{run:02d}0000Z-rescaled-000{run}"
    return Report(name, "rescaled", "runtime", window, vertices, root_causes=())


@pytest.fixture(scope="module")
def uneven_run(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, str]:
    """One real run of :data:`UNEVEN`: its runs folder and run id."""
    folder = tmp_path_factory.mktemp("uneven")
    ended = drain(
        run_scenario(parse_scenario(UNEVEN), Settings(runs_dir=folder), bursts=1, duration_s=0.3)
    )
    return folder, ended.run_id


@pytest.fixture(scope="module")
def runs_dir(
    real_runs: Any, uneven_run: tuple[Path, str], tmp_path_factory: pytest.TempPathFactory
) -> Path:
    """The real runs' folders copied together, the hand-made and the synthetic history added."""
    folder = tmp_path_factory.mktemp("analysed") / "runs"
    shutil.copytree(real_runs.runs_dir, folder)
    shutil.copytree(uneven_run[0], folder, dirs_exist_ok=True)
    store = HistoryStore.in_runs_dir(folder)
    store.append(rescaled(0, 2, 900.0, light=17831), 0)  # 1,000 records/s at 100% busy
    store.append(rescaled(1, 6, 450.0, light=7261), 0)  # 500, at three times the parallelism
    synthesize(store, PLAN)
    return folder


@pytest.fixture(scope="module")
def analysis(spark: Any, runs_dir: Path) -> Analysis:
    lines: list[str] = []
    found = analyze_history(Settings(runs_dir=runs_dir), master="local[2]", progress=lines.append)
    assert any("part files" in line for line in lines), lines
    return found


def test_every_job_is_analysed_and_synthetic_ones_are_marked(analysis: Analysis) -> None:
    jobs = {j.job: j for j in analysis.jobs}
    assert set(jobs) == {"tiny", "uneven", "rescaled", "synth-job-1", "synth-job-2"}
    assert not jobs["tiny"].synthetic and jobs["synth-job-1"].synthetic
    assert (jobs["synth-job-1"].runs, jobs["synth-job-1"].windows) == (4, 12)
    assert jobs["synth-job-1"].first_run == run_id(PLAN, 1, 0)
    assert analysis.master == "local[2]" and analysis.spark_version


def test_the_planted_regressions_are_found_with_both_run_ids(analysis: Analysis) -> None:
    at = regression_run(PLAN)
    assert at is not None
    for k in (1, 2):
        found = [r for r in analysis.regressions if r.job == f"synth-job-{k}"]
        assert [(r.kind, r.vertex) for r in found] == [
            ("capacity-drop", planted_bottleneck(k)),
            ("checkpoint-slower", ""),  # the job's, not a vertex's
        ]
        drop, slower = found
        pair = (run_id(PLAN, k, at - 1), run_id(PLAN, k, at))
        assert (drop.before_run, drop.after_run) == (slower.before_run, slower.after_run) == pair
        assert drop.change is not None and -0.45 < drop.change < -0.35  # 1,000 -> 600
        assert drop.before_run in drop.detail and drop.after_run in drop.detail
        assert slower.change is not None and 3.5 < slower.change < 4.5  # 400 ms -> 2,000 ms
        assert "90% of their time waiting for barriers (was 50%)" in slower.detail


def test_the_planted_autoscaler_verdicts_are_counted_per_job(analysis: Analysis) -> None:
    """Every window judged; wrong in every window from the regression run on (misses at the
    bottleneck) and in each earlier run's first (scales-ineffectively at the second cause's)."""
    at = regression_run(PLAN)
    assert at is not None
    windows = PLAN.runs * PLAN.bursts
    early, late = at * PLAN.bursts, (PLAN.runs - at) * PLAN.bursts  # before it, from it on
    by_job = {h.job: h for h in analysis.autoscaler}
    for k in (1, 2):
        found = by_job[f"synth-job-{k}"]
        assert (found.windows, found.judged) == (windows, windows)
        assert found.wrong == late + at  # 6 + 2 of 12
        second = "sink" if planted_bottleneck(k) != "sink" else "enrich"
        assert [(t.verdict, t.windows, t.vertex, t.vertex_windows) for t in found.verdicts] == [
            ("agrees", early, planted_bottleneck(k), early),
            ("misses", late, planted_bottleneck(k), late),
            ("scales-ineffectively", PLAN.runs, second, PLAN.runs),
        ]


def test_a_slower_sink_between_two_real_runs_is_a_capacity_drop(
    analysis: Analysis, real_runs: Any
) -> None:
    drops = [r for r in analysis.regressions if r.job == "tiny" and r.kind == "capacity-drop"]
    assert [(r.vertex, r.before_run, r.after_run) for r in drops] == [
        ("out", real_runs.fast, real_runs.slow)
    ]
    assert isinstance(drops[0].after, float) and isinstance(drops[0].before, float)
    assert drops[0].after < drops[0].before * 0.8


def test_the_report_the_compare_page_and_spark_give_one_capacity_on_a_real_run(
    analysis: Analysis, runs_dir: Path, uneven_run: tuple[Path, str]
) -> None:
    report = load_report(uneven_run[1], Settings(runs_dir=runs_dir))
    work = next(v for v in report.vertices if v.name == "work")
    (cause,) = [c for c in report.root_causes or () if c.vertex == "work"]
    assert cause.subtasks == (0, 1, 2)  # the same subtasks in all three
    figures = [s.metrics.records_in_per_s / s.metrics.busy_ratio for s in work.subtasks]
    # the run tells the mean from the median by far more than the checks below allow (0.1%)
    assert abs(statistics.median(figures) - statistics.mean(figures)) > 0.005 * statistics.mean(
        figures
    ), figures
    spark = next(v for v in analysis.vertices if (v.job, v.vertex) == ("uneven", "work"))
    (point,) = spark.by_run
    assert cause.capacity_per_subtask == pytest.approx(statistics.mean(figures), abs=0.5)
    assert capacity_of_vertex(work) == pytest.approx(statistics.mean(figures), rel=1e-3)
    assert point.capacity == pytest.approx(statistics.mean(figures), rel=1e-3)


def test_noise_under_min_busy_is_no_regression_and_a_rescale_is_named(analysis: Analysis) -> None:
    found = [r for r in analysis.regressions if r.job == "rescaled"]
    assert [(r.kind, r.vertex) for r in found] == [("capacity-drop", "parse")]
    (drop,) = found
    assert (drop.before, drop.after) == (pytest.approx(1000), pytest.approx(500))
    assert (drop.parallelism_before, drop.parallelism_after) == (2, 6)
    assert drop.detail.endswith(
        "; parse runs 6 subtasks instead of 2: the parallelism changed between the runs"
    )
    light = next(v for v in analysis.vertices if (v.job, v.vertex) == ("rescaled", "light"))
    assert light.capacity_p50 is None and [p.capacity for p in light.by_run] == [None, None]


def test_the_chronic_bottleneck_is_ranked_first(analysis: Analysis) -> None:
    for k in (1, 2):
        ranked = [c for c in analysis.chronic if c.job == f"synth-job-{k}"]
        assert [c.rank for c in ranked] == list(range(1, len(ranked) + 1))
        assert ranked[0].vertex == planted_bottleneck(k)
        assert ranked[0].window_share == 1.0 and ranked[0].runs == PLAN.runs
        assert ranked[0].score > 3 * ranked[1].score  # the weak second cause of burst 0


def test_vertices_carry_levels_capacity_and_a_falling_trend(analysis: Analysis) -> None:
    vertices = {(v.job, v.vertex): v for v in analysis.vertices}
    source = vertices[("synth-job-1", "source")]
    assert source.share_high == 1.0 and source.ratio_p50 is not None and source.ratio_p50 > 0.8
    bottleneck = vertices[("synth-job-1", planted_bottleneck(1))]
    assert bottleneck.share_ok == 1.0 and bottleneck.busy_p50 is not None
    assert bottleneck.capacity_trend is not None and bottleneck.capacity_trend < -0.1
    assert [p.run_id for p in bottleneck.by_run] == [run_id(PLAN, 1, i) for i in range(4)]
    steady = vertices[("synth-job-1", "sink")]
    assert steady.capacity_trend is not None and abs(steady.capacity_trend) < 0.05


def test_a_subtask_hot_in_every_window_is_skew(analysis: Analysis) -> None:
    synthetic = [s for s in analysis.skew if s.job.startswith("synth")]
    assert sorted((s.job, s.vertex, s.subtask) for s in synthetic) == [
        (f"synth-job-{k}", skewed_vertex(k), 0) for k in (1, 2)
    ]
    assert all(s.share == 1.0 and s.runs == PLAN.runs for s in synthetic)


def test_the_json_reads_back_with_the_figures(analysis: Analysis) -> None:
    doc = json.loads(analysis_to_json(analysis))
    assert doc["schema"] == "bpmon.analysis/1"
    assert doc["thresholds"]["capacity_drop"] == 0.2
    assert {r["kind"] for r in doc["regressions"]} >= {"capacity-drop"}


def test_one_job_since_a_time_is_analysed_alone(spark: Any, runs_dir: Path) -> None:
    since = PLAN.start + PLAN.every * 2 - timedelta(minutes=1)
    found = analyze_history(Settings(runs_dir=runs_dir), job="synth-job-2", since=since)
    assert [j.job for j in found.jobs] == ["synth-job-2"]
    assert found.jobs[0].runs == 2  # runs 2 and 3 of the four
    assert [(r.before_run, r.after_run) for r in found.regressions] == []  # 2 -> 3: no drop


def test_a_single_run_gets_an_answer_not_an_error(
    spark: Any, tiny_run: Any, tmp_path: Path
) -> None:
    tiny_run(tmp_path, cost_us=1000)
    found = analyze_history(Settings(runs_dir=tmp_path))
    assert [j.runs for j in found.jobs] == [1]
    assert found.regressions == ()
    assert len(found.notes) == 1 and "single run" in found.notes[0]
    assert {v.vertex for v in found.vertices} == {"src", "out"}


def test_an_empty_history_is_a_plain_answer_without_spark(tmp_path: Path) -> None:
    found = analyze_history(Settings(runs_dir=tmp_path), master="spark://nowhere:1")
    assert found.master is None and found.jobs == ()
    assert "no history" in found.notes[0] and "bpmon history import" in found.notes[0]
    synthesize(HistoryStore.in_runs_dir(tmp_path), SynthPlan(runs=1, jobs=1, start=PLAN.start))
    other = analyze_history(Settings(runs_dir=tmp_path), job="nope", master="spark://nowhere:1")
    assert "no windows of job 'nope'" in other.notes[0] and "synth-job-1" in other.notes[0]


def test_analyze_writes_every_format_and_the_aggregates(
    spark: Any, runs_dir: Path, tmp_path: Path
) -> None:
    runner = CliRunner()
    args = ["analyze", "--runs-dir", str(runs_dir), "--master", "local[2]"]
    done = runner.invoke(app, [*args, "--format", "html", "--out", str(tmp_path)])
    assert done.exit_code == 0, done.output
    page = (tmp_path / "analysis.html").read_text()
    assert "plotly" in page.lower() and "capacity-drop" in page
    assert "decisions judged against bpmon" in page and "scales-ineffectively 4 (" in page
    assert json.loads((tmp_path / "analysis.json").read_text())["schema"] == "bpmon.analysis/1"
    regressions = pq.read_table(tmp_path / "regressions.parquet").to_pylist()
    assert {r["kind"] for r in regressions} == {"capacity-drop", "checkpoint-slower"}
    checkpoints = pq.read_table(tmp_path / "checkpoint_runs.parquet").to_pylist()
    assert sorted((r["job"], r["run_id"]) for r in checkpoints) == sorted(
        (f"synth-job-{k}", run_id(PLAN, k, i)) for k in (1, 2) for i in range(PLAN.runs)
    )
    assert len(pq.read_table(tmp_path / "vertex_runs.parquet")) > 0
    verdicts = pq.read_table(tmp_path / "autoscaler_verdicts.parquet").to_pylist()
    assert {(r["job"], r["verdict"]) for r in verdicts if r["job"].startswith("synth")} == {
        (f"synth-job-{k}", kind)
        for k in (1, 2)
        for kind in ("agrees", "misses", "scales-ineffectively")
    }
    jobs = pq.read_table(tmp_path / "autoscaler.parquet").to_pylist()
    assert {r["job"]: r["judged"] for r in jobs}["synth-job-1"] == PLAN.runs * PLAN.bursts
    markdown = runner.invoke(app, [*args, "--format", "md", "--job", "synth-job-1"])
    assert markdown.exit_code == 0 and "## Chronic bottlenecks" in markdown.stdout
    assert run_id(PLAN, 1, 2) in markdown.stdout
    text = runner.invoke(app, [*args, "--job", "tiny"])
    assert text.exit_code == 0 and "capacity-drop" in text.stdout


def test_a_bad_format_or_html_without_a_folder_is_one_line(tmp_path: Path) -> None:
    runner = CliRunner()
    for extra, expected in (
        (["--format", "pdf"], "--format 'pdf'"),
        (["--format", "html"], "--out"),
    ):
        done = runner.invoke(app, ["analyze", "--runs-dir", str(tmp_path), *extra])
        assert done.exit_code == 2
        assert done.stderr.count("\n") == 1 and expected in done.stderr


@pytest.mark.parametrize("width", [80, 120])
def test_the_analysis_tables_fit_the_terminal_without_breaking_a_word(
    analysis: Analysis, width: int, fits: Callable[..., str]
) -> None:
    out = " ".join(fits(lambda console: render_analysis_text(analysis, console), width).split())
    for title in ("Chronic bottlenecks", "Vertices over every window", "Skew over time"):
        assert title in out
    assert "capacity: records/s one subtask handles at 100% busy" in out  # the legend
    assert "synth-job-1" in out and "synth-job-2" in out


def test_one_job_s_tables_name_it_in_the_title_and_fit_80_columns(
    spark: Any, runs_dir: Path, fits: Callable[..., str]
) -> None:
    found = analyze_history(Settings(runs_dir=runs_dir), job="tiny", master="local[2]")
    out = " ".join(fits(lambda console: render_analysis_text(found, console), 80).split())
    assert "Vertices over every window: job tiny" in out
    assert ": 1 job, 2 runs, " in out  # counted in the right number, not "1 job(s)"


def test_analyze_json_is_the_analysis_document(spark: Any, runs_dir: Path) -> None:
    args = ["analyze", "--runs-dir", str(runs_dir), "--master", "local[2]", "--job", "tiny"]
    done = CliRunner().invoke(app, [*args, "--json"])
    assert done.exit_code == 0, done.output
    doc = json.loads(done.stdout)
    assert doc["schema"] == "bpmon.analysis/1"
    assert {r["kind"] for r in doc["regressions"]} == {"capacity-drop"}
    both = CliRunner().invoke(app, [*args, "--json", "--format", "md"])
    assert both.exit_code == 2 and "--json and --format md" in both.stderr
