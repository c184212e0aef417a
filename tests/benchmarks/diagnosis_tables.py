"""The diagnosis benchmark's results: per case, per part of the split, per category, as tables and
as one JSON object.

``bench_diagnosis.py`` runs the corpus and fills an :class:`Outcome` per case and a
:class:`Recommendation` per verified recommendation; this module only totals and prints them.
Every total is given for the tuning part, the held-out part and both together ("all").
"""

from __future__ import annotations

import statistics
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace

from diagnosis_corpus import CATEGORIES, SPLITS, Case
from diagnosis_scoring import (
    FIGURES,
    METHODS,
    Tally,
    Verdict,
    calibration,
    tally,
)

from bpmon.model.values import Report

PARTS = (*SPLITS, "all")
LABELS = {
    "top1": "top-1",
    "kind": "kind",
    "subtasks": "subtasks",
    "false_positive": "false pos.",
    "confident_false_positive": "conf. FP",
    "all_found": "all found",
    "stall": "stalls",
    "false_stall": "false stalls",
}


@dataclass(frozen=True, slots=True)
class Outcome:
    """One case's run and every method's verdict on it (empty when the run gave no report)."""

    case: Case
    report: Report | None
    verdict_s: float | None
    error: str | None
    verdicts: Mapping[str, Verdict]
    shows: bool


@dataclass(frozen=True, slots=True)
class Recommendation:
    """bpmon's recommended parallelism for one case, and whether re-runs removed the backpressure.

    ``results`` holds, in order, whether the backpressure was gone at N, N-1 and N-2 (None: that
    run gave no report); it stops after the first one that did not remove it.
    """

    case: Case
    vertex: str
    current: int
    recommended: int
    also: tuple[tuple[str, int], ...] = ()
    """The vertices in series after it raised with it (``next_in_series``), at their advice."""
    results: tuple[bool | None, ...] = ()

    def next_step(self) -> int | None:
        """How many subtasks below N the next re-run is (None: nothing left to run)."""
        if not self.results:
            return 0
        if len(self.results) >= 3 or self.results[-1] is not True:
            return None
        return len(self.results)

    def record(self, gone: bool | None) -> Recommendation:
        """This recommendation with the result of its next step."""
        return replace(self, results=(*self.results, gone))

    @property
    def removed(self) -> bool:
        """N removed the backpressure."""
        return bool(self.results) and self.results[0] is True

    @property
    def one_fewer_removes(self) -> bool:
        """N-1 would have removed it too (N is not the smallest)."""
        return len(self.results) > 1 and self.results[1] is True

    @property
    def smallest(self) -> bool:
        """N removed it and N-1 did not."""
        return self.removed and len(self.results) > 1 and self.results[1] is False

    @property
    def within_one(self) -> bool:
        """N removed it and N-2 did not: N is at most one above the smallest."""
        return self.smallest or (len(self.results) > 2 and self.results[2] is False)


def in_part(case: Case, part: str) -> bool:
    """Whether ``case`` belongs to ``part`` (a split, or "all")."""
    return part in ("all", case.split)


def totals(outcomes: Sequence[Outcome], method: str) -> dict[str, Tally]:
    """One method's figures over ``outcomes`` (a case without a report counts as missed)."""
    missed = Verdict((), top1=False, false_positive=False, all_found=False)
    return tally(o.verdicts.get(method, missed) for o in outcomes)


def rec_totals(recs: Sequence[Recommendation]) -> dict[str, Tally]:
    """Shares of the verified recommendations."""
    out = {k: Tally() for k in ("removed", "smallest", "within_one", "one_fewer_removes")}
    for rec in recs:
        out["removed"] = out["removed"].add(rec.removed)
        out["one_fewer_removes"] = out["one_fewer_removes"].add(rec.one_fewer_removes)
        out["smallest"] = out["smallest"].add(rec.smallest)
        out["within_one"] = out["within_one"].add(rec.within_one)
    return out


def _table(header: Sequence[str], rows: Sequence[Sequence[str]]) -> None:
    widths = [max(len(str(r[i])) for r in (header, *rows)) for i in range(len(header))]
    for row in (header, *rows):
        print("  ".join(f"{cell:<{w}}" for cell, w in zip(row, widths, strict=True)).rstrip())


def _case_row(o: Outcome) -> list[str]:
    case = o.case
    expected = " + ".join(f"{v}/{k}" for v, k in case.expected) or "(healthy)"
    if case.subtasks:
        expected += f" {list(case.subtasks)}"
    cells = []
    for method in METHODS:
        verdict = o.verdicts.get(method)
        if verdict is None:
            cells.append("ERROR")
            continue
        text = verdict.named[0] if verdict.named else "-"
        if method == "bpmon" and o.report is not None and o.report.root_causes:
            top = o.report.root_causes[0]
            text = f"{top.vertex}/{top.kind} {top.confidence:.2f}"
        if len(verdict.named) > 1:
            text += f" +{len(verdict.named) - 1}"
        cells.append(f"{text} {'ok' if verdict.top1 and not verdict.false_positive else 'X'}")
    took = "-" if o.verdict_s is None else f"{o.verdict_s:.1f}"
    return [
        case.name,
        case.category,
        case.split,
        "yes" if o.shows else "NO",
        expected,
        *cells,
        took,
    ]


def print_report(outcomes: Sequence[Outcome], recs: Sequence[Recommendation]) -> None:
    """Every table: cases, parts, categories, recommendations, calibration, time to a verdict."""
    print()
    _table(
        ("scenario", "category", "split", "shows", "expected", *METHODS, "s"),
        [_case_row(o) for o in outcomes],
    )
    for o in outcomes:
        if o.error:
            print(f"ERROR {o.case.name}: {o.error}")
    for part in PARTS:
        chosen = [o for o in outcomes if in_part(o.case, part)]
        if not chosen:
            continue
        what = {"tuning": "thresholds may be tuned on these", "held-out": "score here"}
        print(f"\n== {part}: {len(chosen)} cases{' (' + what[part] + ')' if part in what else ''}")
        _table(
            ("method", *LABELS.values()),
            [[m, *(str(totals(chosen, m)[f]) for f in FIGURES)] for m in METHODS],
        )
    for part in SPLITS:
        print(f"\n== per category, {part} (top-1, then false positives and all found)")
        rows = []
        for category in CATEGORIES:
            chosen = [o for o in outcomes if o.case.category == category and in_part(o.case, part)]
            if chosen:
                cells = []
                for method in METHODS:
                    t = totals(chosen, method)
                    cells.append(f"{t['top1']} {t['false_positive'].hits} {t['all_found'].hits}")
                rows.append([category, str(len(chosen)), *cells])
        _table(("category", "n", *METHODS), rows)
    print_recommendations(recs)
    print_calibration(outcomes)
    print("\n== time to a verdict (s)")
    for part in PARTS:
        times = [o.verdict_s for o in outcomes if in_part(o.case, part) and o.verdict_s]
        if times:
            print(f"{part:<9} median {statistics.median(times):.1f}  max {max(times):.1f}")


def print_recommendations(recs: Sequence[Recommendation]) -> None:
    """Each verified recommendation, then the shares per part."""
    print("\n== recommendations (bpmon's top cause), verified by re-running")
    marks = {True: "gone", False: "stays", None: "?"}
    rows = [
        [
            r.case.name,
            r.case.split,
            r.vertex,
            f"{r.current} -> {r.recommended}",
            *(marks[r.results[i]] if i < len(r.results) else "" for i in range(3)),
        ]
        for r in recs
    ]
    _table(("scenario", "split", "vertex", "parallelism", "at N", "at N-1", "at N-2"), rows)
    for part in PARTS:
        t = rec_totals([r for r in recs if in_part(r.case, part)])
        print(
            f"{part:<9} removed {t['removed']}  smallest {t['smallest']}  within one "
            f"{t['within_one']}  N-1 also removes {t['one_fewer_removes']}"
        )


def print_calibration(outcomes: Sequence[Outcome]) -> None:
    """Root causes by confidence, with the share right, for all cases and the held-out part."""
    print("\n== calibration: every root cause by confidence (right vertex / right vertex and kind)")
    header = ["confidence"]
    columns = []
    for part in ("all", "held-out"):
        pairs = [(o.case, o.report) for o in outcomes if o.report and in_part(o.case, part)]
        columns.append(calibration(pairs))
        header += [f"{part} n", "vertex", "and kind"]
    rows = []
    for index, bucket in enumerate(columns[0]):
        row = [f"{bucket.low:.1f}-{bucket.high:.1f}"]
        for buckets in columns:
            b = buckets[index]
            row += [str(b.vertex.of), _pct(b.vertex.share), _pct(b.vertex_and_kind.share)]
        rows.append(row)
    _table(header, rows)


def _pct(share: float | None) -> str:
    return "-" if share is None else f"{share:.0%}"


def _tally_json(t: Tally) -> list[int]:
    return [t.hits, t.of]


def figures(
    outcomes: Sequence[Outcome],
    recs: Sequence[Recommendation],
    elapsed: float,
    *,
    verified: bool,
) -> dict[str, object]:
    """The JSON object of every figure; a count is ``[hits, of]`` (of the cases it applies to)."""
    out: dict[str, object] = {
        "scenarios": len(outcomes),
        "parts": {p: sum(1 for o in outcomes if o.case.split == p) for p in SPLITS},
        "truthful": sum(1 for o in outcomes if o.shows),
        "errors": {o.case.name: o.error for o in outcomes if o.error},
    }
    summary, categories, recommendations, calib, times = {}, {}, {}, {}, {}
    for part in PARTS:
        chosen = [o for o in outcomes if in_part(o.case, part)]
        summary[part] = {
            m: {f: _tally_json(t) for f, t in totals(chosen, m).items()} for m in METHODS
        }
        categories[part] = {
            category: {
                m: {
                    f: _tally_json(totals(group, m)[f])
                    for f in ("top1", "false_positive", "all_found")
                }
                for m in METHODS
            }
            for category in CATEGORIES
            if (group := [o for o in chosen if o.case.category == category])
        }
        part_recs = [r for r in recs if in_part(r.case, part)]
        recommendations[part] = (
            {k: _tally_json(t) for k, t in rec_totals(part_recs).items()} if verified else None
        )
        pairs = [(o.case, o.report) for o in chosen if o.report is not None]
        calib[part] = [
            {
                "confidence": [b.low, b.high],
                "causes": b.vertex.of,
                "right_vertex": b.vertex.share,
                "right_kind": b.vertex_and_kind.share,
            }
            for b in calibration(pairs)
        ]
        verdicts = [o.verdict_s for o in chosen if o.verdict_s is not None]
        times[part] = {
            "median": round(statistics.median(verdicts), 2) if verdicts else None,
            "max": round(max(verdicts), 2) if verdicts else None,
        }
    out |= {
        "summary": summary,
        "categories": categories,
        "recommendations": recommendations,
        "recommendation_runs": [
            {
                "case": r.case.name,
                "vertex": r.vertex,
                "current": r.current,
                "recommended": r.recommended,
                "results": list(r.results),
            }
            for r in recs
        ],
        "calibration": calib,
        "time_to_verdict_s": times,
        "cases": {
            o.case.name: {
                "split": o.case.split,
                "category": o.case.category,
                "shows": o.shows,
                "top1": {m: v.top1 for m, v in o.verdicts.items()},
                "bpmon": list(o.verdicts["bpmon"].named) if "bpmon" in o.verdicts else None,
            }
            for o in outcomes
        },
        "elapsed_s": round(elapsed, 1),
    }
    return out
