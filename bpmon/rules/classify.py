"""The kind of a bottleneck: how its subtasks differ (Dhalion's diagnosers, per subtask).

For a *busy* suspect, its busy subtasks are those at least ``busy_share_of_max`` as busy as its
busiest one. Then, first match wins:

- ``spilling``: a subtask's pipelined or hybrid outputs spill to disk (its metrics' ``spill``) at
  least ``spill_bytes_per_s_min`` bytes/s; these subtasks are named. A vertex whose every output
  is a blocking exchange writes all of it to disk by design, which is not a cause.
- ``slow-sink``: the vertex is a sink (kind ``sink``, or no consumer in the graph).
- ``slow-operator``: every subtask is busy; the operator as a whole lacks capacity.
- ``slow-subtask``: the busy subtasks spend at least ``slow_subtask_ratio`` times as long per
  record (busy / records in) as the others, by the time accounting and also by the busy share
  blended with the samples: a slow instance. Checked before skew because a slow
  instance can also show uneven counts for a while (its input buffers drain long after the fast
  ones emptied), while a hot key raises the records, not the time each one takes. Not while
  every producer is HIGH and the busy subtasks receive ``skew_ratio`` times the others'
  records: held back, an exchange waits for its slowest channel, so a slow instance receives no
  more than the others, and those counts are a hot key's.
- ``data-skew``: the busy subtasks receive on average at least ``skew_ratio`` (Dhalion: 1.5) times
  the records per second of the others (``records_in_per_s``) at a similar time per record; they
  are named.
- otherwise ``slow-operator`` (a mild unevenness that neither rule explains).

Without record rates (a py-spy target), a few busy subtasks among idle ones are reported as
``slow-subtask`` with confidence lowered by ``[confidence] no_rates``: from samples alone a hot key
and a slow instance look the same, and the evidence says so.

A ``network`` suspect names the consuming vertex's idle subtasks; a ``starved`` one becomes
``resource-starved`` (confidence lowered by ``not_running``).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

from bpmon.model.evidence import (
    EvidenceLine,
    EvidencePart,
    count,
    line,
    milliseconds,
    percent,
    rounded_percent,
    subtasks,
    times,
    whole,
)
from bpmon.model.values import (
    CauseKind,
    ChannelWindow,
    Observation,
    SubtaskWindow,
    VertexObservation,
)
from bpmon.rules.chains import chain_share, dominates
from bpmon.rules.channel_lines import held_line, transit_line
from bpmon.rules.channels import credit_in_transit, held_at_link
from bpmon.rules.config import RulesConfig
from bpmon.rules.graph import Suspect
from bpmon.rules.levels import (
    blended_busy,
    blended_idle,
    busy_ratio,
    shown_idle,
)
from bpmon.rules.localize import Localization


@dataclass(frozen=True, slots=True)
class Classification:
    """A suspect's kind, the subtasks it names, the evidence for the kind, and a certainty.

    Attributes:
        certainty: a factor in [0, 1] applied to the confidence (1 when nothing is missing).
    """

    kind: CauseKind
    subtasks: tuple[int, ...]
    evidence: tuple[EvidenceLine, ...]
    certainty: float = 1.0


def classify(
    suspect: Suspect, loc: Localization, obs: Observation, rules: RulesConfig
) -> Classification:
    """The kind of one suspect."""
    vertex = obs.vertex(suspect.vertex)
    if suspect.mechanism == "starved":
        return Classification(
            "resource-starved",
            tuple(s.index for s in vertex.subtasks),
            (line(vertex.name, " shows no samples and no time metrics: it is not running"),),
            rules.confidence.not_running,
        )
    if suspect.mechanism == "network":
        held = held_at_link(obs.channels, suspect.pressing, vertex.name, rules)
        transit = credit_in_transit(obs, suspect.pressing, vertex.name, rules)
        return _network(vertex, rules, held, transit)
    return _busy_kind(vertex, loc, rules, _only_blocking_outputs(obs, vertex.name))


def _only_blocking_outputs(obs: Observation, name: str) -> bool:
    outputs = [e for v in obs.vertices for e in v.inputs if e.source == name]
    return bool(outputs) and all(e.exchange == "blocking" for e in outputs)


def _network(
    vertex: VertexObservation,
    rules: RulesConfig,
    held: Sequence[ChannelWindow] = (),
    transit: Sequence[ChannelWindow] = (),
) -> Classification:
    idle_min = rules.network.idle_min
    idle = [s for s in vertex.subtasks if (blended_idle(s) or 0.0) >= idle_min]
    pools = [
        s.metrics.in_pool_usage for s in vertex.subtasks if s.metrics.in_pool_usage is not None
    ]
    name = vertex.name
    idles = percent("idle", shown_idle(vertex) or 0.0, name)
    lines = [line(name, " idles ", idles, " waiting for input")]
    certainty = 1.0
    if pools:
        lines.append(
            line(
                name,
                " input buffers at most ",
                rounded_percent("in-pool", max(pools), name),
                " used (in pool): data does not arrive although its producers are blocked",
            )
        )
    else:
        lines.append(line(name, " input pool usage unknown: the network is inferred"))
        certainty = rules.confidence.no_pool_metrics
    if held or transit:
        lines.append(held_line(held, name) if held else transit_line(transit, name))
        certainty = 1.0
    return Classification("network", tuple(s.index for s in idle), tuple(lines), certainty)


def busy_subtasks(vertex: VertexObservation, rules: RulesConfig) -> list[SubtaskWindow]:
    """The subtasks at least ``busy_share_of_max`` as busy as the busiest one."""
    values = [(s, blended_busy(s)) for s in vertex.subtasks]
    top = max((b for _, b in values if b is not None), default=0.0)
    cut = top * rules.kinds.busy_share_of_max
    return [s for s, b in values if b is not None and top > 0 and b >= cut]


def _busy_kind(
    vertex: VertexObservation, loc: Localization, rules: RulesConfig, blocking_only: bool = False
) -> Classification:
    hot = busy_subtasks(vertex, rules)
    indices = tuple(s.index for s in hot)
    spill = None if blocking_only else _spilling(vertex, rules)
    if spill is not None:
        return spill
    consumers = loc.graph.consumers.get(vertex.name, ())
    sink = vertex.kind == "sink" or (loc.with_topology and not consumers)
    if sink and _writing(vertex, indices):
        return Classification("slow-sink", indices, (_busy_line(vertex, hot),))
    rest = [s for s in vertex.subtasks if s not in hot]
    if not rest:
        return Classification("slow-operator", indices, (_busy_line(vertex, hot),))
    if any(s.metrics.records_in_per_s is None for s in vertex.subtasks):
        return Classification(
            "slow-subtask",
            indices,
            (
                _contrast_line(vertex.name, hot, rest),
                line(
                    "records per subtask unknown (no record rates): a hot key would look the same"
                ),
            ),
            rules.confidence.no_rates,
        )
    return _by_rates(vertex, hot, rest, rules, _held_back(vertex.name, loc, rules))


def _writing(vertex: VertexObservation, subtasks: Sequence[int]) -> bool:
    """Whether a sink vertex's time goes to its writing: False only for a chain whose samples
    show an operator before the sink taking it (:func:`~bpmon.rules.chains.dominates`), as a
    SQL job's ``GroupAggregate -> Writer``; that chain is then classified by its busy operator
    (slow operator, hot key, slow subtask), not as a slow external system."""
    share = chain_share(vertex, subtasks)
    return share is None or not dominates(share) or share.position == len(vertex.operators) - 1


def _held_back(name: str, loc: Localization, rules: RulesConfig) -> bool:
    """Whether every producer of ``name`` is HIGH: blocked on its outputs most of the window."""
    producers = [loc.summaries.get(e.source) for e in loc.graph.producers.get(name, ())]
    return bool(producers) and all(
        p is not None and p.above(rules.levels.low_max) for p in producers
    )


def _by_rates(
    vertex: VertexObservation,
    hot: list[SubtaskWindow],
    rest: list[SubtaskWindow],
    rules: RulesConfig,
    held_back: bool,
) -> Classification:
    """Slow instance or hot key, from the time per record and the records each subtask receives.

    The time per record of lightly loaded subtasks is the weaker figure on Flink: its busy total
    leaves out the idle stretch under way at each reading (``TimerGauge`` adds a stretch when it
    ends), so over a short span a subtask 15% busy read 6-30% on the same job. The record counts
    are exact. While the producers are held back (HIGH), a slow instance receives no more
    records than the others (every exchange waits for its slowest channel), so busy subtasks
    receiving ``skew_ratio`` times the others' records are a hot key whatever the times say.
    """
    indices = tuple(s.index for s in hot)
    hot_in, rest_in = _mean_rate(hot), _mean_rate(rest)
    skewed = hot_in > 0 and hot_in >= rules.kinds.skew_ratio * rest_in
    share_line = _share_line(vertex, hot)
    contrast = _contrast_line(vertex.name, hot, rest)
    hot_cost, rest_cost = _time_per_record(hot), _time_per_record(rest)
    slower = _slower(hot_cost, rest_cost, rules) and _slower(
        _time_per_record(hot, blended_busy), _time_per_record(rest, blended_busy), rules
    )
    name, others = vertex.name, tuple(s.index for s in rest)
    hot_ms = milliseconds("time-per-record", hot_cost, name, indices)
    rest_ms = milliseconds("time-per-record", rest_cost, name, others)
    if slower and not (skewed and held_back):
        factor = float("inf") if rest_cost == 0 else hot_cost / rest_cost
        return Classification(
            "slow-subtask",
            indices,
            (
                line(
                    subtasks(name, indices),
                    " spends ",
                    hot_ms,
                    " per record, ",
                    times("slower", factor, name, indices),
                    "x the others (",
                    rest_ms,
                    ")",
                ),
                line("records received: ", share_line.parts),
                contrast,
            ),
        )
    if skewed:
        skew = float("inf") if rest_in == 0 else hot_in / rest_in
        why = (
            "while their producers were held back, which a slow instance cannot cause: time "
            "per record"
            if slower
            else "at the same time per record"
        )
        return Classification(
            "data-skew",
            indices,
            (
                share_line,
                line(
                    times("records-factor", skew, name, indices),
                    f"x the records per subtask of the others, {why} (",
                    hot_ms,
                    " against ",
                    rest_ms,
                    ")",
                ),
                contrast,
            ),
        )
    return Classification(
        "slow-operator", tuple(s.index for s in vertex.subtasks), (contrast, share_line)
    )


def _mean_rate(subs: list[SubtaskWindow]) -> float:
    return sum(s.metrics.records_in_per_s or 0.0 for s in subs) / len(subs)


def _slower(hot_cost: float, rest_cost: float, rules: RulesConfig) -> bool:
    return hot_cost > 0 and hot_cost >= rules.kinds.slow_subtask_ratio * rest_cost


def _time_per_record(
    subs: list[SubtaskWindow], busy_of: Callable[[SubtaskWindow], float | None] = busy_ratio
) -> float:
    """Seconds of busy time per input record over ``subs`` (inf when busy with no records).

    Busy time is by default the one the report shows (the time accounting, else the samples),
    so the evidence's time per record can be recomputed from the report's own busy and
    records-in figures. The accounting is continuous, while a 50 ms sample grid can alias with
    periodic work (a subtask woken by its producer's 100 ms flusher may show no busy sample at
    all though it is 20% busy). ``busy_of = blended_busy`` reads it with the samples blended in:
    a slow instance must be slower that way too, because a Flink subtask's accounting over a
    short window can read a fifth of what its samples and its records say (a hot-key job's cold
    subtask: 4% busy by the accounting, 22% sampled, at 95 records/s of 1.5 ms each), which
    alone would make the hot subtask look slow.
    """
    busy = sum(busy_of(s) or 0.0 for s in subs)
    records = sum(s.metrics.records_in_per_s or 0.0 for s in subs)
    if records <= 0:
        return float("inf") if busy > 0 else 0.0
    return busy / records


def _share_line(vertex: VertexObservation, hot: list[SubtaskWindow]) -> EvidenceLine:
    total = sum(s.metrics.records_in_per_s or 0.0 for s in vertex.subtasks)
    got = sum(s.metrics.records_in_per_s or 0.0 for s in hot)
    share = got / total if total > 0 else 0.0
    fair = len(hot) / max(1, len(vertex.subtasks))
    verb = "receives" if len(hot) == 1 else "receive"
    name, indices = vertex.name, [s.index for s in hot]
    return line(
        subtasks(name, indices),
        f" {verb} ",
        percent("records-share", share, name, indices),
        f" of the records of {name} (fair share ",
        percent("fair-share", fair, name, indices),
        ")",
    )


def _verb(subs: Sequence[object], one: str, many: str) -> str:
    return one if len(subs) == 1 else many


def busy_span(vertex: str, subs: Sequence[SubtaskWindow]) -> tuple[EvidencePart, ...]:
    """The busy ratios of ``subs`` as the report shows them: ``95%``, or ``90% to 99%``."""
    values = [busy_ratio(s) or 0.0 for s in subs]
    of = [s.index for s in subs]
    low = percent("busy-least", min(values, default=0.0), vertex, of)
    high = percent("busy-most", max(values, default=0.0), vertex, of)
    if low.shown == high.shown:
        return (percent("busy", min(values, default=0.0), vertex, of),)
    return (low, " to ", high)


def _contrast_line(
    vertex: str, hot: list[SubtaskWindow], rest: list[SubtaskWindow]
) -> EvidenceLine:
    """``enrich[0] is busy 99%, the others 20% to 31%``: the figures of the report's table."""
    return line(
        subtasks(vertex, [s.index for s in hot]),
        f" {_verb(hot, 'is', 'are')} busy ",
        busy_span(vertex, hot),
        ", the others ",
        busy_span(vertex, rest),
    )


def _busy_line(vertex: VertexObservation, hot: list[SubtaskWindow]) -> EvidenceLine:
    """``both subtasks of enrich are busy 97% to 99%``: the figures of the report's table."""
    name, n = vertex.name, len(vertex.subtasks)
    span = busy_span(name, hot)
    if len(hot) < n:
        who = subtasks(name, [s.index for s in hot])
        return line(who, f" {_verb(hot, 'is', 'are')} busy ", span)
    if n == 1:
        return line(f"the only subtask of {name} is busy ", span)
    every: tuple[EvidencePart, ...] = (
        ("both",) if n == 2 else ("all ", count("parallelism", n, name))
    )
    return line(*every, f" subtasks of {name} are busy ", span)


def _spilling(vertex: VertexObservation, rules: RulesConfig) -> Classification | None:
    spilled = {
        s.index: s.metrics.spill.written_bytes_per_s
        for s in vertex.subtasks
        if s.metrics.spill is not None
    }
    heavy = {i: b for i, b in spilled.items() if b > 0 and b >= rules.kinds.spill_bytes_per_s_min}
    if not heavy:
        return None
    indices = tuple(sorted(heavy))
    total = sum(heavy.values())
    return Classification(
        "spilling",
        indices,
        (
            line(
                subtasks(vertex.name, indices),
                " spill ",
                whole("spill", total, "bytes/s", vertex.name, indices),
                " bytes/s to disk",
            ),
        ),
    )
