"""The history store: every saved report is in the dataset, appends are idempotent, odd files
are named and left alone, and saving works without pyarrow."""

from __future__ import annotations

import logging
import os
import subprocess
import sys
import textwrap
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from bpmon.history.importer import import_runs
from bpmon.history.runs import RunStore
from bpmon.history.schema import SCHEMA_KEY, TABLES, arrow_schema
from bpmon.history.store import HistoryStore, keep_in_history
from bpmon.model.report_json import report_to_json
from bpmon.model.values import Report, VertexStatus
from bpmon.service.facade import save_report
from tests.history.reports import RUN, window_report


def report(run_id: str = RUN, job: str = "slow enrich/eu") -> Report:
    """A diagnosed report (burst 1 of a watch): a two-subtask source, a sink without subtask
    detail, one cause."""
    return window_report(1, run_id=run_id, job=job)


def test_a_report_becomes_one_row_per_subtask_and_one_per_cause(tmp_path: Path) -> None:
    history = HistoryStore(tmp_path)
    assert history.append(report(), burst=2)
    rows = history.read("subtasks").to_pylist()
    assert [(r["vertex"], r["subtask"], r["level"]) for r in rows] == [
        ("source", 0, "HIGH"),
        ("source", 1, "LOW"),
        ("sink", None, "OK"),  # no subtask detail: the vertex as a whole
    ]
    assert {r["job"] for r in rows} == {"slow enrich/eu"}
    assert {(r["burst"], r["date"].isoformat(), r["synthetic"]) for r in rows} == {
        (2, "2026-11-22", False)
    }
    assert rows[2]["records_in_per_s"] == 990.0 and rows[0]["busy_ratio"] is None
    (cause,) = history.read("causes").to_pylist()
    assert (cause["vertex"], cause["kind"], cause["subtasks"]) == ("sink", "slow-sink", [0])
    assert cause["capacity_per_subtask"] == 990.0 and cause["rank"] == 0


def test_the_dataset_is_partitioned_by_job_and_date_and_versioned(tmp_path: Path) -> None:
    history = HistoryStore(tmp_path)
    history.append(report(), burst=0)
    part = tmp_path / "subtasks/job=slow%20enrich%2Feu/date=2026-11-22"
    assert [p.name for p in part.iterdir()] == ["part-20261122T101500Z-enrich-0001-0.parquet"]
    schema = pq.read_schema(next(part.iterdir()))
    assert schema.metadata[SCHEMA_KEY] == b"bpmon.history/1"
    assert schema.names == [c.name for c in TABLES["subtasks"]]


def test_appending_a_report_twice_adds_nothing(tmp_path: Path) -> None:
    history = HistoryStore(tmp_path)
    assert history.append(report(), burst=0)
    before = sorted(p.stat().st_mtime_ns for p in tmp_path.rglob("*.parquet"))
    assert not history.append(report(), burst=0)
    assert sorted(p.stat().st_mtime_ns for p in tmp_path.rglob("*.parquet")) == before
    assert history.read("subtasks").num_rows == 3


def test_torn_foreign_and_unfinished_files_are_named_skipped_and_left(tmp_path: Path) -> None:
    history = HistoryStore(tmp_path)
    history.append(report(), burst=0)
    history.append(report("20261122T101500Z-enrich-0002"), burst=0)
    good = history.scan()
    folder = good.subtasks[0].path.parent
    torn = folder / "part-torn-0.parquet"
    torn.write_bytes(good.subtasks[0].path.read_bytes()[:200])
    foreign = folder / "part-foreign-0.parquet"
    pq.write_table(pa.table({"x": [1, 2]}), foreign)
    stray = folder / "notes.txt"
    stray.write_text("mine")
    temp = folder / ".part-x-0.parquet.abc.tmp"
    temp.write_bytes(b"PAR1")
    orphan = good.causes[1].path
    os.unlink(good.subtasks[1].path)  # as if killed between the two renames
    contents = {p: p.read_bytes() for p in (torn, foreign, stray, temp, orphan)}

    scan = history.scan()
    assert [p.path for p in scan.subtasks] == [good.subtasks[0].path]
    assert [p.path for p in scan.causes] == [good.causes[0].path]
    for path in contents:
        assert sum(str(path) in line for line in scan.skipped) == 1, (path, scan.skipped)
    reasons = " | ".join(scan.skipped)
    for reason in ("torn", "foreign Parquet", "foreign file", "temporary", "unfinished append"):
        assert reason in reasons
    assert history.read("subtasks", scan).num_rows == 3
    assert {p: p.read_bytes() for p in contents} == contents  # nothing deleted or changed
    assert history.append(report("20261122T101500Z-enrich-0002"), burst=0)  # completes it
    assert len(history.scan().causes) == 2


def test_a_part_of_another_major_version_is_skipped(tmp_path: Path) -> None:
    history = HistoryStore(tmp_path)
    history.append(report(), burst=0)
    path = history.scan().subtasks[0].path
    table = pq.read_table(path)
    later = path.with_name("part-later-0.parquet")
    pq.write_table(table.replace_schema_metadata({SCHEMA_KEY: b"bpmon.history/2"}), later)
    scan = history.scan()
    assert len(scan.subtasks) == 1
    assert any(str(later) in s and "bpmon.history/2" in s for s in scan.skipped)


def test_every_report_a_run_saves_is_in_the_history(
    tmp_path: Path, tiny_run: Callable[..., str]
) -> None:
    run_id = tiny_run(tmp_path, cost_us=1000, bursts=2)
    rows = HistoryStore.in_runs_dir(tmp_path).read("subtasks").to_pylist()
    assert {(r["run_id"], r["burst"]) for r in rows} == {(run_id, 0), (run_id, 1)}
    assert {r["vertex"] for r in rows} == {"src", "out"}
    assert RunStore(tmp_path).list_runs()[0].run_id == run_id  # history/ is not a run


def test_a_failed_append_is_one_warning_and_the_report_is_saved(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    (tmp_path / "history").write_text("a file where the dataset's folder should be")
    with caplog.at_level(logging.WARNING, logger="bpmon.history"):
        path = save_report(RunStore(tmp_path), report(), burst=0)
        assert not keep_in_history(tmp_path, report(), 0)
    assert path.is_file()
    assert len(caplog.records) == 2
    assert "bpmon history import" in caplog.records[0].getMessage()


def test_without_pyarrow_reports_are_saved_silently_and_the_history_names_the_fix(
    tmp_path: Path,
) -> None:
    """The core install: runs say nothing of the history; asking for it names what is missing."""
    document = tmp_path / "report.txt"
    document.write_text(report_to_json(report()))
    code = textwrap.dedent(
        f"""
        import sys
        from dataclasses import replace
        from pathlib import Path
        sys.modules["pyarrow"] = None  # as in the core install: `import pyarrow` fails
        from bpmon.model.errors import BpmonError
        from bpmon.history.runs import RunStore
        from bpmon.service.history import import_history
        from bpmon.model.report_json import report_from_json
        from bpmon.service.facade import Settings, save_report
        report = report_from_json(Path({str(document)!r}).read_text())
        store = RunStore(Path({str(tmp_path)!r}))
        save_report(store, report)
        save_report(store, replace(report, run_id="20261122T101500Z-enrich-0002"))
        print("pyarrow" in sys.modules and sys.modules["pyarrow"] is not None)
        sys.stdout.flush()
        sys.stderr.write("saved\\n")
        try:
            import_history(Path({str(tmp_path)!r}), Settings(runs_dir=Path({str(tmp_path)!r})))
        except BpmonError as exc:
            print(exc)
        """
    )
    done = subprocess.run([sys.executable, "-c", code], check=False, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    assert done.stderr == "saved\n"  # nothing said by the two saves
    loaded, asked = done.stdout.splitlines()
    assert loaded == "False"
    assert "pyarrow is not installed" in asked and "scripts/setup --spark" in asked
    assert "bpmon history import" in asked
    assert len(list(tmp_path.glob("*/report.json"))) == 2
    assert not (tmp_path / "history").exists()


def test_import_builds_the_dataset_from_run_folders_once(tmp_path: Path) -> None:
    runs = RunStore(tmp_path / "runs")
    runs.save(report("20261122T101500Z-enrich-0001"), burst=0)
    runs.save(report("20261122T101500Z-enrich-0001"), burst=1)
    runs.save(report("20261122T101500Z-enrich-0002"), burst=0)
    broken = tmp_path / "runs" / "20261122T101500Z-enrich-0003"
    broken.mkdir()
    (broken / "report.json").write_text("{not json")
    history = HistoryStore(tmp_path / "out" / "history")

    first = import_runs(history, tmp_path / "runs")
    assert (first.runs, first.added, first.present) == (3, 3, 0)
    assert len(first.skipped) == 1 and str(broken) in first.skipped[0]
    again = import_runs(history, tmp_path / "runs")
    assert (again.added, again.present) == (0, 3)
    assert history.read("subtasks").num_rows == 9
    assert (broken / "report.json").read_text() == "{not json"


def test_the_arrow_schema_is_the_declared_one() -> None:
    for table, columns in TABLES.items():
        schema = arrow_schema(table)
        assert schema.names == [c.name for c in columns]
        assert [f.nullable for f in schema] == [c.nullable for c in columns]


def test_a_value_pyarrow_refuses_is_one_warning_and_the_report_is_saved(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    source = VertexStatus("source", 2**31, "HIGH", 0.9)  # a parallelism no int32 column holds
    huge = replace(report(), vertices=(source,))
    with caplog.at_level(logging.WARNING, logger="bpmon.history"):
        path = save_report(RunStore(tmp_path), huge, burst=0)  # the one save path: no raise
    assert path.is_file()
    (record,) = caplog.records
    message = record.getMessage()
    assert "\n" not in message
    assert huge.run_id in message and "ArrowInvalid" in message
    assert "report this as a bug" in message and str(tmp_path) in message
    assert HistoryStore.in_runs_dir(tmp_path).read("subtasks").num_rows == 0
    done = import_runs(HistoryStore(tmp_path / "elsewhere"), tmp_path)
    assert (done.added, done.present) == (0, 0)
    assert len(done.skipped) == 1 and "ArrowInvalid" in done.skipped[0]
