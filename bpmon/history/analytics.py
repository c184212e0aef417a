"""``bpmon analyze``: the history aggregated with Spark's DataFrame API into an :class:`Analysis`.

Two Spark actions do the work. The subtask rows are read with the declared schema (never
inferred) from the parts the store found readable and reduced in one pass (a hash aggregate, one
shuffle) to one row per window and vertex: its level and ratio (its worst subtask's), its busiest
subtask, its capacity per subtask (:mod:`bpmon.model.capacity`, expressed as a column from the same
``min_busy``), its parallelism, which of its subtasks was hot, the window's checkpoint figures
(the same on every row of a window), and which of the autoscaler's verdicts it got. That table, a
few rows per window, is cached (the first action), and eight small aggregates are asked of it and
of the cause rows in one query that comes back in one ``collect`` (the second):

- ``vertex``: per job and vertex, the share of windows at each level, p50/p95 ratio, p50 busy
  and p50 capacity;
- ``run_vertex``: per run and vertex, the median capacity, level and ratio, and the parallelism;
- ``run``: per run, its start, windows and monitored seconds;
- ``hot``: per vertex and subtask, the windows it was hot in;
- ``named``: per run, vertex and kind, how often it was named root cause (confidence x
  seconds, windows, first-ranked windows);
- ``checkpoints``: per run, the checkpoints its windows saw as their newest, each once (by id):
  their duration's p50/p95, how many failed, the time they waited for barriers, and the job's
  counts at the run's first and last window;
- ``autoscaler``: per job, the windows with the autoscaler's decision, those it judged (a verdict
  at any vertex), those with a verdict other than ``agrees``, and the windows of each verdict;
- ``autoscaler_vertex``: per job and vertex, the windows it got each verdict in.

Nothing is read twice or recomputed (each aggregate prunes other columns of the one pass, so
without the cache Spark would run the pass once per aggregate). The results hold a row per run
and vertex at most, never per row of the history, and :mod:`bpmon.history.findings` answers every
question from them on the driver. The same code runs on ``local[*]`` and on a cluster; a small
history runs in one shuffle partition, interpreted (:data:`SMALL`). No Python UDF: every
expression is Spark's own.

pyspark is imported here and in ``spark.py`` only.
"""

from __future__ import annotations

import contextlib
import math
import time
from collections.abc import Callable, Iterator
from datetime import datetime
from typing import Any

from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import functions as F  # noqa: N812 - Spark's own idiom

from bpmon.history.aggregates import Aggregates, run_vertices, verdict_column
from bpmon.history.findings import (
    autoscaler_histories,
    checkpoint_histories,
    chronic_bottlenecks,
    job_runs,
    regressions,
    skewed_subtasks,
    vertex_histories,
)
from bpmon.history.schema import spark_schema
from bpmon.history.store import Scan
from bpmon.model.analysis import Analysis, Thresholds
from bpmon.model.autoscaler import VERDICT_KINDS
from bpmon.model.numbers import counted

Progress = Callable[[str], None]

CODEGEN_ROWS = 250_000
"""From this many subtask rows on, the job runs as :data:`LARGE`, below as :data:`SMALL`
(measured on ``local[2]``: at 100,000 rows :data:`SMALL` takes 7.5 s instead of 8.1-8.6, at
300,000 both about 9, at 1,000,000 :data:`LARGE` 11.6 s instead of 16.4)."""
LARGE = {
    "spark.sql.codegen.wholeStage": "true",
    "spark.sql.codegen.factoryMode": "FALLBACK",
    "spark.sql.adaptive.enabled": "true",
}
"""Millions of rows: compiled code and adaptive execution pay for themselves (Spark's defaults)."""
SMALL = {
    "spark.sql.codegen.wholeStage": "false",
    "spark.sql.codegen.factoryMode": "NO_CODEGEN",
    "spark.sql.adaptive.enabled": "false",
}
"""Fewer rows: compiling a class per expression and planning each stage again (adaptive
execution runs each shuffle stage as a job of its own) cost more than interpreting them
(measured on 200 windows: the JVM spends 9-10 s of CPU instead of 12, the analysis 7.4 s
instead of 10 on the 2-core machine)."""
ROWS_PER_PARTITION = 2_000_000
"""Subtask rows per shuffle partition (at least one, at most the session's own number)."""


def read_table(spark: SparkSession, paths: list[str], table: str) -> DataFrame:
    """The part files ``paths`` of ``table`` read with the declared schema."""
    reader = spark.read.schema(spark_schema(table))  # type: ignore[arg-type]
    if not paths:
        return spark.createDataFrame([], spark_schema(table))  # type: ignore[arg-type]
    return reader.option("recursiveFileLookup", "true").parquet(*paths)


def level_order(level: Column) -> Column:
    """OK 0, LOW 1, HIGH 2 (null stays null): levels as numbers that can be compared."""
    return F.when(level == "OK", 0).when(level == "LOW", 1).when(level == "HIGH", 2).otherwise(None)


def subtask_capacity(min_busy: float) -> Column:
    """:func:`bpmon.model.capacity.subtask_capacity` as a column of the subtask rows: records in (or
    out, for a subtask that receives none) over busy, from a subtask at least ``min_busy`` busy
    that handled records; null otherwise."""
    records_in, busy = F.col("records_in_per_s"), F.col("busy_ratio")
    rate = F.when(records_in > 0, records_in).otherwise(F.col("records_out_per_s"))
    return F.when((busy >= min_busy) & (rate > 0), rate / busy)


def window_vertices(subtasks: DataFrame, limits: Thresholds) -> DataFrame:
    """One row per window and vertex: the one pass over the subtask rows (a hash aggregate).

    ``capacity`` is the mean of the subtasks' figures (:mod:`bpmon.model.capacity`). ``hot`` is the
    window's hottest subtask when it is hot: it gets ``hot_ratio`` x the mean records/s of its
    siblings, or (failing that) is ``hot_ratio`` x as busy as them while at least ``busy_min``
    busy (a slow instance). One subtask per window keeps this a single pass.
    """
    busy, rate = F.col("busy_ratio"), F.col("records_in_per_s")
    seconds = F.col("window_end").cast("double") - F.col("window_start").cast("double")
    grouped = subtasks.groupBy("job", "run_id", "burst", "vertex").agg(
        F.min("window_start").alias("start"),
        F.max(seconds).alias("seconds"),
        F.min("vertex_index").alias("vertex_index"),
        F.max("parallelism").alias("parallelism"),
        F.max(level_order(F.col("level"))).alias("level"),
        F.max("ratio").alias("ratio"),
        F.max(busy).alias("busy"),
        F.avg(subtask_capacity(limits.min_busy)).alias("capacity"),
        F.max(F.col("synthetic").cast("int")).alias("synthetic"),
        *_spread(rate, "rate"),
        *_spread(busy, "busy"),
        F.max("checkpoint_id").alias("ck_id"),
        F.max("checkpoint_duration_ms").alias("ck_ms"),
        F.max("checkpoint_barrier_wait_ms").alias("ck_wait_ms"),
        F.max((F.col("checkpoint_status") == "failed").cast("int")).alias("ck_failed"),
        F.max("checkpoints_completed").alias("ck_completed_n"),
        F.max("checkpoints_failed").alias("ck_failed_n"),
        F.max(F.col("autoscaler_acts").cast("int")).alias("as_acts"),
        *[
            F.max(F.array_contains("autoscaler_verdicts", kind).cast("int")).alias(name)
            for kind, name in zip(VERDICT_KINDS, VERDICT_FIGURES, strict=True)
        ],
    )
    by_rate = _hottest("rate", limits.hot_ratio)
    by_busy = _hottest("busy", limits.hot_ratio) & (F.col("busy_top") >= limits.busy_min)
    hot = F.when(by_rate, F.col("rate_at")).when(by_busy, F.col("busy_at"))
    keep = ["job", "run_id", "burst", "vertex", "start", "seconds", "vertex_index"]
    keep += ["parallelism", "level", "ratio", "busy", "capacity", "synthetic", *CHECKPOINT_FIGURES]
    keep += ["as_acts", *VERDICT_FIGURES]
    return grouped.select(*keep, hot.alias("hot"))


CHECKPOINT_FIGURES = ("ck_id", "ck_ms", "ck_wait_ms", "ck_failed", "ck_completed_n", "ck_failed_n")
"""The window's checkpoint figures in :func:`window_vertices`' rows."""
VERDICT_FIGURES = tuple(verdict_column(kind) for kind in VERDICT_KINDS)
"""Per verdict, 1 when the vertex got it in the window, 0 when not, null without a decision
(integers, not the stored strings: the one pass stays a hash aggregate of fixed-width values)."""


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


def read_history(
    spark: SparkSession, scan: Scan, *, job: str | None, since: datetime | None
) -> tuple[DataFrame, DataFrame]:
    """The subtask and cause rows of ``scan``, filtered by ``job`` and ``since``."""
    subtasks = read_table(spark, scan.paths("subtasks"), "subtasks")
    causes = read_table(spark, scan.paths("causes"), "causes")
    if job is not None:
        subtasks, causes = subtasks.where(F.col("job") == job), causes.where(F.col("job") == job)
    if since is not None:
        moment = F.lit(since).cast("timestamp")
        subtasks = subtasks.where(F.col("window_start") >= moment)
        causes = causes.where(F.col("window_start") >= moment)
    return subtasks, causes


def aggregates(windows: DataFrame, causes: DataFrame) -> DataFrame:
    """The eight small aggregates as one DataFrame, ``part`` naming each row's (one action)."""
    frames = [
        _per_vertex(windows),
        _per_run_vertex(windows),
        _per_run(windows),
        _hot(windows),
        _named(windows, causes),
        _checkpoints(windows),
        *_autoscaler(windows),
    ]
    out = frames[0]
    for frame in frames[1:]:
        out = out.unionByName(frame, allowMissingColumns=True)
    return out


def _per_vertex(w: DataFrame) -> DataFrame:
    levelled = F.col("level").isNotNull()

    def share(level: int) -> Column:
        at = F.avg(F.when(levelled, (F.col("level") == level).cast("double")))
        return F.coalesce(at, F.lit(0.0))

    return w.groupBy("job", "vertex").agg(
        F.lit("vertex").alias("part"),
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


def _per_run_vertex(w: DataFrame) -> DataFrame:
    return w.groupBy("job", "run_id", "vertex").agg(
        F.lit("run_vertex").alias("part"),
        F.percentile_approx("capacity", 0.5).alias("capacity"),
        F.percentile_approx("level", 0.5).alias("level"),
        F.percentile_approx("ratio", 0.5).alias("ratio"),
        F.max("parallelism").alias("parallelism"),
    )


def _per_run(w: DataFrame) -> DataFrame:
    per_window = w.groupBy("job", "run_id", "burst").agg(
        F.min("start").alias("start"),
        F.max("seconds").alias("seconds"),
        F.max("synthetic").alias("synthetic"),
    )
    return per_window.groupBy("job", "run_id").agg(
        F.lit("run").alias("part"),
        F.min("start").alias("start"),
        F.count("*").alias("windows"),
        F.sum("seconds").alias("seconds"),
        F.max("synthetic").alias("synthetic"),
    )


def _hot(w: DataFrame) -> DataFrame:
    return (
        w.where(F.col("hot").isNotNull())
        .groupBy("job", "vertex", F.col("hot").alias("subtask"))
        .agg(
            F.lit("hot").alias("part"),
            F.count("*").alias("hot_windows"),
            F.countDistinct("run_id").alias("runs"),
        )
    )


def _named(w: DataFrame, causes: DataFrame) -> DataFrame:
    """The root causes of the windows the subtask rows hold, per run, vertex and kind: the
    confidence x seconds, how many, their confidence, in which windows, how often first."""
    seconds = F.col("window_end").cast("double") - F.col("window_start").cast("double")
    named = causes.join(w.select("job", "run_id", "burst"), ["job", "run_id", "burst"], "semi")
    return named.groupBy("job", "run_id", "vertex", "kind").agg(
        F.lit("named").alias("part"),
        F.sum(F.col("confidence") * seconds).alias("weight"),
        F.count("*").alias("causes"),
        F.sum("confidence").alias("confidence_sum"),
        F.collect_set("burst").alias("bursts"),
        F.sum(F.when(F.col("rank") == 0, 1).otherwise(0)).alias("first"),
    )


def _checkpoints(w: DataFrame) -> DataFrame:
    """Per run whose windows observed checkpoints: the checkpoints they saw as their newest, each
    once however many windows saw it (by id), and the job's counts at its first and last window.

    A window's figures are on each of its vertices' rows; its first vertex's row (``vertex_index``
    0, which every window has) stands for it, so each window counts once. ``ck_p`` is the p50 and
    p95 of the checkpoints' durations (a failed one's until it failed); ``ck_waited_ms`` over
    ``ck_timed_ms`` the share of their time spent waiting for barriers (a wait counted up to its
    checkpoint's duration, of the checkpoints whose wait is known).
    """
    burst = F.col("burst")
    windows = w.where((F.col("vertex_index") == 0) & F.col("ck_completed_n").isNotNull())
    seen = windows.groupBy("job", "run_id", "ck_id").agg(
        F.count("*").alias("ck_windows"),
        F.min(burst).alias("ck_first"),
        F.max(burst).alias("ck_last"),
        F.min_by("ck_failed_n", burst).alias("ck_failed_first"),
        F.max_by("ck_failed_n", burst).alias("ck_failed_last"),
        F.min_by("ck_completed_n", burst).alias("ck_completed_first"),
        F.max_by("ck_completed_n", burst).alias("ck_completed_last"),
        F.max("ck_ms").alias("ck_ms"),
        F.max("ck_wait_ms").alias("ck_wait_ms"),
        F.max("ck_failed").alias("ck_failed"),
    )
    ms, wait = F.col("ck_ms"), F.col("ck_wait_ms")
    timed = F.col("ck_id").isNotNull() & wait.isNotNull() & (ms > 0)
    return seen.groupBy("job", "run_id").agg(
        F.lit("checkpoints").alias("part"),
        F.sum("ck_windows").alias("ck_windows"),
        F.count("ck_id").alias("ck_count"),
        F.percentile_approx(F.when(F.col("ck_id").isNotNull(), ms), [0.5, 0.95]).alias("ck_p"),
        F.sum(F.when(F.col("ck_id").isNotNull(), F.col("ck_failed"))).alias("ck_failed"),
        F.min("ck_first").alias("ck_first"),
        F.max("ck_last").alias("ck_last"),
        F.min_by("ck_failed_first", "ck_first").alias("ck_failed_first"),
        F.max_by("ck_failed_last", "ck_last").alias("ck_failed_last"),
        F.min_by("ck_completed_first", "ck_first").alias("ck_completed_first"),
        F.max_by("ck_completed_last", "ck_last").alias("ck_completed_last"),
        F.sum(F.when(timed, F.least(wait, ms))).alias("ck_waited_ms"),
        F.sum(F.when(timed, ms)).alias("ck_timed_ms"),
    )


def _autoscaler(w: DataFrame) -> list[DataFrame]:
    """The autoscaler's verdicts per job (``autoscaler``) and per job and vertex
    (``autoscaler_vertex``), in windows: of those whose report had its decision (``as_acts`` is on
    every row of such a window), the windows with any verdict (``as_judged``), with one other
    than ``agrees`` (``as_wrong``), and per verdict the windows with it at any vertex (the job's)
    or at the vertex. A vertex with a verdict twice in a window (two causes) counts once."""
    decided = w.where(F.col("as_acts").isNotNull())
    per_window = decided.groupBy("job", "run_id", "burst").agg(
        *[F.max(name).alias(name) for name in VERDICT_FIGURES]
    )
    agrees = verdict_column("agrees")
    judged = F.greatest(*[F.col(n) for n in VERDICT_FIGURES]) > 0
    wrong = F.greatest(*[F.col(n) for n in VERDICT_FIGURES if n != agrees]) > 0
    per_job = per_window.groupBy("job").agg(
        F.lit("autoscaler").alias("part"),
        F.count("*").alias("as_windows"),
        F.sum(judged.cast("int")).alias("as_judged"),
        F.sum(wrong.cast("int")).alias("as_wrong"),
        *[F.sum(name).alias(name) for name in VERDICT_FIGURES],
    )
    per_vertex = (
        decided.where(F.greatest(*[F.col(n) for n in VERDICT_FIGURES]) > 0)
        .groupBy("job", "vertex")
        .agg(
            F.lit("autoscaler_vertex").alias("part"),
            *[F.sum(name).alias(name) for name in VERDICT_FIGURES],
        )
    )
    return [per_job, per_vertex]


def collect_parts(frame: DataFrame) -> dict[str, list[dict[str, Any]]]:
    """The rows of :func:`aggregates`, by part, as dicts (one Spark action)."""
    parts: dict[str, list[dict[str, Any]]] = {}
    for row in frame.collect():
        parts.setdefault(row["part"], []).append(row.asDict())
    return parts


def shuffle_partitions(rows: int, most: int) -> int:
    """Shuffle partitions for ``rows`` subtask rows: one per ``ROWS_PER_PARTITION``, at least one,
    at most ``most`` (the session's own setting: what the cores or the cluster take)."""
    return max(1, min(most, math.ceil(rows / ROWS_PER_PARTITION)))


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
    most = int(spark.conf.get("spark.sql.shuffle.partitions") or 1)
    settings = {
        # The part files are listed on the driver: a listing job per thousand files costs seconds.
        "spark.sql.sources.parallelPartitionDiscovery.threshold": str(len(scan.subtasks) + 32),
        "spark.sql.shuffle.partitions": str(shuffle_partitions(rows, most)),
        **(LARGE if rows >= CODEGEN_ROWS else SMALL),
    }
    with _conf(spark, settings):
        subtasks, causes = read_history(spark, scan, job=job, since=since)
        windows = window_vertices(subtasks, limits).persist()
        try:
            progress(f"one pass: {windows.count():,} rows of a window and vertex")
            progress(
                "levels, capacities, causes, hot subtasks, checkpoints and the autoscaler's "
                "verdicts per vertex and run"
            )
            found = Aggregates.of(collect_parts(aggregates(windows, causes)))
        finally:
            windows.unpersist()
    series = run_vertices(found)
    jobs = job_runs(found)
    progress(
        f"{counted(len(found.runs), 'run')} of {counted(len(jobs), 'job')}: trends, chronic "
        "bottlenecks, regressions between runs, skew over time, checkpoints, the autoscaler"
    )
    vertices, chronic = vertex_histories(found, series), chronic_bottlenecks(found)
    checkpoints, autoscaler = checkpoint_histories(found), autoscaler_histories(found)
    found_regressions, skew = regressions(found, series, limits), skewed_subtasks(found, limits)
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
        vertices=vertices,
        chronic=chronic,
        regressions=found_regressions,
        skew=skew,
        checkpoints=checkpoints,
        autoscaler=autoscaler,
        skipped=scan.skipped,
    )
