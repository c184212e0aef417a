"""Additive schema evolution: a part written before a column was added still reads everywhere.

The older parts here are real Parquet files written by pyarrow the way an older bpmon wrote
them: the schema version in the metadata, the columns of its day (two nullable ones fewer, and
none of the checkpoint or autoscaler columns; or exactly the columns of the bpmon before the
checkpoint ones, or before the autoscaler ones), no windows recorded. The current code reads them
with pyarrow, compacts them and reads and analyses them with Spark beside parts that carry
checkpoints or the autoscaler's verdicts, the missing columns as nulls. Parts that cannot be read
that way (a missing column that may not be null, a column of another type) are still skipped and
named.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, date, datetime
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from bpmon.history.analytics import read_table
from bpmon.history.compaction import compact
from bpmon.history.schema import (
    AUTOSCALER_COLUMNS,
    CHECKPOINT_COLUMNS,
    SCHEMA_KEY,
    TABLE_KEY,
    TABLES,
    arrow_schema,
)
from bpmon.history.store import HistoryStore
from bpmon.model.analysis import AutoscalerHistory, VerdictTally
from bpmon.model.autoscaler import VerdictKind
from bpmon.model.checkpoints import CheckpointStatus
from bpmon.model.values import Report
from bpmon.service.facade import Settings
from bpmon.service.history import analyze_history
from tests.history.reports import autoscaler, checkpoints, with_autoscaler, with_checkpoints

RUN = "20261122T101500Z-enrich-0001"
Exactly = Callable[[HistoryStore, set[tuple[str, int]]], None]
ADDED = ("in_pool_usage", "records_out_per_s")
"""Columns the older bpmon did not have yet (both may be null)."""
OLD_RUN = "20261122T080000Z-enrich-0000"

OLD_ROWS = {
    "job": ["enrich/eu"] * 2,
    "date": [date(2026, 11, 22)] * 2,
    "run_id": ["20261122T080000Z-enrich-0000"] * 2,
    "burst": [0, 0],
    "window_start": [datetime(2026, 11, 22, 8, 0, tzinfo=UTC)] * 2,
    "window_end": [datetime(2026, 11, 22, 8, 0, 5, tzinfo=UTC)] * 2,
    "source": ["runtime"] * 2,
    "levels_from": ["samples"] * 2,
    "vertex": ["source", "sink"],
    "vertex_index": [0, 1],
    "parallelism": [1, 1],
    "subtask": [0, None],
    "level": ["HIGH", "OK"],
    "ratio": [0.9, 0.0],
    "busy_ratio": [0.1, 1.0],
    "idle_ratio": [0.0, 0.0],
    "backpressured_time_ratio": [0.9, 0.0],
    "out_pool_usage": [1.0, 0.1],
    "records_in_per_s": [0.0, 990.0],
    "bpmon_version": ["0.1.0"] * 2,
    "synthetic": [False, False],
}


def write_older(
    store: HistoryStore,
    rows: dict[str, list[Any]],
    name: str,
    types: dict[str, pa.DataType] | None = None,
) -> Path:
    """A subtasks part as another bpmon wrote it: its columns (of the current types unless
    ``types`` says otherwise), its version, nothing else."""
    current = arrow_schema("subtasks")
    fields = [
        pa.field(column, (types or {}).get(column) or _type(current, column, values))
        for column, values in rows.items()
    ]
    meta = {SCHEMA_KEY: b"bpmon.history/1", TABLE_KEY: b"subtasks"}
    table = pa.Table.from_pydict(rows, schema=pa.schema(fields, metadata=meta))
    path = store.part_path("subtasks", "enrich/eu", date(2026, 11, 22), name)
    path.parent.mkdir(parents=True, exist_ok=True)
    pq.write_table(table, path)
    return path


def _type(schema: pa.Schema, column: str, values: list[Any]) -> pa.DataType:
    index = schema.get_field_index(column)
    return schema.field(index).type if index >= 0 else pa.array(values).type


def checkpointed(report: Report, burst: int) -> Report:
    """``report`` with a checkpoint completed in its window: id ``burst + 1``, 100 + burst ms."""
    status: CheckpointStatus = "completed"
    ended = (burst + 1, status, 100.0 + burst, 50.0)
    return with_checkpoints(report, checkpoints(ended, completed=burst + 1, failed=0))


def assert_checkpoints_kept(rows: list[dict[str, Any]]) -> None:
    """The older part's rows read every checkpoint column as null; today's keep their figures."""
    old = [r for r in rows if r["run_id"] == OLD_RUN]
    assert old and {r[c] for r in old for c in CHECKPOINT_COLUMNS} == {None}
    new = [r for r in rows if r["run_id"] == RUN]
    assert new and all(r["checkpoint_id"] == r["burst"] + 1 for r in new)
    assert all(r["checkpoint_duration_ms"] == 100.0 + r["burst"] for r in new)
    assert {r["checkpoint_vertex_sync_ms"] for r in new if r["vertex"] == "sink"} == {1.5}


@pytest.fixture
def mixed(tmp_path: Path, make_report: Callable[..., Report]) -> HistoryStore:
    """A job-day with an older part (two columns fewer, no checkpoint columns) beside three parts
    of today's bpmon with checkpoints."""
    store = HistoryStore(tmp_path, compact=False)
    for burst in range(3):
        store.append(checkpointed(make_report(burst), burst), burst)
    write_older(store, OLD_ROWS, f"{OLD_RUN}-0")
    return store


def test_an_older_part_reads_with_the_added_columns_as_nulls(mixed: HistoryStore) -> None:
    scan = mixed.scan()
    assert scan.skipped == ()
    rows = mixed.read("subtasks", scan).to_pylist()
    old = [r for r in rows if r["run_id"] == OLD_ROWS["run_id"][0]]
    assert [(r["vertex"], r["records_in_per_s"]) for r in old] == [("source", 0.0), ("sink", 990.0)]
    assert {r[c] for r in old for c in ADDED} == {None}
    assert {r["records_out_per_s"] for r in rows if r["run_id"] == RUN} == {None}
    assert {r["in_pool_usage"] for r in rows if r["run_id"] == RUN} == {None}
    assert_checkpoints_kept(rows)
    assert len(rows) == 2 + 3 * 3


def test_compaction_brings_an_older_part_to_the_current_schema(mixed: HistoryStore) -> None:
    before = sorted(mixed.read("subtasks").to_pylist(), key=lambda r: (r["run_id"], r["burst"]))
    done = compact(pq, mixed.root, today=None)
    assert (done.merged, done.files_after, done.problems) == (4, 2, [])
    (part,) = mixed.scan().subtasks
    assert pq.read_schema(part.path).names == arrow_schema("subtasks").names
    after = sorted(mixed.read("subtasks").to_pylist(), key=lambda r: (r["run_id"], r["burst"]))
    assert after == before
    assert_checkpoints_kept(after)


def test_spark_reads_an_older_part_with_the_added_columns_as_nulls(
    spark: Any, mixed: HistoryStore
) -> None:
    frame = read_table(spark, mixed.scan().paths("subtasks"), "subtasks")
    rows = [r.asDict() for r in frame.where(frame.run_id == OLD_ROWS["run_id"][0]).collect()]
    assert sorted((r["vertex"], r["records_in_per_s"]) for r in rows) == [
        ("sink", 990.0),
        ("source", 0.0),
    ]
    assert {r[c] for r in rows for c in ADDED} == {None}
    assert_checkpoints_kept([r.asDict() for r in frame.collect()])
    assert frame.count() == 2 + 3 * 3


def test_the_checkpoint_columns_may_be_null_so_older_parts_stay_readable() -> None:
    """Parts written before the checkpoint columns lack them: a column among them that may not
    be null would make every such part unreadable (skipped)."""
    columns = {c.name: c for c in TABLES["subtasks"]}
    assert CHECKPOINT_COLUMNS and all(columns[name].nullable for name in CHECKPOINT_COLUMNS)


@pytest.mark.slow
def test_parts_from_before_the_checkpoint_columns_analyse_beside_new_ones(
    spark: Any, tmp_path: Path, make_report: Callable[..., Report]
) -> None:
    """A part with exactly the columns of the bpmon before them, and parts of today with
    checkpoints: read and analysed together, the older run has no checkpoint figures and today's
    run all of them; compacted, the older rows keep their nulls."""
    store = HistoryStore.in_runs_dir(tmp_path, compact=False)
    yesterday = {**OLD_ROWS, "in_pool_usage": [0.2, None], "records_out_per_s": [900.0, 0.0]}
    before = set(CHECKPOINT_COLUMNS) | set(AUTOSCALER_COLUMNS)  # it had neither
    assert set(yesterday) == set(arrow_schema("subtasks").names) - before
    path = write_older(store, yesterday, f"{OLD_RUN}-0")
    for burst in range(3):
        store.append(checkpointed(make_report(burst), burst), burst)
    assert store.scan().skipped == ()

    found = analyze_history(Settings(runs_dir=tmp_path), master="local[2]")
    (job,) = found.jobs
    (history,) = found.checkpoints
    assert job.runs == 2  # the older run is analysed, without checkpoints
    assert [(p.run_id, p.checkpoints, p.duration_p50) for p in history.by_run] == [
        (RUN, 3, 101.0)  # 100, 101, 102 ms: the median is 101
    ]
    done = compact(pq, store.root, today=None)
    assert done.problems == [] and not path.exists()
    assert_checkpoints_kept(store.read("subtasks").to_pylist())


def test_the_autoscaler_columns_may_be_null_so_older_parts_stay_readable() -> None:
    columns = {c.name: c for c in TABLES["subtasks"]}
    assert AUTOSCALER_COLUMNS and all(columns[name].nullable for name in AUTOSCALER_COLUMNS)


@pytest.mark.slow
def test_parts_from_before_the_autoscaler_columns_analyse_beside_new_ones(
    spark: Any, tmp_path: Path, make_report: Callable[..., Report]
) -> None:
    """A part with exactly the columns of the bpmon before them (the checkpoint ones included),
    and parts of today with the autoscaler's verdicts: read, analysed and compacted together, the
    older run's window counts in no autoscaler figure, today's three do; nothing is lost."""
    store = HistoryStore.in_runs_dir(tmp_path, compact=False)
    current = arrow_schema("subtasks")
    yesterday = {
        **OLD_ROWS,
        "in_pool_usage": [0.2, None],
        "records_out_per_s": [900.0, 0.0],
        **{c: [None, None] for c in CHECKPOINT_COLUMNS},
        "checkpoint_id": [7, 7],
    }
    assert set(yesterday) == set(current.names) - set(AUTOSCALER_COLUMNS)
    path = write_older(store, yesterday, f"{OLD_RUN}-0")
    decided: list[tuple[VerdictKind, int]] = [("misses", 1), ("misses", 1), ("agrees", 3)]
    for burst, (verdict, asked) in enumerate(decided):
        decision = autoscaler({"source": (2, 2), "sink": (1, asked)}, (("sink", verdict),))
        store.append(with_autoscaler(make_report(burst), decision), burst)
    assert store.scan().skipped == ()

    def assert_kept(rows: list[dict[str, Any]]) -> None:
        old = [r for r in rows if r["run_id"] == OLD_RUN]
        assert old and {r[c] for r in old for c in AUTOSCALER_COLUMNS} == {None}
        assert [r["checkpoint_id"] for r in old] == [7, 7]  # what it had, kept
        sinks = [r for r in rows if r["run_id"] == RUN and r["vertex"] == "sink"]
        got = [
            (r["autoscaler_verdicts"], r["autoscaler_recommended_parallelism"])
            for r in sorted(sinks, key=lambda r: r["burst"])
        ]
        assert got == [(["misses"], 1), (["misses"], 1), (["agrees"], 3)]

    assert_kept(store.read("subtasks").to_pylist())
    found = analyze_history(Settings(runs_dir=tmp_path), master="local[2]")
    (job,) = found.jobs
    assert job.runs == 2  # the older run is analysed, without a decision
    assert found.autoscaler == (
        AutoscalerHistory(
            "enrich/eu",
            windows=3,
            judged=3,
            wrong=2,
            verdicts=(VerdictTally("misses", 2, "sink", 2), VerdictTally("agrees", 1, "sink", 1)),
        ),
    )
    done = compact(pq, store.root, today=None)
    assert done.problems == [] and not path.exists()
    assert_kept(store.read("subtasks").to_pylist())


def test_a_later_minor_versions_extra_column_is_left_out(tmp_path: Path) -> None:
    store = HistoryStore(tmp_path)
    later = {**OLD_ROWS, **{c: [0.5, 0.5] for c in ADDED}, "gc_time_ratio": [0.01, 0.02]}
    write_older(store, later, "later-0")
    rows = store.read("subtasks").to_pylist()
    assert [r["in_pool_usage"] for r in rows] == [0.5, 0.5]
    assert "gc_time_ratio" not in rows[0]


@pytest.mark.parametrize(
    ("change", "types", "reason"),
    [
        ({"vertex": None}, {}, "has no column 'vertex' (it may not be null)"),
        ({"ratio": ["high", "low"]}, {"ratio": pa.string()}, "column 'ratio' is string"),
        (
            {"autoscaler_verdicts": ["misses", ""]},
            {"autoscaler_verdicts": pa.string()},
            "column 'autoscaler_verdicts' is string, expected list<item: string>",
        ),
    ],
)
def test_a_part_that_cannot_be_read_so_is_skipped_and_named(
    tmp_path: Path, change: dict[str, Any], types: dict[str, pa.DataType], reason: str
) -> None:
    store = HistoryStore(tmp_path)
    rows = {k: v for k, v in {**OLD_ROWS, **change}.items() if v is not None}
    path = write_older(store, rows, "odd-0", types)
    scan = store.scan()
    assert scan.subtasks == ()
    assert [line for line in scan.skipped if str(path) in line and reason in line]


def test_a_dataset_an_older_bpmon_wrote_compacts_and_reads_the_same(
    tmp_path: Path, make_report: Callable[..., Report], exactly: Exactly
) -> None:
    store = HistoryStore(tmp_path, compact=False)
    for burst in range(40):
        store.append(make_report(burst), burst)
    meta = {SCHEMA_KEY: b"bpmon.history/1"}
    for path in sorted(tmp_path.rglob("part-*.parquet")):  # as it wrote them: no windows
        table = pq.read_table(path)
        pq.write_table(
            table.replace_schema_metadata({**meta, TABLE_KEY: path.parts[-4].encode()}), path
        )
        twin = Path(str(path).replace("/subtasks/", "/causes/"))
        if not twin.exists():  # and an empty causes part for every healthy window
            empty = arrow_schema("causes").empty_table()
            pq.write_table(empty.replace_schema_metadata({**meta, TABLE_KEY: b"causes"}), twin)
    assert len(list((tmp_path / "causes").rglob("*.parquet"))) == 40
    exactly(store, {(RUN, b) for b in range(40)})
    done = compact(pq, tmp_path, today=None)
    assert (done.merged, done.files_after, done.problems) == (40, 2, [])
    exactly(store, {(RUN, b) for b in range(40)})


def test_a_later_versions_part_is_never_compacted_by_this_one(tmp_path: Path) -> None:
    store = HistoryStore(tmp_path, compact=False)
    later = {**OLD_ROWS, **{c: [0.5, 0.5] for c in ADDED}, "gc_time_ratio": [0.01, 0.02]}
    path = write_older(store, later, "later-0")
    write_older(store, {**OLD_ROWS, "run_id": ["20261122T080000Z-enrich-0001"] * 2}, "older-0")
    before = path.read_bytes()
    done = compact(pq, tmp_path, today=None)
    assert len(done.problems) == 1 and "gc_time_ratio" in done.problems[0]
    assert path.read_bytes() == before  # its column is kept: left as it was
    assert pq.read_table(path).column("gc_time_ratio").to_pylist() == [0.01, 0.02]
