"""Part files: where one goes, how it is written atomically, and what its footer says.

A part is one Parquet file of one table (``subtasks`` or ``causes``) in a job-day folder::

    <table>/job=<percent-encoded job>/date=<YYYY-MM-DD>/part-<name>.parquet

Its Parquet metadata holds the schema version and its table (``schema.py``), and the windows it
holds (:class:`~bpmon.history.windows.Windows`, key ``bpmon.history.windows``); a compacted part
(``part-compacted-<id>.parquet``, also marked ``bpmon.history.compacted``) holds the windows of
every part it replaced. Parts written before windows were recorded have their windows read from
their ``run_id`` and ``burst`` columns when a reader needs them.

Parts of the same major version are read with the current schema: columns added by a later
minor version are left out, and nullable columns a part predates are read as nulls, so a part
never becomes unreadable when a column is added. A part of another major version, or whose
column has another type, or that lacks a column that may not be null, is skipped and named.
"""

from __future__ import annotations

import re
import uuid
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from datetime import date
from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib.parse import quote, unquote

from bpmon.history.atomic import atomic_write, sync_folder
from bpmon.history.schema import (
    COMPACTED_KEY,
    MAJOR,
    SCHEMA_KEY,
    TABLE_KEY,
    TABLES,
    WINDOWS_KEY,
    TableName,
    arrow_schema,
    schema_major,
)
from bpmon.history.windows import Windows

if TYPE_CHECKING:
    import pyarrow as pa

COMPACTED_PREFIX = "part-compacted-"

ROW_GROUP = 256 * 1024
"""Rows per Parquet row group: what a compaction holds in memory per part it reads."""

PART_NAME = re.compile(r"part-[A-Za-z0-9][A-Za-z0-9_.-]*\.parquet")
TEMP_NAME = re.compile(r"\.part-.*\.tmp")
DATE_FOLDER = re.compile(r"date=\d{4}-\d{2}-\d{2}")
KEYS = ("run_id", "burst")
"""The columns that name a window."""


@dataclass(frozen=True, slots=True)
class Part:
    """One readable part file: its table, job and date (from its folders), rows and windows.

    Attributes:
        windows: the windows it holds; None for a part written before they were recorded
            (:func:`windows_of` reads them from its columns).
        compacted: it replaces every other part whose windows it covers.
    """

    table: TableName
    path: Path
    rows: int
    job: str
    day: date
    windows: Windows | None = None
    compacted: bool = False

    @property
    def name(self) -> str:
        """The file name (the same in both tables for one append or one compaction)."""
        return self.path.name


def job_folder(job: str) -> str:
    """The ``job=<percent-encoded name>`` folder of ``job``."""
    return f"job={quote(job, safe='')}"


def job_of_folder(name: str) -> str:
    """The job a ``job=<percent-encoded name>`` folder holds."""
    return unquote(name.removeprefix("job="))


def compacted_name() -> str:
    """A fresh, never reused name for a compacted part (without ``part-`` and ``.parquet``)."""
    return f"compacted-{uuid.uuid4().hex[:20]}"


def write_part(
    pq: Any,
    target: Path,
    data: pa.Table,
    table: TableName,
    *,
    windows: Windows | None = None,
    compacted: bool = False,
) -> Path:
    """Write ``data`` (of ``table``'s schema) to ``target`` atomically, recording its windows.

    ``windows`` defaults to those of the rows; a part may hold windows without rows (a causes
    part of windows without a root cause).

    Raises:
        ValueError: ``data`` does not have the table's schema.
        OSError: the file cannot be written.
    """
    held = windows_in(data) if windows is None else windows
    return write_stream(pq, target, [data], table, held, compacted=compacted)


def write_stream(
    pq: Any,
    target: Path,
    tables: Iterable[pa.Table],
    table: TableName,
    windows: Windows,
    *,
    compacted: bool = False,
) -> Path:
    """Write ``tables`` one after the other into the part ``target``, atomically.

    The file is written under a hidden temporary name in its final folder, synced, renamed and
    the folder synced; a process killed on the way leaves at most the temporary file. Only one
    of ``tables`` is in memory at a time.

    Raises:
        ValueError: one of ``tables`` does not have the table's schema.
        OSError: the file cannot be written.
    """
    schema = arrow_schema(table)
    meta = {**(schema.metadata or {}), WINDOWS_KEY: windows.encode()}
    if compacted:
        meta[COMPACTED_KEY] = b"true"
    with (
        atomic_write(target) as out,
        pq.ParquetWriter(out, schema.with_metadata(meta), compression="zstd") as writer,
    ):
        for data in _row_groups_of(tables, schema, table):
            writer.write_table(data, row_group_size=ROW_GROUP)
    return target


def _row_groups_of(
    tables: Iterable[pa.Table], schema: pa.Schema, table: TableName
) -> Iterator[pa.Table]:
    """``tables`` gathered into tables of about :data:`ROW_GROUP` rows (many small parts merged
    make a few large row groups, not one per part)."""
    import pyarrow as pa

    held: list[pa.Table] = []
    rows = 0
    for data in tables:
        if not data.schema.equals(schema, check_metadata=True):
            raise ValueError(f"rows for {table} do not have the history schema: {data.schema}")
        held.append(data)
        rows += data.num_rows
        if rows >= ROW_GROUP:
            yield pa.concat_tables(held)
            held, rows = [], 0
    if held:
        yield pa.concat_tables(held)


def windows_in(data: pa.Table) -> Windows:
    """The windows of the rows of ``data`` (its distinct run ids and bursts)."""
    keys = data.select(list(KEYS)).group_by(list(KEYS)).aggregate([])
    runs, bursts = keys.column("run_id").to_pylist(), keys.column("burst").to_pylist()
    return Windows.of(zip(runs, bursts, strict=True))


def check_part(pq: Any, table: TableName, path: Path) -> Part | str:
    """The part at ``path`` (``<table>/job=../date=../<file>``), or why it is not a readable one."""
    if TEMP_NAME.fullmatch(path.name):
        return "an unfinished write (a temporary file)"
    if not PART_NAME.fullmatch(path.name):
        return "a foreign file (not job=<job>/date=<YYYY-MM-DD>/part-<name>.parquet)"
    try:
        footer = pq.read_metadata(path)
        have = footer.schema.to_arrow_schema()
    except Exception as exc:  # pyarrow raises ArrowInvalid or OSError for a torn file
        first = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        return f"not a readable Parquet file (torn or foreign: {first[:120]})"
    meta = have.metadata or {}
    written = meta.get(SCHEMA_KEY, b"").decode("utf-8", "replace")
    if not written:
        return "a foreign Parquet file (no bpmon.history.schema in its metadata)"
    if schema_major(written) != MAJOR or meta.get(TABLE_KEY, b"").decode() != table:
        return f"written as {written} {meta.get(TABLE_KEY, b'?').decode()!r}, not this reader's"
    problem = check_columns(have, table)
    if problem is not None:
        return problem
    if WINDOWS_KEY in meta:
        try:
            windows: Windows | None = Windows.decode(meta[WINDOWS_KEY])
        except ValueError as exc:
            return f"its bpmon.history.windows metadata is not valid ({exc})"
    else:
        windows = _single_window(footer)
    compacted = meta.get(COMPACTED_KEY) == b"true"
    if compacted and windows is None:
        return "a compacted part without its windows (bpmon.history.windows)"
    job, day = path.parent.parent.name, date.fromisoformat(path.parent.name.removeprefix("date="))
    return Part(table, path, int(footer.num_rows), job_of_folder(job), day, windows, compacted)


def _single_window(footer: Any) -> Windows | None:
    """The windows of a part written before they were recorded, from its footer's statistics:
    one window when every row group holds a single run id and burst, none when it has no rows;
    None when the statistics do not say (the columns are read instead)."""
    if footer.num_row_groups == 0:
        return Windows()
    paths = [footer.row_group(0).column(j).path_in_schema for j in range(footer.num_columns)]
    if "run_id" not in paths or "burst" not in paths:
        return None
    found = set()
    for index in range(footer.num_row_groups):
        stats = [footer.row_group(index).column(paths.index(c)).statistics for c in KEYS]
        if any(st is None or not st.has_min_max or st.min != st.max for st in stats):
            return None
        found.add((stats[0].min, stats[1].min))
    return Windows.of(found) if len(found) == 1 else None


def check_columns(have: pa.Schema, table: TableName) -> str | None:
    """Why a part's columns cannot be read with the current schema, or None when they can.

    Additive evolution: a column the part lacks is read as null when it may be null; a column
    the part has beyond the schema (a later minor version's) is left out.
    """
    for column in TABLES[table]:
        index = have.get_field_index(column.name)
        if index < 0:
            if column.nullable:
                continue
            return f"has no column {column.name!r} (it may not be null)"
        field = arrow_schema(table).field(column.name)
        if not have.field(index).type.equals(field.type):
            return f"column {column.name!r} is {have.field(index).type}, expected {field.type}"
    return None


def windows_of(pq: Any, part: Part) -> Windows:
    """The windows ``part`` holds: from its metadata, or from its columns for an older part."""
    if part.windows is not None:
        return part.windows
    return windows_in(pq.read_table(part.path, columns=list(KEYS)))


def read_part(pq: Any, part: Part) -> pa.Table:
    """The rows of ``part`` with the current schema (missing nullable columns as nulls)."""
    schema = arrow_schema(part.table)
    data = pq.read_table(part.path, schema=schema)
    return data.replace_schema_metadata(schema.metadata)


def row_groups(pq: Any, part: Part) -> Iterator[pa.Table]:
    """The rows of ``part`` one row group at a time, with the current schema, for a rewrite.

    Raises:
        ValueError: the part has columns the current schema does not know (a later bpmon
            wrote it): rewriting it would drop them, so it must not be rewritten here.
    """
    import pyarrow as pa

    schema = arrow_schema(part.table)
    with pq.ParquetFile(part.path) as file:
        have = file.schema_arrow
        unknown = [name for name in have.names if schema.get_field_index(name) < 0]
        if unknown:
            raise ValueError(
                f"{part.name} has columns this bpmon does not know ({', '.join(unknown)}): a "
                "later bpmon wrote it; compact with that bpmon, which keeps them"
            )
        present = [f.name for f in schema if have.get_field_index(f.name) >= 0]
        for index in range(file.num_row_groups):
            got = file.read_row_group(index, columns=present)
            columns = [
                got.column(f.name) if f.name in present else pa.nulls(got.num_rows, f.type)
                for f in schema
            ]
            yield pa.Table.from_arrays(columns, schema=schema)


def make_folders(folder: Path) -> None:
    """Create ``folder`` and its parents, syncing each new one into its parent."""
    missing = []
    current = folder
    while not current.exists():
        missing.append(current)
        current = current.parent
    folder.mkdir(parents=True, exist_ok=True)
    for created in reversed(missing):
        sync_folder(created.parent)
