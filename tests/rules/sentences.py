"""The recommendation and the findings, checked against the report's own fields.

These stay strings in the model (``spec/report.md``), so their figures are read back from the
words: one regex per shape of recommendation that sizes a vertex, and one per finding that quotes
a level or an idle share. The evidence lines carry their figures (:mod:`.figures`).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

from bpmon.model.numbers import ratio as format_ratio
from bpmon.model.values import Report, RootCause, VertexStatus

ABOVE_OK = ("LOW", "HIGH")


def table_percent(value: float | None) -> str | None:
    """The whole percentage the table's two-decimal cell shows (``0.95`` -> ``95``)."""
    cell = format_ratio(value)
    return None if value is None else str(round(float(cell) * 100))


def shares(vertex: VertexStatus, index: int) -> tuple[float, float]:
    """The share of ``vertex``'s records in that subtask ``index`` receives, and the part of it
    no parallelism spreads (solved from ``share = fixed + (1 - fixed) / n``)."""
    total = sum(s.metrics.records_in_per_s or 0.0 for s in vertex.subtasks)
    mine = sum(s.metrics.records_in_per_s or 0.0 for s in vertex.subtasks if s.index == index)
    share = mine / total if total > 0 else 0.0
    n = vertex.parallelism
    return share, max(0.0, (share - 1 / n) / (1 - 1 / n))


@dataclass
class Check:
    """The report being checked, and the problems found so far."""

    report: Report
    problems: list[str]

    def vertex(self, name: str) -> VertexStatus:
        return next(v for v in self.report.vertices if v.name == name)

    def expect(self, ok: bool, line: str, what: str) -> None:
        if not ok:
            self.problems.append(f"{what}: {line!r}")

    def percent(self, quoted: str, value: float | None, line: str, what: str) -> None:
        self.expect(quoted == table_percent(value), line, f"{what} is {format_ratio(value)}")

    def level(self, name: str, level: str, ratio: str, line: str) -> None:
        v = self.vertex(name)
        shown = (v.level, format_ratio(v.ratio))
        self.expect(shown == (level, ratio), line, f"{name} is {shown}")


_ADVICE = re.compile(
    r"(?P<n>\d+) subtasks instead of (?P<m>\d+) would take the ~(?P<d>[\d,]+) records/s "
    r"offered(?: and ~(?P<k>[\d,]+) records/s more to drain its sources' backlog)? at "
    r"(?P<u>\d+)% utilisation.*measured ~(?P<c>[\d,]+) records/s per subtask"
)


_SKEWED_ADVICE = re.compile(
    r"(?P<n>\d+) subtasks instead of (?P<m>\d+) would leave (?P<v>[^\s\[]+)\[(?P<i>\d+)\] "
    r"(?P<sh>\d+)% of the ~(?P<d>[\d,]+) records/s offered, at (?P<u>\d+)% utilisation.*"
    r"measured ~(?P<c>[\d,]+) records/s per subtask"
)
_KEY_ADVICE = re.compile(
    r"Spread the hot key\(s\) that land on (?P<v>[^\s\[]+)\[(?P<i>\d+)\]: ~(?P<k>[\d,]+) "
    r"records/s of one key is more than the ~(?P<c>[\d,]+) records/s one subtask takes"
)


def _skewed_recommendation(c: Check, cause: RootCause) -> None:
    """A hash-partitioned vertex sized for its hot subtask, or told to spread the key."""
    line, rate, cap = cause.recommendation, cause.offered_rate, cause.capacity_per_subtask
    key = _KEY_ADVICE.search(line)
    if key is not None:
        c.expect(cause.recommended_parallelism is None, line, "a parallelism")
        _, fixed = shares(c.vertex(key["v"]), int(key["i"]))
        c.expect(rate is not None and key["k"] == f"{rate * fixed:,.0f}", line, "one key's rate")
        c.expect(cap is not None and key["c"] == f"{cap:,.0f}", line, f"capacity {cap}")
        c.expect(rate is None or cap is None or rate * fixed > cap * 0.9, line, "it would fit")
    found = _SKEWED_ADVICE.search(line)
    if found is None:
        return
    n = int(found["n"])
    c.expect(n == cause.recommended_parallelism, line, "recommended_parallelism")
    c.expect(int(found["m"]) == c.vertex(cause.vertex).parallelism, line, "parallelism")
    _, fixed = shares(c.vertex(found["v"]), int(found["i"]))
    share = fixed + (1 - fixed) / n
    c.expect(found["sh"] == f"{share * 100:.0f}", line, f"the share at {n} is {share:.3f}")
    c.expect(rate is not None and found["d"] == f"{rate:,.0f}", line, f"offered_rate {rate}")
    c.expect(cap is not None and found["c"] == f"{cap:,.0f}", line, f"capacity {cap}")
    if rate is not None and cap:
        c.expect(found["u"] == f"{rate * share / cap * 100:.0f}", line, "utilisation")


def _recommendation(c: Check, cause: RootCause) -> None:
    _skewed_recommendation(c, cause)
    found = _ADVICE.search(cause.recommendation)
    if found is None:
        return
    line = cause.recommendation
    c.expect(int(found["n"]) == cause.recommended_parallelism, line, "recommended_parallelism")
    c.expect(int(found["m"]) == c.vertex(cause.vertex).parallelism, line, "parallelism")
    rate, cap = cause.offered_rate, cause.capacity_per_subtask
    c.expect(rate is not None and found["d"] == f"{rate:,.0f}", line, f"offered_rate {rate}")
    c.expect(cap is not None and found["c"] == f"{cap:,.0f}", line, f"capacity {cap}")
    n = cause.recommended_parallelism
    catch = cause.catch_up_rate
    if found["k"] is not None:
        c.expect(catch is not None and found["k"] == f"{catch:,.0f}", line, f"catch-up {catch}")
    else:
        c.expect(not catch, line, f"a catch-up rate {catch} the sentence does not state")
    if rate is not None and cap and n:
        target = rate + (catch or 0.0)
        c.expect(found["u"] == f"{target / (n * cap) * 100:.0f}", line, "utilisation")


_UNEXPLAINED = r"(?P<v>{v}) is (?P<lvl>LOW|HIGH) \((?P<r>\d\.\d\d)\) (?:but no consumer|and waits)"
_HEAD_OF_LINE = (
    r"(?P<p>(?P<v>{v})\[(?P<pi>\d+)\]) is (?P<lvl>LOW|HIGH) \((?P<r>\d\.\d\d)\) while its "
    r"consumer (?P<c>{v})\[(?P<ci>\d+)\] idles (?P<i>\d+)%: under TCP flow control .* "
    r"bottleneck (?P<b>{v})\[\d+\], .*"
)


def _finding(c: Check, kind: str, vertex: str, detail: str, names: Sequence[str]) -> None:
    v = "(?:" + "|".join(re.escape(n) for n in sorted(names, key=len, reverse=True)) + ")"
    if kind == "unexplained":
        m = re.match(_UNEXPLAINED.format(v=v), detail)
        c.expect(m is not None and m["v"] == vertex, detail, "an unknown unexplained line")
        if m is not None:
            c.level(m["v"], m["lvl"], m["r"], detail)
    elif kind == "head-of-line":
        for part in detail.split("; "):  # one part per collateral subtask
            m = re.fullmatch(_HEAD_OF_LINE.format(v=v), part)
            c.expect(m is not None and m["v"] == vertex, part, "an unknown head-of-line line")
            if m is None:
                continue
            producer = c.vertex(m["v"]).subtasks[int(m["pi"])]
            shown = format_ratio(producer.ratio)
            c.expect(shown == m["r"], part, f"{m['p']} ratio is {shown}")
            consumer = c.vertex(m["c"]).subtasks[int(m["ci"])]
            c.percent(m["i"], consumer.metrics.idle_ratio, part, f"{m['c']} idle")
    else:
        c.problems.append(f"no check for a {kind!r} finding: {detail!r}")


def recommendation_problems(report: Report, cause: RootCause) -> list[str]:
    """Every figure of ``cause``'s recommendation that disagrees with the report's fields."""
    check = Check(report, [])
    _recommendation(check, cause)
    return check.problems


def finding_problems(report: Report) -> list[str]:
    """Every figure of the report's findings that disagrees with its fields."""
    check = Check(report, [])
    names = [v.name for v in report.vertices]
    for f in report.findings:
        _finding(check, f.kind, f.vertex, f.detail, names)
    return check.problems


def unaccounted(report: Report) -> list[str]:
    """Vertices above OK that no root cause and no finding accounts for.

    A vertex is accounted for when it feeds a root cause's vertex, is named by a finding (a
    head-of-line finding also names the producers it blocks), or feeds a vertex above OK that is
    accounted for (it waits on that one).
    """
    above = {v.name for v in report.vertices if v.level in ABOVE_OK}
    feeds: dict[str, set[str]] = {v.name: set() for v in report.vertices}
    for v in report.vertices:
        for e in v.inputs:
            feeds.setdefault(e.source, set()).add(v.name)
    causes = {c.vertex for c in report.root_causes or ()}
    done = {f.vertex for f in report.findings} | {n for n in above if feeds[n] & causes}
    for f in report.findings:  # a head-of-line finding names its blocked producers
        if f.kind == "head-of-line":
            done |= {n for n in above if f"{n} (" in f.detail.split(" are backpressured")[0]}
    if not report.vertices or not any(v.inputs for v in report.vertices):
        done |= above if causes else set()  # no topology: every blocked vertex waits on it
    grew = True
    while grew:
        before = len(done)
        done |= {n for n in above if feeds[n] & above & done}
        grew = len(done) > before
    return sorted(above - done)
