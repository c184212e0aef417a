"""``bpmon analyze``: the history aggregated with Spark's DataFrame API into an :class:`Analysis`.

The subtask rows are read with the declared schema (never inferred) from the parts the store
found readable, and reduced once, in one shuffle, to one row per window and vertex: its level
and ratio (its worst subtask's), its busiest subtask, its capacity per subtask, and which of its
subtasks were hot in that window. That table, a thousandth of the rows or less, is cached, and
every question is asked of it and of the cause rows:

- per job and vertex: the share of windows at each level, p50/p95 ratio, p50 busy, capacity per
  subtask and its trend over the runs;
- chronic bottlenecks (:mod:`bpmon.history.findings`), regressions between consecutive runs of a
  job, skew over time.

Only the small results come back to the driver, so the same code runs on ``local[*]`` and on a
cluster.

May import: the model layer, bpmon.history; pyspark (this module and ``spark.py`` only).
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from pyspark.sql import Column, DataFrame, SparkSession, Window
from pyspark.sql import functions as F  # noqa: N812 - Spark's own idiom

from bpmon.analysis import Analysis, RunCapacity, Thresholds, VertexHistory
from bpmon.history.findings import chronic_bottlenecks, job_runs, regressions, skewed_subtasks
from bpmon.history.schema import spark_schema
from bpmon.history.store import Scan

Progress = Callable[[str], None]

CODEGEN_ROWS = 2_000_000
"""From this many subtask rows on, the first pass runs with whole-stage code generation."""


@dataclass(frozen=True)
class Frames:
    """The cached tables every question is asked of."""

    windows: DataFrame  # one row per window and vertex
    causes: DataFrame  # one row per root cause, with its window's seconds
    runs: DataFrame  # one row per run: its job, order in the job (seq), start, windows


def read_table(spark: SparkSession, paths: list[str], table: str) -> DataFrame:
    """The part files ``paths`` of ``table`` read with the declared schema."""
    reader = spark.read.schema(spark_schema(table))  # type: ignore[arg-type]
    if not paths:
        return spark.createDataFrame([], spark_schema(table))  # type: ignore[arg-type]
    return reader.option("recursiveFileLookup", "true").parquet(*paths)


def level_order(level: Column) -> Column:
    """OK 0, LOW 1, HIGH 2 (null stays null): levels as numbers that can be compared."""
    return F.when(level == "OK", 0).when(level == "LOW", 1).when(level == "HIGH", 2).otherwise(None)


def window_vertices(subtasks: DataFrame, limits: Thresholds) -> DataFrame:
    """One row per window and vertex: the one pass over the subtask rows (a hash aggregate).

    ``hot`` is the window's hottest subtask when it is hot: it gets ``hot_ratio`` x the mean
    records/s of its siblings, or (failing that) is ``hot_ratio`` x as busy as them while at least
    ``busy_min`` busy (a slow instance). One subtask per window keeps this a single pass.
    """
    busy, rate = F.col("busy_ratio"), F.col("records_in_per_s")
    capacity = F.when((busy >= limits.min_busy) & (rate > 0), F.try_divide(rate, busy))
    seconds = F.col("window_end").cast("double") - F.col("window_start").cast("double")
    grouped = subtasks.groupBy("job", "run_id", "burst", "vertex").agg(
        F.min("window_start").alias("start"),
        F.max(seconds).alias("seconds"),
        F.min("vertex_index").alias("vertex_index"),
        F.max(level_order(F.col("level"))).alias("level"),
        F.max("ratio").alias("ratio"),
        F.max(busy).alias("busy"),
        F.avg(capacity).alias("capacity"),
        F.max(F.col("synthetic").cast("int")).alias("synthetic"),
        *_spread(rate, "rate"),
        *_spread(busy, "busy"),
    )
    by_rate = _hottest("rate", limits.hot_ratio)
    by_busy = _hottest("busy", limits.hot_ratio) & (F.col("busy_top") >= limits.busy_min)
    hot = F.when(by_rate, F.col("rate_at")).when(by_busy, F.col("busy_at"))
    return grouped.select(
        "job",
        "run_id",
        "burst",
        "vertex",
        "start",
        "seconds",
        "vertex_index",
        "level",
        "ratio",
        "busy",
        "capacity",
        "synthetic",
        hot.alias("hot"),
    )


def _spread(value: Column, name: str) -> list[Column]:
    """Sum, count and maximum of ``value`` over a window's subtasks, and which subtask has it."""
    return [
        F.sum(value).alias(f"{name}_sum"),
        F.count(value).alias(f"{name}_n"),
        F.max(value).alias(f"{name}_top"),
        F.max_by("subtask", value).alias(f"{name}_at"),
    ]


def _hottest(name: str, ratio: float) -> Column:
    """Whether the top ``name`` is at least ``ratio`` x the mean of the other subtasks'."""
    top, total, n = F.col(f"{name}_top"), F.col(f"{name}_sum"), F.col(f"{name}_n")
    others = F.try_divide(total - top, n - 1)  # null for a single subtask
    hot = (n > 1) & (others > 0) & (top >= others * ratio) & F.col(f"{name}_at").isNotNull()
    return F.coalesce(hot, F.lit(False))


def prepare(
    spark: SparkSession,
    scan: Scan,
    *,
    job: str | None,
    since: datetime | None,
    limits: Thresholds,
) -> Frames:
    """Read, filter and reduce the history; the three cached tables, materialised."""
    subtasks = read_table(spark, scan.paths("subtasks"), "subtasks")
    causes = read_table(spark, scan.paths("causes"), "causes")
    if job is not None:
        subtasks, causes = subtasks.where(F.col("job") == job), causes.where(F.col("job") == job)
    if since is not None:
        moment = F.lit(since).cast("timestamp")
        subtasks = subtasks.where(F.col("window_start") >= moment)
        causes = causes.where(F.col("window_start") >= moment)
    windows = window_vertices(subtasks, limits).persist()
    per_window = windows.groupBy("job", "run_id", "burst").agg(
        F.min("start").alias("start"),
        F.max("seconds").alias("seconds"),
        F.max("synthetic").alias("synthetic"),
    )
    order = Window.partitionBy("job").orderBy("start", "run_id")
    runs = (
        per_window.groupBy("job", "run_id")
        .agg(
            F.min("start").alias("start"),
            F.count("*").alias("windows"),
            F.sum("seconds").alias("seconds"),
            F.max("synthetic").alias("synthetic"),
        )
        .withColumn("seq", F.row_number().over(order))
        .persist()
    )
    cause_rows = causes.join(
        per_window.select("job", "run_id", "burst", "seconds"), ["job", "run_id", "burst"]
    ).persist()
    return Frames(windows, cause_rows, runs)


def vertex_histories(frames: Frames, limits: Thresholds) -> tuple[list[VertexHistory], list[Any]]:
    """Per job and vertex: level shares, ratio and busy percentiles, capacity and its trend.

    Also returns the per-run rows of every vertex whose capacity dropped or whose level
    worsened since the job's previous run (flagged here, in one pass with the trend).
    """
    w = frames.windows
    levelled = F.col("level").isNotNull()

    def share(level: int) -> Column:
        at = F.avg(F.when(levelled, (F.col("level") == level).cast("double")))
        return F.coalesce(at, F.lit(0.0))

    stats = w.groupBy("job", "vertex").agg(
        F.min("vertex_index").alias("vertex_index"),
        F.count("*").alias("windows"),
        F.countDistinct("run_id").alias("runs"),
        share(0).alias("share_ok"),
        share(1).alias("share_low"),
        share(2).alias("share_high"),
        F.percentile_approx("ratio", [0.5, 0.95]).alias("ratio_p"),
        F.percentile_approx("busy", 0.5).alias("busy_p50"),
        F.percentile_approx("capacity", 0.5).alias("capacity_p50"),
    )
    rows = stats.orderBy("job", "vertex_index", "vertex").collect()
    points: dict[tuple[str, str], list[Any]] = {}
    flagged: list[Any] = []
    for r in run_vertices(frames, limits).collect():
        points.setdefault((r["job"], r["vertex"]), []).append(r)
        if r["dropped"] or r["worse"]:
            flagged.append(r)
    return [_vertex_history(r, points.get((r["job"], r["vertex"]), [])) for r in rows], flagged


def run_vertices(frames: Frames, limits: Thresholds) -> DataFrame:
    """One row per run and vertex: median capacity, level and ratio, the previous run's, the
    capacity trend of the vertex, and whether the capacity dropped or the level worsened."""
    per_run = (
        frames.windows.groupBy("job", "run_id", "vertex")
        .agg(
            F.percentile_approx("capacity", 0.5).alias("capacity"),
            F.percentile_approx("level", 0.5).alias("level"),
            F.percentile_approx("ratio", 0.5).alias("ratio"),
        )
        .join(frames.runs.select("job", "run_id", "seq", "start"), ["job", "run_id"])
    )
    vertex = Window.partitionBy("job", "vertex")
    ordered = vertex.orderBy("seq")
    out = per_run.withColumn(
        "trend", F.regr_slope("capacity", F.col("seq").cast("double")).over(vertex)
    ).withColumn("trend", F.try_divide(F.col("trend"), F.avg("capacity").over(vertex)))
    for name in ("seq", "run_id", "capacity", "level", "ratio"):
        out = out.withColumn(f"prev_{name}", F.lag(name).over(ordered))
    consecutive = F.coalesce(F.col("prev_seq") == F.col("seq") - 1, F.lit(False))
    dropped = (F.col("prev_capacity") > 0) & (
        F.col("capacity") < F.col("prev_capacity") * (1 - limits.capacity_drop)
    )
    worse = F.col("level") > F.col("prev_level")
    return out.select(
        "*",
        (consecutive & F.coalesce(dropped, F.lit(False))).alias("dropped"),
        (consecutive & F.coalesce(worse, F.lit(False))).alias("worse"),
    ).orderBy("job", "vertex", "seq")


def _vertex_history(r: Any, points: list[Any]) -> VertexHistory:
    ratios = r["ratio_p"] or [None, None]
    measured = [p for p in points if p["capacity"] is not None]
    return VertexHistory(
        job=r["job"],
        vertex=r["vertex"],
        windows=r["windows"],
        runs=r["runs"],
        share_ok=r["share_ok"],
        share_low=r["share_low"],
        share_high=r["share_high"],
        ratio_p50=ratios[0],
        ratio_p95=ratios[1],
        busy_p50=r["busy_p50"],
        capacity_p50=r["capacity_p50"],
        capacity_trend=points[0]["trend"] if len(measured) >= 2 else None,
        by_run=tuple(RunCapacity(p["run_id"], p["start"], p["capacity"]) for p in points),
    )


@contextlib.contextmanager
def _conf(spark: SparkSession, settings: dict[str, str]) -> Iterator[None]:
    """Run with SQL settings changed, then put the session's own back (it may be shared)."""
    saved = {key: spark.conf.get(key, None) for key in settings}
    for key, value in settings.items():
        spark.conf.set(key, value)
    try:
        yield
    finally:
        for key, old in saved.items():
            if old is None:
                spark.conf.unset(key)
            else:
                spark.conf.set(key, old)


def analyze(
    spark: SparkSession,
    scan: Scan,
    *,
    history: str,
    job: str | None,
    since: datetime | None,
    limits: Thresholds,
    master: str,
    progress: Progress,
    began: float,
    generated_at: datetime,
) -> Analysis:
    """Every aggregate of the history in ``scan`` (filtered by ``job`` and ``since``)."""
    rows = scan.rows("subtasks")
    progress(
        f"reading {len(scan.subtasks):,} part files: {rows:,} subtask rows, "
        f"{scan.rows('causes'):,} cause rows"
    )
    # Whole-stage code generation pays for itself on millions of rows; on the small tables
    # after the first pass, compiling each query costs more than running it interpreted. The
    # part files are listed on the driver: a listing job per thousand files costs seconds.
    first_pass = {
        "spark.sql.codegen.wholeStage": "true" if rows >= CODEGEN_ROWS else "false",
        "spark.sql.sources.parallelPartitionDiscovery.threshold": str(len(scan.subtasks) + 32),
    }
    with _conf(spark, first_pass):
        frames = prepare(spark, scan, job=job, since=since, limits=limits)
        progress(
            "one pass over the subtask rows: levels, ratios, capacity, hot subtasks per window"
        )
        try:
            jobs = job_runs(frames)
            with _conf(spark, {"spark.sql.codegen.wholeStage": "false"}):
                progress(
                    f"{sum(j.runs for j in jobs):,} runs of {len(jobs)} job(s): levels, "
                    "percentiles, capacity trends per vertex"
                )
                vertices, flagged = vertex_histories(frames, limits)
                progress("chronic bottlenecks, regressions between runs, skew over time")
                chronic = chronic_bottlenecks(frames)
                found = regressions(frames, limits, flagged)
                skew = skewed_subtasks(frames, limits)
        finally:
            for frame in (frames.windows, frames.runs, frames.causes):
                frame.unpersist()
    return Analysis(
        generated_at=generated_at,
        history=history,
        job=job,
        since=since,
        master=master,
        spark_version=spark.version,
        seconds=time.monotonic() - began,
        subtask_rows=rows,
        cause_rows=scan.rows("causes"),
        thresholds=limits,
        jobs=jobs,
        vertices=tuple(vertices),
        chronic=chronic,
        regressions=found,
        skew=skew,
        skipped=scan.skipped,
    )
