"""Scoring a diagnosis against the corpus: bpmon's root causes and three rules of thumb.

Everything here reads a finished :class:`~bpmon.model.values.Report` and a corpus case, nothing
else: the baselines see the same report bpmon's rules produced, so the comparison is on equal
evidence.

Methods:

- ``bpmon``: the report's root causes, most likely first, with their confidence;
- ``most-bp``: the most backpressured vertex (the red vertex of a dashboard);
- ``seed``: the first vertex that is not HIGH right downstream of a HIGH one (Flink's old rule,
  topological order);
- ``busiest``: the busiest vertex downstream of a backpressured one (Flink's docs' advice).

A baseline names nothing when no vertex is above OK, and knows no kind, subtasks or stalls.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass

from diagnosis_corpus import Case

from bpmon.model.values import Report, RootCause, VertexStatus

BASELINES = ("most-bp", "seed", "busiest")
METHODS = ("bpmon", *BASELINES)
CONFIDENT = 0.5
"""A wrong vertex named with at least this confidence is a confident false positive (a figure of
bpmon's alone; every wrong vertex named is a false positive, for every method alike)."""
BUSY_SHOWN = 0.85
NETWORK_HEADROOM = 0.85
BUCKETS = ((0.0, 0.5), (0.5, 0.7), (0.7, 0.9), (0.9, 1.01))


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


# -- one case -------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Verdict:
    """How one method did on one case. ``None``: the figure does not apply to this case or method.

    Attributes:
        named: the vertices it named, most likely first.
        top1: the first named vertex is an expected bottleneck (healthy: nothing is named).
        false_positive: a healthy job got a cause, or a wrong vertex was named, whatever its
            confidence: scored the same for bpmon and the baselines.
        confident_false_positive: bpmon only: as ``false_positive``, counting only causes of
            confidence at least :data:`CONFIDENT` (a baseline's answer carries none).
        all_found: every expected bottleneck is named (healthy: nothing is).
        kind: the first cause has the kind expected at its vertex.
        subtasks: the cause at the primary vertex names exactly the expected subtasks.
        stall: a stall is reported (cases expected to stall).
        false_stall: a stall is reported on a job that moves.
    """

    named: tuple[str, ...]
    top1: bool
    false_positive: bool
    all_found: bool
    kind: bool | None = None
    subtasks: bool | None = None
    stall: bool | None = None
    false_stall: bool | None = None
    confident_false_positive: bool | None = None


def reports_stall(report: Report) -> bool:
    """A root cause of kind ``stalled`` (no finding has that kind)."""
    return any(c.kind == "stalled" for c in report.root_causes or ())


def judge_bpmon(case: Case, report: Report) -> Verdict:
    """bpmon's verdict on one case."""
    causes: tuple[RootCause, ...] = report.root_causes or ()
    named = tuple(c.vertex for c in causes)
    if case.healthy:
        wrong = confident = bool(causes)
    else:
        wrong = any(c.vertex not in case.vertices for c in causes)
        confident = any(c.vertex not in case.vertices and c.confidence >= CONFIDENT for c in causes)
    kind: bool | None = None
    subtasks: bool | None = None
    if not case.healthy:
        kind = bool(causes) and case.kind_of(causes[0].vertex) == causes[0].kind
    if case.subtasks:
        primary = case.expected[0][0]
        # exactly the expected subtasks: a cause naming every subtask does not score
        subtasks = any(
            c.vertex == primary and sorted(c.subtasks) == sorted(case.subtasks) for c in causes
        )
    stalled = reports_stall(report)
    return Verdict(
        named=named,
        top1=top1(case, named),
        false_positive=wrong,
        all_found=found_all(case, named),
        kind=kind,
        subtasks=subtasks,
        stall=stalled if case.stalled else None,
        false_stall=None if case.stalled else stalled,
        confident_false_positive=confident,
    )


def judge_baseline(case: Case, named: tuple[str, ...]) -> Verdict:
    """A baseline's verdict on one case: what it names is all it says."""
    return Verdict(
        named=named,
        top1=top1(case, named),
        false_positive=any(vertex not in case.vertices for vertex in named),
        all_found=found_all(case, named),
    )


def judge(case: Case, report: Report) -> dict[str, Verdict]:
    """Every method's verdict on one case, from the same report."""
    out = {"bpmon": judge_bpmon(case, report)}
    out.update({m: judge_baseline(case, rule(report)) for m, rule in BASELINE_RULES.items()})
    return out


def top1(case: Case, named: Sequence[str]) -> bool:
    """The first named vertex is an expected bottleneck (healthy: nothing named)."""
    if case.healthy:
        return not named
    return bool(named) and named[0] in case.vertices


def found_all(case: Case, named: Sequence[str]) -> bool:
    """Every expected bottleneck is named (healthy: nothing is)."""
    return case.vertices <= set(named) if case.expected else not named


def shows_pattern(case: Case, report: Report) -> bool:
    """Whether the run shows the intended physics, read from measurements only (no rule).

    Healthy: nothing above OK. Stalled: no vertex moves a record. Short of slots: no subtask of
    the primary runs (each waits to be deployed). Source-limited: the source is busy at least 85%,
    nothing is above OK, and its pendingRecords grow. Network: the consumer is not backpressured
    and has headroom (busy below 85%). Otherwise every expected bottleneck is busy at least 85%
    (its busiest subtask). The primary one has a producer above OK, except healthy.
    """
    vertices = {v.name: v for v in report.vertices}
    if case.healthy:
        return not any(above_ok(v) for v in report.vertices)
    if case.stalled:
        return all((v.metrics.records_out_per_s or 0.0) < 1.0 for v in report.vertices)
    primary_name, primary_kind = case.expected[0]
    primary_vertex = vertices[primary_name]
    if primary_kind == "resource-starved":
        states = [s.metrics.scheduling for s in primary_vertex.subtasks]
        return all(s is not None and s.waiting for s in states)
    if primary_kind == "source-limited":
        backlogs = [s.metrics.backlog for s in primary_vertex.subtasks]
        return (
            (primary_vertex.metrics.busy_ratio or 0.0) >= BUSY_SHOWN
            and not any(above_ok(v) for v in report.vertices)
            and sum((b.growth_per_s or 0.0) if b else 0.0 for b in backlogs) > 0.0
        )
    for name, kind in case.expected:
        vertex = vertices[name]
        busy = vertex.metrics.busy_ratio or 0.0
        if kind == "network" and (above_ok(vertex) or busy >= NETWORK_HEADROOM):
            return False
        if kind != "network" and busy < BUSY_SHOWN:
            return False
    primary = vertices[case.expected[0][0]]
    return any(above_ok(vertices[e.source]) for e in primary.inputs if e.source in vertices)


# -- totals ---------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Tally:
    """A figure counted over the cases it applies to: ``hits`` of ``of``."""

    hits: int = 0
    of: int = 0

    def add(self, value: bool | None) -> Tally:
        """This tally with one more case (``None``: the case does not count)."""
        if value is None:
            return self
        return Tally(self.hits + int(value), self.of + 1)

    @property
    def share(self) -> float | None:
        """hits / of, None when nothing counted."""
        return round(self.hits / self.of, 3) if self.of else None

    def __str__(self) -> str:
        return f"{self.hits}/{self.of}" if self.of else "-"


FIGURES = (
    "top1",
    "kind",
    "subtasks",
    "false_positive",
    "confident_false_positive",
    "all_found",
    "stall",
    "false_stall",
)


def tally(verdicts: Iterable[Verdict]) -> dict[str, Tally]:
    """Every figure of :class:`Verdict` counted over ``verdicts``."""
    out = {figure: Tally() for figure in FIGURES}
    for verdict in verdicts:
        for figure in FIGURES:
            out[figure] = out[figure].add(getattr(verdict, figure))
    return out


@dataclass(frozen=True, slots=True)
class Bucket:
    """Root causes whose confidence falls in ``[low, high)``: how many, how many right."""

    low: float
    high: float
    vertex: Tally
    vertex_and_kind: Tally


def calibration(pairs: Iterable[tuple[Case, Report]]) -> list[Bucket]:
    """Every root cause bucketed by confidence, each judged right when its vertex is an expected
    bottleneck (``vertex``) and, stricter, has the kind expected there (``vertex_and_kind``)."""
    causes = [(case, c) for case, report in pairs for c in report.root_causes or ()]
    buckets = []
    for low, high in BUCKETS:
        vertex, both = Tally(), Tally()
        for case, cause in causes:
            if low <= cause.confidence < high:
                expected = case.kind_of(cause.vertex)
                vertex = vertex.add(expected is not None)
                both = both.add(expected == cause.kind)
        buckets.append(Bucket(low, min(high, 1.0), vertex, both))
    return buckets
