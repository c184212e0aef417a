"""The aggregates of an analysis as Parquet files (``bpmon analyze --out DIR``).

One file per table of :class:`~bpmon.model.analysis.Analysis` (``jobs``, ``vertices``,
``vertex_runs``, ``chronic``, ``regressions``, ``skew``, ``checkpoint_runs``, ``autoscaler``,
``autoscaler_verdicts``), written on the driver from the values the analysis returned,
atomically, so a notebook, DuckDB or a dashboard can read the findings without Spark.
``docs/history.md`` lists the columns.
"""

from __future__ import annotations

from dataclasses import asdict, fields
from pathlib import Path
from typing import Any

from bpmon.history.atomic import atomic_write
from bpmon.history.store import require_pyarrow
from bpmon.model.analysis import (
    Analysis,
    AutoscalerHistory,
    ChronicBottleneck,
    JobHistory,
    Regression,
    RunCheckpoints,
    SkewedSubtask,
    VerdictTally,
    VertexHistory,
)

TABLES = (
    "jobs",
    "vertices",
    "vertex_runs",
    "chronic",
    "regressions",
    "skew",
    "checkpoint_runs",
    "autoscaler",
    "autoscaler_verdicts",
)
"""The files written, as ``<name>.parquet``."""


def write_aggregates(analysis: Analysis, folder: Path) -> list[Path]:
    """Write the analysis's tables into ``folder`` (created if needed); the files written."""
    pq = require_pyarrow()
    import pyarrow as pa

    folder.mkdir(parents=True, exist_ok=True)
    tables: dict[str, Any] = {
        "jobs": _table(pa, JobHistory, [asdict(j) for j in analysis.jobs]),
        "vertices": _table(
            pa, VertexHistory, [_without(asdict(v), "by_run") for v in analysis.vertices]
        ),
        "vertex_runs": pa.Table.from_pylist(
            [
                {"job": v.job, "vertex": v.vertex, **asdict(point)}
                for v in analysis.vertices
                for point in v.by_run
            ],
            schema=pa.schema(
                [
                    ("job", pa.string()),
                    ("vertex", pa.string()),
                    ("run_id", pa.string()),
                    ("start", pa.timestamp("us", tz="UTC")),
                    ("capacity", pa.float64()),
                ]
            ),
        ),
        "chronic": _table(pa, ChronicBottleneck, [asdict(c) for c in analysis.chronic]),
        "regressions": _table(pa, Regression, [_labels(asdict(r)) for r in analysis.regressions]),
        "skew": _table(pa, SkewedSubtask, [asdict(s) for s in analysis.skew]),
        "checkpoint_runs": _table(
            pa,
            RunCheckpoints,
            [{"job": c.job, **asdict(point)} for c in analysis.checkpoints for point in c.by_run],
            first=[("job", pa.string())],
        ),
        "autoscaler": _table(
            pa, AutoscalerHistory, [_without(asdict(h), "verdicts") for h in analysis.autoscaler]
        ),
        "autoscaler_verdicts": _table(
            pa,
            VerdictTally,
            [{"job": h.job, **asdict(t)} for h in analysis.autoscaler for t in h.verdicts],
            first=[("job", pa.string())],
        ),
    }
    written = []
    for name in TABLES:
        target = folder / f"{name}.parquet"
        with atomic_write(target) as out:
            pq.write_table(tables[name], out)
        written.append(target)
    return written


_TYPES = {"str": "string", "int": "int64", "float": "float64", "bool": "bool_"}


def _table(
    pa: Any, cls: type, rows: list[dict[str, Any]], first: list[tuple[str, Any]] | None = None
) -> Any:
    """Rows of dataclass ``cls`` as a table whose schema follows the dataclass's annotations
    (after the columns ``first``)."""
    columns = list(first or [])
    for f in fields(cls):
        if f.name in ("by_run", "verdicts"):
            continue
        annotation = str(f.type).replace(" | None", "")
        if f.name in ("before", "after"):
            kind = pa.string()  # a capacity, a level or a vertex name: kept as text
        elif annotation == "datetime":
            kind = pa.timestamp("us", tz="UTC")
        elif annotation in ("RegressionKind", "VerdictKind"):
            kind = pa.string()
        else:
            kind = getattr(pa, _TYPES[annotation])()
        columns.append((f.name, kind))
    return pa.Table.from_pylist(rows, schema=pa.schema(columns))


def _without(row: dict[str, Any], key: str) -> dict[str, Any]:
    return {k: v for k, v in row.items() if k != key}


def _labels(row: dict[str, Any]) -> dict[str, Any]:
    """``before`` and ``after`` as text (they are numbers, levels or vertex names)."""
    for key in ("before", "after"):
        value = row[key]
        row[key] = (
            None if value is None else (f"{value:.6g}" if isinstance(value, float) else value)
        )
    return row
