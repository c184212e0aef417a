"""``bpmon history synth``: a synthetic history with known facts, for tests and benchmarks.

Every row it writes has ``synthetic = true``, its jobs are named ``synth-job-<k>`` and its run ids
hold ``synth``, so synthetic rows are never mistaken for runs. What it plants, per job ``k``:

- the four vertices ``source -> parse -> enrich -> sink``, each of ``parallelism`` subtasks;
- a **chronic bottleneck** (:func:`planted_bottleneck`): named first root cause in every window
  with confidence 0.75-1.0, its producers HIGH (ratio ~0.9), itself OK and ~97% busy; a weaker
  second cause (``network``, confidence 0.3) in the first window of every run;
- a **regression**: from run ``runs // 2`` on, the bottleneck handles 40% fewer records/s per
  subtask (1,000 -> 600), so the pair of runs ``runs // 2 - 1`` and ``runs // 2`` is a capacity
  drop; the other vertices' capacities vary by 3% only;
- **skew**: subtask 0 of the first vertex after the source that is not the bottleneck receives
  2.5 times the records of each of its siblings, in every window;
- **checkpoints**: a checkpoint completes in every window (its id the burst plus one, as are the
  counts), taking ~400 ms of which half waits for barriers; from run ``runs // 2`` on, the slower
  bottleneck holds the barriers: ~2,000 ms, 90% of it waiting (a checkpoint slowdown between the
  same two runs as the capacity drop). Only the job's figures: the per-vertex phases are null;
- **the autoscaler's verdicts**: in every window it would scale the bottleneck up by one subtask:
  ``agrees`` before run ``runs // 2``, ``misses`` from it on (the slower bottleneck needs more than
  one more); in the first window of every run it would also double the weak second cause's vertex,
  ``scales-ineffectively`` (a shared link is no faster for more subtasks). Every window is judged;
  those of run ``runs // 2`` on, and the first of each earlier run, would have been wrong.

Rows are built column-wise with pyarrow (noise from ``pyarrow.compute.random``, seeded), one part
file per run, so ten million rows take seconds, not minutes. Writing the same plan twice writes
nothing the second time (part names come from the run ids).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from bpmon.history.rows import Columns, empty_columns
from bpmon.history.store import HistoryStore, require_pyarrow
from bpmon.model.clock import as_utc
from bpmon.model.errors import ConfigError

VERTICES = ("source", "parse", "enrich", "sink")
BASE_CAPACITY = 1000.0
"""Records/s per subtask of a bottleneck at 100% busy, before the regression."""
DROP = 0.4
"""The planted capacity drop (40%)."""
OTHER_CAPACITY = 5000.0
"""Records/s per subtask at 100% busy of the vertices that are not the bottleneck."""
HOT_SHARE = 2.5
"""How many times a sibling's records the hot subtask receives."""
WINDOW_S = 5.0
CHECKPOINT_MS = 400.0
"""A checkpoint's duration before the regression."""
CHECKPOINT_SLOWDOWN = 5.0
"""How many times longer checkpoints take from the regression run on."""


@dataclass(frozen=True, slots=True)
class SynthPlan:
    """What to generate: ``runs`` runs of each of ``jobs`` jobs, from ``start``, ``every`` apart.

    Attributes:
        runs: runs per job.
        jobs: how many jobs.
        bursts: windows per run (one part file per run holds them all).
        parallelism: subtasks of every vertex.
        start: the first run's first window.
        every: time between two runs of a job.
        seed: the noise's seed (the same plan and seed give the same rows).
    """

    runs: int
    jobs: int
    start: datetime
    bursts: int = 3
    parallelism: int = 4
    every: timedelta = timedelta(hours=6)
    seed: int = 0

    def __post_init__(self) -> None:
        for name in ("runs", "jobs", "bursts", "parallelism"):
            if getattr(self, name) < 1:
                raise ConfigError(f"--{name} {getattr(self, name)}: expected 1 or more")
        if self.parallelism < 2:
            raise ConfigError(f"--parallelism {self.parallelism}: skew needs at least 2 subtasks")

    @property
    def subtask_rows(self) -> int:
        """How many subtask rows the plan makes."""
        return self.runs * self.jobs * self.bursts * len(VERTICES) * self.parallelism


@dataclass(frozen=True, slots=True)
class SynthResult:
    """What was written: runs, rows of each table, and parts that were already there."""

    runs: int
    subtask_rows: int
    cause_rows: int
    present: int


def job_name(k: int) -> str:
    """The name of synthetic job ``k`` (1-based)."""
    return f"synth-job-{k}"


def planted_bottleneck(k: int) -> str:
    """The chronic bottleneck of job ``k``: parse, enrich, sink, parse, ..."""
    return VERTICES[1 + (k - 1) % 3]


def skewed_vertex(k: int) -> str:
    """The vertex of job ``k`` whose subtask 0 is hot."""
    return "enrich" if planted_bottleneck(k) == "parse" else "parse"


def run_id(plan: SynthPlan, k: int, i: int) -> str:
    """The id of run ``i`` (0-based) of job ``k``."""
    return f"{run_start(plan, k, i):%Y%m%dT%H%M%SZ}-{job_name(k)}-synth{i:04d}"


def run_start(plan: SynthPlan, k: int, i: int) -> datetime:
    """When run ``i`` of job ``k`` begins (jobs are a minute apart)."""
    return as_utc(plan.start) + i * plan.every + timedelta(minutes=k - 1)


def regression_run(plan: SynthPlan) -> int | None:
    """The first run with the lower capacity (None with a single run)."""
    return plan.runs // 2 if plan.runs >= 2 else None


def synthesize(history: HistoryStore, plan: SynthPlan) -> SynthResult:
    """Write the plan's runs into ``history`` (one part per run and table)."""
    require_pyarrow()
    subtask_rows = cause_rows = present = 0
    for k in range(1, plan.jobs + 1):
        for i in range(plan.runs):
            rid = run_id(plan, k, i)
            day = run_start(plan, k, i).date()
            if history.holds(job_name(k), day, rid, rid, 0):  # its part, or compacted
                present += 1
                continue
            subtasks = _subtasks(plan, k, i)
            causes = _causes(plan, k, i)
            history.write_part("causes", job_name(k), day, rid, causes)
            history.write_part("subtasks", job_name(k), day, rid, subtasks)
            subtask_rows += subtasks.num_rows
            cause_rows += len(causes["run_id"])
    return SynthResult(plan.runs * plan.jobs, subtask_rows, cause_rows, present)


def _window_starts(plan: SynthPlan, k: int, i: int) -> list[datetime]:
    first = run_start(plan, k, i)
    return [first + timedelta(seconds=b * WINDOW_S) for b in range(plan.bursts)]


def _capacity(plan: SynthPlan, i: int) -> float:
    regressed = regression_run(plan)
    return BASE_CAPACITY * (1 - DROP) if regressed is not None and i >= regressed else BASE_CAPACITY


def _subtasks(plan: SynthPlan, k: int, i: int) -> Any:
    """The subtask rows of run ``i`` of job ``k``, as a pyarrow table."""
    import pyarrow as pa
    import pyarrow.compute as pc

    from bpmon.history.schema import arrow_schema

    p, bottleneck, hot = plan.parallelism, planted_bottleneck(k), skewed_vertex(k)
    capacity = _capacity(plan, i)
    throughput = capacity * p * 0.97  # records/s through the job, set by the bottleneck
    per_sub = throughput / p
    before = VERTICES.index(bottleneck)
    pattern: dict[str, list[Any]] = {
        "vertex": [],
        "vertex_index": [],
        "subtask": [],
        "level": [],
        "ratio": [],
        "busy": [],
        "in": [],
    }
    for index, vertex in enumerate(VERTICES):
        share = [per_sub] * p
        if vertex == hot:
            cold = throughput / (HOT_SHARE + p - 1)
            share = [cold * HOT_SHARE] + [cold] * (p - 1)
        for s in range(p):
            upstream = index < before
            records = 0.0 if vertex == "source" else share[s]
            cap = capacity if vertex == bottleneck else OTHER_CAPACITY
            pattern["vertex"].append(vertex)
            pattern["vertex_index"].append(index)
            pattern["subtask"].append(s)
            pattern["level"].append("HIGH" if upstream else "OK")
            pattern["ratio"].append(0.9 if upstream else 0.0)
            pattern["busy"].append(0.97 if vertex == bottleneck else max(share[s], 1.0) / cap)
            pattern["in"].append(records)
    n, width = plan.bursts * len(pattern["vertex"]), len(pattern["vertex"])
    seed = plan.seed * 1_000_003 + k * 10_007 + i

    def noise(salt: int, spread: float) -> Any:  # 1 +- spread, uniform
        u = pc.random(n, initializer=seed * 7 + salt)
        return pc.add(1.0 - spread, pc.multiply(u, 2 * spread))

    def repeat(values: list[Any]) -> Any:
        return pa.array(values * plan.bursts)

    busy = pc.min_element_wise(pc.multiply(repeat(pattern["busy"]), noise(1, 0.03)), 1.0)
    records_in = pc.multiply(repeat(pattern["in"]), noise(2, 0.01))
    ratio = pc.min_element_wise(pc.multiply(repeat(pattern["ratio"]), noise(3, 0.05)), 1.0)
    starts = [s for s in _window_starts(plan, k, i) for _ in range(width)]
    columns: dict[str, Any] = {
        "job": pa.repeat(job_name(k), n),
        "date": pa.array([s.date() for s in starts], pa.date32()),
        "run_id": pa.repeat(run_id(plan, k, i), n),
        "burst": pa.array([b for b in range(plan.bursts) for _ in range(width)], pa.int32()),
        "window_start": pa.array(starts, pa.timestamp("us", tz="UTC")),
        "window_end": pa.array(
            [s + timedelta(seconds=WINDOW_S) for s in starts], pa.timestamp("us", tz="UTC")
        ),
        "source": pa.repeat("runtime", n),
        "levels_from": pa.repeat("samples", n),
        "vertex": repeat(pattern["vertex"]),
        "vertex_index": pa.array(pattern["vertex_index"] * plan.bursts, pa.int32()),
        "parallelism": pa.repeat(pa.scalar(p, pa.int32()), n),
        "subtask": pa.array(pattern["subtask"] * plan.bursts, pa.int32()),
        "level": repeat(pattern["level"]),
        "ratio": ratio,
        "busy_ratio": busy,
        "idle_ratio": pc.subtract(1.0, busy),
        "backpressured_time_ratio": ratio,
        "out_pool_usage": pc.if_else(pc.greater(ratio, 0.5), 1.0, 0.1),
        "in_pool_usage": pa.repeat(pa.scalar(None, pa.float64()), n),
        "records_in_per_s": records_in,
        "records_out_per_s": records_in,
        "bpmon_version": pa.repeat(_version(), n),
        "synthetic": pa.repeat(True, n),
    }
    columns |= _checkpoints(plan, i, width, noise(4, 0.05))
    columns |= _autoscaler(plan, k, i, pattern["vertex"])
    schema = arrow_schema("subtasks")
    return pa.Table.from_arrays([columns[f.name] for f in schema], schema=schema)


def _checkpoints(plan: SynthPlan, i: int, width: int, jitter: Any) -> dict[str, Any]:
    """The checkpoint columns of run ``i``: one completed checkpoint a window (see the module);
    ``jitter`` is one factor per row (the window's first row's is used)."""
    import pyarrow as pa
    import pyarrow.compute as pc

    n = plan.bursts * width
    regressed = regression_run(plan)
    slow = regressed is not None and i >= regressed
    waiting = 0.9 if slow else 0.5
    per_window = pc.take(jitter, pa.array([b * width for b in range(plan.bursts)]))
    duration = pc.multiply(per_window, CHECKPOINT_MS * (CHECKPOINT_SLOWDOWN if slow else 1.0))
    wait = pc.multiply(duration, waiting)
    ids = pa.array([b + 1 for b in range(plan.bursts) for _ in range(width)], pa.int64())

    def rows(values: Any) -> Any:  # a value per window -> one per row
        return pc.take(values, pa.array([b for b in range(plan.bursts) for _ in range(width)]))

    def null(kind: Any) -> Any:
        return pa.nulls(n, kind)

    return {
        "checkpoints_completed": ids,
        "checkpoints_failed": pa.repeat(pa.scalar(0, pa.int64()), n),
        "checkpoint_id": ids,
        "checkpoint_status": pa.repeat("completed", n),
        "checkpoint_duration_ms": rows(duration),
        "checkpoint_start_delay_ms": rows(pc.multiply(wait, 0.75)),
        "checkpoint_alignment_ms": rows(pc.multiply(wait, 0.25)),
        "checkpoint_sync_ms": pa.repeat(pa.scalar(5.0), n),
        "checkpoint_async_ms": rows(pc.subtract(pc.subtract(duration, wait), 5.0)),
        "checkpoint_barrier_wait_ms": rows(wait),
        "checkpoint_state_bytes": pa.repeat(pa.scalar(1 << 20, pa.int64()), n),
        "checkpoint_persisted_bytes": pa.repeat(pa.scalar(0, pa.int64()), n),
        "checkpoint_vertex_start_delay_ms": null(pa.float64()),
        "checkpoint_vertex_alignment_ms": null(pa.float64()),
        "checkpoint_vertex_sync_ms": null(pa.float64()),
        "checkpoint_vertex_async_ms": null(pa.float64()),
        "checkpoint_vertex_acknowledged": null(pa.int32()),
    }


def _autoscaler(plan: SynthPlan, k: int, i: int, vertices: list[str]) -> dict[str, Any]:
    """The autoscaler columns of run ``i`` of job ``k`` (see the module); ``vertices`` is the
    vertex of each row of a window."""
    import pyarrow as pa
    import pyarrow.compute as pc

    regressed = regression_run(plan)
    at_bottleneck = "misses" if regressed is not None and i >= regressed else "agrees"
    bottleneck, second = planted_bottleneck(k), _second_cause(k)
    choices = pa.array([[], [at_bottleneck], ["scales-ineffectively"]], pa.list_(pa.string()))
    verdict: list[int] = []
    recommended: list[int] = []
    p = plan.parallelism
    for b in range(plan.bursts):
        for vertex in vertices:
            doubled = b == 0 and vertex == second
            verdict.append(1 if vertex == bottleneck else 2 if doubled else 0)
            recommended.append(p + 1 if vertex == bottleneck else 2 * p if doubled else p)
    return {
        "autoscaler_acts": pa.repeat(True, len(verdict)),
        "autoscaler_recommended_parallelism": pa.array(recommended, pa.int32()),
        "autoscaler_verdicts": pc.take(choices, pa.array(verdict, pa.int32())),
    }


def _second_cause(k: int) -> str:
    """The vertex of job ``k``'s weak second cause (``network``, in each run's first window)."""
    return "sink" if planted_bottleneck(k) != "sink" else "enrich"


def _causes(plan: SynthPlan, k: int, i: int) -> Columns:
    """The cause rows of run ``i`` of job ``k``: the bottleneck in every window, a weak second."""
    import random

    rng = random.Random(plan.seed * 1_000_003 + k * 10_007 + i)
    bottleneck, second = planted_bottleneck(k), _second_cause(k)
    kind = "slow-sink" if bottleneck == "sink" else "slow-operator"
    capacity = _capacity(plan, i)
    columns = empty_columns("causes")
    for b, start in enumerate(_window_starts(plan, k, i)):
        named: list[tuple[str, str, float, float | None]] = [
            (bottleneck, kind, 0.75 + 0.25 * rng.random(), capacity)
        ]
        if b == 0:
            named.append((second, "network", 0.3, None))
        for rank, (vertex, what, confidence, cap) in enumerate(named):
            row = {
                "job": job_name(k),
                "date": start.date(),
                "run_id": run_id(plan, k, i),
                "burst": b,
                "window_start": start,
                "window_end": start + timedelta(seconds=WINDOW_S),
                "source": "runtime",
                "rank": rank,
                "vertex": vertex,
                "kind": what,
                "subtasks": list(range(plan.parallelism)),
                "confidence": confidence,
                "capacity_per_subtask": cap,
                "offered_rate": None,
                "recommended_parallelism": None,
                "bpmon_version": _version(),
                "synthetic": True,
            }
            for name, values in columns.items():
                values.append(row[name])
    return columns


def _version() -> str:
    import bpmon

    return bpmon.__version__
