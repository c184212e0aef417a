"""What the analytics look for across runs: chronic bottlenecks, regressions, skew over time,
each job's checkpoints run by run, and how often the autoscaler would have been wrong.

Spark reduces the history to a few small tables (:mod:`bpmon.history.analytics`); they come back
to the driver once, as :class:`~bpmon.history.aggregates.Aggregates`, and every question is
answered here from them in plain Python. The thresholds come from the rules, handed over by the
service as :class:`~bpmon.model.analysis.Thresholds` (the history layer does not read the rules).

A regression between two runs of a job whose parallelism changed says so, in the words of the
comparison of two runs (:func:`bpmon.model.capacity.explained`): a capacity per subtask measured at
another parallelism is another measurement, and a vertex that lost subtasks can backpressure
others without any operator getting slower.

A run's checkpoints are slower when their median duration rose by more than ``capacity_drop``
(the one regression threshold of ``[history]``) against the job's previous run, to at least
``[checkpoints] slow_ms``: a quick checkpoint a few milliseconds slower is noise, and not what the
diagnosis calls slow either.

No pyspark here: these are the small results.
"""

from __future__ import annotations

import itertools
from collections import defaultdict
from collections.abc import Iterable, Mapping
from typing import Any

from bpmon.history.aggregates import Aggregates, Row, Run, RunVertex, verdict_column
from bpmon.model.analysis import (
    LEVEL_NAMES,
    AutoscalerHistory,
    CheckpointHistory,
    ChronicBottleneck,
    JobHistory,
    Regression,
    RunCapacity,
    RunCheckpoints,
    SkewedSubtask,
    Thresholds,
    VerdictTally,
    VertexHistory,
)
from bpmon.model.autoscaler import VERDICT_KINDS
from bpmon.model.capacity import explained, parallelism_change
from bpmon.model.numbers import counted, milliseconds, percent, ratio


def job_runs(found: Aggregates) -> tuple[JobHistory, ...]:
    """Per job: its runs and windows, its first and last run, whether any row is synthetic."""
    by_job: dict[str, list[Run]] = defaultdict(list)
    for run in found.runs:
        by_job[run.job].append(run)
    return tuple(
        JobHistory(
            job,
            len(runs),
            sum(r.windows for r in runs),
            runs[0].run_id,
            runs[-1].run_id,
            min(r.start for r in runs),
            max(r.start for r in runs),
            any(r.synthetic for r in runs),
        )
        for job, runs in sorted(by_job.items())
    )


def vertex_histories(
    found: Aggregates, series: Mapping[tuple[str, str], list[RunVertex]]
) -> tuple[VertexHistory, ...]:
    """Per job and vertex: level shares, ratio and busy percentiles, capacity and its trend."""
    rows = sorted(found.vertices, key=lambda r: (r["job"], r["vertex_index"], r["vertex"]))
    return tuple(_vertex_history(r, series.get((r["job"], r["vertex"]), [])) for r in rows)


def _vertex_history(r: Row, points: list[RunVertex]) -> VertexHistory:
    ratios = r["ratio_p"] or [None, None]
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
        capacity_trend=trend((p.run.seq, p.capacity) for p in points),
        by_run=tuple(RunCapacity(p.run.run_id, p.run.start, p.capacity) for p in points),
    )


def trend(points: Iterable[tuple[int, float | None]]) -> float | None:
    """The least-squares slope of the capacities over the runs' order, as a share of their mean
    (-0.05: 5% less each run); None with fewer than two measured runs."""
    known = [(float(x), y) for x, y in points if y is not None]
    if len(known) < 2:
        return None
    n = len(known)
    mx, my = sum(x for x, _ in known) / n, sum(y for _, y in known) / n
    spread = sum((x - mx) ** 2 for x, _ in known)
    if spread == 0 or my == 0:
        return None
    return sum((x - mx) * (y - my) for x, y in known) / spread / my


def chronic_bottlenecks(found: Aggregates) -> tuple[ChronicBottleneck, ...]:
    """Vertices most often named root cause, weighted by confidence and window seconds."""
    seconds: dict[str, float] = defaultdict(float)
    windows: dict[str, int] = defaultdict(int)
    for run in found.runs:
        seconds[run.job] += run.seconds
        windows[run.job] += run.windows
    by_job: dict[str, list[tuple[Row, float | None]]] = defaultdict(list)
    for r in found.named:
        total = seconds[r["job"]]
        by_job[r["job"]].append((r, r["weight"] / total if total else None))
    out = []
    for job, named in by_job.items():
        named.sort(key=lambda n: (-(n[1] or 0.0), -n[0]["windows"], n[0]["vertex"]))
        for rank, (r, score) in enumerate(named, 1):
            share = r["windows"] / windows[job] if windows[job] else None
            out.append(
                ChronicBottleneck(job, r["vertex"], rank, score or 0.0, r["windows"], share or 0.0,
                                  r["runs"], r["kind"], r["confidence_mean"])
            )  # fmt: skip
    out.sort(key=lambda c: (-c.score, c.job, c.rank))
    return tuple(out)


def regressions(
    found: Aggregates, series: Mapping[tuple[str, str], list[RunVertex]], limits: Thresholds
) -> tuple[Regression, ...]:
    """What got worse from each run of a job to the next, both runs' ids and figures, and the
    parallelism changes between the two runs that may explain it."""
    scales = _scales(found, series)
    out: list[Regression] = []
    for chain in series.values():
        out += [r for p in chain if p.consecutive for r in _vertex_regressions(p, limits, scales)]
    for first, second in zip(found.runs, found.runs[1:], strict=False):
        if first.job == second.job:
            out += _cause_regressions(found, first, second, limits, scales)
    for points in checkpoint_runs(found).values():
        for was, now in itertools.pairwise(points):
            if now[0].seq == was[0].seq + 1:
                out += _checkpoint_regression(was, now, limits, scales)
    out.sort(key=lambda r: (r.job, r.after_run, r.kind, r.vertex))
    return tuple(out)


Scales = dict[tuple[str, str], dict[str, int | None]]
"""Per job and run, each vertex's parallelism, the vertices in the job's order."""


def _scales(found: Aggregates, series: Mapping[tuple[str, str], list[RunVertex]]) -> Scales:
    order = {(r["job"], r["vertex"]): (r["vertex_index"], r["vertex"]) for r in found.vertices}
    scales: Scales = defaultdict(dict)
    for key in sorted(series, key=lambda k: (k[0], order.get(k, (0, k[1])))):
        for p in series[key]:
            scales[(p.job, p.run.run_id)][p.vertex] = p.parallelism
    return scales


def _rescaled(scales: Scales, was: Run, now: Run) -> list[str]:
    """``enrich runs 6 subtasks instead of 2`` for every vertex whose parallelism changed."""
    before, after = scales.get((was.job, was.run_id), {}), scales.get((now.job, now.run_id), {})
    lines = (parallelism_change(v, before.get(v), p) for v, p in after.items())
    return [line for line in lines if line is not None]


def _vertex_regressions(now: RunVertex, limits: Thresholds, scales: Scales) -> list[Regression]:
    """A capacity lower by more than ``capacity_drop``, a median level higher."""
    was = now.previous
    assert was is not None
    out: list[Regression] = []
    rescaled = _rescaled(scales, was.run, now.run)
    before, after = was.run.run_id, now.run.run_id
    if _dropped(was.capacity, now.capacity, limits.capacity_drop):
        assert was.capacity is not None and now.capacity is not None
        change = now.capacity / was.capacity - 1
        detail = (
            f"{now.vertex} handles ~{now.capacity:,.0f} records/s per subtask at 100% busy "
            f"in run {after}, {-change:.0%} less than the ~{was.capacity:,.0f} of run "
            f"{before} (threshold {limits.capacity_drop:.0%})"
        )
        out.append(_regression(now, "capacity-drop", was.capacity, now.capacity, change,
                               explained(detail, rescaled)))  # fmt: skip
    if now.level is not None and was.level is not None and now.level > was.level:
        old, new = LEVEL_NAMES[was.level], LEVEL_NAMES[now.level]
        detail = (
            f"{now.vertex} went {old} -> {new} (median ratio {ratio(was.ratio)} -> "
            f"{ratio(now.ratio)})"
        )
        moved = None if was.ratio is None or now.ratio is None else now.ratio - was.ratio
        out.append(_regression(now, "level-worsened", old, new, moved, explained(detail, rescaled)))
    return out


def _dropped(before: float | None, after: float | None, threshold: float) -> bool:
    if before is None or after is None or before <= 0:
        return False
    return after < before * (1 - threshold)


def _regression(
    now: RunVertex,
    kind: Any,
    before: float | str | None,
    after: float | str | None,
    change: float | None,
    detail: str,
) -> Regression:
    """A regression of ``now``'s vertex since the previous run, with its parallelism in both."""
    was = now.previous
    assert was is not None
    return Regression(
        now.job, now.vertex, kind, was.run.run_id, now.run.run_id, before, after, change, detail,
        parallelism_before=was.parallelism, parallelism_after=now.parallelism,
    )  # fmt: skip


def _cause_regressions(
    found: Aggregates, was: Run, now: Run, limits: Thresholds, scales: Scales
) -> list[Regression]:
    """A bottleneck that moved, and a cause the previous run never named."""
    named_was = found.named_by_run.get((was.job, was.run_id), [])
    named_now = found.named_by_run.get((now.job, now.run_id), [])
    rescaled = _rescaled(scales, was, now)

    def regression(vertex: str, kind: Any, before: Any, after: Any, detail: str) -> Regression:
        old = scales.get((was.job, was.run_id), {}).get(vertex)
        new = scales.get((now.job, now.run_id), {}).get(vertex)
        change = after if kind == "new-cause" else None
        return Regression(now.job, vertex, kind, was.run_id, now.run_id, before, after, change,
                          explained(detail, rescaled), parallelism_before=old,
                          parallelism_after=new)  # fmt: skip

    out: list[Regression] = []
    old_main, new_main = _main(named_was), _main(named_now)
    moved = new_main if old_main and new_main and old_main != new_main else None
    if moved is not None:
        detail = f"the main bottleneck moved from {old_main} to {moved}"
        out.append(regression(moved, "moved-bottleneck", old_main, moved, detail))
    earlier = {r["vertex"] for r in named_was} | {moved}
    shares = {r["vertex"]: r["named"] / now.windows if now.windows else 0.0 for r in named_now}
    for vertex in sorted({v for v, s in shares.items() if s >= limits.cause_share} - earlier):
        detail = (
            f"{vertex} is named root cause in {percent(shares[vertex])} of the windows of run "
            f"{now.run_id}, in none of run {was.run_id}"
        )
        out.append(regression(vertex, "new-cause", 0.0, shares[vertex], detail))
    return out


def _main(named: list[Row]) -> str | None:
    """The vertex most often named first in a run (then most often named, then by name)."""
    first = [r for r in named if r["first"] > 0]
    if not first:
        return None
    best = min(first, key=lambda r: (-r["first"], -r["named"], r["vertex"]))
    return str(best["vertex"])


CheckpointPoint = tuple[Run, RunCheckpoints]
"""A run, and its checkpoints."""


def checkpoint_runs(found: Aggregates) -> dict[str, list[CheckpointPoint]]:
    """Per job, its runs whose windows observed checkpoints, in time order, with their figures."""
    by_job: dict[str, list[CheckpointPoint]] = defaultdict(list)
    for r in found.checkpoints:
        run = found.by_id.get((r["job"], r["run_id"]))
        if run is not None:
            by_job[r["job"]].append((run, _run_checkpoints(r, run)))
    for points in by_job.values():
        points.sort(key=lambda p: p[0].seq)
    return dict(sorted(by_job.items()))


def _run_checkpoints(r: Row, run: Run) -> RunCheckpoints:
    """A run's row of ``analytics._checkpoints`` as its figures."""
    p50, p95 = r["ck_p"] or (None, None)
    spans = r["ck_first"] is not None and r["ck_last"] is not None and r["ck_last"] > r["ck_first"]
    timed = r["ck_timed_ms"]
    return RunCheckpoints(
        run_id=run.run_id,
        start=run.start,
        windows=int(r["ck_windows"]),
        checkpoints=int(r["ck_count"]),
        duration_p50=p50,
        duration_p95=p95,
        failed=int(r["ck_failed"] or 0),
        failed_during=_growth(r["ck_failed_first"], r["ck_failed_last"], spans),
        completed_during=_growth(r["ck_completed_first"], r["ck_completed_last"], spans),
        barrier_wait_share=r["ck_waited_ms"] / timed if timed else None,
    )


def _growth(first: int | None, last: int | None, spans: bool) -> int | None:
    """How much a cumulative count grew over a run (None: one window, or it fell: a restart)."""
    if not spans or first is None or last is None or last < first:
        return None
    return int(last - first)


def checkpoint_histories(found: Aggregates) -> tuple[CheckpointHistory, ...]:
    """Per job whose windows observed checkpoints: its runs' figures and their duration's trend."""
    return tuple(
        CheckpointHistory(
            job,
            len(points),
            trend((run.seq, c.duration_p50) for run, c in points),
            tuple(c for _, c in points),
        )
        for job, points in checkpoint_runs(found).items()
    )


def _checkpoint_regression(
    was: CheckpointPoint, now: CheckpointPoint, limits: Thresholds, scales: Scales
) -> list[Regression]:
    """``checkpoint-slower``: the median duration higher by more than ``capacity_drop``, and at
    least ``checkpoint_slow_ms``, than in the job's previous run."""
    (old_run, old), (new_run, new) = was, now
    before, after = old.duration_p50, new.duration_p50
    if before is None or after is None or before <= 0:
        return []
    if after <= before * (1 + limits.capacity_drop) or after < limits.checkpoint_slow_ms:
        return []
    change = after / before - 1
    detail = (
        f"checkpoints took {milliseconds(after)} (the median of "
        f"{counted(new.checkpoints, 'checkpoint')}) in run {new.run_id}, {change:+.0%} against "
        f"the {milliseconds(before)} of run {old.run_id} (threshold {limits.capacity_drop:.0%})"
    )
    if new.barrier_wait_share is not None:
        detail += f"; {percent(new.barrier_wait_share)} of their time waiting for barriers"
        if old.barrier_wait_share is not None:
            detail += f" (was {percent(old.barrier_wait_share)})"
    if new.failed_during:
        detail += f"; {counted(new.failed_during, 'checkpoint')} failed during the run"
    detail = explained(detail, _rescaled(scales, old_run, new_run))
    return [
        Regression(new_run.job, "", "checkpoint-slower", old.run_id, new.run_id, before, after,
                   change, detail)
    ]  # fmt: skip


def autoscaler_histories(found: Aggregates) -> tuple[AutoscalerHistory, ...]:
    """Per job whose windows had the autoscaler's decision: the windows judged, those it would
    have been wrong in, and each verdict's windows with the vertex that got it most often."""
    at: dict[tuple[str, str], tuple[int, str]] = {}  # (job, verdict) -> (windows, vertex)
    for r in sorted(found.autoscaler_vertices, key=lambda r: r["vertex"]):
        for kind in VERDICT_KINDS:
            n = int(r[verdict_column(kind)] or 0)
            if n > at.get((r["job"], kind), (0, ""))[0]:
                at[(r["job"], kind)] = (n, r["vertex"])
    out = []
    for r in sorted(found.autoscaler, key=lambda r: r["job"]):
        job = r["job"]
        given = [(kind, int(r[verdict_column(kind)] or 0)) for kind in VERDICT_KINDS]
        tallies = [
            VerdictTally(kind, n, at[(job, kind)][1], at[(job, kind)][0])
            for kind, n in sorted(given, key=lambda g: -g[1])  # stable: the verdicts' order
            if n > 0 and (job, kind) in at
        ]
        out.append(
            AutoscalerHistory(job, int(r["as_windows"]), int(r["as_judged"] or 0),
                              int(r["as_wrong"] or 0), tuple(tallies))
        )  # fmt: skip
    return tuple(out)


def skewed_subtasks(found: Aggregates, limits: Thresholds) -> tuple[SkewedSubtask, ...]:
    """Subtasks hot in at least ``hot_share`` of their vertex's windows (two at least)."""
    windows = {(r["job"], r["vertex"]): r["windows"] for r in found.vertices}
    out = []
    for r in found.hot:
        total = windows.get((r["job"], r["vertex"]), 0)
        share = r["hot_windows"] / total if total else 0.0
        if r["hot_windows"] >= 2 and share >= limits.hot_share:
            out.append(SkewedSubtask(r["job"], r["vertex"], r["subtask"], r["hot_windows"],
                                     total, share, r["runs"]))  # fmt: skip
    out.sort(key=lambda s: (-s.share, s.job, s.vertex, s.subtask))
    return tuple(out)
