"""What the analytics look for across runs: chronic bottlenecks, regressions, skew over time.

Each function asks one question of the cached tables of :mod:`bpmon.history.analytics` with the
DataFrame API and returns model values; the thresholds come from the ``[history]`` table of the
rules file, handed over by the service as :class:`~bpmon.analysis.Thresholds` (the history
layer does not read the rules).

May import: the model layer, bpmon.history; pyspark.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from pyspark.sql import DataFrame, Window
from pyspark.sql import functions as F  # noqa: N812 - Spark's own idiom

from bpmon.analysis import (
    LEVEL_NAMES,
    ChronicBottleneck,
    JobHistory,
    Regression,
    SkewedSubtask,
    Thresholds,
)

if TYPE_CHECKING:
    from bpmon.history.analytics import Frames


def job_runs(frames: Frames) -> tuple[JobHistory, ...]:
    """Per job: its runs and windows, its first and last run, whether any row is synthetic."""
    rows = (
        frames.runs.groupBy("job")
        .agg(
            F.count("*").alias("runs"),
            F.sum("windows").alias("windows"),
            F.min_by("run_id", "seq").alias("first_run"),
            F.max_by("run_id", "seq").alias("last_run"),
            F.min("start").alias("first"),
            F.max("start").alias("last"),
            F.max("synthetic").alias("synthetic"),
        )
        .orderBy("job")
        .collect()
    )
    return tuple(
        JobHistory(
            r["job"],
            r["runs"],
            r["windows"],
            r["first_run"],
            r["last_run"],
            r["first"],
            r["last"],
            bool(r["synthetic"]),
        )
        for r in rows
    )


def chronic_bottlenecks(frames: Frames) -> tuple[ChronicBottleneck, ...]:
    """Vertices most often named root cause, weighted by confidence and window seconds."""
    per_job = frames.runs.groupBy("job").agg(
        F.sum("seconds").alias("job_seconds"), F.sum("windows").alias("job_windows")
    )
    named = frames.causes.groupBy("job", "vertex").agg(
        F.sum(F.col("confidence") * F.col("seconds")).alias("weight"),
        F.countDistinct("run_id", "burst").alias("windows"),
        F.countDistinct("run_id").alias("runs"),
        F.mode("kind").alias("kind"),
        F.avg("confidence").alias("confidence_mean"),
    )
    scored = named.join(per_job, "job").select(
        "*",
        F.try_divide(F.col("weight"), F.col("job_seconds")).alias("score"),
        F.try_divide(F.col("windows"), F.col("job_windows")).alias("window_share"),
    )
    ranked = scored.withColumn(
        "rank",
        F.row_number().over(
            Window.partitionBy("job").orderBy(F.desc("score"), F.desc("windows"), "vertex")
        ),
    )
    return tuple(
        ChronicBottleneck(
            r["job"],
            r["vertex"],
            r["rank"],
            r["score"],
            r["windows"],
            r["window_share"],
            r["runs"],
            r["kind"],
            r["confidence_mean"],
        )
        for r in ranked.orderBy(F.desc("score"), "job", "rank").collect()
    )


def regressions(frames: Frames, limits: Thresholds, flagged: list[Any]) -> tuple[Regression, ...]:
    """What got worse from each run of a job to the next, both runs' ids and figures.

    ``flagged`` are the run-vertex rows whose capacity dropped or level worsened
    (:func:`bpmon.history.analytics.run_vertices`); causes are compared here.
    """
    found = [*_vertex_regressions(flagged, limits), *_cause_regressions(frames, limits)]
    found.sort(key=lambda r: (r.job, r.after_run, r.kind, r.vertex))
    return tuple(found)


def _previous(frame: DataFrame, key: list[str], columns: list[str]) -> DataFrame:
    """``frame`` with ``prev_<column>`` of the job's previous run (None for the first run)."""
    order = Window.partitionBy(*key).orderBy("seq")
    out = frame.withColumn("prev_seq", F.lag("seq").over(order))
    for name in columns:
        out = out.withColumn(f"prev_{name}", F.lag(name).over(order))
    return out.where(F.col("prev_seq") == F.col("seq") - 1)


def _vertex_regressions(flagged: list[Any], limits: Thresholds) -> list[Regression]:
    out: list[Regression] = []
    for r in flagged:
        before, after = r["prev_run_id"], r["run_id"]
        if r["dropped"]:
            change = r["capacity"] / r["prev_capacity"] - 1
            detail = (
                f"{r['vertex']} handles ~{r['capacity']:,.0f} records/s per subtask at 100% busy "
                f"in run {after}, {-change:.0%} less than the ~{r['prev_capacity']:,.0f} of run "
                f"{before} (threshold {limits.capacity_drop:.0%})"
            )
            out.append(
                Regression(
                    r["job"], r["vertex"], "capacity-drop", before, after,
                    r["prev_capacity"], r["capacity"], change, detail,
                )
            )  # fmt: skip
        if r["worse"]:
            was, now = LEVEL_NAMES[r["prev_level"]], LEVEL_NAMES[r["level"]]
            detail = (
                f"{r['vertex']} went {was} -> {now} (median ratio {_num(r['prev_ratio'])} -> "
                f"{_num(r['ratio'])})"
            )
            moved = None
            if r["prev_ratio"] is not None and r["ratio"] is not None:
                moved = r["ratio"] - r["prev_ratio"]
            out.append(
                Regression(
                    r["job"], r["vertex"], "level-worsened", before, after, was, now, moved, detail
                )
            )
    return out


def _cause_regressions(frames: Frames, limits: Thresholds) -> list[Regression]:
    """A bottleneck that moved, and a cause the previous run never named."""
    named = frames.causes.groupBy("job", "run_id", "vertex").agg(
        F.countDistinct("burst").alias("named"),
        F.sum(F.when(F.col("rank") == 0, 1).otherwise(0)).alias("first"),
    )
    with_runs = named.join(frames.runs.select("job", "run_id", "seq", "windows"), ["job", "run_id"])
    top = Window.partitionBy("job", "run_id").orderBy(F.desc("first"), F.desc("named"), "vertex")
    share = F.try_divide(F.col("named"), F.col("windows"))
    per_run = with_runs.groupBy("job", "run_id", "seq").agg(
        F.collect_set("vertex").alias("any"),
        F.collect_set(F.when(share >= limits.cause_share, F.col("vertex"))).alias("causes"),
        F.map_from_entries(F.collect_list(F.struct("vertex", share.alias("share")))).alias(
            "shares"
        ),
    )
    main = (
        with_runs.where(F.col("first") > 0)
        .withColumn("pick", F.row_number().over(top))
        .where(F.col("pick") == 1)
        .select("job", "run_id", F.col("vertex").alias("main"))
    )
    every_run = frames.runs.select("job", "run_id", "seq")
    runs = every_run.join(per_run.drop("seq"), ["job", "run_id"], "left").join(
        main, ["job", "run_id"], "left"
    )
    paired = _previous(runs, ["job"], ["run_id", "any", "main"])
    out: list[Regression] = []
    for r in paired.collect():
        before, after, moved = r["prev_run_id"], r["run_id"], None
        if r["main"] and r["prev_main"] and r["main"] != r["prev_main"]:
            moved = r["main"]
            detail = f"the main bottleneck moved from {r['prev_main']} to {r['main']}"
            out.append(
                Regression(
                    r["job"], r["main"], "moved-bottleneck", before, after,
                    r["prev_main"], r["main"], None, detail,
                )
            )  # fmt: skip
        earlier = set(r["prev_any"] or [])
        for vertex in sorted(set(r["causes"] or []) - earlier - {moved}):
            part = (r["shares"] or {}).get(vertex)
            detail = (
                f"{vertex} is named root cause in {_pct(part)} of the windows of run {after}, "
                f"in none of run {before}"
            )
            out.append(
                Regression(r["job"], vertex, "new-cause", before, after, 0.0, part, part, detail)
            )
    return out


def skewed_subtasks(frames: Frames, limits: Thresholds) -> tuple[SkewedSubtask, ...]:
    """Subtasks hot in at least ``hot_share`` of their vertex's windows (two at least)."""
    w = frames.windows
    totals = w.groupBy("job", "vertex").agg(F.count("*").alias("windows"))
    hot = (
        w.where(F.col("hot").isNotNull())
        .groupBy("job", "vertex", F.col("hot").alias("subtask"))
        .agg(F.count("*").alias("hot_windows"), F.countDistinct("run_id").alias("runs"))
        .join(totals, ["job", "vertex"])
        .withColumn("share", F.try_divide(F.col("hot_windows"), F.col("windows")))
        .where((F.col("hot_windows") >= 2) & (F.col("share") >= limits.hot_share))
        .orderBy(F.desc("share"), "job", "vertex", "subtask")
    )
    return tuple(
        SkewedSubtask(
            r["job"],
            r["vertex"],
            r["subtask"],
            r["hot_windows"],
            r["windows"],
            r["share"],
            r["runs"],
        )
        for r in hot.collect()
    )


def _num(value: Any) -> str:
    return "-" if value is None else f"{value:.2f}"


def _pct(value: Any) -> str:
    return "-" if value is None else f"{value:.0%}"
