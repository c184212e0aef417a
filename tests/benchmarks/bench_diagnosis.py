"""Diagnosis accuracy: bpmon's rules engine against three rules of thumb, on a corpus of scenarios.

Every scenario of ``tests/benchmarks/corpus/`` (chains, diamonds, fan-in, fan-out, broadcast, hot
keys, slow instances, slow sinks, capped links, TCP head-of-line blocking, two bottlenecks, healthy
jobs) runs on bpmon's runtime, one at a time, and is diagnosed from ONE burst (the scenario's
``[monitor]`` table) after its warmup. From the same report, four answers are read:

- ``bpmon``: the first root cause of the report (all of them count for false positives);
- ``most-bp``: the most backpressured vertex (the red vertex of a dashboard);
- ``seed``: Flink's old rule, the first vertex that is not HIGH right downstream of a HIGH one
  (first in topological order when several are);
- ``busiest``: the busiest vertex downstream of a backpressured one (Flink's docs' advice).

No baseline names anything when no vertex is above OK. The expected answer is each scenario's
``[expect]`` table; a second bottleneck, where there is one, is listed in
``corpus/expected_extra.toml`` (``[expect]`` takes one root cause only). Metrics:

- top-1: the (first) named vertex is an expected bottleneck; on a healthy job, nothing is named;
- kind (bpmon only): the top cause also has the expected kind, and names the expected subtasks;
- false positives: named vertices that are no expected bottleneck, a healthy job's included;
- all found: every expected bottleneck is named (a baseline names one vertex at most).

The ``shows`` column checks, from the report's measurements alone, that the run shows the intended
pattern (each expected bottleneck busy >= 85%, or idle >= 50% for a network cause, the primary one
with a producer above OK; nothing above OK on a healthy job), so a miss can be told from an
untruthful run. The sampler's jitter p99 over the bursts (median and worst) is reported beside.
``--jobs N`` runs N scenarios at once, each in its own process: faster, but on two cores the jobs
then compete for the CPU. The last line is a JSON object of the figures.

    .venv/bin/python tests/benchmarks/bench_diagnosis.py [--only NAME] [--jobs 1]
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import statistics
import tempfile
import time
import tomllib
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import get_args

from bpmon.model import CauseKind, Report, VertexStatus
from bpmon.scenario import load_expectation, load_scenario
from bpmon.service import RunSession, Settings

CORPUS = Path(__file__).resolve().parent / "corpus"
EXTRA = CORPUS / "expected_extra.toml"
BASELINES = ("most-bp", "seed", "busiest")
METHODS = ("bpmon", *BASELINES)
BUSY_SHOWN = 0.85
IDLE_SHOWN = 0.5
CAUSE_KINDS: tuple[str, ...] = get_args(CauseKind)


@dataclass(frozen=True, slots=True)
class Case:
    """One corpus scenario and what its diagnosis must find.

    Attributes:
        expected: every expected bottleneck, primary first, as ``(vertex, kind)``; empty for a
            healthy job.
        subtasks: the subtasks the primary cause must name (may be empty).
    """

    name: str
    path: Path
    expected: tuple[tuple[str, str], ...]
    subtasks: tuple[int, ...] = ()

    @property
    def vertices(self) -> frozenset[str]:
        """The names of the expected bottlenecks."""
        return frozenset(vertex for vertex, _ in self.expected)


@dataclass(frozen=True, slots=True)
class Outcome:
    """What the four methods named for one case, from one report."""

    case: Case
    report: Report
    elapsed_s: float
    named: Mapping[str, tuple[str, ...]]  # method -> named vertices, most likely first


def load_cases(only: str | None) -> list[Case]:
    """The corpus, sorted by name (``only``: just that scenario)."""
    extra = tomllib.loads(EXTRA.read_text()) if EXTRA.exists() else {}
    cases = []
    for path in sorted(CORPUS.glob("*.toml")):
        if path == EXTRA or (only is not None and path.stem != only.removesuffix(".toml")):
            continue
        expectation = load_expectation(path)
        if expectation is None:
            raise SystemExit(f"{path}: no [expect] table; every corpus scenario needs one")
        primary = (
            [(expectation.root_cause, expectation.kind or "")] if expectation.root_cause else []
        )
        also = extra_expected(path, extra.get(path.stem, {}))
        cases.append(Case(path.stem, path, (*primary, *also), expectation.subtasks))
    if not cases:
        raise SystemExit(f"no corpus scenario named {only!r} in {CORPUS}")
    return cases


def extra_expected(path: Path, table: Mapping[str, object]) -> list[tuple[str, str]]:
    """The further bottlenecks ``expected_extra.toml`` lists for ``path``, checked."""
    names = {op.name for op in load_scenario(path).operators}
    entries = table.get("also", [])
    out = []
    for entry in entries if isinstance(entries, list) else [entries]:
        vertex, kind = (
            (entry.get("vertex"), entry.get("kind")) if isinstance(entry, dict) else ("", "")
        )
        if vertex not in names or kind not in CAUSE_KINDS:
            raise SystemExit(
                f"{EXTRA}: [{path.stem}] also = {entry!r}: expected {{ vertex = an operator of "
                f"{path.name}, kind = one of {', '.join(CAUSE_KINDS)} }}"
            )
        out.append((str(vertex), str(kind)))
    return out


def run_case(path: Path) -> tuple[Report, float]:
    """Run one scenario: warm up, take one burst, stop; the report and the seconds it took."""
    scenario = load_scenario(path)
    started = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="bpmon-bench-") as runs:
        session = RunSession(scenario, Settings(runs_dir=Path(runs)))
        session.start()
        try:
            session.wait(scenario.monitor.warmup_s)
            report = session.burst()
        finally:
            result = session.stop()
    if result.leaks:
        raise SystemExit(f"{path.name}: the job leaked: {', '.join(result.leaks)}")
    return report, time.perf_counter() - started


# -- the graph and the baselines, read from the report only -------------------------------------


def consumers_of(report: Report) -> dict[str, list[str]]:
    """Each vertex's direct consumers, from the report's edges, in report order."""
    out: dict[str, list[str]] = {v.name: [] for v in report.vertices}
    for vertex in report.vertices:
        for edge in vertex.inputs:
            if edge.source in out:
                out[edge.source].append(vertex.name)
    return out


def topological(report: Report) -> list[str]:
    """The vertices, every one after its producers; ties keep report order."""
    order: list[str] = []
    pending = [v.name for v in report.vertices]
    inputs = {v.name: [e.source for e in v.inputs] for v in report.vertices}
    while pending:
        ready = [n for n in pending if all(p in order for p in inputs[n])] or pending[:1]
        for name in ready:
            order.append(name)
            pending.remove(name)
    return order


def above_ok(vertex: VertexStatus) -> bool:
    """Whether a vertex is backpressured (LOW or HIGH)."""
    return vertex.level in ("LOW", "HIGH")


def most_backpressured(report: Report) -> tuple[str, ...]:
    """The vertex with the highest backpressure ratio, if any is above OK."""
    candidates = [v for v in report.vertices if above_ok(v)]
    if not candidates:
        return ()
    return (max(candidates, key=lambda v: v.ratio or 0.0).name,)


def seed_rule(report: Report) -> tuple[str, ...]:
    """The first vertex that is not HIGH and is fed by a HIGH one (topological order)."""
    levels = {v.name: v.level for v in report.vertices}
    consumers = consumers_of(report)
    fed_by_high = {c for name, level in levels.items() if level == "HIGH" for c in consumers[name]}
    for name in topological(report):
        if name in fed_by_high and levels[name] != "HIGH":
            return (name,)
    return ()


def busiest_downstream(report: Report) -> tuple[str, ...]:
    """The busiest vertex downstream (transitively) of a backpressured one."""
    consumers = consumers_of(report)
    reached: set[str] = set()
    stack = [c for v in report.vertices if above_ok(v) for c in consumers[v.name]]
    while stack:
        name = stack.pop()
        if name not in reached:
            reached.add(name)
            stack.extend(consumers[name])
    candidates = [v for v in report.vertices if v.name in reached]
    if not candidates:
        return ()
    return (max(candidates, key=lambda v: v.metrics.busy_ratio or 0.0).name,)


BASELINE_RULES: Mapping[str, Callable[[Report], tuple[str, ...]]] = {
    "most-bp": most_backpressured,
    "seed": seed_rule,
    "busiest": busiest_downstream,
}


def answers(report: Report) -> dict[str, tuple[str, ...]]:
    """What each method names, from the same report."""
    named = {"bpmon": tuple(c.vertex for c in report.root_causes or ())}
    named.update({method: rule(report) for method, rule in BASELINE_RULES.items()})
    return named


# -- scoring --------------------------------------------------------------------------------------


def top1(case: Case, named: Sequence[str]) -> bool:
    """The first named vertex is an expected bottleneck (healthy: nothing named)."""
    if not case.expected:
        return not named
    return bool(named) and named[0] in case.vertices


def found_all(case: Case, named: Sequence[str]) -> bool:
    """Every expected bottleneck is named (healthy: nothing is)."""
    return case.vertices <= set(named) if case.expected else not named


def false_positives(case: Case, named: Sequence[str]) -> int:
    """Named vertices that are no expected bottleneck."""
    return sum(1 for vertex in named if vertex not in case.vertices)


def kind_right(case: Case, report: Report) -> bool:
    """bpmon's first cause is an expected bottleneck with its expected kind (and subtasks)."""
    causes = report.root_causes or ()
    if not causes:
        return False
    kinds = dict(case.expected)
    top = causes[0]
    if kinds.get(top.vertex) != top.kind:
        return False
    primary = case.expected[0][0]
    return top.vertex != primary or set(case.subtasks) <= set(top.subtasks)


def shows_pattern(case: Case, report: Report) -> bool:
    """Whether the run shows the intended pattern (independent of any diagnosis rule)."""
    vertices = {v.name: v for v in report.vertices}
    if not case.expected:
        return not any(above_ok(v) for v in report.vertices)
    for index, (name, kind) in enumerate(case.expected):
        vertex = vertices[name]
        if kind == "network":
            if (vertex.metrics.idle_ratio or 0.0) < IDLE_SHOWN:
                return False
        elif (vertex.metrics.busy_ratio or 0.0) < BUSY_SHOWN:
            return False
        if index == 0 and not any(above_ok(vertices[e.source]) for e in vertex.inputs):
            return False
    return True


@dataclass(frozen=True, slots=True)
class Score:
    """One method's figures over the corpus."""

    top1: int
    false_positives: int
    all_found: int
    kind: int | None = None  # bpmon only


def score(method: str, outcomes: Sequence[Outcome]) -> Score:
    """Count one method's hits over every outcome."""
    picks = [(o.case, o.named[method]) for o in outcomes]
    kind = None
    if method == "bpmon":
        kind = sum(1 for o in outcomes if o.case.expected and kind_right(o.case, o.report))
    return Score(
        top1=sum(1 for case, named in picks if top1(case, named)),
        false_positives=sum(false_positives(case, named) for case, named in picks),
        all_found=sum(1 for case, named in picks if found_all(case, named)),
        kind=kind,
    )


# -- running and printing -------------------------------------------------------------------------


def run_all(cases: Sequence[Case], jobs: int) -> list[Outcome]:
    """Run every case (``jobs`` at a time, each in its own process when more than one)."""
    paths = [case.path for case in cases]
    if jobs <= 1:
        results = []
        for case in cases:
            results.append(run_case(case.path))
            print(f"ran {case.name} ({results[-1][1]:.1f} s)", flush=True)
    else:
        context = multiprocessing.get_context("spawn")
        with ProcessPoolExecutor(max_workers=jobs, mp_context=context) as pool:
            results = list(pool.map(run_case, paths))
    return [
        Outcome(case, report, elapsed, answers(report))
        for case, (report, elapsed) in zip(cases, results, strict=True)
    ]


def _cell(case: Case, named: Sequence[str], label: str | None = None) -> str:
    mark = "ok" if top1(case, named) and not false_positives(case, named) else "X"
    text = label if label is not None else (named[0] if named else "-")
    if len(named) > 1:
        text += f" +{len(named) - 1}"
    return f"{text} {mark}"


def _bpmon_cell(outcome: Outcome) -> str:
    causes = outcome.report.root_causes or ()
    label = f"{causes[0].vertex}/{causes[0].kind}" if causes else "-"
    return _cell(outcome.case, outcome.named["bpmon"], label)


def _expected_cell(case: Case) -> str:
    if not case.expected:
        return "(healthy)"
    text = " + ".join(f"{vertex}/{kind}" for vertex, kind in case.expected)
    return text + (f" {list(case.subtasks)}" if case.subtasks else "")


def print_cases(outcomes: Sequence[Outcome]) -> None:
    """The per-scenario table."""
    header = ("scenario", "shows", "expected", "bpmon", *BASELINES)
    rows = [
        (
            o.case.name,
            "yes" if shows_pattern(o.case, o.report) else "NO",
            _expected_cell(o.case),
            _bpmon_cell(o),
            *(_cell(o.case, o.named[m]) for m in BASELINES),
        )
        for o in outcomes
    ]
    widths = [max(len(str(r[i])) for r in (header, *rows)) for i in range(len(header))]
    for row in (header, *rows):
        print("  ".join(f"{cell:<{w}}" for cell, w in zip(row, widths, strict=True)).rstrip())


def print_summary(scores: Mapping[str, Score], total: int, faulty: int) -> None:
    """The summary table."""
    print(f"\n{'method':<10}{'top-1':>12}{'kind':>12}{'false pos.':>12}{'all found':>12}")
    for method, s in scores.items():
        kind = "-" if s.kind is None else f"{s.kind}/{faulty}"
        print(
            f"{method:<10}{f'{s.top1}/{total}':>12}{kind:>12}{s.false_positives:>12}"
            f"{f'{s.all_found}/{total}':>12}"
        )


def figures(
    outcomes: Sequence[Outcome], scores: Mapping[str, Score], elapsed: float
) -> dict[str, object]:
    """The JSON object of the figures."""
    total = len(outcomes)
    faulty = sum(1 for o in outcomes if o.case.expected)
    out: dict[str, object] = {
        "scenarios": total,
        "with_bottleneck": faulty,
        "truthful": sum(1 for o in outcomes if shows_pattern(o.case, o.report)),
    }
    for method, s in scores.items():
        key = method.replace("-", "_")
        out[f"{key}_top1"] = round(s.top1 / total, 3)
        out[f"{key}_false_positives"] = s.false_positives
        out[f"{key}_all_found"] = round(s.all_found / total, 3)
        if s.kind is not None:
            out[f"{key}_kind"] = round(s.kind / faulty, 3) if faulty else None
    jitters = [o.report.window.jitter_ms_p99 for o in outcomes]
    known = [j for j in jitters if j is not None]
    out["jitter_p99_ms_median"] = round(statistics.median(known), 3) if known else None
    out["jitter_p99_ms_max"] = round(max(known), 3) if known else None
    out["elapsed_s"] = round(elapsed, 1)
    return out


def main() -> None:
    """Run the corpus, print both tables, then a JSON line."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--only", help="run only the corpus scenario with this file stem")
    parser.add_argument("--jobs", type=int, default=1, help="scenarios at once (default 1)")
    args = parser.parse_args()
    started = time.perf_counter()
    outcomes = run_all(load_cases(args.only), args.jobs)
    scores = {method: score(method, outcomes) for method in METHODS}
    print_cases(outcomes)
    faulty = sum(1 for o in outcomes if o.case.expected)
    print_summary(scores, len(outcomes), faulty)
    print(json.dumps(figures(outcomes, scores, time.perf_counter() - started)))


if __name__ == "__main__":
    main()
