"""bpmon's recommendation against Flink's autoscaler, each followed on the runtime corpus.

Every corpus case with a bottleneck (``diagnosis_corpus.py``; healthy jobs have nothing to fix)
runs once on bpmon's runtime; then each policy is followed from that first report for up to
``--steps`` (3) steps, as ``bpmon whatif --follow POLICY --steps 3`` does: diagnose, apply what
the policy would change, re-run, again from the re-run's report:

- ``bpmon``: its root causes' ``recommended_parallelism`` and the vertices in series with them
  (``whatif.recommended_changes``);
- ``autoscaler``: what the Kubernetes operator's autoscaler would decide from the same window,
  with its default configuration (the report's ``autoscaler``: every vertex it gives another
  parallelism, scale-downs included).

A step's changes go on top of the earlier ones. A policy stops when a re-run shows the
backpressure gone (no vertex HIGH, no root cause, no queue still growing: measured, not
configured; nor an expected bottleneck still at least 98% busy, whose queue may still be
filling), or when it would change nothing more. Both policies start from the same first
report, so they answer the same window.

Each case is classed by its own arithmetic (``capacity.py``, the ground truth a benchmark may
read): *scalable* when every expected bottleneck keeps up at some parallelism and scaling is the
fix for its kind; *slow instance* when one is a slow instance (``slow-subtask``: a wider vertex
carries it, once every subtask's share fits the slow one's speed, but the fix is to move the
instance, which bpmon recommends and no parallelism applies); *cannot help* when the fix is not
a parallelism (a capped or slow link, a stall, a job short of slots) or no parallelism up to the
vertex's ``max_parallelism`` makes it keep up (a hot key beyond one subtask, a broadcast input
beyond one subtask's capacity). Figures per policy and class:

- removed: the share of cases whose backpressure a step removed, and within 1, 2 and 3 steps;
- steps: the mean number of re-runs to remove it (removed cases);
- slots at the end (Flink's rule: per slot sharing group its widest vertex), and how often
  bpmon's are at most the autoscaler's;
- within one: the share of removed scalable cases whose bottleneck ends at most one subtask
  above the least parallelism the arithmetic allows (at 100% busy);
- cannot help: how many of those cases the autoscaler scales up and keeps scaling without effect
  (never removed), the slots that costs, and how many of them bpmon's first report names as such
  (its cause sizes no parallelism, and the autoscaler's verdict on it is
  ``scales-ineffectively``).

A run whose report says ``runtime-saturated`` (the machine, not the job) is run again, up to
twice, as in ``bench_diagnosis.py``, and counted. The last line is a JSON object of all figures.

    .venv/bin/python tests/benchmarks/bench_autoscaler.py [--only NAME] [--category hot-key ...]
        [--split held-out] [--steps 3] [--jobs 1]
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import statistics
import sys
import time
from collections.abc import Sequence
from concurrent.futures import ProcessPoolExecutor
from dataclasses import asdict, dataclass, field

from bench_diagnosis import BUSY_CEILING, Job, Run, run_job
from capacity import least_parallelism, slots
from diagnosis_corpus import CATEGORIES, SPLITS, Case, CorpusError, load_corpus

from bpmon.model.errors import BpmonError
from bpmon.model.values import Report
from bpmon.rules.settling import saturated
from bpmon.scenario import load_scenario
from bpmon.scenario.chaining import operator_names
from bpmon.service.whatif import POLICIES, Policy, SettingChange, changed, follow_changes, merged

NOT_BY_PARALLELISM = frozenset({"network", "stalled", "resource-starved"})
"""Kinds whose fix is not a parallelism: the link, the cycle, the slots."""
CLASSES = ("scalable", "slow instance", "cannot help")


@dataclass(frozen=True, slots=True)
class Step:
    """One re-run of a policy: what it applied (all steps so far), and what the re-run showed."""

    changes: tuple[str, ...]
    removed: bool
    top: str
    slots: int
    parallelism: dict[str, int]
    error: str | None = None
    reruns: int = 0


@dataclass(frozen=True, slots=True)
class Followed:
    """A policy followed on one case: its steps, and why it stopped."""

    policy: Policy
    steps: tuple[Step, ...]
    stopped: str

    @property
    def removed_at(self) -> int | None:
        """The step whose re-run showed the backpressure gone; None when none did."""
        return next((i for i, s in enumerate(self.steps, 1) if s.removed), None)

    def slots_at_end(self, start: int) -> int:
        return self.steps[-1].slots if self.steps else start

    def scaled_up(self, start: dict[str, int]) -> bool:
        return any(p > start.get(v, p) for s in self.steps for v, p in s.parallelism.items())


@dataclass(frozen=True, slots=True)
class CaseResult:
    """One case: its class, the first report's figures, and each policy followed."""

    name: str
    category: str
    expected: tuple[tuple[str, str], ...]
    klass: str
    """``scalable``, ``slow instance`` (the fix is to move it, though a wider vertex carries it)
    or ``cannot help``."""
    least: dict[str, int | None]
    start: dict[str, int]
    start_slots: int
    first_top: str
    first_error: str | None
    sized_none: bool
    ineffective_verdict: bool | None
    """Whether the autoscaler's verdict on an expected vertex it scales up is
    ``scales-ineffectively``; None when it scales none of them up."""
    followed: dict[str, Followed] = field(default_factory=dict)
    reruns: int = 0


def top_of(report: Report | None) -> str:
    if report is None:
        return "no report"
    if not report.root_causes:
        return "none"
    cause = report.root_causes[0]
    return f"{cause.kind} at {cause.vertex}"


def gone(case: Case, report: Report | None) -> bool:
    """The backpressure is gone: nothing HIGH, no root cause, no queue still growing, and no
    expected bottleneck still at least 98% busy (one that is has no headroom, and a queue in
    front of it may still be filling its buffers: backpressure takes time to show)."""
    if report is None or _saturated(report):
        return False
    if any(v.level == "HIGH" for v in report.vertices):
        return False
    if report.root_causes or saturated(report.vertices):
        return False
    for vertex in report.vertices:
        if vertex.name in case.vertices:
            shares = [s.metrics.busy_ratio for s in vertex.subtasks] or [vertex.metrics.busy_ratio]
            if max((b for b in shares if b is not None), default=0.0) >= BUSY_CEILING:
                return False
    return True


def _saturated(report: Report | None) -> bool:
    return report is not None and any(f.kind == "runtime-saturated" for f in report.findings)


def parallelisms(case: Case, applied: Sequence[SettingChange]) -> tuple[dict[str, int], int]:
    """The expected bottlenecks' parallelism and the job's slots once ``applied``."""
    scenario = load_scenario(case.path)
    if applied:
        scenario = changed(scenario, list(applied))
    heads = {vertex: operator_names(vertex)[0] for vertex in case.vertices}
    return {v: scenario.operator(h).parallelism for v, h in heads.items()}, slots(scenario)


def follow(case: Case, first: Report, policy: Policy, steps: int) -> tuple[Followed, int]:
    """Follow ``policy`` from ``first`` for up to ``steps`` re-runs; the saturated reruns."""
    applied: list[SettingChange] = []
    report: Report | None = first
    done: list[Step] = []
    reruns = 0
    stopped = f"{steps} steps"
    for _ in range(steps):
        if report is None or _saturated(report):
            stopped = "no report to follow (the runtime saturated)"
            break
        changes = follow_changes(report, policy)
        if not changes:
            stopped = "nothing more to change"
            break
        applied = merged(applied, changes)
        also = tuple((c.vertex, int(c.value)) for c in applied)
        run: Run = run_job(Job(str(case.path), also=also))
        reruns += run.reruns
        widths, used = parallelisms(case, applied)
        removed = gone(case, run.report)
        texts = tuple(map(str, applied))
        done.append(Step(texts, removed, top_of(run.report), used, widths, run.error, run.reruns))
        report = run.report
        if removed:
            stopped = "removed"
            break
        if run.error is not None:
            stopped = run.error
            break
    return Followed(policy, tuple(done), stopped), reruns


def run_case(args: tuple[Case, int]) -> CaseResult:
    """The first run of a case and each policy followed from it (picklable, for ``--jobs``)."""
    case, steps = args
    scenario = load_scenario(case.path)
    least = {vertex: least_parallelism(scenario, vertex) for vertex in case.vertices}
    kinds = {kind for _, kind in case.expected}
    if kinds & NOT_BY_PARALLELISM or any(n is None for n in least.values()):
        klass = "cannot help"
    elif "slow-subtask" in kinds:
        klass = "slow instance"
    else:
        klass = "scalable"
    start, start_slots = parallelisms(case, [])
    first = run_job(Job(str(case.path)))
    followed: dict[str, Followed] = {}
    reruns = first.reruns
    for policy in POLICIES:
        if first.report is not None:
            followed[policy], again = follow(case, first.report, policy, steps)
            reruns += again
    return CaseResult(
        case.name,
        case.category,
        case.expected,
        klass,
        least,
        start,
        start_slots,
        top_of(first.report),
        first.error,
        _sized_none(case, first.report),
        _ineffective(case, first.report),
        followed,
        reruns,
    )


def _sized_none(case: Case, report: Report | None) -> bool:
    """bpmon's first report names an expected bottleneck and sizes no parallelism for it."""
    causes = [c for c in (report.root_causes if report else ()) or () if c.vertex in case.vertices]
    return bool(causes) and all(c.recommended_parallelism is None for c in causes)


def _ineffective(case: Case, report: Report | None) -> bool | None:
    if report is None or report.autoscaler is None:
        return None
    up = {v.name for v in report.autoscaler.vertices if v.recommended_parallelism > v.parallelism}
    on = [v for v in report.autoscaler.verdicts if v.vertex in case.vertices and v.vertex in up]
    if not on:
        return None
    return all(v.verdict == "scales-ineffectively" for v in on)


# -- figures -------------------------------------------------------------------------------------


def share(n: int, of: int) -> str:
    return f"{n}/{of} ({n / of:.0%})" if of else "0/0"


@dataclass(frozen=True, slots=True)
class PolicyFigures:
    """One policy's figures on a set of cases."""

    cases: int
    removed: int
    removed_within: dict[int, int]
    mean_steps: float | None
    slots_end_total: int
    reruns: int

    def line(self, policy: str) -> str:
        within = "/".join(str(n) for n in self.removed_within.values())
        steps = "/".join(str(k) for k in self.removed_within)
        return (
            f"  {policy:<10} removed {share(self.removed, self.cases)}, within {steps} steps "
            f"{within}; mean steps {self.mean_steps}; slots at the end {self.slots_end_total} "
            f"in all; re-runs {self.reruns}"
        )


def policy_figures(results: Sequence[CaseResult], policy: str, steps: int) -> PolicyFigures:
    ran = [r for r in results if policy in r.followed]
    followed = [r.followed[policy] for r in ran]
    at = [f.removed_at for f in followed if f.removed_at is not None]
    used = [f.slots_at_end(r.start_slots) for r, f in zip(ran, followed, strict=True)]
    return PolicyFigures(
        len(ran),
        len(at),
        {k: sum(1 for n in at if n <= k) for k in range(1, steps + 1)},
        round(statistics.mean(at), 2) if at else None,
        sum(used),
        sum(len(f.steps) for f in followed),
    )


def within_one(results: Sequence[CaseResult], policy: str) -> tuple[int, int]:
    """(removed scalable cases whose bottlenecks end within one of the least, removed ones)."""
    close = total = 0
    for r in results:
        f = r.followed.get(policy)
        if f is None or f.removed_at is None or r.klass != "scalable":
            continue
        total += 1
        end = f.steps[f.removed_at - 1].parallelism
        if all(
            least is None or end.get(vertex, r.start[vertex]) <= least + 1
            for vertex, least in r.least.items()
        ):
            close += 1
    return close, total


def print_figures(results: Sequence[CaseResult], steps: int, elapsed: float) -> dict[str, object]:
    doc: dict[str, object] = {"steps": steps, "elapsed_s": round(elapsed, 1)}
    for label in CLASSES:
        part = [r for r in results if r.klass == label]
        print(f"\n{label}: {len(part)} cases")
        figures = {}
        for policy in POLICIES:
            fig = policy_figures(part, policy, steps)
            figures[policy] = asdict(fig)
            print(fig.line(policy))
        doc[label] = figures
    slow = [r for r in results if r.klass == "slow instance" and "autoscaler" in r.followed]
    carried = [r for r in slow if r.followed["autoscaler"].removed_at is not None]
    used = sum(r.followed["autoscaler"].slots_at_end(r.start_slots) for r in carried)
    print(
        f"\nslow instance: the autoscaler carried {share(len(carried), len(slow))} by scaling, "
        f"with {used} slots at the end against {sum(r.start_slots for r in carried)} today "
        "(bpmon: move the instance, which no parallelism applies)"
    )
    doc["slow_instance_carried"] = [len(carried), len(slow)]
    scalable = [r for r in results if r.klass == "scalable" and len(r.followed) == len(POLICIES)]
    fewer = sum(
        1
        for r in scalable
        if r.followed["bpmon"].slots_at_end(r.start_slots)
        <= r.followed["autoscaler"].slots_at_end(r.start_slots)
    )
    at_most = share(fewer, len(scalable))
    print(f"\nscalable: bpmon's slots at the end at most the autoscaler's: {at_most}")
    for policy in POLICIES:
        close, total = within_one(results, policy)
        near = share(close, total)
        print(f"scalable, removed by {policy}: bottleneck within one of the least: {near}")
        doc[f"within_one_{policy}"] = [close, total]
    doc["bpmon_slots_at_most_autoscaler"] = [fewer, len(scalable)]
    helpless = [r for r in results if r.klass == "cannot help" and "autoscaler" in r.followed]
    kept = [
        r
        for r in helpless
        if r.followed["autoscaler"].scaled_up(r.start)
        and r.followed["autoscaler"].removed_at is None
    ]
    named = [r for r in kept if r.sized_none and r.ineffective_verdict]
    extra = sum(r.followed["autoscaler"].slots_at_end(r.start_slots) - r.start_slots for r in kept)
    print(
        f"cannot help: the autoscaler kept scaling without effect on {len(kept)} of "
        f"{len(helpless)} "
        f"({extra} slots more in all); bpmon named {share(len(named), len(kept))} of them "
        "(no parallelism sized, verdict scales-ineffectively)"
    )
    for r in kept:
        if r not in named:
            print(f"  not named: {r.name} ({r.first_top}; verdict {r.ineffective_verdict})")
    doc["kept_scaling"] = len(kept)
    doc["kept_scaling_named"] = len(named)
    doc["kept_scaling_extra_slots"] = extra
    return doc


def print_case(r: CaseResult) -> None:
    cls = r.klass
    least = ", ".join(f"{v} {r.start[v]} (least {n})" for v, n in r.least.items())
    print(f"{r.name} [{cls}; {least}; slots {r.start_slots}]: first {r.first_top}")
    for policy, f in r.followed.items():
        path = "; ".join(
            f"{', '.join(s.changes)} -> {'removed' if s.removed else s.top}"
            + (f" ({s.error})" if s.error else "")
            for s in f.steps
        )
        print(f"  {policy:<10} {path or '-'} [{f.stopped}]")
    sys.stdout.flush()


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--only", help="run only the corpus scenario with this file stem")
    parser.add_argument("--split", choices=SPLITS, help="run only this part of the corpus")
    parser.add_argument(
        "--category", action="append", choices=list(CATEGORIES), help="only this category"
    )
    parser.add_argument("--steps", type=int, default=3, help="re-runs per policy (default 3)")
    parser.add_argument("--jobs", type=int, default=1, choices=(1, 2), help="cases at once")
    args = parser.parse_args()
    try:
        cases = load_corpus(args.only)
    except (CorpusError, BpmonError) as exc:
        raise SystemExit(f"bench_autoscaler: {exc}") from None
    cases = [
        c
        for c in cases
        if not c.healthy
        and args.split in (None, c.split)
        and (args.category is None or c.category in args.category)
    ]
    if not cases:
        raise SystemExit("bench_autoscaler: no corpus case with a bottleneck matches")
    started = time.perf_counter()
    work = [(c, args.steps) for c in cases]
    results: list[CaseResult] = []
    if args.jobs == 1:
        for item in work:
            results.append(run_case(item))
            print_case(results[-1])
    else:
        context = multiprocessing.get_context("spawn")
        with ProcessPoolExecutor(max_workers=args.jobs, mp_context=context) as pool:
            for result in pool.map(run_case, work):
                results.append(result)
                print_case(result)
    doc = print_figures(results, args.steps, time.perf_counter() - started)
    doc["saturated_reruns"] = sum(r.reruns for r in results)
    print(f"\nruns repeated because the runtime saturated: {doc['saturated_reruns']}")
    print(json.dumps(doc))


if __name__ == "__main__":
    main()
