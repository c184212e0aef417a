"""The small results of the analytics' Spark job, on the driver: what the findings are read from.

:mod:`bpmon.history.analytics` collects eight aggregates in one action (per job and vertex, per
run and vertex, per run, per hot subtask, per run's vertex named root cause and kind, per run's
checkpoints, the autoscaler's verdicts per job and per job and vertex); here they become
:class:`Aggregates`: the runs numbered in time order within their job, the causes folded per run
and per vertex, and each vertex's runs linked to the previous one (:func:`run_vertices`).
Their size is the number of runs times the vertices, never the number of rows of the history.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

Row = Mapping[str, Any]


@dataclass(frozen=True)
class Run:
    """One run of a job: its order in the job (``seq``, 1 first), start, windows and seconds."""

    job: str
    run_id: str
    seq: int
    start: datetime
    windows: int
    seconds: float
    synthetic: bool


@dataclass(frozen=True)
class Aggregates:
    """The small results of the Spark job, by part (each a list of rows by column name)."""

    vertices: list[Row]
    run_vertices: list[Row]
    runs: list[Run]
    hot: list[Row]
    named: list[Row]
    named_by_run: dict[tuple[str, str], list[Row]]
    by_id: dict[tuple[str, str], Run]
    checkpoints: list[Row] = field(default_factory=list)
    """Per run whose windows observed checkpoints: ``analytics._checkpoints``' row."""
    autoscaler: list[Row] = field(default_factory=list)
    """Per job whose windows had the autoscaler's decision: ``analytics._autoscaler``' row."""
    autoscaler_vertices: list[Row] = field(default_factory=list)
    """Per job and vertex that got a verdict: the windows of each (``verdict_column``)."""

    @classmethod
    def of(cls, parts: Mapping[str, Sequence[Row]]) -> Aggregates:
        """The parts as collected, the runs numbered in time order within their job."""
        by_job: dict[str, list[Row]] = defaultdict(list)
        for r in parts.get("run", []):
            by_job[r["job"]].append(r)
        runs = [
            Run(r["job"], r["run_id"], seq, r["start"], r["windows"], r["seconds"] or 0.0,
                bool(r["synthetic"]))
            for job in sorted(by_job)
            for seq, r in enumerate(sorted(by_job[job], key=lambda r: (r["start"], r["run_id"])), 1)
        ]  # fmt: skip
        run_named = _per_run_named(parts.get("named", []))
        named_by_run: dict[tuple[str, str], list[Row]] = defaultdict(list)
        for r in run_named:
            named_by_run[(r["job"], r["run_id"])].append(r)
        return cls(
            vertices=list(parts.get("vertex", [])),
            run_vertices=list(parts.get("run_vertex", [])),
            runs=runs,
            hot=list(parts.get("hot", [])),
            named=_per_vertex_named(parts.get("named", []), run_named),
            named_by_run=dict(named_by_run),
            by_id={(r.job, r.run_id): r for r in runs},
            checkpoints=list(parts.get("checkpoints", [])),
            autoscaler=list(parts.get("autoscaler", [])),
            autoscaler_vertices=list(parts.get("autoscaler_vertex", [])),
        )


def verdict_column(kind: str) -> str:
    """The column of the autoscaler's verdict ``kind`` in the analytics' rows (``as_misses``)."""
    return "as_" + kind.replace("-", "_")


def _per_run_named(rows: Iterable[Row]) -> list[Row]:
    """Per run and vertex named root cause: the windows naming it, those naming it first."""
    bursts: dict[tuple[str, str, str], set[int]] = defaultdict(set)
    first: dict[tuple[str, str, str], int] = defaultdict(int)
    for r in rows:
        key = (r["job"], r["run_id"], r["vertex"])
        bursts[key].update(r["bursts"])
        first[key] += r["first"]
    keys = ("job", "run_id", "vertex")
    return [
        {**dict(zip(keys, key, strict=True)), "named": len(seen), "first": first[key]}
        for key, seen in bursts.items()
    ]


def _per_vertex_named(rows: Sequence[Row], run_named: list[Row]) -> list[Row]:
    """Per vertex named root cause: confidence x seconds, windows, runs, its most common kind
    (the first by name among equals) and mean confidence."""
    out: dict[tuple[str, str], dict[str, Any]] = {}
    kinds: dict[tuple[str, str], dict[str, int]] = defaultdict(lambda: defaultdict(int))
    for r in rows:
        key = (r["job"], r["vertex"])
        at = out.setdefault(
            key,
            {
                "job": r["job"],
                "vertex": r["vertex"],
                "weight": 0.0,
                "windows": 0,
                "runs": 0,
                "causes": 0,
                "confidence": 0.0,
            },
        )
        at["weight"] += r["weight"] or 0.0
        at["causes"] += r["causes"]
        at["confidence"] += r["confidence_sum"] or 0.0
        kinds[key][r["kind"]] += r["causes"]
    for r in run_named:
        at = out[(r["job"], r["vertex"])]
        at["windows"] += r["named"]
        at["runs"] += 1
    for key, at in out.items():
        at["kind"] = min(kinds[key].items(), key=lambda kv: (-kv[1], kv[0]))[0]
        at["confidence_mean"] = at["confidence"] / at["causes"] if at["causes"] else None
    return list(out.values())


@dataclass(frozen=True)
class RunVertex:
    """One vertex over one run: the median of its windows' figures, and the previous run's."""

    job: str
    vertex: str
    run: Run
    capacity: float | None
    level: int | None
    ratio: float | None
    parallelism: int | None
    previous: RunVertex | None = None

    @property
    def consecutive(self) -> bool:
        """Whether the previous run of the job saw the vertex too."""
        return self.previous is not None and self.previous.run.seq == self.run.seq - 1


def run_vertices(found: Aggregates) -> dict[tuple[str, str], list[RunVertex]]:
    """Per job and vertex, its runs in time order, each linked to the previous one."""
    series: dict[tuple[str, str], list[RunVertex]] = defaultdict(list)
    for r in found.run_vertices:
        run = found.by_id[(r["job"], r["run_id"])]
        series[(r["job"], r["vertex"])].append(
            RunVertex(r["job"], r["vertex"], run, r["capacity"], r["level"], r["ratio"],
                      r["parallelism"])
        )  # fmt: skip
    linked: dict[tuple[str, str], list[RunVertex]] = {}
    for key, points in series.items():
        points.sort(key=lambda p: p.run.seq)
        chain: list[RunVertex] = []
        for p in points:
            chain.append(RunVertex(**{**vars(p), "previous": chain[-1] if chain else None}))
        linked[key] = chain
    return linked
