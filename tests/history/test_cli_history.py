"""``bpmon history``: the group keeps its single-command forms and adds import, synth, compact
and prune.

All four forms the README shows work, with options before or after the run: ``bpmon history``,
``bpmon history RUN``, ``bpmon history --job J --since DATE`` and ``bpmon history import DIR``.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from rich.console import Console
from typer.testing import CliRunner

from bpmon.cli.commands import app
from bpmon.history.runs import RunStore
from bpmon.history.store import HistoryStore
from bpmon.model.values import Report
from bpmon.render.listing import bursts_table, runs_table
from bpmon.service.facade import Settings, run_bursts, stored_runs
from bpmon.service.history import synthesize_history


@pytest.fixture(scope="module")
def two_jobs(tmp_path_factory: pytest.TempPathFactory, tiny_run: Callable[..., str]) -> Path:
    """A runs folder with two real runs of ``tiny`` (one of two bursts) and nothing else."""
    runs = tmp_path_factory.mktemp("cli") / "runs"
    tiny_run(runs, cost_us=1000, bursts=2)
    tiny_run(runs, cost_us=1000)
    return runs


def bpmon(*args: str) -> tuple[int, str, str]:
    done = CliRunner().invoke(app, list(args))
    return done.exit_code, done.stdout, done.stderr


def test_history_lists_the_runs(two_jobs: Path) -> None:
    code, out, _ = bpmon("history", "--runs-dir", str(two_jobs))
    assert code == 0
    assert sum(line.strip().startswith("2") for line in out.splitlines()) == 2


def test_history_run_lists_its_bursts_with_options_before_or_after(two_jobs: Path) -> None:
    run = sorted(p.name for p in two_jobs.iterdir() if p.name != "history")[0]
    for args in (
        ("history", run, "--runs-dir", str(two_jobs)),
        ("history", "--runs-dir", str(two_jobs), run),
    ):
        code, out, err = bpmon(*args)
        assert code == 0, err
        assert "burst" in out and "window start" in out


def test_history_filters_by_job_and_since(two_jobs: Path) -> None:
    code, out, _ = bpmon("history", "--job", "tiny", "--since", "1d", "--runs-dir", str(two_jobs))
    assert code == 0 and sum("tiny" in line for line in out.splitlines()) == 2
    code, out, _ = bpmon(
        "history", "--job", "tiny", "--since", "2099-01-01", "--runs-dir", str(two_jobs)
    )
    assert code == 0 and "no runs of job 'tiny' since 2099-01-01" in out
    code, out, _ = bpmon("history", "--job", "other", "--runs-dir", str(two_jobs))
    assert code == 0 and "no runs of job 'other'" in out


def test_a_bad_since_is_one_line_with_exit_code_2(two_jobs: Path) -> None:
    code, _, err = bpmon("history", "--since", "last tuesday", "--runs-dir", str(two_jobs))
    assert code == 2
    assert err.count("\n") == 1 and "--since 'last tuesday'" in err and "7d" in err


def test_history_import_builds_the_dataset_once(two_jobs: Path, tmp_path: Path) -> None:
    target = tmp_path / "elsewhere"
    code, out, _ = bpmon("history", "import", str(two_jobs), "--runs-dir", str(target))
    assert code == 0 and "3 report(s) added" in out
    code, out, _ = bpmon("history", "--runs-dir", str(target), "import", str(two_jobs))
    assert code == 0 and "0 report(s) added, 3 already" in out
    assert HistoryStore.in_runs_dir(target).read("subtasks").num_rows == 3 * 3


def test_history_import_of_a_missing_folder_is_one_line(tmp_path: Path) -> None:
    code, _, err = bpmon("history", "import", str(tmp_path / "nope"), "--runs-dir", str(tmp_path))
    assert code != 0 and err.count("\n") == 1 and "is not a folder of runs" in err


def test_history_synth_writes_rows_marked_synthetic(tmp_path: Path) -> None:
    code, out, _ = bpmon(
        "history", "synth", "--runs", "3", "--jobs", "2", "--runs-dir", str(tmp_path)
    )
    assert code == 0 and "6 synthetic run(s)" in out and "synthetic = true" in out
    rows = HistoryStore.in_runs_dir(tmp_path).read("subtasks")
    assert set(rows.column("synthetic").to_pylist()) == {True}
    assert set(rows.column("job").to_pylist()) == {"synth-job-1", "synth-job-2"}
    assert all("synth" in r for r in rows.column("run_id").to_pylist())


@pytest.mark.parametrize(
    ("first", "second", "written"),
    [("12:00:01", "12:59:58", 0), ("12:59:59", "13:00:00", 6)],
)
def test_history_synth_twice_in_an_hour_writes_nothing_new(
    tmp_path: Path, first: str, second: str, written: int
) -> None:
    def at(clock: str) -> Settings:
        moment = datetime.fromisoformat(f"2026-11-23T{clock}+00:00")
        return Settings(runs_dir=tmp_path, now=lambda: moment)

    made = synthesize_history(at(first), runs=3, jobs=2)
    assert (made.runs, made.present) == (6, 0)
    again = synthesize_history(at(second), runs=3, jobs=2)
    assert (again.runs - again.present, again.present) == (written, 6 - written)


def test_history_help_shows_the_forms(bpmon_bin: Path) -> None:
    done = subprocess.run(
        [str(bpmon_bin), "history", "--help"], check=True, capture_output=True, text=True
    )
    assert "[RUN] | import DIR | synth | compact | prune" in done.stdout


def test_analyze_without_java_names_the_fix(bpmon_bin: Path, tmp_path: Path) -> None:
    bpmon("history", "synth", "--runs", "1", "--jobs", "1", "--runs-dir", str(tmp_path))
    env = {k: v for k, v in os.environ.items() if k != "JAVA_HOME"}
    env["PATH"] = str(Path(sys.executable).parent)  # python and bpmon, no java
    done = subprocess.run(
        [str(bpmon_bin), "analyze", "--runs-dir", str(tmp_path)],
        check=False,
        capture_output=True,
        text=True,
        env=env,
    )
    assert done.returncode != 0
    assert done.stderr.count("\n") == 1, done.stderr
    assert "Java" in done.stderr and "scripts/setup --spark" in done.stderr


def test_history_compact_says_how_many_files_before_and_after(
    tmp_path: Path, make_report: Callable[..., Report]
) -> None:
    history = HistoryStore.in_runs_dir(tmp_path, compact=False)
    for burst in range(10):
        history.append(make_report(burst), burst)
    code, out, err = bpmon("history", "compact", "--runs-dir", str(tmp_path))
    assert code == 0, err
    assert out.startswith("compacted 1 job-day(s) of ")
    assert "15 files before, 2 after (10 parts merged into 2)" in out
    assert history.read("subtasks").num_rows == 10 * 3
    code, out, _ = bpmon("history", "--runs-dir", str(tmp_path), "compact")
    assert code == 0 and "compacted 0 job-day(s)" in out and "2 files before, 2 after" in out


def test_history_prune_removes_what_is_older_than_keep_days(
    tmp_path: Path, make_report: Callable[..., Report]
) -> None:
    now = datetime.now(UTC)
    runs, history = RunStore(tmp_path), HistoryStore.in_runs_dir(tmp_path)
    old, new = "20200101T000000Z-enrich-0001", "20200101T000000Z-enrich-0002"
    for run, start in ((old, now - timedelta(days=40)), (new, now - timedelta(hours=1))):
        for burst in range(2):
            report = make_report(burst, run_id=run, start=start)
            runs.save(report, burst)
            history.append(report, burst)
    before = sorted(p for p in tmp_path.rglob("*") if p.is_file())

    code, out, err = bpmon("history", "prune", "--dry-run", "--runs-dir", str(tmp_path))
    assert code == 0, err
    assert out.startswith(f"would remove from {tmp_path} what is older than ")
    assert "(keep_days 30): 1 job-day(s) of the Parquet history (3 files)" in out
    assert out.rstrip().endswith("1 run folder(s) and 2 burst report(s)")  # would be
    assert sorted(p for p in tmp_path.rglob("*") if p.is_file()) == before

    code, out, err = bpmon("history", "prune", "--runs-dir", str(tmp_path))
    assert code == 0, err
    assert "(keep_days 30): 1 job-day(s) of the Parquet history (3 files)" in out
    assert out.rstrip().endswith("1 run folder(s) and 2 burst report(s)")
    assert not (tmp_path / old).exists() and (tmp_path / new / "report.json").is_file()
    assert set(history.read("subtasks").column("run_id").to_pylist()) == {new}

    code, out, _ = bpmon("history", "prune", "--keep-days", "0", "--runs-dir", str(tmp_path))
    assert code == 0 and "keep_days = 0 keeps everything" in out


def test_history_prune_with_negative_days_is_one_line_and_exit_code_2(tmp_path: Path) -> None:
    code, _, err = bpmon("history", "prune", "--keep-days", "-3", "--runs-dir", str(tmp_path))
    assert code == 2 and err.count("\n") == 1 and "--keep-days -3" in err


@pytest.mark.parametrize("width", [80, 120])
def test_the_history_tables_fit_the_terminal_without_breaking_a_word(
    two_jobs: Path, width: int, fits: Callable[..., str]
) -> None:
    settings = Settings(runs_dir=two_jobs)
    runs = stored_runs(settings)
    out = fits(lambda console: console.print(runs_table(runs, console.width)), width)
    assert all(run.run_id in out for run in runs)
    for run in runs:
        bursts = run_bursts(run.run_id, settings)

        def draw(console: Console, bursts: list[tuple[int, Report]] = bursts) -> None:
            console.print(bursts_table(bursts, console.width))

        assert "window start" in " ".join(fits(draw, width).split())


def test_history_json_lists_every_run_with_stable_fields(two_jobs: Path) -> None:
    code, out, err = bpmon("history", "--json", "--runs-dir", str(two_jobs))
    assert code == 0, err
    runs = json.loads(out)
    assert len(runs) == 2
    fields = {"run_id", "job", "source", "started", "window_start", "bursts", "worst_level"}
    for run in runs:
        assert fields | {"root_causes"} == set(run)
        assert run["job"] == "tiny" and run["source"] == "runtime"
        assert run["started"] <= run["window_start"]  # ISO UTC strings sort as times
    assert sorted(r["bursts"] for r in runs) == [1, 2]
    code, out, _ = bpmon("history", "--json", "--since", "2099-01-01", "--runs-dir", str(two_jobs))
    assert code == 0 and json.loads(out) == []


def test_history_run_json_lists_its_bursts(two_jobs: Path) -> None:
    code, out, _ = bpmon("history", "--json", "--runs-dir", str(two_jobs))
    two = next(r["run_id"] for r in json.loads(out) if r["bursts"] == 2)
    for args in (("history", two, "--json"), ("history", "--json", two)):
        code, out, err = bpmon(*args, "--runs-dir", str(two_jobs))
        assert code == 0, err
        bursts = json.loads(out)
        assert [b["burst"] for b in bursts] == [0, 1]
        assert {b["run_id"] for b in bursts} == {two}
        assert bursts[0]["window_start"] < bursts[1]["window_start"]
        assert all(b["samples"] == 10 and b["worst_level"] in ("OK", "LOW", "HIGH") for b in bursts)


def test_since_is_on_the_run_start_not_its_window(
    tmp_path: Path, make_report: Callable[..., Report]
) -> None:
    """A run started 09:52:59 whose first window began after warm-up, at 09:53:05."""
    report = make_report(
        0, run_id="20261126T095259Z-enrich-0001", start=datetime(2026, 11, 26, 9, 53, 5, tzinfo=UTC)
    )
    RunStore(tmp_path).save(report, burst=0)
    listed = {}
    for since in ("2026-11-26T09:53", "2026-11-26T09:52:59"):
        code, out, err = bpmon("history", "--json", "--since", since, "--runs-dir", str(tmp_path))
        assert code == 0, err
        listed[since] = [r["run_id"] for r in json.loads(out)]
    assert listed == {
        "2026-11-26T09:53": [],
        "2026-11-26T09:52:59": ["20261126T095259Z-enrich-0001"],
    }
