"""The autoscaler's second opinion beside bpmon's recommendation: what Flink's Kubernetes
autoscaler would do to each root cause's vertex, and its other disagreements
(``docs/autoscaler.md``, a report's ``autoscaler`` in ``docs/report.md``).

Everything shown comes from the report's structured fields, never from parsing its sentences:
the move (``4 → 13``, ``leave it at 4``, a scale-down after its interval) from the vertex's
``parallelism``, ``recommended_parallelism`` and ``delayed``, the verdict from ``verdict``, and
the verdict's ``detail`` shown whole. A report without an ``autoscaler`` (``None``: py-spy, a
saturated window, reports written before it existed) gets nothing: no box, no heading.

- Each root cause gets the verdict at its vertex (:func:`cause_opinions`): the report writes one
  per cause with a vertex row, in the causes' order, so the causes at one vertex take its
  verdicts in turn.
- The verdicts no cause takes (``scales-wrong-vertex``, ``over-provisions`` at a vertex that is no
  cause) are :attr:`AutoscalerView.others`. They, and where a panel shows only the top cause in
  full (the Job and Compare pages) the other causes' verdicts, are a short list of the
  disagreements (:meth:`bpmon.web.markup.CausePanel.autoscaler_beyond`).
- With no verdict at all (a job nothing limits), one line says whether it would scale, as
  ``bpmon diagnose`` does (:func:`bpmon.render.autoscaler.opinion_lines`).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from bpmon.model.autoscaler import (
    AutoscalerReport,
    AutoscalerVerdict,
    AutoscalerVertex,
    VerdictKind,
)
from bpmon.model.values import Report, RootCause

ARROW = "→"
AGREES: VerdictKind = "agrees"
QUIET = "Flink's autoscaler would not scale: every vertex's processing rate is within its bounds."
"""What the panel says when the autoscaler has no verdict and would change nothing."""


@dataclass(frozen=True, slots=True)
class Opinion:
    """One verdict of the autoscaler as the dashboard shows it, with its vertex's figures
    (``parallelism`` None: the vertex has no row in the autoscaler's table)."""

    vertex: str
    verdict: VerdictKind
    detail: str
    parallelism: int | None
    recommended: int | None
    delayed: bool

    @property
    def agrees(self) -> bool:
        """The autoscaler agrees with bpmon at this vertex."""
        return self.verdict == AGREES

    @property
    def move(self) -> str:
        """``4 → 13``, ``4 → 2 after its scale-down interval``, ``leave it at 4``; empty when
        the vertex has no row."""
        if self.parallelism is None or self.recommended is None:
            return ""
        return _move(self.parallelism, self.recommended, self.delayed)


@dataclass(frozen=True, slots=True)
class AutoscalerView:
    """The parts of the opinion that belong to no root cause: the verdicts no cause takes, in
    the report's order, and every vertex it would change (``payments 2 → 1 after its
    scale-down interval``) with ``acts``, for a report without verdicts."""

    others: tuple[Opinion, ...]
    changes: tuple[str, ...]
    acts: bool

    @property
    def quiet(self) -> str:
        """The line for a report whose autoscaler has no verdict at all."""
        if self.acts and self.changes:
            return "Flink's autoscaler would scale " + ", ".join(self.changes) + "."
        return QUIET


def _move(parallelism: int, recommended: int, delayed: bool) -> str:
    if recommended == parallelism:
        return f"leave it at {parallelism}"
    later = " after its scale-down interval" if delayed and recommended < parallelism else ""
    return f"{parallelism} {ARROW} {recommended}{later}"


def _opinion(verdict: AutoscalerVerdict, rows: dict[str, AutoscalerVertex]) -> Opinion:
    row = rows.get(verdict.vertex)
    return Opinion(
        vertex=verdict.vertex,
        verdict=verdict.verdict,
        detail=verdict.detail,
        parallelism=None if row is None else row.parallelism,
        recommended=None if row is None else row.recommended_parallelism,
        delayed=False if row is None else row.delayed,
    )


def cause_opinions(
    autoscaler: AutoscalerReport, causes: Sequence[RootCause]
) -> tuple[tuple[Opinion | None, ...], AutoscalerView]:
    """The verdict at each cause's vertex (None: the autoscaler gave none there), in the causes'
    order, and the rest of the opinion."""
    rows = {row.name: row for row in autoscaler.vertices}
    left = list(autoscaler.verdicts)
    taken: list[Opinion | None] = []
    for cause in causes:
        mine = next((v for v in left if v.vertex == cause.vertex), None)
        if mine is not None:
            left.remove(mine)
        taken.append(None if mine is None else _opinion(mine, rows))
    changes = tuple(
        f"{row.name} {_move(row.parallelism, row.recommended_parallelism, row.delayed)}"
        for row in autoscaler.vertices
        if row.recommended_parallelism != row.parallelism
    )
    others = tuple(_opinion(v, rows) for v in left)
    return tuple(taken), AutoscalerView(others, changes, autoscaler.acts)


def _short(opinion: Opinion) -> dict[str, Any]:
    return {
        "vertex": opinion.vertex,
        "verdict": opinion.verdict,
        "parallelism": opinion.parallelism,
        "recommended_parallelism": opinion.recommended,
        "detail": opinion.detail,
    }


def autoscaler_summary(report: Report | None) -> dict[str, Any] | None:
    """A job's autoscaler opinion in short, for the JSON API's job summary: ``acts``, the
    verdict at the top root cause's vertex (``root_cause``, None without one) and every verdict
    that is not agreement (``disagreements``, the report's order), each ``{vertex, verdict,
    parallelism, recommended_parallelism, detail}``; None when the report has no opinion."""
    if report is None or report.autoscaler is None:
        return None
    autoscaler = report.autoscaler
    taken, _ = cause_opinions(autoscaler, report.root_causes or ())
    top = taken[0] if taken else None
    rows = {row.name: row for row in autoscaler.vertices}
    return {
        "acts": autoscaler.acts,
        "root_cause": None if top is None else _short(top),
        "disagreements": [
            _short(_opinion(v, rows)) for v in autoscaler.verdicts if v.verdict != AGREES
        ],
    }
