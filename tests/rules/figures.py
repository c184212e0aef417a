"""Every figure an evidence line states, checked against the report's own fields.

A report is read twice by a user: the table (levels, ratios, busy, idle, pools, record rates) and
the text beside it. Each evidence line carries the figures it states
(:class:`~bpmon.model.evidence.EvidenceFigure`: what, of which vertex and subtasks, the value), so
each is checked here against the field it describes, by its kind: a share against the table's
two-decimal cell (``bpmon.model.numbers.ratio``, the very cell the user sees), a subtask index
against the vertex's subtasks, records/s against the root cause's capacity and offered rate, a
time per record against the busy ratios and record rates it is made of. And no number of a line
escapes: its words (the parts that are not figures) hold no digit but those of vertex names and
of :data:`FIXED_WORDS`. Written independently of the rules: it recomputes from the report.

The recommendation and the findings stay strings in the model; :mod:`.sentences` checks them.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass

from bpmon.model.evidence import EvidenceFigure, EvidenceLine, FigureKind
from bpmon.model.numbers import ratio as format_ratio
from bpmon.model.values import Report, RootCause, SubtaskStatus, VertexStatus
from bpmon.rules.classify import Classification
from bpmon.rules.config import RulesConfig

from .sentences import finding_problems, recommendation_problems, shares, table_percent, unaccounted

RULES = RulesConfig()
FIXED_WORDS = ("100% busy", "FLIP-33", "rate is 0")
"""Numbers that are wording, not figures: they say the same in every report."""


def texts(found: RootCause | Classification) -> tuple[str, ...]:
    """The text of each evidence line of ``found``."""
    return tuple(line.text for line in found.evidence)


def _close(a: float | None, b: float | None, within: float = 1e-9) -> bool:
    if a is None or b is None:
        return False
    if math.isinf(a) or math.isinf(b):
        return a == b
    return abs(a - b) <= within + 1e-9 * max(abs(a), abs(b))


@dataclass
class Check:
    """The report being checked, the line and the cause being read, and the problems so far."""

    report: Report
    problems: list[str]
    cause: RootCause
    line: EvidenceLine

    def vertex(self, name: str) -> VertexStatus:
        return next(v for v in self.report.vertices if v.name == name)

    def expect(self, ok: bool, what: str) -> None:
        if not ok:
            self.problems.append(f"{what}: {self.line.text!r}")

    def named(self, fig: EvidenceFigure) -> list[SubtaskStatus]:
        """The subtasks ``fig`` describes (the vertex's all, when it names none)."""
        subs = self.vertex(fig.vertex).subtasks
        return [s for s in subs if s.index in fig.subtasks] if fig.subtasks else list(subs)

    def others(self, fig: EvidenceFigure) -> list[SubtaskStatus]:
        return [s for s in self.vertex(fig.vertex).subtasks if s.index not in fig.subtasks]

    def sibling(self, what: FigureKind) -> EvidenceFigure | None:
        return next((f for f in self.line.figures if f.what == what), None)

    def value(self, fig: EvidenceFigure, field: float | None, within: float = 1e-9) -> None:
        self.expect(_close(fig.value, field, within), f"{fig.what} {fig.value} is not {field}")

    def table(self, fig: EvidenceFigure, field: float | None) -> None:
        """The figure is the field, and shown as the table's two-decimal cell shows it."""
        self.value(fig, field)
        shown = table_percent(field) if fig.unit == "%" else format_ratio(field)
        self.expect(fig.shown in (f"{shown}%", shown), f"{fig.what} is {format_ratio(field)}")


Rule = Callable[[Check, EvidenceFigure], None]


def _busy(c: Check, f: EvidenceFigure) -> None:
    """The vertex's busy share, or that every subtask named shows (the least of them)."""
    if not f.subtasks:
        c.table(f, c.vertex(f.vertex).metrics.busy_ratio)
        return
    c.table(f, min(s.metrics.busy_ratio or 0.0 for s in c.named(f)))
    shown = {table_percent(s.metrics.busy_ratio) for s in c.named(f)}
    c.expect(shown == {f.shown.rstrip("%")}, f"busy {sorted(map(str, shown))}")


def _extreme(pick: Callable[[Iterable[float]], float]) -> Rule:
    def check(c: Check, f: EvidenceFigure) -> None:
        c.table(f, pick(s.metrics.busy_ratio or 0.0 for s in c.named(f)))

    return check


def _whole(c: Check, f: EvidenceFigure, field: float | None) -> None:
    """A whole rate: the field rounded as the text shows it."""
    c.value(f, field, within=0.5)


def _capacity(subs: Iterable[SubtaskStatus]) -> float | None:
    """Records handled (in, or out for a source) / busy, over the subtasks busy enough."""
    handled = [(s.metrics.records_in_per_s, s.metrics.records_out_per_s, s) for s in subs]
    caps = [
        (rin if rin else rout or 0.0) / s.metrics.busy_ratio
        for rin, rout, s in handled
        if s.metrics.busy_ratio is not None and s.metrics.busy_ratio >= RULES.capacity.min_busy
    ]
    return sum(caps) / len(caps) if caps else None


def _rates(subs: Iterable[SubtaskStatus]) -> float:
    return sum(s.metrics.records_in_per_s or 0.0 for s in subs)


def _ms_per_record(subs: Iterable[SubtaskStatus]) -> float:
    items = list(subs)
    busy, records = sum(s.metrics.busy_ratio or 0.0 for s in items), _rates(items)
    if records <= 0:
        return math.inf if busy > 0 else 0.0
    return busy / records * 1000


def _factor(hot: float, cold: float) -> float:
    return math.inf if cold == 0 else hot / cold


def _cap(c: Check, f: EvidenceFigure) -> None:
    if f.vertex == c.cause.vertex:
        c.value(f, c.cause.capacity_per_subtask)
    _whole(c, f, _capacity(c.named(f)))


def _offered(c: Check, f: EvidenceFigure) -> None:
    if f.vertex == c.cause.vertex:
        _whole(c, f, c.cause.offered_rate)
        return
    following = {n.vertex: n for n in c.cause.next_in_series}
    c.expect(f.vertex in following, f"{f.vertex} is not next in series")
    if f.vertex in following:
        c.value(f, following[f.vertex].offered_rate)
    offered, on_path = _offered_after(c, f.vertex)
    if not on_path:  # before the cause: held back by it (through a join: not derivable)
        offered, on_path = _offered_before(c, f.vertex)
    c.expect(on_path, "not in series with the cause")
    if offered is not None:
        c.value(f, offered, within=0.005 * offered + 1)


def _offered_after(c: Check, name: str) -> tuple[float | None, bool]:
    """The cause's offered rate times records out / records in of each vertex on the single
    path from the cause to ``name``; whether there is such a path."""
    offered, on_the_way = c.cause.offered_rate, c.vertex(name)
    while offered is not None and len(on_the_way.inputs) == 1:
        on_the_way = c.vertex(on_the_way.inputs[0].source)
        rin, rout = on_the_way.metrics.records_in_per_s, on_the_way.metrics.records_out_per_s
        offered = offered * rout / rin if rin and rout is not None else None
        if on_the_way.name == c.cause.vertex:
            return offered, True
    return None, False


def _upstream(c: Check) -> set[str]:
    seen: set[str] = set()
    todo = [c.vertex(c.cause.vertex)]
    while todo:
        for edge in todo.pop().inputs:
            if edge.source not in seen:
                seen.add(edge.source)
                todo.append(c.vertex(edge.source))
    return seen


def _offered_before(c: Check, name: str) -> tuple[float | None, bool]:
    """Whether ``name`` is upstream of the cause, and the rate it would be offered: the cause's
    offered rate divided by records out / records in of each vertex on the single path from
    ``name`` to the cause (None where a join on the way mixes other inputs in)."""
    if name not in _upstream(c):
        return None, False
    offered, on_the_way = c.cause.offered_rate, c.vertex(c.cause.vertex)
    while offered is not None and on_the_way.name != name:
        if len(on_the_way.inputs) != 1:
            return None, True
        on_the_way = c.vertex(on_the_way.inputs[0].source)
        rin, rout = on_the_way.metrics.records_in_per_s, on_the_way.metrics.records_out_per_s
        offered = offered * rin / rout if rin is not None and rout else None
    return offered, True


def _needed(c: Check, f: EvidenceFigure) -> None:
    cap, offered = c.sibling("capacity"), c.sibling("offered")
    if cap is None or offered is None:
        c.expect(False, "a parallelism without its capacity and offered rate")
        return
    need = math.ceil(offered.value / (cap.value * RULES.capacity.utilisation_target))
    c.value(f, need)
    c.expect(cap.value * c.vertex(f.vertex).parallelism < offered.value, "it would keep up")
    sentence = f"Then {f.vertex} would limit next: give it {need} subtasks instead of "
    sentence += f"{c.vertex(f.vertex).parallelism} as well."
    c.expect(sentence in c.cause.recommendation, "the recommendation does not say so")


def _skew_bound(vertex: VertexStatus) -> int:
    """Four times today's parallelism, 16 at least, never past Flink's default key groups
    (128 below 86 subtasks: the vertices these checks see)."""
    return min(128, max(4 * vertex.parallelism, 16))


def _skew_needed(c: Check, f: EvidenceFigure) -> None:
    """What the share model would ask of a skewed vertex, from the key share the evidence quotes
    and the cause's capacity and offered rate; past the bound it names, so not recommended."""
    key = next((x for e in c.cause.evidence for x in e.figures if x.what == "key-share"), None)
    cap, offered = c.cause.capacity_per_subtask, c.cause.offered_rate
    if key is None or cap is None or not offered:
        c.expect(False, "a parallelism without its key share, capacity and offered rate")
        return
    room = cap * RULES.capacity.utilisation_target / offered - key.value
    n = c.vertex(f.vertex).parallelism
    c.expect(room > 0, "the key alone would not fit a subtask")
    if room > 0:
        c.value(f, max(n + 1, math.ceil((1 - key.value) / room)))
    c.expect(c.cause.recommended_parallelism is None, "a parallelism is recommended past it")


def _catch_up(c: Check, f: EvidenceFigure) -> None:
    """The cause's catch-up rate: its backlog over [sizing] catch_up_s."""
    _whole(c, f, c.cause.catch_up_rate)
    backlog = c.cause.backlog_records
    c.expect(backlog is not None, "a catch-up without a backlog")
    if backlog is not None:
        c.value(f, backlog / RULES.sizing.catch_up_s, within=1.0)


def _drain(c: Check, f: EvidenceFigure) -> None:
    """Minutes the backlog takes at the recommended parallelism: backlog / (its capacity less
    the offered rate)."""
    cause = c.cause
    backlog, cap, n = (
        cause.backlog_records,
        cause.capacity_per_subtask,
        cause.recommended_parallelism,
    )
    offered = cause.offered_rate
    if backlog is None or cap is None or n is None or offered is None:
        c.expect(False, "a drain time without its backlog, capacity and parallelism")
        return
    c.value(f, backlog / (n * cap - offered) / 60, within=1.0)


def _utilisation(c: Check, f: EvidenceFigure) -> None:
    cap, offered, need = c.sibling("capacity"), c.sibling("offered"), c.sibling("needed")
    if cap and offered and need:
        c.value(f, offered.value / (need.value * cap.value))


def _channel(c: Check, f: EvidenceFigure) -> None:
    """A channel quoted is in the report's ``channels`` with that backlog (or no credit); a
    channel the data waits in is remote, has credit to send, nothing queued, and is the fullest
    such channel into the cause's vertex."""
    ends = [x for x in c.line.figures if x.what == "subtask"]
    key = tuple((x.vertex, x.subtasks[0]) for x in ends[:2])
    found = [x for x in c.report.channels if key == ((x.producer, x.producer_index),
                                                     (x.consumer, x.consumer_index))]  # fmt: skip
    c.expect(len(found) == 1 and key[1][0] == c.cause.vertex, f"no channel {key}")
    if len(found) != 1:
        return
    ch = found[0]
    if f.what == "no-credit":
        c.value(f, ch.no_credit)
        return
    c.value(f, ch.backlog)
    c.expect(ch.remote and (ch.no_credit or 0.0) < 0.5 and ch.queued < 1.0, f"{ch}")
    held = [x for x in c.report.channels if x.consumer == ch.consumer and x.remote
            and x.backlog >= RULES.network.link_backlog_min and (x.no_credit or 0.0) < 0.5
            and (x.stalled or 0.0) < 0.5 and x.queued < 1.0]  # fmt: skip
    channels = c.sibling("channels")
    c.expect(channels is not None and channels.value == len(held), f"{len(held)} channels")
    c.expect(all(x.backlog <= ch.backlog for x in held), "not the fullest channel")


def _scheduling(c: Check, f: EvidenceFigure) -> None:
    """A scheduling figure is one the report's subtasks carry (the region's, where known)."""
    known = [s.metrics.scheduling for v in c.report.vertices for s in v.subtasks]
    states = [s for s in known if s is not None]
    waits = [s.slot_wait for s in states if s.slot_wait is not None]
    needed = [float(w.needed) for w in waits] or [float(v.parallelism) for v in c.report.vertices]
    free = min((s.slots_free for s in states if s.slots_free is not None), default=0)
    values: dict[str, list[float]] = {
        "waited": [s.waited_s for s in states if s.waited_s is not None],
        "slots-total": [float(s.slots_total) for s in states if s.slots_total is not None],
        "restarts": [float(s.slot_failures) for s in states],
        "region": [float(w.region) for w in waits],
        "slots-needed": needed,
        "slots-missing": [float(w.missing) for w in waits] or [max(1, n - free) for n in needed],
        "waiting-subtasks": [float(n) for n in range(1, sum(s.waiting for s in states) + 1)],
    }
    c.expect(any(_close(f.value, v) for v in values[f.what]), f"{f.what} not in {values[f.what]}")


def _spills(c: Check, f: EvidenceFigure) -> list[float]:
    spills = [s.metrics.spill for s in c.named(f) if s.metrics.spill is not None]
    return [
        sum(s.written_bytes_per_s for s in spills),
        sum(s.read_bytes_per_s for s in spills),
        max((s.disk_ms_per_s for s in spills), default=0.0),
    ]


def _chain(c: Check, f: EvidenceFigure) -> None:
    share = c.cause.in_chain
    c.expect(share is not None, "a chain line without the cause's in_chain")
    if share is None:
        return
    if f.what == "chain-samples":
        c.value(f, share.busy_samples)
    else:
        c.expect(any(_close(f.value, s) for _, s in share.shares), f"shares {share.shares}")


def _subtask(c: Check, f: EvidenceFigure) -> None:
    """The index stated is a subtask of the vertex, the one the figure describes."""
    indices = {s.index for s in c.vertex(f.vertex).subtasks}
    c.expect(f.value in indices and (f.value,) == f.subtasks, f"{f.vertex} has {indices}")


def _vertex_metric(get: Callable[[VertexStatus | SubtaskStatus], float | None]) -> Rule:
    """A share of the vertex, or of the one subtask the figure names, as the table shows it."""

    def check(c: Check, f: EvidenceFigure) -> None:
        subs = c.named(f) if f.subtasks else []
        c.table(f, get(subs[0] if subs else c.vertex(f.vertex)))

    return check


CHECKS: dict[FigureKind, Rule] = {
    "subtask": _subtask,
    "parallelism": lambda c, f: c.value(f, len(c.vertex(f.vertex).subtasks)),
    "busy": _busy,
    "busy-least": _extreme(min),
    "busy-most": _extreme(max),
    "busy-sampled": lambda c, f: c.expect(len(c.named(f)) == 1, "one subtask"),  # not shown
    "idle": _vertex_metric(lambda x: x.metrics.idle_ratio),
    "backpressure": _vertex_metric(lambda x: x.ratio),
    "out-pool": _vertex_metric(lambda x: x.metrics.out_pool_usage),
    "in-pool": lambda c, f: c.value(f, c.vertex(f.vertex).metrics.in_pool_usage),
    "records-share": lambda c, f: c.value(
        f, _rates(c.named(f)) / (_rates(c.vertex(f.vertex).subtasks) or math.inf)
    ),
    "fair-share": lambda c, f: c.value(f, len(f.subtasks) / c.vertex(f.vertex).parallelism),
    "hash-share": lambda c, f: c.value(f, shares(c.vertex(f.vertex), f.subtasks[0])[0]),
    "key-share": lambda c, f: c.value(f, shares(c.vertex(f.vertex), f.subtasks[0])[1]),
    "time-per-record": lambda c, f: c.value(f, _ms_per_record(c.named(f))),
    "slower": lambda c, f: c.value(
        f, _factor(_ms_per_record(c.named(f)), _ms_per_record(c.others(f)))
    ),
    "records-factor": lambda c, f: c.value(
        f,
        _factor(_rates(c.named(f)) / len(f.subtasks), _rates(c.others(f)) / len(c.others(f))),
    ),
    "spill": lambda c, f: c.value(f, _spills(c, f)[0]),
    "capacity": _cap,
    "capacity-others": lambda c, f: _whole(c, f, _capacity(c.named(f))),
    "offered": _offered,
    "offered-per-subtask": lambda c, f: _whole(
        c,
        f,
        (c.cause.offered_rate or math.nan)
        * _rates(c.named(f))
        / _rates(c.vertex(f.vertex).subtasks)
        / len(f.subtasks),
    ),
    "emitted": lambda c, f: c.value(f, c.vertex(f.vertex).metrics.records_out_per_s),
    "delivered": lambda c, f: _whole(c, f, _rates(c.vertex(f.vertex).subtasks)),
    "lag-growth": lambda c, f: c.value(
        f,
        (c.cause.offered_rate or math.nan) - (c.vertex(f.vertex).metrics.records_out_per_s or 0),
        within=1.0,
    ),
    "needed": _needed,
    "skew-needed": _skew_needed,
    "skew-bound": lambda c, f: c.value(f, _skew_bound(c.vertex(f.vertex))),
    "utilisation": _utilisation,
    "backlog-records": lambda c, f: _whole(c, f, c.cause.backlog_records),
    "catch-up": _catch_up,
    "drain-minutes": _drain,
    "backlog": _channel,
    "no-credit": _channel,
    "channels": lambda c, f: c.expect(f.value >= 1, "no channel"),  # counted by _channel
    "chain-share": _chain,
    "chain-samples": _chain,
    "window": lambda c, f: c.value(f, c.report.window.seconds),
    "region": _scheduling,
    "waiting-subtasks": _scheduling,
    "waited": _scheduling,
    "slots-needed": _scheduling,
    "slots-missing": _scheduling,
    "slots-total": _scheduling,
    "restarts": _scheduling,
    "spilled-mb": lambda c, f: c.value(f, _spills(c, f)[0] / 1e6),
    "read-back-mb": lambda c, f: c.value(f, _spills(c, f)[1] / 1e6),
    "disk-ms": lambda c, f: c.value(f, _spills(c, f)[2]),
}


def _names(report: Report) -> list[str]:
    """The report's vertex names and the operators of its chains, longest first."""
    names = {v.name for v in report.vertices}
    names |= {op for n in list(names) for op in re.split(r" -> |, |[()]", n) if op}
    return sorted(names, key=len, reverse=True)


def number_problems(line: EvidenceLine, names: list[str]) -> list[str]:
    """A digit in the words of ``line`` (not a figure, a vertex name or :data:`FIXED_WORDS`)."""
    words = "|".join(line.words)
    for fixed in (*FIXED_WORDS, *names):
        words = words.replace(fixed, "")
    stray = re.findall(r"\d+", words)
    return [f"numbers {stray} are no figures: {line.text!r}"] if stray else []


def line_problems(report: Report, cause: RootCause, line: EvidenceLine) -> list[str]:
    """Every figure of ``line`` that disagrees with the field it describes."""
    check = Check(report, number_problems(line, _names(report)), cause, line)
    known = {v.name for v in report.vertices}
    for fig in line.figures:
        if fig.vertex and fig.vertex not in known:
            check.expect(False, f"no vertex {fig.vertex!r}")
        elif fig.what in ("subtask", "parallelism") or not fig.subtasks or check.named(fig):
            CHECKS[fig.what](check, fig)
        else:
            check.expect(False, f"{fig.vertex} has no subtasks {fig.subtasks}")
    return check.problems


def evidence_problems(report: Report) -> list[str]:
    """Every figure of the report's evidence lines that disagrees with its fields."""
    causes = report.root_causes or ()
    return [p for c in causes for line in c.evidence for p in line_problems(report, c, line)]


def problems(report: Report) -> list[str]:
    """Every figure of the report's text that disagrees with its fields, as one line each."""
    found: list[str] = []
    for cause in report.root_causes or ():
        for line in cause.evidence:
            found += line_problems(report, cause, line)
        found += recommendation_problems(report, cause)
        known = {
            s.index for s in next(v for v in report.vertices if v.name == cause.vertex).subtasks
        }
        if not set(cause.subtasks) <= known:
            found.append(f"{cause.vertex} has no subtasks {cause.subtasks}")
    found += finding_problems(report)
    found += [f"{name} is above OK and nothing accounts for it" for name in unaccounted(report)]
    return found
