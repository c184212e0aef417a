"""Diagnosis accuracy on a real Flink: bpmon against the rules a user applies by eye, on the corpus
of ``tests/collectors/flink/corpus.py`` (jobs in ``jobs/BpmonCorpusJobs.java``, each with a
bottleneck, none or two by construction).

For each TaskManager count of ``--task-managers`` (default ``1,2``) a standalone Flink 2.3 starts
on loopback (``cluster.py``; slots spread evenly over the TaskManagers, so on two of them some
exchanges cross TCP), and every case runs at each load of ``--loads`` (the bottleneck's offered
rate / capacity; healthy and slot-starved jobs keep their own): submitted, warmed up 12 s, ONE
window of bpmon's Flink target through the service (``--samples`` samples 50 ms apart, what
``bpmon monitor --flink URL --job ID`` takes), cancelled. bpmon and the baselines
(``diagnosis_scoring.py``) answer from the same report:

- ``bpmon``: the report's root causes; ``busiest``: the busiest vertex downstream of a
  backpressured one (Flink's docs' advice); ``seed``: the first vertex that is not HIGH right after
  a HIGH one; ``most-bp``: the most backpressured vertex.

Figures: top-1 (the first named vertex is an expected bottleneck; healthy: nothing named), kind
(bpmon's first cause has the expected kind), in-chain (the cause on a chained vertex names the
operator where the cost sits), false positives (a healthy job given a cause, or a wrong vertex
named with confidence >= 0.5), recommendation (a cause at the bottleneck carries a parallelism,
counted for the kinds a parallelism fixes: slow operator or sink, source-limited, short of slots;
data skew, a slow instance and the network are recommended another fix), ``shows`` (from
measurements alone: the run shows its intended physics). With ``--verify`` the cluster runs
Flink's adaptive scheduler and each recommended parallelism is applied as ``bpmon monitor --flink
--verify`` applies it (``PUT /jobs/{id}/resource-requirements``), then a second window says
whether the cause is gone (``fixed``); the job short of slots is left out there (that scheduler
runs it on the slots it has). ``--follow autoscaler`` (with or without ``--verify``) runs every
case twice on that cluster, once following bpmon's recommendation and once the autoscaler's
decision from the same kind of window (what ``bpmon monitor --flink --verify --follow
autoscaler`` applies: every vertex it would rescale, a scale-down included), each for up to
``--steps`` rescales, and prints the two side by side: removed, steps taken, the parallelism
each ended with. The autoscaler is capped at the cluster's slots (``vertex.max-parallelism``, as
a team sets it where the slots are fixed). ``--no-pending``: the sources report no
pendingRecords, so the offered rate is estimated. ``--debloat``: buffer debloating on
(``taskmanager.network.memory.buffer-debloat.enabled``), whose verdicts must match. Every run
also compares the root cause's ``offered_rate`` with the job's true offered rate
(``offered/true``; the job publishes it). The cases table, the totals per TaskManager count,
then a JSON object of every figure as the last line. A full run (17 cases on one TaskManager, 17
on two, one load) takes ~13 minutes, ~25 with ``--verify``.

    .venv/bin/python tests/benchmarks/bench_flink_diagnosis.py [--task-managers 1,2]
        [--loads 1.6] [--only NAME,NAME] [--samples 40] [--flamegraph] [--verify]
        [--follow autoscaler] [--steps N] [--no-pending] [--debloat]
"""

from __future__ import annotations

import argparse
import inspect
import json
import sys
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import cast

from diagnosis_corpus import Case
from diagnosis_scoring import METHODS, Tally, Verdict, judge, shows_pattern

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "tests" / "collectors" / "flink"))

import corpus  # type: ignore[import-not-found]  # noqa: E402
from cluster import ADAPTIVE, Cluster, missing_reason  # type: ignore[import-not-found]  # noqa: E402

from bpmon.model.values import Report, RootCause  # noqa: E402
from bpmon.service.whatif import POLICIES, Policy  # noqa: E402

JOBS = REPO / "tests" / "collectors" / "flink" / "jobs" / "BpmonCorpusJobs.java"
DEBLOAT = {"taskmanager.network.memory.buffer-debloat.enabled": "true"}
"""Buffer debloating on (``--debloat``): each gate sizes its buffers to hold about 1 s (the
default target) of its throughput; the verdicts must stay what they are without it."""
SPREAD = {"cluster.evenly-spread-out-slots": "true"}
"""Slots taken from every TaskManager in turn: on two, a job's subtasks sit on both."""
VERIFY_SLOTS = 16
"""Slots per TaskManager with ``--verify``: room for a bottleneck raised to its recommendation."""
SIZED = ("slow-operator", "slow-sink", "source-limited", "resource-starved")
"""The kinds a parallelism fixes; data skew, a slow instance and the network need another fix
(salting or pre-aggregation, a move, bandwidth), which their recommendation names instead."""


@dataclass(frozen=True, slots=True)
class Result:
    """One case at one load on one cluster: the run and every method's verdict."""

    case: corpus.FlinkCase
    task_managers: int
    scored: Case
    report: Report | None
    error: str | None
    seconds: float
    verdicts: dict[str, Verdict]
    check: corpus.Check | None = None
    truth: dict[str, float] | None = None
    followed: dict[str, Followed] | None = None
    """Each policy followed on the cluster (``--follow``): bpmon's and the autoscaler's."""
    tried: bool = False
    """bpmon's recommendation was to be applied on the cluster (``--verify`` or ``--follow``)."""

    @property
    def top(self) -> RootCause | None:
        causes = self.report.root_causes if self.report is not None else None
        return causes[0] if causes else None

    def in_chain(self) -> bool | None:
        """The top cause names the expected operator inside its chain (None: not a chain case)."""
        if self.case.in_chain is None:
            return None
        top = self.top
        return (
            top is not None
            and top.in_chain is not None
            and (top.in_chain.operator == self.case.in_chain)
        )

    def recommended(self) -> bool | None:
        """A cause at an expected bottleneck that a parallelism fixes carries one (None: healthy,
        or a kind another fix is recommended for)."""
        if not self.case.expected or self.case.expected[0][1] not in SIZED:
            return None
        if self.report is None:
            return False
        causes = self.report.root_causes or ()
        return any(c.vertex in self.scored.vertices and c.recommended_parallelism for c in causes)

    def verified(self) -> bool | None:
        """The recommended parallelism, applied on the cluster, removed the cause (None: not
        tried, nothing recommended)."""
        check = self.check
        if check is None and self.followed and "bpmon" in self.followed:
            check = self.followed["bpmon"].check  # bpmon followed on a run of its own
        if check is None:
            return False if self.tried and self.recommended() is True else None
        return check.removed

    def shows(self) -> bool:
        return self.report is not None and shows_pattern(self.scored, self.report)


@dataclass(frozen=True, slots=True)
class Followed:
    """One policy followed on a fresh run of the case: what it did, or why nothing."""

    check: corpus.Check | None
    error: str | None
    seconds: float

    @property
    def removed(self) -> bool | None:
        return None if self.check is None else self.check.removed

    @property
    def steps(self) -> int:
        return 0 if self.check is None else self.check.steps

    @property
    def parallelism(self) -> dict[str, int]:
        return {} if self.check is None else dict(self.check.parallelism)

    @property
    def subtasks(self) -> int | None:
        """Every vertex's parallelism after the last step, added up."""
        if self.check is None:
            return None
        return sum(v.parallelism for v in self.check.after.vertices)

    def cell(self) -> str:
        if self.check is None:
            return "ERROR" if self.error else "no change"
        used = ", ".join(f"{name} {'>'.join(map(str, ps))}" for name, ps in self.check.trail)
        return f"{mark(self.removed)} {self.steps} step(s): {used} ({self.subtasks} subtasks)"


def offered_ratio(r: Result) -> float | None:
    """The top cause's offered rate over the job's true offered rate of the source it takes
    from (None: no cause, no rate, or a case without one)."""
    top = r.top
    true = (r.truth or {}).get(f"offered.{r.case.feeds}")
    if top is None or top.offered_rate is None or not true:
        return None
    return top.offered_rate / true


def scored_case(c: corpus.FlinkCase, task_managers: int) -> Case:
    """The corpus case as the runtime benchmark's scoring reads one."""
    name = f"{c.name}@{c.load:g}/{task_managers}tm"
    return Case(name, JOBS, "flink", "held-out", c.expected, c.subtasks)


@dataclass(frozen=True, slots=True)
class Plan:
    """What every case does on the cluster: apply bpmon's recommendation (``verify``), and
    which policies to follow side by side (``follow``), for how many steps, with or without
    the sources' pendingRecords, with or without buffer debloating."""

    verify: bool = False
    follow: tuple[str, ...] = ()
    steps: int = 1
    pending: bool = True
    debloat: bool = False

    @property
    def rescales(self) -> bool:
        return self.verify or bool(self.follow)


def run_cluster(
    task_managers: int,
    cases: Sequence[corpus.FlinkCase],
    loads: Sequence[float],
    samples: int,
    flamegraph: bool,
    plan: Plan | None = None,
) -> list[Result]:
    """Every case at every load on one fresh cluster of ``task_managers``, stopped after; when
    it rescales the cluster runs Flink's adaptive scheduler (rescales in place) with room to
    grow, and a job short of slots is left out (that scheduler runs it on what there is)."""
    plan = plan or Plan()
    extra: dict[str, object] = {"flamegraph": True} if flamegraph else {}
    if plan.rescales:
        extra["slots"] = VERIFY_SLOTS
        cases = [c for c in cases if not c.starved]
    folder = Path(tempfile.mkdtemp(prefix="bpmon-flink-corpus-"))
    config = {**SPREAD, **(ADAPTIVE if plan.rescales else {}), **(DEBLOAT if plan.debloat else {})}
    cluster = Cluster(folder, task_managers=task_managers, config=config, **extra)
    capped = folder / "autoscaler.conf"  # the autoscaler kept within the cluster's slots
    capped.write_text(f"job.autoscaler.vertex.max-parallelism: {cluster.slots * task_managers}\n")
    cluster.start()
    results = []
    try:
        cluster.upload()
        for load in loads:
            for c in (c.at(load) for c in cases if task_managers in c.task_managers):
                if not c.scales and load != loads[0]:
                    continue  # a healthy or starved job runs once, whatever the loads
                results.append(run_one(c, cluster, samples, plan, capped))
    finally:
        cluster.stop()
    return results


def run_one(
    c: corpus.FlinkCase, cluster: Cluster, samples: int, plan: Plan, capped: Path
) -> Result:
    bpmon_steps = corpus.Follow("bpmon", plan.steps)
    run = corpus.run_case(
        c, cluster, samples=samples, verify=plan.verify, follow=bpmon_steps, pending=plan.pending
    )
    scored = scored_case(c, cluster.task_managers)
    verdicts = judge(scored, run.report) if run.report is not None else {}
    followed: dict[str, Followed] | None = None
    if plan.follow:
        followed = {}
        for policy in ("bpmon", *(p for p in plan.follow if p != "bpmon")):
            if policy == "bpmon" and plan.verify:
                followed[policy] = Followed(run.check, run.error, run.seconds)
                continue
            how = corpus.Follow(cast(Policy, policy), plan.steps, autoscaler=capped)
            again = corpus.run_case(
                c, cluster, samples=samples, verify=True, follow=how, pending=plan.pending
            )
            followed[policy] = Followed(again.check, again.error, again.seconds)
    result = Result(
        c,
        cluster.task_managers,
        scored,
        run.report,
        run.error,
        run.seconds,
        verdicts,
        run.check,
        run.truth,
        followed,
        tried=plan.verify or bool(plan.follow),
    )
    tried = f"; {' '.join(run.check.changes)}: {run.check.summary}" if run.check else ""
    print(f"ran {scored.name} ({run.seconds:.0f} s){': ' + run.error if run.error else ''}{tried}")
    for policy, f in (followed or {}).items():
        print(f"  follow {policy}: {f.cell()}{': ' + f.error if f.error else ''}")
    sys.stdout.flush()
    return result


# -- tables ---------------------------------------------------------------------------------------


def table(header: Sequence[str], rows: Sequence[Sequence[str]]) -> None:
    widths = [max(len(r[i]) for r in (header, *rows)) for i in range(len(header))]
    for row in (header, *rows):
        print("  ".join(f"{cell:<{w}}" for cell, w in zip(row, widths, strict=True)).rstrip())


def mark(value: bool | None) -> str:
    return {True: "ok", False: "X", None: "-"}[value]


def case_row(r: Result) -> list[str]:
    expected = " + ".join(f"{v}/{k}" for v, k in r.case.expected) or "(healthy)"
    top = r.top
    named = f"{top.vertex}/{top.kind} {top.confidence:.2f}" if top else "-"
    bpmon = r.verdicts.get("bpmon")
    cells = [f"{named} {mark(bpmon.top1 and not bpmon.false_positive) if bpmon else 'ERROR'}"]
    for method in ("busiest", "seed"):
        v = r.verdicts.get(method)
        cells.append(f"{v.named[0] if v and v.named else '-'} {mark(v.top1) if v else 'ERROR'}")
    chain = top.in_chain.operator if top and top.in_chain else "-"
    return [
        r.case.name,
        str(r.task_managers),
        f"{r.case.load:g}",
        "yes" if r.shows() else "NO",
        expected,
        *cells,
        f"{chain} {mark(r.in_chain())}" if r.case.in_chain else "",
        mark(r.recommended()),
        mark(r.verified()),
        "-" if (ratio := offered_ratio(r)) is None else f"{ratio:.2f}",
        f"{r.seconds:.0f}",
    ]


def figures(results: Sequence[Result]) -> dict[str, Tally]:
    """Every figure over ``results``: each method's top-1 and false positives, bpmon's kind,
    in-chain, healthy false positives and recommendations."""
    missed = Verdict((), top1=False, false_positive=False, all_found=False)
    out: dict[str, Tally] = {}
    for method in METHODS:
        top1, fp = Tally(), Tally()
        for r in results:
            v = r.verdicts.get(method, missed)
            top1, fp = top1.add(v.top1), fp.add(v.false_positive)
        out[f"{method} top-1"], out[f"{method} false pos."] = top1, fp
    kind, chain, healthy_fp, rec, all_found, worked = (Tally() for _ in range(6))
    for r in results:
        v = r.verdicts.get("bpmon", missed)
        kind = kind.add(v.kind if r.case.expected else None)
        chain = chain.add(r.in_chain())
        healthy_fp = healthy_fp.add(v.false_positive if not r.case.expected else None)
        rec = rec.add(r.recommended())
        worked = worked.add(r.verified())
        all_found = all_found.add(v.all_found)
    out |= {
        "bpmon kind": kind,
        "bpmon in-chain": chain,
        "bpmon healthy false pos.": healthy_fp,
        "bpmon all found": all_found,
        "bpmon recommendation": rec,
        "bpmon verified on cluster": worked,
        "truthful runs": Tally(sum(r.shows() for r in results), len(results)),
    }
    return out


def print_all(results: Sequence[Result]) -> dict[str, object]:
    print()
    header = ("case", "TMs", "load", "shows", "expected", "bpmon", "busiest", "seed")
    table(
        (*header, "in chain", "rec.", "fixed", "offered/true", "s"), [case_row(r) for r in results]
    )
    for r in results:
        if r.error:
            print(f"ERROR {r.scored.name}: {r.error}")
    policies = sorted({p for r in results for p in r.followed or {}}, key=lambda p: p != "bpmon")
    if policies:
        print("\nfollowed on the cluster (removed, steps, the parallelism each ended with):")
        rows = [
            [r.case.name, str(r.task_managers), f"{r.case.load:g}"]
            + [(r.followed or {}).get(p, Followed(None, None, 0)).cell() for p in policies]
            for r in results
        ]
        table(("case", "TMs", "load", *policies), rows)
    groups = {f"{n} TM": [r for r in results if r.task_managers == n] for n in (1, 2)}
    groups = {k: v for k, v in groups.items() if v} | {"all": list(results)}
    totals = {name: figures(chosen) for name, chosen in groups.items()}
    print()
    names = list(totals["all"])
    table(("figure", *totals), [[f, *(str(t[f]) for t in totals.values())] for f in names])
    return {g: {f: [t.hits, t.of] for f, t in fs.items()} for g, fs in totals.items()}


def sizing(r: Result) -> dict[str, object] | None:
    """The top cause's figures a recommendation is sized from."""
    top = r.top
    if top is None:
        return None
    return {
        "capacity_per_subtask": top.capacity_per_subtask,
        "offered_rate": top.offered_rate,
        "recommended_parallelism": top.recommended_parallelism,
    }


def busy_after(check: corpus.Check) -> dict[str, float | None]:
    """Each changed vertex's busy ratio after the rescale (the sizing aims at 0.9)."""
    changed = {c.split(".parallelism=")[0] for c in check.changes}
    return {v.name: v.metrics.busy_ratio for v in check.after.vertices if v.name in changed}


def parse_list(text: str, kind: type[float] | type[int]) -> list[float]:
    try:
        return [float(kind(x)) for x in text.split(",") if x.strip()]
    except ValueError:
        raise SystemExit(f"bench_flink_diagnosis: {text!r} is not a comma-separated list") from None


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--task-managers", default="1,2", help="TaskManager counts, e.g. 1,2")
    parser.add_argument("--loads", default="1.6", help="bottleneck loads (offered / capacity)")
    parser.add_argument("--only", help="run only these cases (comma-separated names)")
    parser.add_argument("--samples", type=int, default=corpus.SAMPLES, help="samples per window")
    parser.add_argument("--flamegraph", action="store_true", help="Flink's own sampler on")
    parser.add_argument(
        "--verify",
        action="store_true",
        help="apply each recommended parallelism on the cluster (adaptive scheduler) and check it",
    )
    parser.add_argument(
        "--follow",
        default="",
        help="also follow these policies on the cluster, side by side with bpmon's "
        "(autoscaler: what Flink's autoscaler would decide)",
    )
    parser.add_argument("--steps", type=int, default=1, help="rescales a policy may take (1-5)")
    parser.add_argument(
        "--no-pending", action="store_true", help="the sources report no pendingRecords"
    )
    parser.add_argument(
        "--debloat", action="store_true", help="buffer debloating on (FLIP-183, 1 s target)"
    )
    args = parser.parse_args()
    follow = tuple(p for p in args.follow.split(",") if p)
    if any(p not in POLICIES for p in follow) or not 1 <= args.steps <= 5:
        raise SystemExit(f"bench_flink_diagnosis: --follow {', '.join(POLICIES)}; --steps 1-5")
    plan = Plan(args.verify, follow, args.steps, not args.no_pending, args.debloat)
    reason = missing_reason()
    if reason is not None:
        raise SystemExit(f"bench_flink_diagnosis: {reason}")
    if args.flamegraph and "flamegraph" not in inspect.signature(Cluster).parameters:
        raise SystemExit("bench_flink_diagnosis: this checkout's cluster.py has no flamegraph")
    try:
        cases = [corpus.case(n) for n in args.only.split(",")] if args.only else corpus.CASES
    except KeyError as exc:
        raise SystemExit(f"bench_flink_diagnosis: {exc.args[0]}") from None
    counts = [int(n) for n in parse_list(args.task_managers, int)]
    loads = parse_list(args.loads, float)
    if not counts or not loads or any(n < 1 for n in counts) or any(x <= 0 for x in loads):
        raise SystemExit("bench_flink_diagnosis: --task-managers and --loads need positive values")
    started = time.perf_counter()
    results = [
        r for n in counts for r in run_cluster(n, cases, loads, args.samples, args.flamegraph, plan)
    ]
    doc: dict[str, object] = {"totals": print_all(results)}
    doc["cases"] = [
        {
            "case": r.case.name,
            "task_managers": r.task_managers,
            "load": r.case.load,
            "expected": [list(e) for e in r.case.expected],
            "bpmon": [[c.vertex, c.kind, c.confidence] for c in (r.report.root_causes or ())]
            if r.report
            else None,
            "in_chain": r.top.in_chain.operator if r.top and r.top.in_chain else None,
            "top1": {m: v.top1 for m, v in r.verdicts.items()},
            "shows": r.shows(),
            "sizing": sizing(r),
            "verified": None
            if r.check is None
            else {
                "changes": list(r.check.changes),
                "removed": r.check.removed,
                "busy_after": busy_after(r.check),
            },
            "offered": {
                "estimate": r.top.offered_rate if r.top else None,
                "true": (r.truth or {}).get(f"offered.{r.case.feeds}"),
                "ratio": offered_ratio(r),
            },
            "followed": {
                policy: {
                    "removed": f.removed,
                    "steps": f.steps,
                    "parallelism": f.parallelism,
                    "trail": {name: list(ps) for name, ps in f.check.trail} if f.check else {},
                    "subtasks": f.subtasks,
                    "changes": list(f.check.changes) if f.check else [],
                    "error": f.error,
                    "seconds": round(f.seconds, 1),
                }
                for policy, f in (r.followed or {}).items()
            },
            "error": r.error,
            "seconds": round(r.seconds, 1),
        }
        for r in results
    ]
    doc["pending_records"] = plan.pending
    doc["sampler"] = "flamegraph" if args.flamegraph else "thread dumps"
    doc["elapsed_s"] = round(time.perf_counter() - started, 1)
    print(f"\nfull run: {doc['elapsed_s']} s")
    print(json.dumps(doc))


if __name__ == "__main__":
    main()
