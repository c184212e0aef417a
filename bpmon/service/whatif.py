"""What if: a scenario with some operator settings changed, and whether a change removes the
backpressure.

``bpmon whatif SCENARIO --set enrich.parallelism=7`` runs the scenario as written and as
changed, and shows both diagnoses side by side; ``bpmon run SCENARIO --verify`` applies bpmon's
own recommendation (the top root cause's ``recommended_parallelism``, and that of the vertices
in series after it that would limit next) and re-runs. The changes themselves are made to the
scenario's file by :mod:`bpmon.scenario.edits` (offered here to the surfaces); this module says
which changes bpmon recommends and whether a change removed the backpressure.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

from bpmon.model.values import Report, RootCause
from bpmon.rules.settling import BUSY, saturated
from bpmon.scenario.chaining import operator_names
from bpmon.scenario.edits import (
    SETTABLE,
    SettingChange,
    changed,
    parse_change,
    rerouted,
    tried_on,
)

__all__ = [
    "POLICIES",
    "SETTABLE",
    "SettingChange",
    "Verdict",
    "changed",
    "follow_changes",
    "merged",
    "nothing_to_follow",
    "parse_change",
    "recommended_changes",
    "rerouted",
    "runtime_saturated",
    "tried_on",
    "verdict",
]


@dataclass(frozen=True, slots=True)
class Verdict:
    """Whether a change removed the backpressure a report found.

    Attributes:
        removed: no vertex is HIGH after the change and the old bottleneck is no root cause.
        summary: one line saying so, with the figures.
        at_edge: changed vertices still at least :data:`~bpmon.rules.settling.BUSY` busy although
        the backpressure is gone: they take what they are offered with nothing to spare, so the next
        rise in load brings the backpressure back.
    """

    removed: bool
    summary: str
    at_edge: tuple[str, ...] = ()


UNSEEN_KINDS = ("resource-starved", "source-limited")
"""Causes that hold a job back without backpressure: gone only when no cause of the kind is left."""


def verdict(before: Report, after: Report, changes: Sequence[SettingChange]) -> Verdict:
    """Compare a report before and after ``changes`` (the same job, re-run)."""
    old = before.root_causes[0] if before.root_causes else None
    high = [v.name for v in after.vertices if v.level == "HIGH"]
    blamed = {c.vertex for c in after.root_causes or ()}
    what = ", ".join(str(c) for c in changes)
    if runtime_saturated(after):
        return Verdict(
            False,
            f"not judged: with {what}, the re-run's runtime was saturated (its figures describe "
            "the machine, not the job): run it again when the machine is quieter",
        )
    if old is not None and old.vertex in blamed:
        return Verdict(False, f"not removed: with {what}, {old.vertex} is still a root cause")
    unseen = [c for c in after.root_causes or () if c.kind in UNSEEN_KINDS]
    if unseen:  # no backpressure shows these: the job is still short of slots, or of a source
        return Verdict(
            False, f"not removed: with {what}, {unseen[0].kind} at {unseen[0].vertex} remains"
        )
    if high:
        now = _top(after.root_causes)
        return Verdict(False, f"not removed: with {what}, {', '.join(high)} still HIGH{now}")
    if queued := saturated(after.vertices):
        # nothing HIGH yet, but a queue grows: with Flink's flushing and a small excess,
        # backpressure takes longer to reach the producers than the re-run waited
        return Verdict(
            False,
            f"not removed: with {what}, {', '.join(queued)} cannot keep up (busy at least "
            f"{BUSY:.0%} with its input buffers full): backpressure is still building",
        )
    worst = max((v.ratio or 0.0 for v in after.vertices), default=0.0)
    edge = _at_edge(after, changes)
    if not edge:
        return Verdict(True, f"removed: with {what}, no vertex is HIGH (worst ratio {worst:.2f})")
    busiest = ", ".join(f"{name} {busy:.0%}" for name, busy in edge)
    asked = _recommended(before, [name for name, _ in edge])
    return Verdict(
        True,
        f"removed, at the edge: with {what}, no vertex is HIGH (worst ratio {worst:.2f}), but "
        f"the changed {_plural(len(edge), 'vertex is', 'vertices are')} still busy ({busiest}): "
        f"nothing to spare, so the next rise in load brings the backpressure back{asked}",
        tuple(name for name, _ in edge),
    )


def _at_edge(after: Report, changes: Sequence[SettingChange]) -> list[tuple[str, float]]:
    """The changed vertices (a chain by any member's name) whose busiest subtask is at least
    :data:`~bpmon.rules.settling.BUSY` busy after the change, with that busy share."""
    names = {c.vertex for c in changes}
    out = []
    for vertex in after.vertices:
        if vertex.name not in names and not names & set(operator_names(vertex.name)):
            continue
        shares = [s.metrics.busy_ratio for s in vertex.subtasks] or [vertex.metrics.busy_ratio]
        busy = max((b for b in shares if b is not None), default=None)
        if busy is not None and busy >= BUSY:
            out.append((vertex.name, busy))
    return out


def _recommended(before: Report, names: Sequence[str]) -> str:
    """`` (the first report recommended enrich 7)`` for the edge vertices it sized."""
    sized = [
        f"{c.vertex} {c.recommended_parallelism}"
        for c in before.root_causes or ()
        if c.vertex in names and c.recommended_parallelism is not None
    ]
    return f" (the first report recommended {', '.join(sized)})" if sized else ""


def _plural(n: int, one: str, many: str) -> str:
    return one if n == 1 else many


def _top(causes: Sequence[RootCause] | None) -> str:
    if not causes:
        return ""
    return f"; root cause now {causes[0].kind} at {causes[0].vertex}"


def recommended_changes(report: Report) -> list[SettingChange]:
    """The changes bpmon recommends, if it sized the top root cause: the top cause's
    parallelism, then every other root cause's (a second bottleneck in series, or in another
    part of the job: the backpressure is gone only once each keeps up), each followed by that of
    the vertices in series after it that would limit next; one change per vertex, the first."""
    causes = report.root_causes or ()
    if not causes or causes[0].recommended_parallelism is None:
        return []
    changes: dict[str, SettingChange] = {}
    for cause in causes:
        sized = [(cause.vertex, cause.recommended_parallelism)]
        sized += [(n.vertex, n.recommended_parallelism) for n in cause.next_in_series]
        for vertex, parallelism in sized:
            if parallelism is not None and vertex not in changes:
                changes[vertex] = SettingChange(vertex, "parallelism", parallelism)
    return list(changes.values())


Policy = Literal["bpmon", "autoscaler"]
POLICIES: tuple[Policy, ...] = ("bpmon", "autoscaler")
"""Whose recommendation ``--follow`` applies: bpmon's sized causes, or what Flink's autoscaler
would decide from the same window (the report's ``autoscaler``)."""


def autoscaler_changes(report: Report) -> list[SettingChange]:
    """The autoscaler's decision on the report's window as changes: every vertex it would give
    another parallelism (a scale-down included: it applies after its interval); none when it
    would not scale at all."""
    decision = report.autoscaler
    if decision is None or not decision.acts:
        return []
    return [
        SettingChange(v.name, "parallelism", v.recommended_parallelism)
        for v in decision.vertices
        if v.recommended_parallelism != v.parallelism
    ]


def follow_changes(report: Report, policy: Policy) -> list[SettingChange]:
    """What ``policy`` would change after ``report``."""
    return recommended_changes(report) if policy == "bpmon" else autoscaler_changes(report)


def runtime_saturated(report: Report) -> bool:
    """Whether the report's window describes the runtime, not the job (``runtime-saturated``):
    no step can be judged on it, or followed from it."""
    return any(f.kind == "runtime-saturated" for f in report.findings)


def nothing_to_follow(report: Report, policy: Policy) -> str:
    """Why ``policy`` has nothing to apply after ``report``: its own answer, or, with no cause
    named and a queue still growing, that the re-run was sampled while its backpressure was
    still building."""
    queued = saturated(report.vertices) if not report.root_causes else []
    if queued:
        return (
            f"{policy} has no cause to follow: the last re-run was sampled while its backpressure "
            f"was still building ({', '.join(queued)} cannot keep up); give it a longer "
            "[monitor] settle_s"
        )
    return f"{policy} would change nothing more"


def merged(earlier: Sequence[SettingChange], later: Sequence[SettingChange]) -> list[SettingChange]:
    """``earlier`` changes with ``later`` ones over them, one per vertex and key: the changes
    of successive steps, applied to the scenario as written."""
    by_key = {(c.vertex, c.key): c for c in earlier}
    by_key |= {(c.vertex, c.key): c for c in later}
    return list(by_key.values())
