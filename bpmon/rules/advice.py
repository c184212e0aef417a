"""What to do about a bottleneck: its measured capacity, the rate it would be offered, the advice.

Capacity is the autoscaler's busy-time true processing rate per subtask (the records it would take
at 100% busy), as :mod:`bpmon.model.capacity` defines it once for the report, the comparison of runs
and the history's analysis: the mean over the subtasks at least ``[capacity] min_busy`` busy of the
records they handle over their busy ratio. The offered rate is :mod:`bpmon.rules.offered`'s (the
sources' records out plus the growth of their lag, carried along the graph; estimated, a step at
a time, where the sources report no lag, and the evidence then says so).

The parallelism suggested is the smallest that takes the offered rate at ``utilisation_target``
(0.9 by default: within one subtask of the least that removes the bottleneck); ``bpmon run
--verify`` re-runs the job with it and says whether the backpressure is gone.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from bpmon.model import capacity
from bpmon.model.evidence import EvidenceLine, count, line, rounded_percent, subtasks, whole
from bpmon.model.values import Observation, SubtaskWindow, VertexObservation
from bpmon.rules.channels import credit_in_transit
from bpmon.rules.classify import Classification
from bpmon.rules.config import RulesConfig
from bpmon.rules.graph import Suspect
from bpmon.rules.levels import busy_ratio
from bpmon.rules.offered import estimated


def capacity_of_windows(subs: Sequence[SubtaskWindow], min_busy: float) -> float | None:
    """Records/s per subtask at 100% busy of ``subs`` (:mod:`bpmon.model.capacity`), their busy read
    as the report shows it; None without rates or busy subtasks."""
    figures = (
        (s.metrics.records_in_per_s, s.metrics.records_out_per_s, busy_ratio(s)) for s in subs
    )
    return capacity.capacity_per_subtask(figures, min_busy)


@dataclass(frozen=True, slots=True)
class Advice:
    """The capacity evidence lines and the recommendation for one root cause.

    The figures the lines quote are also given as numbers (the root cause's fields of
    ``docs/report.md``), so that the text and the JSON carry the same values.

    Attributes:
        capacity_per_subtask: records/s one of the named subtasks handles at 100% busy.
        offered_rate: records/s the vertex's inputs would offer (DS2 estimate).
        recommended_parallelism: the parallelism the recommendation names.
        backlog_records: the records its sources owe (pendingRecords), carried to the vertex.
        catch_up_rate: the records/s more that drain them within ``[sizing] catch_up_s``.
    """

    evidence: tuple[EvidenceLine, ...]
    recommendation: str
    capacity_per_subtask: float | None = None
    offered_rate: float | None = None
    recommended_parallelism: int | None = None
    backlog_records: float | None = None
    catch_up_rate: float | None = None


_ESTIMATE = (
    "the sources' records out plus the growth of their pendingRecords, carried along the graph"
)
_ESTIMATED = (
    "estimated: the sources report no pendingRecords, so each counts as its records out / the "
    "share of time it was not backpressured, as Flink's autoscaler estimates a source's rate, at "
    "most twice what it emits; a step, to check again after it"
)
_UNCERTAIN = (
    "the least it is offered; the estimate is at most twice what the sources emit, so it may "
    "be up to twice the true rate, or short of it by any amount (a source that reports no lag "
    "only says it would send more)"
)
_NO_BACKLOG = (
    "the sources report no pendingRecords: what they owe already, and the rate that would "
    "drain it, are unknown"
)
_NO_LAG = (
    "the offered rate is unknown: the sources report no pendingRecords (FLIP-33), so how much "
    "more they would send is not measured"
)


def advise(
    suspect: Suspect,
    cls: Classification,
    obs: Observation,
    offered: Mapping[str, float | None],
    rules: RulesConfig,
    backlogs: Mapping[str, float | None] | None = None,
) -> Advice:
    """Capacity evidence and an actionable recommendation for a classified suspect
    (``backlogs``: the records each vertex's sources owe, for the catch-up)."""
    vertex = obs.vertex(suspect.vertex)
    demand = whole_rate(offered.get(vertex.name))
    backlog = (backlogs or {}).get(vertex.name)
    if cls.kind in ("slow-operator", "slow-sink"):
        return _scale(vertex, cls, demand, rules, estimated(obs), backlog)
    if cls.kind == "data-skew":
        return _skew(vertex, cls, demand, rules)
    if cls.kind == "slow-subtask":
        return _slow_instance(vertex, cls, rules)
    producers = ", ".join(suspect.pressing)
    if cls.kind == "network" and credit_in_transit(obs, suspect.pressing, vertex.name, rules):
        return Advice((), _round_trip_advice(vertex.name, producers))
    return Advice((), _fixed_advice(cls.kind, vertex.name, producers))


def _round_trip_advice(name: str, producers: str) -> str:
    """The recommendation for channels limited by their credit per round trip."""
    return (
        f"Give the channels from {producers} to {name} more credit: raise the exclusive buffers "
        "per channel (taskmanager.network.memory.buffers-per-channel) or the floating buffers "
        "per gate (floating-buffers-per-gate); each channel carries only as many buffers per "
        "round trip as it has credit, so the latency, not the bandwidth, limits it. Or avoid the "
        "hop by co-locating them (forward exchange, slot sharing)."
    )


def _named(vertex: str, indices: Sequence[int]) -> str:
    """``enrich[0]`` or ``enrich[0,2]`` as a recommendation names subtasks."""
    return line(subtasks(vertex, indices)).text


def whole_rate(rate: float | None) -> float | None:
    """A rate as the text quotes it, whole records/s: the JSON field then carries the same.

    A rate that rounds to 0 is no rate to size anything with: None.
    """
    return float(round(rate)) if rate is not None and round(rate) > 0 else None


def _fixed_advice(kind: str, name: str, producers: str) -> str:
    """The recommendation for the kinds that have no capacity figure."""
    if kind == "network":
        return (
            f"Raise the bandwidth between the task managers of {producers} and {name}, or the "
            "network buffers of that exchange (buffers-per-channel, floating-buffers-per-gate), "
            "or avoid the hop by co-locating them (forward exchange, slot sharing)."
        )
    if kind == "resource-starved":
        return (
            f"Give the job more task slots (more task managers or slots per task manager), or "
            f"lower {name}'s parallelism or share slots, so that {name} can run; "
            f"{producers} wait on it."
        )
    return (
        f"Give {name} more memory (managed or network memory) so that it spills less, "
        "or shrink its state (pre-aggregate, smaller windows)."
    )


def _scale(
    vertex: VertexObservation,
    cls: Classification,
    demand: float | None,
    rules: RulesConfig,
    guessed: bool = False,
    backlog: float | None = None,
) -> Advice:
    # When only some subtasks are named (a slow instance, a hot key), they are the ones that
    # cannot keep up: the vertex is sized from their capacity, not from the average.
    named = [s for s in vertex.subtasks if s.index in cls.subtasks]
    subset = bool(named) and len(named) < len(vertex.subtasks)
    cap = whole_rate(
        capacity_of_windows(named if subset else vertex.subtasks, rules.capacity.min_busy)
    )
    target = rules.capacity.utilisation_target
    n, name = vertex.parallelism, vertex.name
    sink = cls.kind == "slow-sink"
    lead = (
        f"Scale the external system that {name} writes to (or write in larger batches or "
        "asynchronously)"
        if sink
        else f"Give {name} more capacity (more parallelism, or cheaper per-record work: "
        "batching, caching, async I/O)"
    )
    if not cap:  # no rates, or records in at 0 while busy: nothing to size it from
        return Advice((), f"{lead}; no record rates were available to size it.")
    group = [s.index for s in (named if subset else vertex.subtasks)]
    lines = [
        line(
            subtasks(name, group) if subset else name,
            " handles ~",
            whole("capacity", cap, vertex=name, of=group),
            " records/s per subtask at 100% busy (records in / busy)",
        )
    ]
    broadcast = [e.source for e in vertex.inputs if e.partitioner == "broadcast"]
    if broadcast:
        lines.append(
            line(
                f"{name} reads {', '.join(broadcast)} through a broadcast exchange: every "
                "subtask receives every record, so more subtasks do not take more of them"
            )
        )
        return Advice(
            tuple(lines),
            f"Make each record cheaper for {name} (batching, caching, a smaller broadcast "
            "input): more parallelism does not help a broadcast input.",
            cap,
            demand,
        )
    if demand is None or demand <= 0:
        lines.append(line(_NO_LAG))
        return Advice(
            tuple(lines),
            f"{lead}: it handles ~{cap:,.0f} records/s per subtask; size it from the rate your "
            "sources must sustain (parallelism = that rate / capacity per subtask).",
            cap,
        )
    how = _ESTIMATED if guessed else _ESTIMATE
    offer = whole("offered", demand, vertex=name)
    lines.append(line("its inputs would offer ~", offer, f" records/s ({how})"))
    reaching = sum(s.metrics.records_in_per_s or 0.0 for s in vertex.subtasks)
    if guessed and reaching > 0:
        lines.append(
            line(
                "how uncertain: ~",
                whole("delivered", reaching, vertex=name),
                f" records/s reach it now, {_UNCERTAIN}",
            )
        )
    tail = " if the external system scales with them" if sink else ""
    hot = _hot_share(vertex, named) if subset else None
    if hot is not None:
        return _scale_skewed(vertex, hot, lines, lead, cap, demand, rules)
    catch = _catch_up(name, backlog, rules, lines, unknown=guessed)
    target = demand + (catch or 0.0)
    need = max(n + 1, math.ceil(target / (cap * rules.capacity.utilisation_target)))
    more = f" and ~{catch:,.0f} records/s more to drain its sources' backlog" if catch else ""
    if catch and backlog:
        spare = need * cap - demand
        if spare > 0:
            lines.append(
                line(
                    "at that parallelism the backlog would drain in ~",
                    whole("drain-minutes", backlog / spare / 60, "min", vertex=name),
                    " min",
                )
            )
    return Advice(
        tuple(lines),
        f"{lead}: {need} subtasks instead of {n} would take the ~{demand:,.0f} records/s "
        f"offered{more} at {target / (need * cap):.0%} utilisation{tail} (from the measured "
        f"~{cap:,.0f} records/s per subtask; `bpmon run --verify` tries it).",
        cap,
        demand,
        need,
        backlog,
        catch,
    )


def _catch_up(
    name: str,
    backlog: float | None,
    rules: RulesConfig,
    lines: list[EvidenceLine],
    *,
    unknown: bool,
) -> float | None:
    """The records/s that drain the sources' backlog within ``[sizing] catch_up_s``, with the
    evidence line that says so (or, ``unknown``: the sources report no pendingRecords, that the
    backlog is not known); None where it is unknown or there is none."""
    if backlog is None:
        if unknown:
            lines.append(line(_NO_BACKLOG))
        return None
    if backlog <= 0:
        return None
    catch = backlog / rules.sizing.catch_up_s
    lines.append(
        line(
            "its sources owe ~",
            whole("backlog-records", backlog, "count", vertex=name),
            " records (pendingRecords): ~",
            whole("catch-up", catch, vertex=name),
            " records/s more drain them within [sizing] catch_up_s",
        )
    )
    return catch


@dataclass(frozen=True, slots=True)
class HotShare:
    """The share of a hash-partitioned vertex's records its hottest named subtask receives.

    Under a hash exchange a hot key stays on one subtask however many there are: with a share
    ``fixed`` of the records on one key and the rest spread evenly, subtask 0 of ``n`` receives
    ``fixed + (1 - fixed) / n``. ``fixed`` is solved from the share measured now.
    """

    index: int
    measured: float
    fixed: float

    def at(self, parallelism: int) -> float:
        """The hottest subtask's share at ``parallelism`` subtasks."""
        return self.fixed + (1.0 - self.fixed) / parallelism


def _hot_share(vertex: VertexObservation, named: Sequence[SubtaskWindow]) -> HotShare | None:
    """The share of the hottest of ``named`` (some of the subtasks) behind a hash exchange.

    None when no input is hashed: a rebalance or forward input (forward becomes rebalance once
    parallelisms differ) gives each subtask 1/n whoever is slow.
    """
    n = vertex.parallelism
    if n < 2 or not any(e.partitioner == "hash" for e in vertex.inputs):
        return None
    rates = [s.metrics.records_in_per_s for s in vertex.subtasks]
    total = sum(r for r in rates if r is not None)
    if None in rates or total <= 0:
        return None
    hottest = max(named, key=lambda s: s.metrics.records_in_per_s or 0.0)
    measured = (hottest.metrics.records_in_per_s or 0.0) / total
    fixed = max(0.0, (measured - 1.0 / n) / (1.0 - 1.0 / n))
    return HotShare(hottest.index, measured, fixed)


def _scale_skewed(
    vertex: VertexObservation,
    hot: HotShare,
    lines: list[EvidenceLine],
    lead: str,
    cap: float,
    demand: float,
    rules: RulesConfig,
) -> Advice:
    """Size a vertex whose hottest subtask, behind a hash exchange, is the one that cannot keep up.

    More subtasks take only the evenly spread part of the records from it; when the hot key
    alone is more than it can take, no parallelism helps and the key has to be spread.
    """
    n, name = vertex.parallelism, vertex.name
    who = _named(name, [hot.index])
    lines.append(_key_share_line(name, hot))
    sized = _size_for_share(vertex, hot, cap, demand, rules)
    if sized is None:
        return Advice(
            tuple(lines),
            f"Spread the hot key(s) that land on {who}: ~{demand * hot.fixed:,.0f} records/s "
            f"of one key is more than the ~{cap:,.0f} records/s one subtask takes, so more "
            "parallelism does not remove the bottleneck; salt the key or pre-aggregate before "
            "the hash exchange.",
            cap,
            demand,
        )
    if sized.bound is not None:
        lines.append(_beyond_bound(vertex, sized))
        return Advice(
            tuple(lines),
            f"Spread the hot key(s) that land on {who}: salt the key or pre-aggregate before "
            f"the hash exchange; more parallelism would have to grow past {sized.bound} "
            "subtasks to take them.",
            cap,
            demand,
        )
    need, share = sized.need, sized.share
    return Advice(
        tuple(lines),
        f"{lead}: {need} subtasks instead of {n} would leave {who} {share:.0%} of the "
        f"~{demand:,.0f} records/s offered, at {demand * share / cap:.0%} utilisation (from the "
        f"measured ~{cap:,.0f} records/s per subtask; `bpmon run --verify` tries it); spreading "
        "the hot key would do more.",
        cap,
        demand,
        need,
    )


def _skew(
    vertex: VertexObservation, cls: Classification, demand: float | None, rules: RulesConfig
) -> Advice:
    hot = [s for s in vertex.subtasks if s.index in cls.subtasks]
    who = _named(vertex.name, cls.subtasks)
    edges = [e for e in vertex.inputs if e.partitioner == "hash"] or list(vertex.inputs)
    exchange = f"the {edges[0].partitioner} exchange from {edges[0].source}" if edges else "it"
    lines: list[EvidenceLine] = []
    cap = whole_rate(capacity_of_windows(hot, rules.capacity.min_busy))
    total = sum(s.metrics.records_in_per_s or 0.0 for s in vertex.subtasks)
    if cap is not None and demand and total > 0:
        share = sum(s.metrics.records_in_per_s or 0.0 for s in hot) / total
        name, group = vertex.name, cls.subtasks
        lines.append(
            line(
                subtasks(name, group),
                " handles ~",
                whole("capacity", cap, vertex=name, of=group),
                " records/s per subtask at 100% busy and would be offered ~",
                whole("offered-per-subtask", demand * share / len(hot), vertex=name, of=group),
                " per subtask of the ~",
                whole("offered", demand, vertex=name),
                f" records/s offered to {name} ({_ESTIMATE})",
            )
        )
    spread = f"salt the key, pre-aggregate before {exchange}, or route hot keys separately"
    hottest = _hot_share(vertex, hot) if cap is not None and demand and hot else None
    if hottest is not None and cap is not None and demand:
        sized = _size_for_share(vertex, hottest, cap, demand, rules)
        lines.append(_key_share_line(vertex.name, hottest))
        if sized is not None and sized.bound is not None:
            lines.append(_beyond_bound(vertex, sized))
        elif sized is not None:
            need, left = sized.need, sized.share
            return Advice(
                tuple(lines),
                f"Spread the hot key(s) that land on {who} ({spread}); short of that, more "
                f"parallelism helps here even if its hot share is one key: {need} "
                f"subtasks instead of {vertex.parallelism} would leave the hottest {left:.0%} of "
                f"the ~{demand:,.0f} records/s offered, at {demand * left / cap:.0%} "
                f"utilisation (from the measured ~{cap:,.0f} records/s per subtask; `bpmon run "
                "--verify` tries it).",
                cap,
                demand,
                need,
            )
    return Advice(
        tuple(lines),
        f"Spread the hot key(s) that land on {who}: {spread}; more parallelism does not split "
        "one key.",
        cap,
        demand if demand else None,
    )


MAX_SKEW_SCALE = 4
"""A skewed vertex is sized at most this many times today's parallelism (or :data:`SKEW_FLOOR`,
whichever is more), and never past its key groups. The share model counts the unsplit part at
its worst, as one key, so when that part nearly fills a subtask the parallelism it asks for
grows without bound while the truth (many hot keys, which more subtasks do split) needs far
fewer: in the runtime corpus a Zipf window of 12 subtasks was sized 139 where 17 sufficed.
Past the bound spreading the key is the fix, and the evidence says what the model would ask."""

SKEW_FLOOR = 16
"""The bound of a small skewed vertex: one key of half the records on 3 subtasks takes 13."""


@dataclass(frozen=True, slots=True)
class ShareSizing:
    """What the share model asks of a skewed vertex: ``need`` subtasks, the hottest then
    receiving ``share`` of the records; ``bound`` the most bpmon recommends (None: within it)."""

    need: int
    share: float
    bound: int | None = None


def key_groups(vertex: VertexObservation) -> int:
    """The most subtasks a keyed vertex can have: its key groups, as Flink reports them, else
    Flink's default (1.5 x the parallelism rounded up to a power of two, 128 to 32,768)."""
    if vertex.max_parallelism is not None:
        return vertex.max_parallelism
    wanted = vertex.parallelism + vertex.parallelism // 2
    return min(max(1 << max(0, wanted - 1).bit_length(), 128), 32768)


def _size_for_share(
    vertex: VertexObservation, hot: HotShare, cap: float, demand: float, rules: RulesConfig
) -> ShareSizing | None:
    """The least parallelism above today's at which the hottest subtask's share fits its
    capacity at the utilisation target, and that share: the least p with demand x (fixed +
    (1 - fixed) / p) <= cap x target; None when the part on one key alone is too much. Above
    :data:`MAX_SKEW_SCALE` x today's, or above the vertex's key groups, it carries its
    ``bound``, and no parallelism is recommended."""
    room = cap * rules.capacity.utilisation_target / demand - hot.fixed
    if room <= 0:
        return None
    need = max(vertex.parallelism + 1, math.ceil((1.0 - hot.fixed) / room))
    bound = min(key_groups(vertex), max(MAX_SKEW_SCALE * vertex.parallelism, SKEW_FLOOR))
    return ShareSizing(need, hot.at(need), bound if need > bound else None)


def _beyond_bound(vertex: VertexObservation, sized: ShareSizing) -> EvidenceLine:
    """``at worst (one key) count would need ~17 subtasks instead of 3, more than the 16 ...``."""
    assert sized.bound is not None
    name, n = vertex.name, vertex.parallelism
    groups = key_groups(vertex)
    why = "its key groups" if sized.bound == groups else "four times today's"
    if sized.bound == SKEW_FLOOR and groups != SKEW_FLOOR:
        why = "the least bound, for a vertex this small"
    return line(
        f"counting that part at its worst, as one key, {name} would need ~",
        count("skew-needed", sized.need, name),
        " subtasks instead of ",
        count("parallelism", n, name),
        ", more than the ",
        count("skew-bound", sized.bound, name),
        f" bpmon recommends at most for a skew ({why}): spreading the key is the fix",
    )


def _key_share_line(name: str, hot: HotShare) -> EvidenceLine:
    one = [hot.index]
    return line(
        subtasks(name, one),
        " receives ",
        rounded_percent("hash-share", hot.measured, name, one),
        f" of {name}'s records through the hash exchange (~",
        rounded_percent("key-share", hot.fixed, name, one),
        " on a key no parallelism splits)",
    )


def _slow_instance(vertex: VertexObservation, cls: Classification, rules: RulesConfig) -> Advice:
    hot = [s for s in vertex.subtasks if s.index in cls.subtasks]
    rest = [s for s in vertex.subtasks if s.index not in cls.subtasks]
    who = _named(vertex.name, cls.subtasks)
    tms = sorted({s.task_manager for s in hot if s.task_manager is not None})
    where = f" (task manager {', '.join(str(t) for t in tms)})" if tms else ""
    lines: list[EvidenceLine] = []
    cap_hot = whole_rate(capacity_of_windows(hot, rules.capacity.min_busy))
    cap_rest = whole_rate(capacity_of_windows(rest, rules.capacity.min_busy))
    if cap_hot is not None and cap_rest is not None:
        name, others = vertex.name, [s.index for s in rest]
        lines.append(
            line(
                subtasks(name, cls.subtasks),
                " handles ~",
                whole("capacity", cap_hot, vertex=name, of=cls.subtasks),
                " records/s per subtask at 100% busy, the others ~",
                whole("capacity-others", cap_rest, vertex=name, of=others),
            )
        )
    return Advice(
        tuple(lines),
        f"Investigate or replace the instance running {who}{where}: look for a slow or "
        "overloaded machine, GC pauses or a noisy neighbour, and restart the subtask elsewhere; "
        "if a hot key is possible, compare the records each subtask receives.",
        cap_hot,
    )
