"""bpmon analyze (Spark local[2]) against DuckDB and pyarrow + pandas on the same history queries.

Synthetic histories (``bpmon history synth``) are analysed three ways, each in a fresh process
whose wall time and peak memory (the resident set of the process and its children, the JVM
included, sampled every 0.1 s) are measured:

- ``small``: 200 windows, what a new user has after a few dozen runs (2 jobs x 100 runs of one
  window, four vertices of 2 subtasks: 1,600 subtask rows in 200 part files). Goal: 20 s with
  Spark's start;
- ``1000000`` and ``10000000`` subtask rows: 10 jobs x 100 runs of four vertices of 50 subtasks.
  Goal: 10 M rows in 45 s.

The engines:

- ``spark``: the real ``bpmon analyze --master local[2] --format json`` (Spark's start included);
- ``duckdb``: the same queries in SQL over the same part files, one process;
- ``pandas``: the same queries with pyarrow (reading) and pandas (grouping), one process.

The queries: the pass that reduces the subtask rows to one row per window and vertex (worst level
and ratio, busiest subtask, capacity per subtask as ``bpmon/model/capacity.py`` defines it, hottest
subtask), then per vertex the level shares and p50/p95 ratio, p50 busy, p50 capacity and its
trend over runs; per run and vertex the median capacity and level against the previous run's
(capacity drops, worsened levels); chronic bottlenecks from the cause rows; each run's main
bottleneck against the previous run's (moved); hot subtasks. Each engine prints what it found
(regressions, the top chronic bottleneck per job), and the benchmark checks the three agree on
the planted capacity drops.

The histories are written once into ``--data`` and reused. The 10 M case is heavy on a shared
2-core machine: run it with ``--sizes 10000000`` only when needed. Each case prints Spark's time
over DuckDB's; the last line is a JSON object of the figures.

    .venv/bin/python tests/benchmarks/bench_history.py [--sizes small,1000000,10000000]
        [--data DIR] [--engines spark,duckdb,pandas]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from bpmon.history.store import HistoryStore
from bpmon.history.synth import SynthPlan, synthesize
from bpmon.model.capacity import MIN_BUSY

ENGINES = ("spark", "duckdb", "pandas")
JOBS, RUNS, VERTICES, PARALLELISM = 10, 100, 4, 50
DROP, HOT = 0.2, 1.5
SMALL = SynthPlan(runs=100, jobs=2, bursts=1, parallelism=2, start=datetime(2026, 1, 1, tzinfo=UTC))
"""The small case: 200 windows in 200 part files, 1,600 subtask rows."""


def plan_of(size: str) -> SynthPlan:
    """``small``, or a history of that many subtask rows."""
    if size == "small":
        return SMALL
    bursts = int(size) // (JOBS * RUNS * VERTICES * PARALLELISM)
    start = datetime(2026, 1, 1, tzinfo=UTC)
    return SynthPlan(runs=RUNS, jobs=JOBS, bursts=bursts, parallelism=PARALLELISM, start=start)


def history_of(size: str, data: Path) -> Path:
    """The runs folder of the synthetic history of ``size`` (written once)."""
    folder = data / f"rows-{size}"
    done = folder / ".complete"
    if not done.exists():
        began = time.monotonic()
        made = synthesize(HistoryStore.in_runs_dir(folder), plan_of(size))
        print(f"wrote {made.subtask_rows:,} rows in {time.monotonic() - began:.0f} s", flush=True)
        done.write_text("")
    return folder


# -- measuring a process tree ---------------------------------------------------------------------


def tree_rss(pid: int) -> int:
    """Resident bytes of ``pid`` and all its descendants (from /proc)."""
    children: dict[int, list[int]] = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                stat = Path(f"/proc/{entry}/stat").read_text()
            except OSError:
                continue
            parent = int(stat.rsplit(")", 1)[1].split()[1])
            children.setdefault(parent, []).append(int(entry))
    total, todo = 0, [pid]
    while todo:
        current = todo.pop()
        todo += children.get(current, [])
        try:
            for line in Path(f"/proc/{current}/status").read_text().splitlines():
                if line.startswith("VmRSS:"):
                    total += int(line.split()[1]) * 1024
        except OSError:
            continue
    return total


def measure(command: list[str]) -> dict[str, Any]:
    """Run ``command``; its wall time, peak tree RSS, and what it printed (files, not pipes: a
    pipe nobody reads while the process runs would stall it once full)."""
    with tempfile.TemporaryFile("w+") as out, tempfile.TemporaryFile("w+") as err:
        began = time.monotonic()
        peak = 0
        with subprocess.Popen(command, stdout=out, stderr=err, text=True) as p:
            while p.poll() is None:
                peak = max(peak, tree_rss(p.pid))
                time.sleep(0.1)
        wall = time.monotonic() - began
        out.seek(0)
        err.seek(0)
        printed, errors = out.read(), err.read()
    if p.returncode != 0:
        raise SystemExit(f"{command[:4]} failed: {errors[-2000:]}")
    return {
        "wall_s": round(wall, 2),
        "peak_mib": round(peak / 2**20),
        "out": printed,
        "err": errors,
    }


# -- the engines ----------------------------------------------------------------------------------


def run_spark(runs: Path) -> dict[str, Any]:
    bpmon = Path(sys.executable).parent / "bpmon"
    result = measure(
        [str(bpmon), "analyze", "--master", "local[2]", "--format", "json", "--runs-dir", str(runs)]
    )
    doc = json.loads(result["out"])
    started = [line for line in result["err"].splitlines() if "session started in" in line]
    return {
        "wall_s": result["wall_s"],
        "peak_mib": result["peak_mib"],
        "spark_start_s": float(started[0].rsplit(" in ", 1)[1].split()[0]) if started else None,
        "drops": sorted(
            (r["job"], r["before_run"], r["after_run"])
            for r in doc["regressions"]
            if r["kind"] == "capacity-drop"
        ),
        "chronic_top": sorted((c["job"], c["vertex"]) for c in doc["chronic"] if c["rank"] == 1),
    }


def run_inline(engine: str, runs: Path) -> dict[str, Any]:
    result = measure([sys.executable, __file__, "--engine", engine, "--runs", str(runs)])
    found = json.loads(result["out"].strip().splitlines()[-1])
    return {"wall_s": result["wall_s"], "peak_mib": result["peak_mib"], **found}


def files(runs: Path, table: str) -> list[str]:
    return [str(p) for p in sorted((runs / "history" / table).rglob("part-*.parquet"))]


DUCKDB_QUERIES = f"""
CREATE TABLE wv AS
SELECT job, run_id, burst, vertex,
  min(window_start) AS start,
  max(epoch(window_end) - epoch(window_start)) AS seconds,
  max(CASE level WHEN 'OK' THEN 0 WHEN 'LOW' THEN 1 WHEN 'HIGH' THEN 2 END) AS level,
  max(ratio) AS ratio, max(busy_ratio) AS busy,
  avg(CASE WHEN busy_ratio >= {MIN_BUSY} AND handled > 0 THEN handled / busy_ratio END) AS capacity,
  sum(records_in_per_s) AS rs, count(records_in_per_s) AS rn, max(records_in_per_s) AS rt,
  arg_max(subtask, records_in_per_s) AS ra
FROM (SELECT *, CASE WHEN records_in_per_s > 0 THEN records_in_per_s ELSE records_out_per_s END
  AS handled FROM sub) GROUP BY ALL;
CREATE TABLE runs AS
SELECT job, run_id, min(start) AS start, count(DISTINCT burst) AS windows,
  sum(seconds) / count(DISTINCT vertex) AS seconds,
  row_number() OVER (PARTITION BY job ORDER BY min(start), run_id) AS seq
FROM wv GROUP BY job, run_id;
"""

DUCKDB_RESULTS = {
    "vertices": """
SELECT job, vertex, count(*) AS windows, avg((level = 0)::DOUBLE) AS ok,
  avg((level = 2)::DOUBLE) AS high, approx_quantile(ratio, 0.5) AS p50,
  approx_quantile(ratio, 0.95) AS p95, approx_quantile(busy, 0.5) AS busy50,
  approx_quantile(capacity, 0.5) AS capacity
FROM wv GROUP BY ALL""",
    "drops": f"""
WITH per_run AS (
  SELECT w.job, w.run_id, w.vertex, r.seq, quantile_cont(w.capacity, 0.5) AS capacity,
    quantile_disc(w.level, 0.5) AS level
  FROM wv w JOIN runs r USING (job, run_id) GROUP BY ALL),
paired AS (
  SELECT *, lag(seq) OVER v AS prev_seq, lag(run_id) OVER v AS prev_run,
    lag(capacity) OVER v AS prev_capacity, lag(level) OVER v AS prev_level,
    regr_slope(capacity, seq) OVER (PARTITION BY job, vertex) AS trend
  FROM per_run WINDOW v AS (PARTITION BY job, vertex ORDER BY seq))
SELECT job, prev_run, run_id FROM paired
WHERE prev_seq = seq - 1 AND prev_capacity > 0 AND capacity < prev_capacity * {1 - DROP}""",
    "worse": """
WITH per_run AS (
  SELECT w.job, w.vertex, r.seq, quantile_disc(w.level, 0.5) AS level
  FROM wv w JOIN runs r USING (job, run_id) GROUP BY ALL)
SELECT count(*) FROM (SELECT level > lag(level) OVER (PARTITION BY job, vertex ORDER BY seq) AS w
  FROM per_run) WHERE w""",
    "chronic": """
WITH named AS (
  SELECT c.job, c.vertex, sum(c.confidence * (epoch(c.window_end) - epoch(c.window_start))) AS w
  FROM causes c GROUP BY ALL),
total AS (SELECT job, sum(seconds) AS s FROM runs GROUP BY job)
SELECT job, vertex FROM (
  SELECT n.job, n.vertex, row_number() OVER (PARTITION BY n.job ORDER BY n.w / t.s DESC) AS rank
  FROM named n JOIN total t USING (job)) WHERE rank = 1""",
    "moved": """
WITH main AS (
  SELECT c.job, c.run_id, r.seq, mode(c.vertex) AS vertex
  FROM causes c JOIN runs r USING (job, run_id) WHERE c.rank = 0 GROUP BY ALL)
SELECT count(*) FROM (SELECT vertex <> lag(vertex) OVER (PARTITION BY job ORDER BY seq) AS moved
  FROM main) WHERE moved""",
    "skew": f"""
SELECT job, vertex, ra AS subtask, count(*) AS hot FROM wv
WHERE rn > 1 AND rt >= {HOT} * (rs - rt) / (rn - 1) GROUP BY ALL HAVING count(*) >= 2""",
}


def engine_duckdb(runs: Path) -> dict[str, Any]:
    import duckdb

    db = duckdb.connect()
    for view, table in (("sub", "subtasks"), ("causes", "causes")):
        listed = files(runs, table)
        db.execute(
            f"CREATE VIEW {view} AS SELECT * FROM read_parquet({listed!r}, hive_partitioning=false)"
        )
    db.execute(DUCKDB_QUERIES)
    got = {name: db.execute(sql).fetchall() for name, sql in DUCKDB_RESULTS.items()}
    return {
        "drops": sorted(tuple(r) for r in got["drops"]),
        "chronic_top": sorted(tuple(r) for r in got["chronic"]),
        "skew": len(got["skew"]),
    }


def engine_pandas(runs: Path) -> dict[str, Any]:
    import pyarrow.parquet as pq  # to_pandas() below needs pandas installed

    columns = [
        "job", "run_id", "burst", "vertex", "subtask", "window_start", "window_end", "level",
        "ratio", "busy_ratio", "records_in_per_s", "records_out_per_s",
    ]  # fmt: skip
    sub = (
        pq.ParquetDataset(files(runs, "subtasks"), partitioning=None)
        .read(columns=columns)
        .to_pandas()
    )
    sub["lvl"] = sub["level"].map({"OK": 0, "LOW": 1, "HIGH": 2})
    handled = sub["records_in_per_s"].where(sub["records_in_per_s"] > 0, sub["records_out_per_s"])
    ok = (sub["busy_ratio"] >= MIN_BUSY) & (handled > 0)
    sub["capacity"] = (handled / sub["busy_ratio"]).where(ok)
    keys = ["job", "run_id", "burst", "vertex"]
    top = sub.loc[sub.groupby(keys)["records_in_per_s"].idxmax(), [*keys, "subtask"]]
    wv = (
        sub.groupby(keys)
        .agg(
            start=("window_start", "min"),
            end=("window_end", "max"),
            level=("lvl", "max"),
            ratio=("ratio", "max"),
            busy=("busy_ratio", "max"),
            capacity=("capacity", "mean"),
            rs=("records_in_per_s", "sum"),
            rn=("records_in_per_s", "count"),
            rt=("records_in_per_s", "max"),
        )
        .reset_index()
        .merge(top.rename(columns={"subtask": "ra"}), on=keys)
    )
    del sub
    wv["seconds"] = (wv["end"] - wv["start"]).dt.total_seconds()
    runs_t = wv.groupby(["job", "run_id"]).agg(start=("start", "min")).reset_index()
    runs_t = runs_t.sort_values(["job", "start", "run_id"])
    runs_t["seq"] = runs_t.groupby("job").cumcount() + 1
    wv.groupby(["job", "vertex"]).agg(
        windows=("level", "size"),
        ok=("level", lambda s: (s == 0).mean()),
        p50=("ratio", "median"),
        p95=("ratio", lambda s: s.quantile(0.95)),
        busy50=("busy", "median"),
        capacity=("capacity", "median"),
    )
    per_run = (
        wv.groupby(["job", "run_id", "vertex"])
        .agg(capacity=("capacity", "median"), level=("level", "median"))
        .reset_index()
        .merge(runs_t[["job", "run_id", "seq"]], on=["job", "run_id"])
        .sort_values(["job", "vertex", "seq"])
    )
    grouped = per_run.groupby(["job", "vertex"])
    for name in ("seq", "run_id", "capacity", "level"):
        per_run[f"prev_{name}"] = grouped[name].shift()
    consecutive = per_run["prev_seq"] == per_run["seq"] - 1
    drops = per_run[
        consecutive
        & (per_run["prev_capacity"] > 0)
        & (per_run["capacity"] < per_run["prev_capacity"] * (1 - DROP))
    ]
    causes = pq.ParquetDataset(files(runs, "causes"), partitioning=None).read().to_pandas()
    causes["w"] = causes["confidence"] * (
        (causes["window_end"] - causes["window_start"]).dt.total_seconds()
    )
    named = causes.groupby(["job", "vertex"])["w"].sum().reset_index()
    chronic = named.sort_values("w", ascending=False).groupby("job").head(1)
    hot = wv[(wv["rn"] > 1) & (wv["rt"] >= HOT * (wv["rs"] - wv["rt"]) / (wv["rn"] - 1))]
    skew = hot.groupby(["job", "vertex", "ra"]).size()
    return {
        "drops": sorted(zip(drops["job"], drops["prev_run_id"], drops["run_id"], strict=True)),
        "chronic_top": sorted(zip(chronic["job"], chronic["vertex"], strict=True)),
        "skew": int((skew >= 2).sum()),
    }


# -- the benchmark --------------------------------------------------------------------------------


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="small,1000000,10000000")
    parser.add_argument("--data", type=Path, default=Path("/tmp/bpmon-bench-history"))
    parser.add_argument("--engines", default=",".join(ENGINES))
    parser.add_argument("--engine", help=argparse.SUPPRESS)
    parser.add_argument("--runs", type=Path, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.engine:  # a measured child: one engine, its findings as JSON
        found = {"duckdb": engine_duckdb, "pandas": engine_pandas}[args.engine](args.runs)
        print(json.dumps(found, default=list))
        return
    figures: dict[str, Any] = {}
    for size in args.sizes.split(","):
        runs = history_of(size, args.data)
        label = "200 windows" if size == "small" else f"{int(size):,} rows"
        results: dict[str, Any] = {}
        for engine in args.engines.split(","):
            results[engine] = run_spark(runs) if engine == "spark" else run_inline(engine, runs)
            r = results[engine]
            print(
                f"{label:>16}  {engine:<7} {r['wall_s']:7.1f} s  {r['peak_mib']:6,} MiB  "
                f"{len(r['drops'])} capacity drops"
                + (f"  (Spark start {r['spark_start_s']:.1f} s)" if r.get("spark_start_s") else ""),
                flush=True,
            )
        drops = {e: [list(d) for d in r["drops"]] for e, r in results.items()}
        agree = len({json.dumps(d) for d in drops.values()}) == 1
        print(f"  the engines {'agree' if agree else 'DISAGREE'} on the capacity drops", flush=True)
        figures[size] = {
            e: {k: v for k, v in r.items() if k in ("wall_s", "peak_mib", "spark_start_s")}
            for e, r in results.items()
        } | {"agree": agree}
        if "spark" in results and "duckdb" in results:
            ratio = results["spark"]["wall_s"] / results["duckdb"]["wall_s"]
            figures[size]["spark_over_duckdb"] = round(ratio, 1)
            print(f"  Spark / DuckDB: {ratio:.1f}x", flush=True)
    print(json.dumps(figures))


if __name__ == "__main__":
    main()
