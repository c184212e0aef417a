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

from bpmon.model.values import (
    CauseKind,
    ChannelWindow,
    Observation,
    SubtaskWindow,
    VertexObservation,
)
from bpmon.rules.channels import credit_in_transit, held_at_link
from bpmon.rules.config import RulesConfig
from bpmon.rules.graph import Suspect
from bpmon.rules.levels import (
    blended_busy,
    blended_idle,
    busy_ratio,
    percent,
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
    evidence: tuple[str, ...]
    certainty: float = 1.0


def name_subtasks(vertex: str, indices: Sequence[int]) -> str:
    """``enrich[0]`` or ``enrich[0,2]``: how evidence names subtasks."""
    return f"{vertex}[{','.join(str(i) for i in indices)}]"


def classify(
    suspect: Suspect, loc: Localization, obs: Observation, rules: RulesConfig
) -> Classification:
    """The kind of one suspect."""
    vertex = obs.vertex(suspect.vertex)
    if suspect.mechanism == "starved":
        return Classification(
            "resource-starved",
            tuple(s.index for s in vertex.subtasks),
            (f"{vertex.name} shows no samples and no time metrics: it is not running",),
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
    lines = [f"{vertex.name} idles {percent(shown_idle(vertex) or 0.0)} waiting for input"]
    certainty = 1.0
    if pools:
        lines.append(
            f"{vertex.name} input buffers at most {max(pools):.0%} used (in pool): data does "
            "not arrive although its producers are blocked"
        )
    else:
        lines.append(f"{vertex.name} input pool usage unknown: the network is inferred")
        certainty = rules.confidence.no_pool_metrics
    if held:
        worst = max(held, key=lambda c: c.backlog)
        lines.append(
            f"{name_subtasks(worst.producer, [worst.producer_index])} holds {worst.backlog:.1f} "
            f"buffers for {name_subtasks(worst.consumer, [worst.consumer_index])} on a remote "
            f"channel with credit to send and none queued at the consumer: the data waits for "
            f"the link ({len(held)} such channel{'s' if len(held) != 1 else ''})"
        )
        certainty = 1.0
    elif transit:
        worst = max(transit, key=lambda c: c.no_credit or 0.0)
        lines.append(
            f"{name_subtasks(worst.producer, [worst.producer_index])} had buffers for "
            f"{name_subtasks(worst.consumer, [worst.consumer_index])} and no credit "
            f"{percent(worst.no_credit or 0.0)} of the time while the consumer idled with none "
            f"queued: its credit was on the way back, so the channel carries its few credits per "
            f"round trip ({len(transit)} such channel{'s' if len(transit) != 1 else ''})"
        )
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
    if vertex.kind == "sink" or (loc.with_topology and not consumers):
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
                "records per subtask unknown (no record rates): a hot key would look the same",
            ),
            rules.confidence.no_rates,
        )
    return _by_rates(vertex, hot, rest, rules, _held_back(vertex.name, loc, rules))


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
    if slower and not (skewed and held_back):
        factor = "many" if rest_cost == 0 else f"{hot_cost / rest_cost:.1f}"
        return Classification(
            "slow-subtask",
            indices,
            (
                f"{name_subtasks(vertex.name, indices)} spends {_ms(hot_cost)} per record, "
                f"{factor}x the others ({_ms(rest_cost)})",
                f"records received: {share_line}",
                contrast,
            ),
        )
    if skewed:
        skew = "many" if rest_in == 0 else f"{hot_in / rest_in:.1f}"
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
                f"{skew}x the records per subtask of the others, {why} "
                f"({_ms(hot_cost)} against {_ms(rest_cost)})",
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


def _ms(seconds: float) -> str:
    return "an unbounded time" if seconds == float("inf") else f"{seconds * 1000:.2f} ms"


def _share_line(vertex: VertexObservation, hot: list[SubtaskWindow]) -> str:
    total = sum(s.metrics.records_in_per_s or 0.0 for s in vertex.subtasks)
    got = sum(s.metrics.records_in_per_s or 0.0 for s in hot)
    share = got / total if total > 0 else 0.0
    fair = len(hot) / max(1, len(vertex.subtasks))
    verb = "receives" if len(hot) == 1 else "receive"
    who = name_subtasks(vertex.name, [s.index for s in hot])
    return (
        f"{who} {verb} {percent(share)} of the records of {vertex.name} "
        f"(fair share {percent(fair)})"
    )


def _verb(subs: Sequence[object], one: str, many: str) -> str:
    return one if len(subs) == 1 else many


def busy_span(subs: Sequence[SubtaskWindow]) -> str:
    """The busy ratios of ``subs`` as the report shows them: ``95%``, or ``90% to 99%``."""
    values = [busy_ratio(s) or 0.0 for s in subs]
    low, high = percent(min(values, default=0.0)), percent(max(values, default=0.0))
    return low if low == high else f"{low} to {high}"


def _contrast_line(vertex: str, hot: list[SubtaskWindow], rest: list[SubtaskWindow]) -> str:
    """``enrich[0] is busy 99%, the others 20% to 31%``: the figures of the report's table."""
    who = name_subtasks(vertex, [s.index for s in hot])
    return f"{who} {_verb(hot, 'is', 'are')} busy {busy_span(hot)}, the others {busy_span(rest)}"


def _busy_line(vertex: VertexObservation, hot: list[SubtaskWindow]) -> str:
    """``both subtasks of enrich are busy 97% to 99%``: the figures of the report's table."""
    span, n = busy_span(hot), len(vertex.subtasks)
    if len(hot) < n:
        who = name_subtasks(vertex.name, [s.index for s in hot])
        return f"{who} {_verb(hot, 'is', 'are')} busy {span}"
    if n == 1:
        return f"the only subtask of {vertex.name} is busy {span}"
    every = "both" if n == 2 else f"all {n}"
    return f"{every} subtasks of {vertex.name} are busy {span}"


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
        (f"{name_subtasks(vertex.name, indices)} spill {total:,.0f} bytes/s to disk",),
    )
