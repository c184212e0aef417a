"""The real-Flink diagnosis corpus: what each job of ``jobs/BpmonCorpusJobs.java`` must be
diagnosed as, and one run of a job on a running cluster.

Each :class:`FlinkCase` names a job (its arithmetic is in the Java file's header), the load it runs
at (its bottleneck's offered rate / capacity), the vertex and kind bpmon must name (none for a
healthy job, two for ``two-bottlenecks``), the operator inside a chain where the cost sits, and
how many TaskManagers the case needs. :func:`run_case` submits it, lets it warm up, takes one
window through bpmon's service (what ``bpmon monitor --flink URL --job ID`` does) and cancels it.
``bench_flink_diagnosis.py`` runs the whole table; ``test_corpus.py`` a robust few.
"""

from __future__ import annotations

import tempfile
import time
import urllib.error
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING

from bpmon.collectors.flink.target import FlinkTarget
from bpmon.model.errors import BpmonError
from bpmon.model.events import JobEnded, ReportReady
from bpmon.model.values import Report
from bpmon.service import facade
from bpmon.service.whatif import Policy, SettingChange, follow_changes, merged
from bpmon.service.whatif import verdict as whatif_verdict

if TYPE_CHECKING:  # a type only: the benchmark imports this module from outside the package
    from .cluster import Cluster

ENTRY = "BpmonCorpusJobs"
WARMUP_S = 12.0
"""Seconds a job runs before its window: backpressure has built up, and Flink's busy time (an
average over 5 s slots, updated every 5 s) no longer shows the start-up slot (as test_e2e)."""
SAMPLES = 40
"""Samples of the one window (50 ms apart): what test_e2e takes."""
PATIENCE_S = 15.0
"""How long a window waits for a job whose tasks do not all run before it gives up."""
STARVED_WAIT_S = 12.0
"""A job short of slots never runs: it is watched after this long in its waiting state (bpmon
takes tasks waiting 10 s or longer for a job short of slots, a shorter wait for a restart)."""


@dataclass(frozen=True, slots=True)
class FlinkCase:
    """One corpus job and what its diagnosis must name.

    Attributes:
        name: the job (``BpmonCorpusJobs``'s first argument) and the case's name.
        expected: every bottleneck, primary first, as ``(vertex, kind)``; empty: healthy.
        load: the bottleneck's utilisation (offered / capacity); a healthy job's busiest subtask.
        scales: whether ``--loads`` replaces ``load`` (not for healthy or slot-starved jobs).
        in_chain: the operator inside the primary vertex's chain where the cost sits.
        subtasks: the subtasks the primary cause must name (empty: not checked).
        task_managers: the TaskManager counts the case runs on (the network case needs two).
        starved: the job waits for slots and never runs (submitted without waiting for it).
        feeds: the source whose records the primary bottleneck takes: its true offered rate
            (the job publishes it, :func:`true_rates`) is what bpmon's ``offered_rate`` of the
            cause estimates (every operator before the bottleneck passes each record on once).
    """

    name: str
    expected: tuple[tuple[str, str], ...]
    load: float = 1.6
    scales: bool = True
    in_chain: str | None = None
    subtasks: tuple[int, ...] = ()
    task_managers: tuple[int, ...] = (1, 2)
    starved: bool = False
    feeds: str = "events"

    def at(self, load: float) -> FlinkCase:
        """This case at ``load`` if it scales, else unchanged."""
        return replace(self, load=load) if self.scales else self


def _one(vertex: str, kind: str) -> tuple[tuple[str, str], ...]:
    return ((vertex, kind),)


CASES: tuple[FlinkCase, ...] = (
    FlinkCase("async-lookup", _one("lookup", "slow-operator")),
    FlinkCase("slow-timers", _one("sessionize", "slow-operator")),
    FlinkCase("interval-join", _one("verify-payment", "slow-operator"), feeds="payments"),
    FlinkCase("zipf-agg", _one("aggregate", "data-skew")),
    FlinkCase("batch-sink", _one("warehouse: Writer", "slow-sink")),
    FlinkCase("network", _one("digest", "network"), task_managers=(2,)),
    FlinkCase(
        "long-chain",
        _one("parse -> validate -> enrich -> normalize -> tag", "slow-operator"),
        in_chain="enrich",
    ),
    FlinkCase(
        "source-chained", _one("Source: events -> decode", "source-limited"), in_chain="decode"
    ),
    FlinkCase("decoy", _one("score", "slow-operator")),
    FlinkCase(
        "two-bottlenecks", (("geo", "slow-operator"), ("fraud", "slow-operator")), feeds="clicks"
    ),
    FlinkCase(
        "short-of-slots", _one("work", "resource-starved"), load=1.0, scales=False, starved=True
    ),
    FlinkCase("healthy", (), load=0.65, scales=False),
    FlinkCase("healthy-keyed", (), load=0.6, scales=False),
    FlinkCase("parse-cpu", _one("parse-json", "slow-operator")),
    FlinkCase("hot-key", _one("count", "data-skew")),
    FlinkCase("slow-sink", _one("db: Writer", "slow-sink")),
    FlinkCase("slow-instance", _one("enrich", "slow-subtask"), subtasks=(2,)),
)
"""The corpus, one row a job. Vertex names are Flink's: a chain joins its operators with
``" -> "``, a sink vertex is ``NAME: Writer``."""


def case(name: str) -> FlinkCase:
    """The corpus case called ``name``.

    Raises:
        KeyError: no such case (the message lists them).
    """
    for c in CASES:
        if c.name == name:
            return c
    raise KeyError(f"no corpus case {name!r}; the cases: {', '.join(c.name for c in CASES)}")


@dataclass(frozen=True, slots=True)
class Check:
    """A policy followed on the cluster: the changes applied (every step's, merged), the report
    after the last step, its verdict, the steps taken, the parallelism of each changed vertex in
    the end, and each changed vertex's parallelism before and after every step (``trail``)."""

    changes: tuple[str, ...]
    after: Report
    removed: bool
    summary: str
    steps: int = 1
    parallelism: tuple[tuple[str, int], ...] = ()
    policy: Policy = "bpmon"
    trail: tuple[tuple[str, tuple[int, ...]], ...] = ()


@dataclass(frozen=True, slots=True)
class CaseRun:
    """One run of a case: bpmon's report of its window, or why there is none; with
    ``verify``, the policy followed on the cluster (None: nothing to try, or it failed); and
    the job's true offered rate per source (what it publishes, :func:`true_rates`)."""

    case: FlinkCase
    report: Report | None
    error: str | None
    seconds: float
    check: Check | None = None
    truth: dict[str, float] | None = None


def job_args(c: FlinkCase, cluster: Cluster, *, pending: bool = True) -> tuple[str, ...]:
    """The job's arguments: its load, and for a job short of slots a parallelism two above the
    cluster's slots; ``pending=False``: its sources report no pendingRecords."""
    width = cluster.slots * cluster.task_managers + 2
    return (f"{c.load:g}", str(width), *(() if pending else ("pending=false",)))


def true_rates(cluster: Cluster, job: str) -> dict[str, float]:
    """What the job publishes of itself (``GET /jobs/{id}/config``, its user-config): each
    source's true offered rate (``bpmon.offered.NAME``, records/s) and backlog at submission
    (``bpmon.backlog.NAME``, records), by key without the ``bpmon.`` prefix."""
    config = cluster.get(f"/jobs/{job}/config")
    user = (config.get("execution-config") or {}).get("user-config") or {}
    return {k.removeprefix("bpmon."): float(v) for k, v in user.items() if k.startswith("bpmon.")}


@dataclass(frozen=True, slots=True)
class Follow:
    """How ``--verify`` goes on a corpus run: whose recommendation, for how many steps, and the
    rules and autoscaler options of every window (None: bpmon's and the autoscaler's own)."""

    policy: Policy = "bpmon"
    steps: int = 1
    rules: Path | None = None
    autoscaler: Path | None = None


def run_case(
    c: FlinkCase,
    cluster: Cluster,
    *,
    warmup_s: float = WARMUP_S,
    samples: int = SAMPLES,
    verify: bool = False,
    follow: Follow | None = None,
    pending: bool = True,
) -> CaseRun:
    """Submit ``c``'s job, wait until it runs and warms up, take one bpmon window through the
    service, cancel the job; the report (or the error, as one line). With ``verify`` (a cluster
    with the adaptive scheduler), ``follow``'s policy (bpmon's recommended parallelism by
    default) is then applied as ``bpmon monitor --flink --verify --follow POLICY --steps N``
    applies it, and a window after each step says whether it worked. ``pending=False``: the
    job's sources report no pendingRecords (the offered rate is then estimated)."""
    follow = follow or Follow()
    began = time.monotonic()
    args = job_args(c, cluster, pending=pending)
    job = cluster.submit(c.name, wait=False, args=args, entry=ENTRY)
    report: Report | None = None
    check = truth = None
    try:
        if c.starved:
            time.sleep(STARVED_WAIT_S)
        else:
            cluster.wait_running(job)
            time.sleep(warmup_s)
        truth = true_rates(cluster, job)
        report, error = window_of(cluster.url, job, samples, follow)
        if verify and report is not None:
            check, job = _check(cluster, job, report, samples, follow)
    except (BpmonError, RuntimeError, OSError) as exc:
        error = f"{type(exc).__name__}: {exc}"  # a report already taken is kept
    finally:
        _cancel(cluster, job)
    return CaseRun(c, report, error, time.monotonic() - began, check, truth)


def _check(
    cluster: Cluster, job: str, before: Report, samples: int, follow: Follow
) -> tuple[Check | None, str]:
    """Follow ``follow.policy`` from ``before`` through Flink's adaptive scheduler (what
    ``monitor --verify --follow`` does), up to ``follow.steps`` times or until the cause is
    gone, a window after each step; and the job's id after."""
    report = before
    applied: list[SettingChange] = []
    check: Check | None = None
    trail: dict[str, list[int]] = {}
    for step in range(1, follow.steps + 1):
        changes = follow_changes(report, follow.policy)
        if not changes:
            break
        applied = merged(applied, changes)
        wanted = {c.vertex: int(c.value) for c in applied}
        job = facade.rescale_flink(cluster.url, job, wanted, say=lambda _: None)
        after, error = window_of(cluster.url, job, samples, follow)
        if after is None:
            raise RuntimeError(f"no report after the rescale: {error}")
        verdict = whatif_verdict(report, after, changes)
        for change in changes:
            trail.setdefault(change.vertex, [_parallelism(before, change.vertex)])
            trail[change.vertex].append(int(change.value))
        check = Check(
            tuple(map(str, applied)),
            after,
            verdict.removed,
            verdict.summary,
            step,
            tuple(wanted.items()),
            follow.policy,
            tuple((name, tuple(ps)) for name, ps in trail.items()),
        )
        report = after
        if verdict.removed and not verdict.at_edge:
            break
    return check, job


def _parallelism(report: Report, vertex: str) -> int:
    return next(v.parallelism for v in report.vertices if v.name == vertex)


def window_of(
    url: str, job: str, samples: int, follow: Follow | None = None
) -> tuple[Report | None, str | None]:
    """One window of ``job`` through the service, as ``monitor_flink`` takes it, but giving up
    after :data:`PATIENCE_S` of a job that is not running (not the CLI's minute)."""
    plan = replace(facade.outside_plan(samples, 50.0, 1, None), patience_s=PATIENCE_S)
    follow = follow or Follow()
    with tempfile.TemporaryDirectory(prefix="bpmon-corpus-") as runs:
        settings = facade.Settings(
            runs_dir=Path(runs), rules_path=follow.rules, autoscaler_path=follow.autoscaler
        )
        report: Report | None = None
        for event in facade.watch(FlinkTarget(url, job), plan, settings, live=False):
            if isinstance(event, ReportReady):
                report = event.report
            elif isinstance(event, JobEnded) and report is None:
                return None, f"the job ended before its window: {event}"
    return report, None if report is not None else "no report"


def _cancel(cluster: Cluster, job: str) -> None:
    """Cancel ``job``; a job already over (failed for want of slots) needs nothing."""
    try:
        cluster.cancel(job)
    except (urllib.error.HTTPError, RuntimeError):
        if cluster.get(f"/jobs/{job}/status").get("status") not in ("FAILED", "CANCELED"):
            raise
