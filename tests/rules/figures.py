"""Every figure the text of a report quotes, checked against the report's own fields.

A report is read twice by a user: the table (levels, ratios, busy, idle, pools, record rates) and
the text beside it (each root cause's evidence and recommendation, each finding). This module
knows every shape of evidence line the rules write, one regex each, and checks each figure such a
line quotes against the field it describes: a percentage against the table's two-decimal ratio
(``bpmon.model.numbers.ratio``, the very cell the user sees), a level and ratio against the
vertex's, a subtask index against the vertex's subtasks, records/s against the root cause's capacity
and offered rate, a time per record against the busy ratios and record rates it is made of.

A line that no shape matches is a problem too: a new kind of evidence needs its own check here.
Written independently of the rules (it recomputes from the report, not from the rules' code).
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass

from bpmon.model.numbers import ratio as format_ratio
from bpmon.model.values import Report, RootCause, SubtaskStatus, VertexStatus
from bpmon.rules.config import RulesConfig

RULES = RulesConfig()
ABOVE_OK = ("LOW", "HIGH")


def table_percent(value: float | None) -> str | None:
    """The whole percentage the table's two-decimal cell shows (``0.95`` -> ``95``)."""
    cell = format_ratio(value)
    return None if value is None else str(round(float(cell) * 100))


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

    def subtasks(self, name: str, indices: str, line: str) -> list[SubtaskStatus]:
        """The subtasks ``name[indices]`` names; a problem when one does not exist."""
        wanted = [int(i) for i in indices.split(",")]
        have = {s.index: s for s in self.vertex(name).subtasks}
        self.expect(all(i in have for i in wanted), line, f"{name} has no subtask {wanted}")
        return [have[i] for i in wanted if i in have]

    def span(self, subs: Sequence[SubtaskStatus], low: str, high: str | None, line: str) -> None:
        """``low%`` (to ``high%``) must be the least and most busy the table shows for ``subs``."""
        shown = sorted(int(table_percent(s.metrics.busy_ratio) or -1) for s in subs)
        quoted = [int(low), int(high if high is not None else low)]
        self.expect(bool(shown) and quoted == [shown[0], shown[-1]], line, f"busy {shown}")

    def percent(self, quoted: str, value: float | None, line: str, what: str) -> None:
        self.expect(quoted == table_percent(value), line, f"{what} is {format_ratio(value)}")

    def level(self, name: str, level: str, ratio: str, line: str) -> None:
        v = self.vertex(name)
        shown = (v.level, format_ratio(v.ratio))
        self.expect(shown == (level, ratio), line, f"{name} is {shown}")


def _rate(text: str) -> float:
    return float(text.replace(",", ""))


def _ms_per_record(subs: Iterable[SubtaskStatus]) -> float:
    items = list(subs)
    busy = sum(s.metrics.busy_ratio or 0.0 for s in items)
    records = sum(s.metrics.records_in_per_s or 0.0 for s in items)
    if records <= 0:
        return float("inf") if busy > 0 else 0.0
    return busy / records * 1000


def _ms(value: float) -> str:
    return "an unbounded time" if value == float("inf") else f"{value:.2f} ms"


def _capacity(subs: Iterable[SubtaskStatus]) -> float | None:
    caps = [
        s.metrics.records_in_per_s / s.metrics.busy_ratio
        for s in subs
        if s.metrics.records_in_per_s is not None
        and s.metrics.busy_ratio is not None
        and s.metrics.busy_ratio >= RULES.capacity.min_busy
    ]
    return sum(caps) / len(caps) if caps else None


Shape = Callable[[Check, RootCause | None, "re.Match[str]", str], None]


def _shapes(names: Sequence[str]) -> list[tuple[re.Pattern[str], Shape]]:
    """The evidence shapes, with the vertex names of this report spelled out."""
    v = "(?:" + "|".join(re.escape(n) for n in sorted(names, key=len, reverse=True)) + ")"
    sub = rf"(?P<v>{v})\[(?P<idx>\d+(?:,\d+)*)\]"
    span = r"(?P<lo>\d+)%(?: to (?P<hi>\d+)%)?"
    span2 = r"(?P<lo2>\d+)%(?: to (?P<hi2>\d+)%)?"
    level = r"(?P<lvl>OK|LOW|HIGH) \((?P<r>\d\.\d\d)"
    rate = r"[\d,]+"
    table: list[tuple[str, Shape]] = [
        (rf"{sub} (?:is|are) busy {span}", _named_busy),
        (rf"the only subtask of (?P<v>{v}) is busy {span}", _every_busy),
        (rf"(?:both|all (?P<n>\d+)) subtasks of (?P<v>{v}) are busy {span}", _every_busy),
        (rf"{sub} (?:is|are) busy {span}, the others {span2}", _contrast),
        (rf"{sub} busy (?P<t>\d+)% \(time accounting\)(?:, (?P<s>\d+)% \(samples\))?", _views),
        (rf"{sub} busy (?P<s>\d+)% \(samples\)", _views),
        (
            rf"(?P<p>{v}) is {level}(?:, out pool (?P<pool>\d+)%)?\) and feeds (?P<v>{v}) "
            r"through a (?P<part>\w+) exchange",
            _feeds,
        ),
        (
            rf"(?P<v>{v}) is {level}\): (?:not backpressured itself|much less backpressured "
            r"than its producers \((?P<w>\d\.\d\d)\))",
            _own,
        ),
        (
            r"no topology: (?P<ps>.+) (?:is|are) backpressured and "
            rf"(?P<v>{v}) is the busiest vertex on the data path that is not \(busy (?P<b>\d+)%\)",
            _no_topology,
        ),
        (
            rf"(?P<p>{v}), itself a bottleneck, feeds (?P<v>{v}), which is saturated too "
            r"\(busy (?P<b>\d+)%\)",
            _series,
        ),
        (rf"(?P<v>{v}) idles (?P<i>\d+)% waiting for input", _idles),
        (rf"(?P<v>{v}) input buffers at most (?P<p>\d+)% used \(in pool\): .+", _in_pool),
        (rf"(?P<v>{v}) input pool usage unknown: the network is inferred", _no_in_pool),
        (
            r"records per subtask unknown \(no record rates\): a hot key would look the same",
            _no_rates,
        ),
        (
            rf"{sub} spends (?P<x>\d+\.\d\d ms|an unbounded time) per record, "
            r"(?P<f>many|\d+\.\d)x the others \((?P<y>\d+\.\d\d ms|an unbounded time)\)",
            _cost,
        ),
        (
            rf"(?:records received: )?{sub} (?:receives|receive) (?P<s>\d+)% of the records of "
            rf"(?P<v2>{v}) \(fair share (?P<f>\d+)%\)",
            _share,
        ),
        (
            r"(?P<k>many|\d+\.\d)x the records per subtask of the others, (?:at the same time "
            r"per record|while their producers were held back, which a slow instance cannot "
            r"cause: time per record) \((?P<x>.+) against (?P<y>.+)\)",
            _skew,
        ),
        (rf"{sub} spill (?P<b>{rate}) bytes/s to disk", _spill),
        (rf"(?P<v>{v}) shows no samples and no time metrics: it is not running", _starved),
        (
            rf"(?P<v>{v}) handles ~(?P<c>{rate}) records/s per subtask at 100% busy "
            r"\(records in / busy\)",
            _capacity_line,
        ),
        (
            rf"{sub} handles ~(?P<c>{rate}) records/s per subtask at 100% busy "
            r"\(records in / busy\)",
            _named_capacity,
        ),
        (
            rf"{sub} receives (?P<s>\d+)% of (?P<v2>{v})'s records through the hash exchange "
            r"\(~(?P<f>\d+)% on a key no parallelism splits\)",
            _hash_share,
        ),
        (
            rf"(?P<p>{v})\[(?P<pi>\d+)\] holds (?P<b>\d+\.\d) buffers for "
            rf"(?P<c>{v})\[(?P<ci>\d+)\] on a remote channel with credit to send and none "
            r"queued at the consumer: the data waits for the link \((?P<n>\d+) such channels?\)",
            _held_channel,
        ),
        (rf"its inputs would offer ~(?P<d>{rate}) records/s \(.+\)", _offer),
        (r"the offered rate is unknown: the sources report no pendingRecords .*", _no_offer),
        (
            rf"(?P<v>{v}) reads .+ through a broadcast exchange: every subtask receives every "
            r"record, so more subtasks do not take more of them",
            _no_parallelism,
        ),
        (
            rf"{sub} handles ~(?P<c>{rate}) records/s per subtask at 100% busy and would be "
            rf"offered ~(?P<e>{rate}) per subtask of the ~(?P<d>{rate}) records/s offered to "
            rf"(?P<v2>{v}) \(.+\)",
            _skew_capacity,
        ),
        (
            rf"{sub} handles ~(?P<c>{rate}) records/s per subtask at 100% busy, "
            rf"the others ~(?P<c2>{rate})",
            _instance_capacity,
        ),
        (
            rf"next in series: (?P<v>{v}) handles ~(?P<c>{rate}) records/s per subtask x "
            rf"(?P<p>\d+) and would then be offered ~(?P<d>{rate}): it would limit next; "
            r"(?P<n>\d+) subtasks would take it at (?P<u>\d+)%",
            _next_in_series,
        ),
    ]
    return [(re.compile(p), f) for p, f in table]


def _named_busy(c: Check, cause: RootCause | None, m: re.Match[str], line: str) -> None:
    c.span(c.subtasks(m["v"], m["idx"], line), m["lo"], m["hi"], line)


def _every_busy(c: Check, cause: RootCause | None, m: re.Match[str], line: str) -> None:
    vertex = c.vertex(m["v"])
    n = 1 if line.startswith("the only") else 2 if line.startswith("both") else int(m["n"])
    c.expect(n == vertex.parallelism == len(vertex.subtasks), line, f"parallelism {n}")
    c.span(vertex.subtasks, m["lo"], m["hi"], line)


def _contrast(c: Check, cause: RootCause | None, m: re.Match[str], line: str) -> None:
    named = c.subtasks(m["v"], m["idx"], line)
    rest = [s for s in c.vertex(m["v"]).subtasks if s not in named]
    c.span(named, m["lo"], m["hi"], line)
    c.span(rest, m["lo2"], m["hi2"], line)


def _views(c: Check, cause: RootCause | None, m: re.Match[str], line: str) -> None:
    named = c.subtasks(m["v"], m["idx"], line)
    if len(named) != 1:
        c.problems.append(f"one subtask expected: {line!r}")
        return
    s = named[0]
    shown = m["t"] if "t" in m.groupdict() and m["t"] is not None else m["s"]
    c.percent(shown, s.metrics.busy_ratio, line, f"{m['v']}[{s.index}] busy")


def _feeds(c: Check, cause: RootCause | None, m: re.Match[str], line: str) -> None:
    c.level(m["p"], m["lvl"], m["r"], line)
    if m["pool"] is not None:
        c.percent(m["pool"], c.vertex(m["p"]).metrics.out_pool_usage, line, "out pool")
    edges = {(e.source, e.partitioner) for e in c.vertex(m["v"]).inputs}
    c.expect((m["p"], m["part"]) in edges, line, f"inputs of {m['v']} are {edges}")


def _own(c: Check, cause: RootCause | None, m: re.Match[str], line: str) -> None:
    c.level(m["v"], m["lvl"], m["r"], line)
    if m["w"] is not None:
        ratios = {format_ratio(c.vertex(e.source).ratio) for e in c.vertex(m["v"]).inputs}
        c.expect(m["w"] in ratios, line, f"producer ratios {ratios}")


def _no_topology(c: Check, cause: RootCause | None, m: re.Match[str], line: str) -> None:
    for name in m["ps"].split(", "):
        c.expect(c.vertex(name).level in ABOVE_OK, line, f"{name} is not backpressured")
    c.expect(c.vertex(m["v"]).level == "OK", line, f"{m['v']} is not OK")
    c.percent(m["b"], c.vertex(m["v"]).metrics.busy_ratio, line, f"{m['v']} busy")


def _series(c: Check, cause: RootCause | None, m: re.Match[str], line: str) -> None:
    c.percent(m["b"], c.vertex(m["v"]).metrics.busy_ratio, line, f"{m['v']} busy")
    causes = {x.vertex for x in c.report.root_causes or ()}
    c.expect(m["p"] in causes, line, f"{m['p']} is not a root cause")


def _idles(c: Check, cause: RootCause | None, m: re.Match[str], line: str) -> None:
    c.percent(m["i"], c.vertex(m["v"]).metrics.idle_ratio, line, f"{m['v']} idle")


def _in_pool(c: Check, cause: RootCause | None, m: re.Match[str], line: str) -> None:
    c.percent(m["p"], c.vertex(m["v"]).metrics.in_pool_usage, line, f"{m['v']} in pool")


def _no_in_pool(c: Check, cause: RootCause | None, m: re.Match[str], line: str) -> None:
    c.expect(c.vertex(m["v"]).metrics.in_pool_usage is None, line, "the in pool is known")


def _cause_vertex(c: Check, cause: RootCause | None, line: str) -> VertexStatus | None:
    c.expect(cause is not None, line, "a root cause line among the findings")
    return None if cause is None else c.vertex(cause.vertex)


def _no_rates(c: Check, cause: RootCause | None, m: re.Match[str], line: str) -> None:
    vertex = _cause_vertex(c, cause, line)
    if vertex is not None:
        rates = [s.metrics.records_in_per_s for s in vertex.subtasks]
        c.expect(None in rates, line, "every subtask has a record rate")


def _cost(c: Check, cause: RootCause | None, m: re.Match[str], line: str) -> None:
    named = c.subtasks(m["v"], m["idx"], line)
    rest = [s for s in c.vertex(m["v"]).subtasks if s not in named]
    hot, cold = _ms_per_record(named), _ms_per_record(rest)
    c.expect((m["x"], m["y"]) == (_ms(hot), _ms(cold)), line, f"{_ms(hot)}, {_ms(cold)}")
    factor = "many" if cold == 0 else f"{hot / cold:.1f}"
    c.expect(m["f"] == factor, line, f"the factor is {factor}")


def _share(c: Check, cause: RootCause | None, m: re.Match[str], line: str) -> None:
    named = c.subtasks(m["v"], m["idx"], line)
    vertex = c.vertex(m["v2"])
    total = sum(s.metrics.records_in_per_s or 0.0 for s in vertex.subtasks)
    got = sum(s.metrics.records_in_per_s or 0.0 for s in named)
    c.percent(m["s"], got / total if total > 0 else 0.0, line, "the share of records")
    c.percent(m["f"], len(named) / vertex.parallelism, line, "the fair share")


def _skew(c: Check, cause: RootCause | None, m: re.Match[str], line: str) -> None:
    vertex = _cause_vertex(c, cause, line)
    if vertex is None or cause is None:
        return
    hot = [s for s in vertex.subtasks if s.index in cause.subtasks]
    rest = [s for s in vertex.subtasks if s.index not in cause.subtasks]

    def mean(subs: list[SubtaskStatus]) -> float:
        return sum(s.metrics.records_in_per_s or 0.0 for s in subs) / len(subs)

    k = "many" if mean(rest) == 0 else f"{mean(hot) / mean(rest):.1f}"
    c.expect(m["k"] == k, line, f"the factor is {k}")
    pair = (_ms(_ms_per_record(hot)), _ms(_ms_per_record(rest)))
    c.expect((m["x"], m["y"]) == pair, line, f"times per record are {pair}")


def _spill(c: Check, cause: RootCause | None, m: re.Match[str], line: str) -> None:
    named = c.subtasks(m["v"], m["idx"], line)
    total = sum(s.metrics.spill.written_bytes_per_s for s in named if s.metrics.spill)
    c.expect(m["b"] == f"{total:,.0f}", line, f"they spill {total:,.0f} bytes/s")


def _starved(c: Check, cause: RootCause | None, m: re.Match[str], line: str) -> None:
    v = c.vertex(m["v"])
    c.expect(v.metrics.busy_ratio is None and v.ratio is None, line, f"{m['v']} has figures")


def _capacity_line(c: Check, cause: RootCause | None, m: re.Match[str], line: str) -> None:
    cap = cause.capacity_per_subtask if cause is not None else None
    c.expect(cap is not None and m["c"] == f"{cap:,.0f}", line, f"capacity field {cap}")
    again = _capacity(c.vertex(m["v"]).subtasks)
    c.expect(again is not None and m["c"] == f"{again:,.0f}", line, f"recomputed {again}")


def _named_capacity(c: Check, cause: RootCause | None, m: re.Match[str], line: str) -> None:
    cap = cause.capacity_per_subtask if cause is not None else None
    c.expect(cap is not None and m["c"] == f"{cap:,.0f}", line, f"capacity field {cap}")
    again = _capacity(c.subtasks(m["v"], m["idx"], line))
    c.expect(again is not None and m["c"] == f"{again:,.0f}", line, f"recomputed {again}")


def _next_in_series(c: Check, cause: RootCause | None, m: re.Match[str], line: str) -> None:
    """Capacity from the vertex's table; the offered rate from the cause's, times records out /
    records in of each vertex on the single path to it; the parallelism from the two."""
    vertex = c.vertex(m["v"])
    cap = _capacity(vertex.subtasks)
    c.expect(cap is not None and m["c"] == f"{cap:,.0f}", line, f"recomputed capacity {cap}")
    c.expect(int(m["p"]) == vertex.parallelism, line, f"parallelism {vertex.parallelism}")
    offered = cause.offered_rate if cause is not None else None
    on_the_way = vertex
    while offered is not None and len(on_the_way.inputs) == 1 and cause is not None:
        on_the_way = c.vertex(on_the_way.inputs[0].source)
        rin, rout = on_the_way.metrics.records_in_per_s, on_the_way.metrics.records_out_per_s
        offered = offered * rout / rin if rin and rout is not None else None
        if on_the_way.name == cause.vertex:
            break
    on_path = cause is not None and on_the_way.name == cause.vertex
    joined = False  # held back before the cause through a join: its offer is not derivable
    if not on_path and cause is not None:  # held back before the cause: walk up from it
        offered, on_path = _offered_before(c, cause, vertex)
        joined = on_path and offered is None
    c.expect(on_path, line, "not in series with the cause")
    quoted = _rate(m["d"])
    c.expect(joined or (offered is not None and abs(quoted - offered) <= 0.005 * offered + 1),
             line, f"recomputed offered rate {offered}")  # fmt: skip
    if cap is None or not on_path:
        return
    whole_cap = _rate(m["c"])
    c.expect(whole_cap * vertex.parallelism < quoted, line, "it could take what it is offered")
    need = math.ceil(quoted / (whole_cap * RULES.capacity.utilisation_target))
    c.expect(int(m["n"]) == need, line, f"needed {need}")
    c.expect(m["u"] == f"{quoted / (need * whole_cap) * 100:.0f}", line, "utilisation")
    sentence = f"Then {m['v']} would limit next: give it {need} subtasks instead of "
    sentence += f"{vertex.parallelism} as well."
    c.expect(cause is not None and sentence in cause.recommendation, line, "recommendation")


def _offered_before(c: Check, cause: RootCause, vertex: VertexStatus) -> tuple[float | None, bool]:
    """Whether ``vertex`` is upstream of the cause, and the rate it would be offered: the
    cause's offered rate divided by records out / records in of each vertex from ``vertex`` on
    the single path to the cause (None where a join on the way mixes other inputs in)."""
    offered = cause.offered_rate
    on_the_way = c.vertex(cause.vertex)
    seen: set[str] = set()
    todo = [on_the_way]
    while todo:  # is it upstream at all?
        for edge in todo.pop().inputs:
            if edge.source not in seen:
                seen.add(edge.source)
                todo.append(c.vertex(edge.source))
    if vertex.name not in seen:
        return None, False
    while offered is not None and on_the_way.name != vertex.name:
        if len(on_the_way.inputs) != 1:
            return None, True
        on_the_way = c.vertex(on_the_way.inputs[0].source)
        rin, rout = on_the_way.metrics.records_in_per_s, on_the_way.metrics.records_out_per_s
        offered = offered * rin / rout if rin is not None and rout else None
    return offered, True


def _shares(vertex: VertexStatus, index: int) -> tuple[float, float]:
    """The share of ``vertex``'s records in that subtask ``index`` receives, and the part of it
    no parallelism spreads (solved from ``share = fixed + (1 - fixed) / n``)."""
    total = sum(s.metrics.records_in_per_s or 0.0 for s in vertex.subtasks)
    mine = next(s.metrics.records_in_per_s or 0.0 for s in vertex.subtasks if s.index == index)
    share = mine / total if total > 0 else 0.0
    n = vertex.parallelism
    return share, max(0.0, (share - 1 / n) / (1 - 1 / n))


def _hash_share(c: Check, cause: RootCause | None, m: re.Match[str], line: str) -> None:
    c.expect(m["v"] == m["v2"], line, "another vertex's records")
    (hot,) = c.subtasks(m["v"], m["idx"], line)
    share, fixed = _shares(c.vertex(m["v"]), hot.index)
    c.expect(m["s"] == f"{share * 100:.0f}", line, f"the share is {share:.3f}")
    c.expect(m["f"] == f"{fixed * 100:.0f}", line, f"the fixed share is {fixed:.3f}")


def _held_channel(c: Check, cause: RootCause | None, m: re.Match[str], line: str) -> None:
    """The channel quoted is in the report's ``channels``, remote, with that backlog, credit to
    send and nothing queued; it is the fullest such channel into the cause's vertex."""
    key = (m["p"], int(m["pi"]), m["c"], int(m["ci"]))
    found = [
        ch
        for ch in c.report.channels
        if (ch.producer, ch.producer_index, ch.consumer, ch.consumer_index) == key
    ]
    c.expect(len(found) == 1, line, "no such channel in the report")
    if not found:
        return
    ch = found[0]
    c.expect(ch.remote and (ch.no_credit or 0.0) < 0.5 and ch.queued < 1.0, line, f"{ch}")
    c.expect(m["b"] == f"{ch.backlog:.1f}", line, f"backlog is {ch.backlog}")
    c.expect(cause is not None and m["c"] == cause.vertex, line, "another vertex's channel")
    held = [
        x
        for x in c.report.channels
        if x.consumer == m["c"]
        and x.remote
        and x.backlog >= RULES.network.link_backlog_min
        and (x.no_credit or 0.0) < 0.5
        and (x.stalled or 0.0) < 0.5
        and x.queued < 1.0
    ]
    c.expect(int(m["n"]) == len(held), line, f"{len(held)} such channels")
    c.expect(all(x.backlog <= ch.backlog for x in held), line, "not the fullest channel")


def _no_parallelism(c: Check, cause: RootCause | None, m: re.Match[str], line: str) -> None:
    c.expect(cause is not None and cause.recommended_parallelism is None, line, "a parallelism")


def _no_offer(c: Check, cause: RootCause | None, m: re.Match[str], line: str) -> None:
    c.expect(cause is not None and cause.offered_rate is None, line, "offered_rate is set")
    c.expect(cause is not None and cause.recommended_parallelism is None, line, "a parallelism")


def _offer(c: Check, cause: RootCause | None, m: re.Match[str], line: str) -> None:
    rate = cause.offered_rate if cause is not None else None
    c.expect(rate is not None and m["d"] == f"{rate:,.0f}", line, f"offered_rate {rate}")


def _skew_capacity(c: Check, cause: RootCause | None, m: re.Match[str], line: str) -> None:
    _capacity_of_named(c, cause, m, line)
    _offer(c, cause, m, line)


def _instance_capacity(c: Check, cause: RootCause | None, m: re.Match[str], line: str) -> None:
    named = _capacity_of_named(c, cause, m, line)
    rest = [s for s in c.vertex(m["v"]).subtasks if s not in named]
    again = _capacity(rest)
    c.expect(again is not None and m["c2"] == f"{again:,.0f}", line, f"the others {again}")


def _capacity_of_named(
    c: Check, cause: RootCause | None, m: re.Match[str], line: str
) -> list[SubtaskStatus]:
    named = c.subtasks(m["v"], m["idx"], line)
    cap = cause.capacity_per_subtask if cause is not None else None
    c.expect(cap is not None and m["c"] == f"{cap:,.0f}", line, f"capacity field {cap}")
    again = _capacity(named)
    c.expect(again is not None and m["c"] == f"{again:,.0f}", line, f"recomputed {again}")
    return named


_ADVICE = re.compile(
    r"(?P<n>\d+) subtasks instead of (?P<m>\d+) would take the ~(?P<d>[\d,]+) records/s "
    r"offered at (?P<u>\d+)% utilisation.*measured ~(?P<c>[\d,]+) records/s per subtask"
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
        _, fixed = _shares(c.vertex(key["v"]), int(key["i"]))
        c.expect(rate is not None and key["k"] == f"{rate * fixed:,.0f}", line, "one key's rate")
        c.expect(cap is not None and key["c"] == f"{cap:,.0f}", line, f"capacity {cap}")
        c.expect(rate is None or cap is None or rate * fixed > cap * 0.9, line, "it would fit")
    found = _SKEWED_ADVICE.search(line)
    if found is None:
        return
    n = int(found["n"])
    c.expect(n == cause.recommended_parallelism, line, "recommended_parallelism")
    c.expect(int(found["m"]) == c.vertex(cause.vertex).parallelism, line, "parallelism")
    _, fixed = _shares(c.vertex(found["v"]), int(found["i"]))
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
    if rate is not None and cap and n:
        c.expect(found["u"] == f"{rate / (n * cap) * 100:.0f}", line, "utilisation")


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


def problems(report: Report) -> list[str]:
    """Every figure of the report's text that disagrees with its fields, as one line each."""
    check = Check(report, [])
    names = [v.name for v in report.vertices]
    shapes = _shapes(names)
    for cause in report.root_causes or ():
        for line in cause.evidence:
            hits = [(rx, f) for rx, f in shapes if rx.fullmatch(line)]
            check.expect(bool(hits), line, "no check knows this evidence line")
            for rx, shape in hits[:1]:
                match = rx.fullmatch(line)
                assert match is not None
                shape(check, cause, match, line)
        _recommendation(check, cause)
        vertex = check.vertex(cause.vertex)
        known = {s.index for s in vertex.subtasks}
        check.expect(set(cause.subtasks) <= known, cause.vertex, f"subtasks {cause.subtasks}")
    for f in report.findings:
        _finding(check, f.kind, f.vertex, f.detail, names)
    for name in unaccounted(report):
        check.problems.append(f"{name} is above OK and nothing accounts for it")
    return check.problems
