"""Diagnosis accuracy: bpmon's rules against three rules of thumb, on a corpus built from physics.

Every scenario of ``tests/benchmarks/corpus/`` (``diagnosis_corpus.py``: chains, diamonds, fan-in,
fan-out, broadcast, hot keys, slow instances, slow sinks, capped links, capped fan-outs, forward
sub-pipelines, ``tcp``, stalls, two bottlenecks, healthy jobs at 80-90%) runs on bpmon's runtime
through the service (``facade.run_scenario``), one at a time (``--jobs 2`` at most), and is
diagnosed from ONE burst after its warm-up. bpmon and the baselines (``diagnosis_scoring.py``)
answer from the same report. The corpus is split once and for all: the TUNING part may be used to
tune thresholds, the HELD-OUT part is what the diagnosis is scored on; every figure is printed for
both parts and per category. Figures:

- top-1: the first named vertex is an expected bottleneck (healthy: nothing named);
- kind / subtasks (bpmon): the first cause has the expected kind; the cause at the primary vertex
  names the expected subtasks;
- false positives: cases where a healthy job gets a root cause, or a wrong vertex is named with
  confidence >= 0.5 (a baseline's answer counts as confident);
- all found: every expected bottleneck is named; stalls: stall cases reported ``stalled``;
- time to a verdict: from starting the job to the report (warm-up + burst + diagnosis);
- recommendations, verified by re-running: for each case whose top cause has
  ``recommended_parallelism`` N, the scenario runs again with that vertex at N (forward edges of
  the vertex become rebalance, as Flink's default is once parallelisms differ). The backpressure is
  gone when no vertex is HIGH (but those upstream of another expected bottleneck of the case), the
  vertex is no root cause, and its busiest subtask is below 98% busy (a vertex short of capacity
  is ~100% busy, and its backpressure can take longer than a short burst to build up). When N
  removes it, N-1 runs too, and N-2 if N-1 also does: "smallest" is N-1 failing, "within one
  subtask" is N-2 failing;
- calibration: every root cause bucketed by confidence, with the share right (vertex, and vertex
  with kind).

Every window is also diagnosed a second time from only what a Flink cluster would show of it
(``bpmon.collectors.views.observed_as(window, signals.FLINK)``: no per-channel readings, no
spill figures, no region's slot request; what ``bpmon run --observe flink`` does), and bpmon's
figures are printed for both side by side: how much of the accuracy rests on signals only the
runtime has.

A run whose report says ``runtime-saturated`` (bpmon's runtime could not keep up, because the
machine was busy with something else) describes the Python process, not the job: it is run again,
up to twice, and the reruns are printed and counted in the JSON (``saturated``).

The ``shows`` column checks from measurements alone that a run shows its intended physics, so a
miss can be told from an untruthful run. The last line is a JSON object of all figures.

    .venv/bin/python tests/benchmarks/bench_diagnosis.py [--only NAME] [--split held-out]
        [--category tcp ...] [--jobs 1] [--samples N] [--no-verify] [--repeat 3]

``--repeat N`` runs the corpus N times and prints, per part, how many cases' verdicts (the
first cause's vertex and kind) changed between runs: a verdict must not flip from one run of a
job to the next.
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import os
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass, replace
from pathlib import Path

from diagnosis_corpus import CATEGORIES, SPLITS, Case, CorpusError, load_corpus
from diagnosis_scoring import judge, shows_pattern
from diagnosis_tables import (
    LABELS,
    PARTS,
    Outcome,
    Recommendation,
    figures,
    in_part,
    print_report,
    totals,
)

from bpmon.collectors.inprocess import RuntimeTarget
from bpmon.collectors.sampler import Progress, StopSignal
from bpmon.collectors.views import observed_as
from bpmon.model.errors import BpmonError
from bpmon.model.events import JobEnded, JobFailed, ReportReady
from bpmon.model.signals import FLINK
from bpmon.model.values import Observation, Report
from bpmon.rules.engine import diagnose
from bpmon.scenario import load_scenario
from bpmon.scenario.chaining import operator_names
from bpmon.scenario.network import OutputFlush
from bpmon.service import facade
from bpmon.service.whatif import SettingChange, changed, recommended_changes

END_RIGHT_AFTER_S = 0.001
"""The job's least duration: it stops right after its one burst."""
VERIFY_SAMPLES = 20
"""Samples of a verification burst: levels and busy ratios need no more."""
BUSY_CEILING = 0.98
"""A vertex at least this busy has no headroom: it is still the bottleneck."""


@dataclass(frozen=True, slots=True)
class Run:
    """One run of a scenario: its report and how long the verdict took, or why there is none;
    ``flink``: the same window diagnosed from only what Flink would show of it."""

    report: Report | None
    verdict_s: float | None
    error: str | None = None
    reruns: int = 0
    flink: Report | None = None


class KeptWindow(RuntimeTarget):
    """The runtime target, keeping its last window so it can be diagnosed again as Flink sees it."""

    last: Observation | None = None

    def observe(
        self,
        samples: int = 100,
        interval_ms: float = 50.0,
        progress: Progress | None = None,
        stop: StopSignal | None = None,
    ) -> Observation:
        self.last = super().observe(samples, interval_ms, progress, stop)
        return self.last


def as_flink_shows(target: KeptWindow, settings: facade.Settings) -> Report | None:
    """The target's last window diagnosed from only what a Flink cluster would show of it."""
    if target.last is None:
        return None
    return diagnose(observed_as(target.last, FLINK), settings.rules())


@dataclass(frozen=True, slots=True)
class Job:
    """A run to make (picklable, for ``--jobs 2``): a file, a burst size, a parallelism change."""

    path: str
    samples: int | None = None
    vertex: str | None = None
    parallelism: int | None = None
    also: tuple[tuple[str, int], ...] = ()
    """Further (vertex, parallelism) changes: the recommendation's ``next_in_series``."""


FLUSH_VARIABLE = "BPMON_BENCH_OUTPUT_FLUSH"
"""Set by ``--output-flush`` (an environment variable, so ``--jobs 2``'s workers see it too)."""
SATURATED_RERUNS = 2
"""Runs again when bpmon's runtime could not keep up (the machine was busy elsewhere)."""


def run_job(job: Job) -> Run:
    """Run one scenario; again (up to ``SATURATED_RERUNS`` times) when the runtime saturated.

    A report with a ``runtime-saturated`` finding describes the Python process on a machine busy
    with something else, not the job: it names no root cause and scores nothing. The reruns are
    counted and printed, never hidden.
    """
    run = _run_once(job)
    for attempt in range(1, SATURATED_RERUNS + 1):
        if not _saturated(run.report):
            return run
        run = replace(_run_once(job), reruns=attempt)
    return run


def _saturated(report: Report | None) -> bool:
    return report is not None and any(f.kind == "runtime-saturated" for f in report.findings)


def _run_once(job: Job) -> Run:
    """Run one scenario through the service: warm up, one burst, stop."""
    scenario = load_scenario(job.path)
    # sized as `bpmon run --verify` sizes it: a source keeps its offered load, a chain rescales
    # as one, a forward edge across the new parallelism becomes rebalance
    sized = [] if job.vertex is None or job.parallelism is None else [(job.vertex, job.parallelism)]
    if changes := [SettingChange(v, "parallelism", p) for v, p in [*sized, *job.also]]:
        scenario = changed(scenario, changes)
    if job.samples is not None:
        scenario = replace(scenario, monitor=replace(scenario.monitor, samples=job.samples))
    if flush := os.environ.get(FLUSH_VARIABLE):
        mode: OutputFlush = "publish" if flush == "publish" else "finish"
        network = replace(scenario.network, output_flush=mode)
        scenario = replace(scenario, network=network)
    report, verdict_s = None, None
    started = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="bpmon-bench-") as runs:
        settings = facade.Settings(runs_dir=Path(runs))
        target = KeptWindow(scenario)
        try:
            plan = facade.scenario_plan(scenario, bursts=1, duration_s=END_RIGHT_AFTER_S)
            events = facade.watch(target, plan, settings)
            for event in events:
                if isinstance(event, ReportReady):
                    report, verdict_s = event.report, time.perf_counter() - started
                elif isinstance(event, JobFailed):
                    return Run(report, verdict_s, f"the job failed: {event.error}")
                elif isinstance(event, JobEnded) and event.leaks:
                    return Run(report, verdict_s, f"the job leaked: {', '.join(event.leaks)}")
        except BpmonError as exc:
            return Run(None, None, str(exc))
    error = None if report is not None else "no report"
    return Run(report, verdict_s, error, flink=as_flink_shows(target, settings))


def run_all(jobs: Sequence[Job], workers: int, label: Callable[[Job], str]) -> list[Run]:
    """Run every job, ``workers`` at a time (each in its own process when more than one)."""

    def done(job: Job, run: Run) -> Run:
        took = "-" if run.verdict_s is None else f"{run.verdict_s:.1f} s to a verdict"
        again = f", run {run.reruns + 1} times: the runtime saturated" if run.reruns else ""
        still = "; still saturated" if _saturated(run.report) else ""
        error = "" if run.error is None else ": " + run.error
        print(f"ran {label(job)} ({took}{again}{still}){error}")
        sys.stdout.flush()
        return run

    if workers <= 1 or len(jobs) <= 1:
        return [done(job, run_job(job)) for job in jobs]
    context = multiprocessing.get_context("spawn")
    with ProcessPoolExecutor(max_workers=workers, mp_context=context) as pool:
        return [done(job, run) for job, run in zip(jobs, pool.map(run_job, jobs), strict=True)]


# -- recommendations, verified by re-running ------------------------------------------------------


def upstream_of(report: Report, names: set[str]) -> set[str]:
    """Every vertex that feeds one of ``names``, directly or not."""
    inputs = {v.name: [e.source for e in v.inputs] for v in report.vertices}
    out: set[str] = set()
    stack = [p for name in names for p in inputs.get(name, [])]
    while stack:
        name = stack.pop()
        if name not in out:
            out.add(name)
            stack.extend(inputs.get(name, []))
    return out


def backpressure_gone(case: Case, vertex: str, report: Report) -> bool:
    """Whether ``vertex`` stopped being a bottleneck in ``report`` (see the module docstring)."""
    others = {name for name in case.vertices if name != vertex}
    excused = others | upstream_of(report, others)
    if any(v.level == "HIGH" and v.name not in excused for v in report.vertices):
        return False
    if any(c.vertex == vertex for c in report.root_causes or ()):
        return False
    status = {v.name: v for v in report.vertices}.get(vertex)
    return status is not None and (status.metrics.busy_ratio or 0.0) < BUSY_CEILING


def verify(outcomes: Sequence[Outcome], workers: int) -> list[Recommendation]:
    """Re-run every case whose top cause recommends a parallelism: at N, then N-1, then N-2."""
    pending: list[Recommendation] = []
    for o in outcomes:
        causes = (o.report.root_causes or ()) if o.report is not None else ()
        if o.report is not None and causes and causes[0].recommended_parallelism is not None:
            vertex = causes[0].vertex
            head = operator_names(vertex)[0]  # a chain's operators share one parallelism
            current = load_scenario(o.case.path).operator(head).parallelism
            # what `bpmon run --verify` applies besides the top cause: the vertices in series
            # after it, and every other root cause (with those after it)
            also = tuple((c.vertex, int(c.value)) for c in recommended_changes(o.report)[1:])
            pending.append(
                Recommendation(o.case, vertex, current, causes[0].recommended_parallelism, also)
            )
    for step in range(3):  # N, N-1, N-2
        todo = []
        for index, rec in enumerate(pending):
            if rec.next_step() != step:
                continue
            parallelism = rec.recommended - step
            if parallelism == rec.current or parallelism < 1:
                pending[index] = rec.record(False)  # today's parallelism had the bottleneck
            else:
                todo.append(index)
        jobs = [
            Job(
                str(pending[i].case.path),
                VERIFY_SAMPLES,
                pending[i].vertex,
                pending[i].recommended - step,
                pending[i].also,
            )
            for i in todo
        ]
        runs = run_all(jobs, workers, _verify_label)
        for index, run in zip(todo, runs, strict=True):
            rec = pending[index]
            gone = (
                None if run.report is None else backpressure_gone(rec.case, rec.vertex, run.report)
            )
            pending[index] = rec.record(gone)
    return pending


def _verify_label(job: Job) -> str:
    changes = [(job.vertex, job.parallelism), *job.also]
    return f"{Path(job.path).stem} with " + ", ".join(f"{v}.parallelism={p}" for v, p in changes)


VIEW_FIGURES = ("top1", "kind", "false_positive")


def print_views(every: Sequence[Outcome], flink: Sequence[Outcome]) -> dict[str, object]:
    """bpmon's figures from every signal and from what Flink shows, on the same windows."""
    print("\nbpmon from every signal | from only what Flink shows (same windows):")
    out: dict[str, object] = {}
    for part in PARTS:
        pair = [
            totals([o for o in group if in_part(o.case, part)], "bpmon") for group in (every, flink)
        ]
        cells = "  ".join(f"{LABELS[f]} {pair[0][f]} | {pair[1][f]}" for f in VIEW_FIGURES)
        print(f"  {part:<9} {cells}")
        out[part] = {f: [str(pair[0][f]), str(pair[1][f])] for f in VIEW_FIGURES}
    changed = [
        f"{a.case.name}: {a.verdicts['bpmon'].named[:1]} -> {b.verdicts['bpmon'].named[:1]}"
        for a, b in zip(every, flink, strict=True)
        if "bpmon" in a.verdicts
        and "bpmon" in b.verdicts
        and a.verdicts["bpmon"].named[:1] != b.verdicts["bpmon"].named[:1]
    ]
    print("  named otherwise from what Flink shows: " + ("; ".join(changed) or "none"))
    return out


def main() -> None:
    """Run the corpus, print the tables, then a JSON line."""
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--only", help="run only the corpus scenario with this file stem")
    parser.add_argument("--split", choices=SPLITS, help="run only this part of the corpus")
    parser.add_argument(
        "--category",
        action="append",
        choices=list(CATEGORIES),
        help="run only this category (again for several)",
    )
    parser.add_argument(
        "--repeat",
        type=int,
        default=1,
        help="run the corpus this many times and count the verdicts that change between runs "
        "(the tables score the first)",
    )
    parser.add_argument("--jobs", type=int, default=1, choices=(1, 2), help="runs at once")
    parser.add_argument("--samples", type=int, help="samples per burst (default: the scenario's)")
    parser.add_argument("--no-verify", action="store_true", help="skip the re-runs")
    parser.add_argument(
        "--output-flush",
        choices=("finish", "publish"),
        help="run every scenario with this [network] output_flush (default: the scenario's)",
    )
    args = parser.parse_args()
    if args.output_flush:
        os.environ[FLUSH_VARIABLE] = args.output_flush
    try:
        cases = load_corpus(args.only)
    except (CorpusError, BpmonError) as exc:
        raise SystemExit(f"bench_diagnosis: {exc}") from None
    cases = [c for c in cases if args.split in (None, c.split)]
    cases = [c for c in cases if args.category is None or c.category in args.category]
    if not cases:
        raise SystemExit("bench_diagnosis: no corpus case matches --split / --category")
    if args.repeat < 1:
        raise SystemExit("bench_diagnosis: --repeat must be at least 1")
    started = time.perf_counter()
    by_path = {str(c.path): c for c in cases}
    every_run = []
    for attempt in range(args.repeat):
        if args.repeat > 1:
            print(f"-- repeat {attempt + 1} of {args.repeat}")
        every_run.append(
            run_all(
                [Job(str(c.path), args.samples) for c in cases],
                args.jobs,
                lambda j: by_path[j.path].name,
            )
        )
    runs = every_run[0]
    outcomes = [
        Outcome(
            case,
            run.report,
            run.verdict_s,
            run.error,
            judge(case, run.report) if run.report is not None else {},
            run.report is not None and shows_pattern(case, run.report),
        )
        for case, run in zip(cases, runs, strict=True)
    ]
    recommendations = [] if args.no_verify else verify(outcomes, args.jobs)
    print_report(outcomes, recommendations)
    as_flink = [
        replace(o, report=run.flink, verdicts=judge(o.case, run.flink) if run.flink else {})
        for o, run in zip(outcomes, runs, strict=True)
    ]
    views = print_views(outcomes, as_flink)
    reruns = sum(run.reruns for run in runs)
    saturated = sum(_saturated(run.report) for run in runs)
    print(f"\nruns repeated because the runtime saturated: {reruns}; still saturated: {saturated}")
    elapsed = time.perf_counter() - started
    doc = figures(outcomes, recommendations, elapsed, verified=not args.no_verify)
    doc["saturated"] = {"reruns": reruns, "still": saturated}
    doc["views"] = views
    if args.repeat > 1:
        doc["repeats"] = print_flips(cases, every_run)
    print(json.dumps(doc))


def verdict_of(run: Run) -> str:
    """bpmon's answer in one run, as compared between repeats: the first cause's vertex and
    kind ("healthy" when none is named, "no report" when the run gave none)."""
    if run.report is None:
        return "no report"
    causes = run.report.root_causes or ()
    return f"{causes[0].vertex} ({causes[0].kind})" if causes else "healthy"


def _top1(case: Case, run: Run) -> bool:
    return run.report is not None and judge(case, run.report)["bpmon"].top1


def print_flips(cases: Sequence[Case], every_run: Sequence[Sequence[Run]]) -> dict[str, object]:
    """Print and return, per part of the split, how many cases' verdicts changed between
    repeats (the first cause's vertex and kind), and top-1 in each repeat."""
    print(f"\nverdicts that changed between {len(every_run)} repeats:")
    out: dict[str, object] = {}
    for part in SPLITS:
        index = [i for i, c in enumerate(cases) if c.split == part]
        if not index:
            continue
        flips = []
        for i in index:
            answers = [verdict_of(runs[i]) for runs in every_run]
            if len(set(answers)) > 1:
                flips.append(f"{cases[i].name}: {' / '.join(answers)}")
        tops = [sum(_top1(cases[i], runs[i]) for i in index) for runs in every_run]
        print(f"  {part}: {len(flips)} of {len(index)} changed; top-1 per repeat {tops}")
        for line in flips:
            print(f"    {line}")
        out[part] = {"cases": len(index), "changed": flips, "top1": tops}
    return out


if __name__ == "__main__":
    main()
