"""The history dataset's schema, declared once: the columns of its two tables and their version.

The history is a Parquet dataset under the runs directory (``docs/history.md``)::

    <runs-dir>/history/
        subtasks/job=<job>/date=<YYYY-MM-DD>/part-<run id>-<burst>.parquet
        causes/job=<job>/date=<YYYY-MM-DD>/part-<run id>-<burst>.parquet
        (and part-compacted-<id>.parquet: many windows merged, ``compaction.py``)

``subtasks`` holds one row per subtask per monitoring window, ``causes`` one row per root cause
of a window. What belongs to a whole window is repeated on each of its subtask rows, as its run
and times are: the job's checkpoints (its counts and its newest checkpoint, ``checkpoint*``
columns), and on each vertex's rows that vertex's phases in that checkpoint; whether the
autoscaler would act (``autoscaler_acts``), and on each vertex's rows what it would give that
vertex and its verdicts there (``autoscaler_*``). Parquet stores a value repeated down a column
in a few bytes, and the analytics' one pass over the subtask rows reads them with the rest (no
table or join of their own).

Every column is listed here exactly once, with its type, whether it may be null and what it
means; the pyarrow schema the store writes, the Spark schema the analytics read with and the
table in ``docs/history.md`` (checked by a test) all come from these lists.

Every part file carries :data:`HISTORY_SCHEMA`, its table's name and the windows it holds in its
Parquet metadata. A reader takes the files of its own major version and skips (and names) any
other: columns are added in minor versions, never renamed or given another meaning, and a part
written before a nullable column was added reads it as null (``parts.py``).

pyarrow and pyspark are imported only inside the functions that build their schemas.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from typing import TYPE_CHECKING, Literal

if TYPE_CHECKING:
    import pyarrow as pa
    from pyspark.sql.types import StructType

HISTORY_SCHEMA = "bpmon.history/1"
"""The dataset's schema name and major version, written into every part file."""

SCHEMA_KEY = b"bpmon.history.schema"
"""The Parquet metadata key holding :data:`HISTORY_SCHEMA`."""

TABLE_KEY = b"bpmon.history.table"
"""The Parquet metadata key holding the table a part belongs to (``subtasks`` or ``causes``)."""

WINDOWS_KEY = b"bpmon.history.windows"
"""The Parquet metadata key holding the windows a part holds (JSON, ``windows.py``)."""

COMPACTED_KEY = b"bpmon.history.compacted"
"""The Parquet metadata key marking a compacted part (it replaces the parts it covers)."""

TableName = Literal["subtasks", "causes"]
Kind = Literal[
    "string", "int32", "int64", "float64", "bool", "date", "timestamp", "int32 list", "string list"
]


@dataclass(frozen=True, slots=True)
class Column:
    """One column: its name, type, whether it may be null, and what it holds."""

    name: str
    kind: Kind
    nullable: bool
    doc: str


_WINDOW = (
    Column("job", "string", False, "the job's name (also the `job=` partition)"),
    Column("date", "date", False, "the UTC date the window started (also the `date=` partition)"),
    Column("run_id", "string", False, "the run the window belongs to"),
    Column("burst", "int32", False, "the window's burst within its run (0 is the first)"),
    Column("window_start", "timestamp", False, "when the window began (UTC, microseconds)"),
    Column("window_end", "timestamp", False, "when the window ended (UTC, microseconds)"),
    Column("source", "string", False, "what was watched: `runtime`, `pyspy` or `flink`"),
)
_CHECKPOINTS = (
    Column(
        "checkpoints_completed",
        "int64",
        True,
        "checkpoints completed since the job started; null: no checkpoints observed",
    ),
    Column("checkpoints_failed", "int64", True, "checkpoints failed since the job started"),
    Column(
        "checkpoint_id", "int64", True, "the newest checkpoint that ended; null: none ended yet"
    ),
    Column("checkpoint_status", "string", True, "`completed` or `failed`"),
    Column(
        "checkpoint_duration_ms",
        "float64",
        True,
        "its trigger to its last acknowledgement (failed: to the failure)",
    ),
    Column("checkpoint_start_delay_ms", "float64", True, "its longest start delay of any vertex"),
    Column("checkpoint_alignment_ms", "float64", True, "its longest alignment of any vertex"),
    Column("checkpoint_sync_ms", "float64", True, "its longest sync phase of any vertex"),
    Column("checkpoint_async_ms", "float64", True, "its longest async phase of any vertex"),
    Column(
        "checkpoint_barrier_wait_ms",
        "float64",
        True,
        "the longest any subtask waited for its barriers (start delay + alignment)",
    ),
    Column("checkpoint_state_bytes", "int64", True, "the state it stored"),
    Column("checkpoint_persisted_bytes", "int64", True, "the in-flight data it stored (unaligned)"),
    Column(
        "checkpoint_vertex_start_delay_ms",
        "float64",
        True,
        "the row's vertex in it (its slowest subtask): start delay; null: not listed",
    ),
    Column("checkpoint_vertex_alignment_ms", "float64", True, "the row's vertex in it: alignment"),
    Column("checkpoint_vertex_sync_ms", "float64", True, "the row's vertex in it: sync phase"),
    Column("checkpoint_vertex_async_ms", "float64", True, "the row's vertex in it: async phase"),
    Column(
        "checkpoint_vertex_acknowledged",
        "int32",
        True,
        "the row's vertex in it: its subtasks that acknowledged it",
    ),
)
"""The job's checkpoints as of the window's end (``docs/report.md``: the report's
``checkpoints``), the same on every row of the window but the ``checkpoint_vertex_*`` columns,
which are the row's vertex's. All null for a report without checkpoints; the ``checkpoint_*``
ones null when none had ended yet."""

CHECKPOINT_COLUMNS = tuple(c.name for c in _CHECKPOINTS)
"""The checkpoint columns' names (added in ``bpmon.history/1``: older parts read them as null)."""

_AUTOSCALER = (
    Column(
        "autoscaler_acts",
        "bool",
        True,
        "whether the autoscaler would scale at all; null: no decision in the window",
    ),
    Column(
        "autoscaler_recommended_parallelism",
        "int32",
        True,
        "the parallelism it would give the row's vertex (its own: no change)",
    ),
    Column(
        "autoscaler_verdicts",
        "string list",
        True,
        "its verdicts at the row's vertex (`agrees`, `misses`, ...); empty: none there",
    ),
)
"""The autoscaler's decision in the window (``docs/report.md``: the report's ``autoscaler``):
``autoscaler_acts`` the same on every row of the window, the others the row's vertex's. All null
for a report without one (the target gave no rates or busy time)."""

AUTOSCALER_COLUMNS = tuple(c.name for c in _AUTOSCALER)
"""The autoscaler columns' names (added in ``bpmon.history/1``: older parts read them as null)."""

_WRITER = (
    Column("bpmon_version", "string", False, "the bpmon version that wrote the row"),
    Column("synthetic", "bool", False, "true for rows made by `bpmon history synth`, not a run"),
)

SUBTASK_COLUMNS: tuple[Column, ...] = (
    *_WINDOW,
    Column("levels_from", "string", False, "`samples` or `time`: where the levels came from"),
    Column("vertex", "string", False, "the vertex (operator) name"),
    Column("vertex_index", "int32", False, "the vertex's position in the report (sources first)"),
    Column("parallelism", "int32", False, "the vertex's parallelism"),
    Column(
        "subtask", "int32", True, "the subtask index; null: the vertex as a whole (no subtasks)"
    ),
    Column("level", "string", True, "`OK`, `LOW` or `HIGH`; null: not diagnosed"),
    Column("ratio", "float64", True, "backpressure ratio (backpressured samples / samples)"),
    Column("busy_ratio", "float64", True, "busy share of the window"),
    Column("idle_ratio", "float64", True, "idle share of the window"),
    Column("backpressured_time_ratio", "float64", True, "backPressuredTimeMsPerSecond / 1000"),
    Column("out_pool_usage", "float64", True, "outPoolUsage"),
    Column("in_pool_usage", "float64", True, "inPoolUsage"),
    Column("records_in_per_s", "float64", True, "numRecordsInPerSecond"),
    Column("records_out_per_s", "float64", True, "numRecordsOutPerSecond"),
    *_CHECKPOINTS,
    *_AUTOSCALER,
    *_WRITER,
)
"""One row per subtask per window."""

CAUSE_COLUMNS: tuple[Column, ...] = (
    *_WINDOW,
    Column("rank", "int32", False, "the cause's place in the report (0 is the most likely)"),
    Column("vertex", "string", False, "the vertex named as root cause"),
    Column("kind", "string", False, "the kind of cause (`slow-operator`, `data-skew`, ...)"),
    Column("subtasks", "int32 list", False, "the subtasks at fault"),
    Column("confidence", "float64", False, "how sure the diagnosis is, 0 to 1"),
    Column("capacity_per_subtask", "float64", True, "records/s one subtask handles at 100% busy"),
    Column("offered_rate", "float64", True, "records/s the vertex's inputs would offer"),
    Column("recommended_parallelism", "int32", True, "the parallelism suggested"),
    *_WRITER,
)
"""One row per root cause per window."""

TABLES: dict[TableName, tuple[Column, ...]] = {
    "subtasks": SUBTASK_COLUMNS,
    "causes": CAUSE_COLUMNS,
}


def schema_major(text: str) -> int | None:
    """The major version of a ``bpmon.history/N`` string; None when it is not one."""
    name, _, major = text.partition("/")
    if name != HISTORY_SCHEMA.partition("/")[0] or not major.isdigit():
        return None
    return int(major)


MAJOR = schema_major(HISTORY_SCHEMA)


@functools.cache
def arrow_schema(table: TableName) -> pa.Schema:
    """The pyarrow schema of ``table``, with the version in its metadata (built once: a
    pyarrow schema is immutable)."""
    import pyarrow as pa

    types = {
        "string": pa.string(),
        "int32": pa.int32(),
        "int64": pa.int64(),
        "float64": pa.float64(),
        "bool": pa.bool_(),
        "date": pa.date32(),
        "timestamp": pa.timestamp("us", tz="UTC"),
        "int32 list": pa.list_(pa.int32()),
        "string list": pa.list_(pa.string()),
    }
    fields = [pa.field(c.name, types[c.kind], nullable=c.nullable) for c in TABLES[table]]
    return pa.schema(fields, metadata={SCHEMA_KEY: HISTORY_SCHEMA.encode(), TABLE_KEY: table})


def spark_schema(table: TableName) -> StructType:
    """The Spark schema of ``table``: the analytics read with it, never with an inferred one."""
    from pyspark.sql import types as st

    types = {
        "string": st.StringType(),
        "int32": st.IntegerType(),
        "int64": st.LongType(),
        "float64": st.DoubleType(),
        "bool": st.BooleanType(),
        "date": st.DateType(),
        "timestamp": st.TimestampType(),
        "int32 list": st.ArrayType(st.IntegerType(), containsNull=False),
        "string list": st.ArrayType(st.StringType(), containsNull=False),
    }
    return st.StructType(
        [st.StructField(c.name, types[c.kind], nullable=c.nullable) for c in TABLES[table]]
    )
