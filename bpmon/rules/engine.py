"""The rules engine: one :class:`Observation` in, one :class:`Report` (``docs/report.md``) out.

It reports every vertex and subtask (levels from the samples, the time accounting beside them),
localises the bottlenecks on the graph (:mod:`bpmon.rules.localize`), classifies each one
(:mod:`bpmon.rules.classify`), sizes it and says what to do (:mod:`bpmon.rules.advice`), and ranks
them by confidence, most likely first.

Confidence is a weighted mean of four pieces of evidence, each in [0, 1] (weights in
``[confidence]``): *pressure* (how far the worst producer waiting on it is from OK towards HIGH:
``(bp - ok_max) / (low_max - ok_max)``, so any HIGH producer counts fully), *separation* (the share
of that backpressure the suspect does not have: ``1 - own / worst``), *saturation* (how far its
busiest subtask is past ``busy_min``; for a network cause, how idle it is) and *agreement* (whether
samples and time accounting agree on its busy share; for a network cause, how empty its input
buffers are). It is then multiplied by the factors for what is missing or indirect: a secondary
bottleneck in series, no record rates, no pool metrics, no topology, a vertex that is not running.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace

from bpmon.model.autoscaler import AutoscalerReport
from bpmon.model.evidence import (
    EvidenceLine,
    EvidencePart,
    FigureKind,
    line,
    percent,
    ratio,
    subtasks,
)
from bpmon.model.signals import Signal
from bpmon.model.values import Finding, Observation, Report, RootCause, RuntimeLoad, SubtaskWindow
from bpmon.rules.advice import advise, capacity_of_windows
from bpmon.rules.autoscaler import decide, verdicts
from bpmon.rules.chains import with_chain_evidence
from bpmon.rules.checkpoints import checkpoint_findings, checkpoint_report
from bpmon.rules.classify import Classification, classify
from bpmon.rules.config import RulesConfig, load_rules
from bpmon.rules.debloat import debloat_finding
from bpmon.rules.graph import JobGraph, Suspect, VertexSummary, build_graph, summarize
from bpmon.rules.levels import (
    blended_busy,
    level_of,
    sample_share,
    shown_busy,
    vertex_status,
)
from bpmon.rules.localize import Localization, localize
from bpmon.rules.offered import offered_rates, pending_backlogs
from bpmon.rules.scheduling import scheduling_causes
from bpmon.rules.series import evidence_line, next_in_series, recommendation_tail
from bpmon.rules.sources import source_causes
from bpmon.rules.stall import find_stalls
from bpmon.rules.unobserved import unobserved_finding


def diagnose(observation: Observation, rules: RulesConfig | None = None) -> Report:
    """Diagnose one window: levels, root causes (ranked) and findings.

    Args:
        observation: what the collectors saw over one window.
        rules: the diagnosis parameters; the shipped ``rules/backpressure.toml`` when None.
    """
    rules = rules if rules is not None else load_rules()
    vertices = tuple(vertex_status(v, rules.levels) for v in observation.vertices)
    load = observation.load
    if load is not None and load.saturated:
        causes: list[RootCause] = []  # the figures describe the Python process, not the job
        findings: tuple[Finding, ...] = (_saturated(observation, load),)
    else:
        stalls = find_stalls(observation, *_graph_of(observation), rules)
        stalled = frozenset().union(*(region for _, region in stalls))
        rest = replace(
            observation, vertices=tuple(v for v in observation.vertices if v.name not in stalled)
        )
        causes, findings = _bottlenecks(rest, rules)
        causes = [cause for cause, _ in stalls] + causes  # nothing moves there: no bottleneck
        causes += scheduling_causes(observation)  # no slot, or spilling: no sample shows them
        named = {c.vertex for c in causes}
        causes += [c for c in source_causes(observation, rules) if c.vertex not in named]
        causes = with_chain_evidence(causes, observation)  # which member of a chain
        if load is not None and load.host_busy:  # the figures hold; say the machine was busy
            findings = (*findings, _host_busy(observation, load))
    missing = unobserved_finding(observation)
    if missing is not None:  # what the target could not show: no rule could use it
        findings = (*findings, missing)
    debloating = debloat_finding(observation)
    if debloating is not None:  # smaller buffers: the pool usages count less data
        findings = (*findings, debloating)
    window = observation.checkpoints
    checkpoints = None if window is None else checkpoint_report(window)
    if window is not None and checkpoints is not None:
        findings = (
            *findings,
            *checkpoint_findings(
                window, checkpoints, causes, vertices, observation.settings, rules.checkpoints
            ),
        )
    return Report(
        autoscaler=_autoscaler(observation, tuple(causes), rules),
        run_id=observation.run_id,
        job=observation.job,
        source=observation.source,
        window=observation.window,
        vertices=vertices,
        root_causes=tuple(causes),
        findings=findings,
        levels_from=observation.levels_from,
        channels=observation.channels,
        checkpoints=checkpoints,
    )


def _autoscaler(
    observation: Observation, causes: tuple[RootCause, ...], rules: RulesConfig
) -> AutoscalerReport | None:
    """The autoscaler's decision on the window and the verdicts on it; None without the record
    rates and busy time it decides from, or in a window that describes the runtime itself."""
    needed = {Signal.RECORD_RATES, Signal.TIME_ACCOUNTING}
    load = observation.load
    if not needed <= observation.signals or (load is not None and load.saturated):
        return None
    decision = decide(observation, rules.autoscaler)
    return replace(decision, verdicts=verdicts(decision, causes, observation))


def _bottlenecks(
    obs: Observation, rules: RulesConfig
) -> tuple[list[RootCause], tuple[Finding, ...]]:
    """The root causes of the regions that move records, ranked, and the findings."""
    loc = localize(obs, rules)
    offered = offered_rates(obs, loc.graph, rules) if loc.suspects else {}
    roomy = frozenset(s.vertex for s in loc.suspects if _has_headroom(s, obs, offered, rules))
    if roomy:  # what they wait on is elsewhere: search again without them
        loc = localize(obs, rules, roomy)
    # sizing may estimate what a source without pendingRecords offers; the room test above may not
    sizing = offered_rates(obs, loc.graph, rules, estimate=True) if loc.suspects else {}
    causes = [_root_cause(s, loc, obs, sizing, rules) for s in loc.suspects]
    causes.sort(key=lambda c: (-c.confidence, c.vertex))
    return causes, loc.findings


def _has_headroom(
    suspect: Suspect, obs: Observation, offered: Mapping[str, float | None], rules: RulesConfig
) -> bool:
    """A busy suspect, not saturated, whose measured capacity takes all it is offered.

    Its producers cannot be waiting on it: the rate they would send (records out plus the
    growth of the sources' lag) fits in it. A real bottleneck cannot take what it is offered,
    or it would not build a lag.
    """
    if suspect.mechanism != "busy" or suspect.secondary:
        return False
    vertex = obs.vertex(suspect.vertex)
    busiest = max((blended_busy(s) or 0.0 for s in vertex.subtasks), default=0.0)
    demand = offered.get(suspect.vertex)
    cap = capacity_of_windows(vertex.subtasks, rules.capacity.min_busy)
    if busiest >= rules.bottleneck.saturated_busy or not demand or not cap:
        return False
    return cap * vertex.parallelism >= demand


def _graph_of(obs: Observation) -> tuple[JobGraph, dict[str, VertexSummary]]:
    return build_graph(obs), {v.name: summarize(v) for v in obs.vertices}


def _saturated(obs: Observation, load: RuntimeLoad) -> Finding:
    """The runtime could not keep up with its own scenario: no bottleneck is named."""
    sources = [v.name for v in obs.vertices if not v.inputs] or [obs.job]
    advice = (
        "no root cause is named: run it again when the machine is quieter"
        if load.host_busy
        else "no root cause is named: lower the sources' rates or raise the operators' cost_us "
        "so the job fits in bpmon's runtime"
    )
    return Finding(kind="runtime-saturated", vertex=sources[0], detail=f"{load.reason}; {advice}")


def _host_busy(obs: Observation, load: RuntimeLoad) -> Finding:
    """Other processes held the cores, but the job's threads ran more than they waited."""
    return Finding(kind="host-busy", vertex=obs.job, detail=load.reason)


def _root_cause(
    suspect: Suspect,
    loc: Localization,
    obs: Observation,
    offered: Mapping[str, float | None],
    rules: RulesConfig,
) -> RootCause:
    cls = classify(suspect, loc, obs, rules)
    advice = advise(suspect, cls, obs, offered, rules, pending_backlogs(obs, loc.graph))
    following = []
    if advice.recommended_parallelism is not None:
        named = frozenset(s.vertex for s in loc.suspects)
        following = next_in_series(suspect.vertex, loc.graph, obs, offered, named, rules)
    evidence = (
        *cls.evidence,
        *_time_lines(suspect, obs, cls),
        *_pressure_lines(suspect, loc, obs, rules),
        *advice.evidence,
        *(evidence_line(f) for f in following),
    )
    recommendation = advice.recommendation + "".join(recommendation_tail(f) for f in following)
    return RootCause(
        vertex=suspect.vertex,
        kind=cls.kind,
        subtasks=cls.subtasks,
        confidence=round(_confidence(suspect, loc, obs, cls, rules), 2),
        evidence=evidence,
        recommendation=recommendation,
        capacity_per_subtask=advice.capacity_per_subtask,
        offered_rate=advice.offered_rate,
        recommended_parallelism=advice.recommended_parallelism,
        next_in_series=tuple(following),
        backlog_records=advice.backlog_records,
        catch_up_rate=advice.catch_up_rate,
    )


def _pressure(suspect: Suspect, loc: Localization) -> float:
    """How backpressured the producers waiting on the suspect are (through a series chain)."""
    if suspect.secondary:
        feeders = [s for s in loc.suspects if s.vertex in suspect.pressing]
        return max((_pressure(f, loc) for f in feeders), default=0.0)
    return max((loc.summaries[p].backpressure or 0.0 for p in suspect.pressing), default=0.0)


def _confidence(
    suspect: Suspect, loc: Localization, obs: Observation, cls: Classification, rules: RulesConfig
) -> float:
    cf, prof, lv = rules.confidence, loc.summaries[suspect.vertex], rules.levels
    worst = _pressure(suspect, loc)
    pressure = (worst - lv.ok_max) / (lv.low_max - lv.ok_max)
    separation = 1.0 - (prof.backpressure or 0.0) / worst if worst > 0 else 0.0
    if suspect.mechanism == "busy":
        busy_min = rules.bottleneck.busy_min
        span = 1.0 - busy_min
        saturation = 1.0 if span <= 0 else ((prof.busy or 0.0) - busy_min) / span
        agreement = _agreement(_busiest(obs, suspect.vertex), rules)
    elif suspect.mechanism == "network":
        saturation = prof.idle or 0.0
        agreement = 1.0 - min(1.0, prof.in_pool) if prof.in_pool is not None else 0.5
    else:
        saturation, agreement = 1.0, 0.5
    parts = (
        (cf.pressure, pressure),
        (cf.separation, separation),
        (cf.saturation, saturation),
        (cf.agreement, agreement),
    )
    score = sum(w * min(1.0, max(0.0, v)) for w, v in parts) / cf.weight_sum()
    score *= cls.certainty
    if suspect.secondary:
        score *= cf.secondary
    if not loc.with_topology:
        score *= cf.no_topology
    return min(1.0, max(0.0, score))


def _agreement(sw: SubtaskWindow | None, rules: RulesConfig) -> float:
    """1 when samples and time accounting agree on busy, 0.5 when not, 0.75 with one view."""
    if sw is None:
        return 0.0
    sampled, timed = sample_share(sw, sw.busy), sw.metrics.busy_ratio
    if sampled is None or timed is None:
        return 0.75
    return 1.0 if abs(sampled - timed) <= rules.levels.disagreement else 0.5


def _busiest(obs: Observation, vertex: str) -> SubtaskWindow | None:
    subs = obs.vertex(vertex).subtasks
    return max(subs, key=lambda s: blended_busy(s) or 0.0, default=None)


def _time_lines(
    suspect: Suspect, obs: Observation, cls: Classification
) -> tuple[EvidenceLine, ...]:
    """``enrich[1] busy 96% (time accounting), 99% (samples)`` for the busiest subtask.

    The view the report's table shows (the time accounting when there is one) comes first; each
    figure is named by its view, because the two rarely agree to the percent.
    """
    if suspect.mechanism != "busy":
        return ()
    sw = _busiest(obs, suspect.vertex)
    if sw is None:
        return ()
    name, one = suspect.vertex, [sw.index]
    views: list[EvidencePart] = []
    if sw.metrics.busy_ratio is not None:
        views += [percent("busy", sw.metrics.busy_ratio, name, one), " (time accounting)"]
    sampled = sample_share(sw, sw.busy)
    if sampled is not None:
        # the table shows the sampled share only where there is no time accounting
        what: FigureKind = "busy" if not views else "busy-sampled"
        views += [", "] if views else []
        views += [percent(what, sampled, name, one), " (samples)"]
    if not views:
        return ()
    return (line(subtasks(name, one), " busy ", views),)


def _pressure_lines(
    suspect: Suspect, loc: Localization, obs: Observation, rules: RulesConfig
) -> tuple[EvidenceLine, ...]:
    prof = loc.summaries[suspect.vertex]
    own = prof.backpressure
    if not loc.with_topology or suspect.secondary:
        return _indirect_lines(suspect, loc, obs)
    lines = []
    edges = {e.source: e for e in obs.vertex(suspect.vertex).inputs}
    for name in suspect.pressing:
        p = loc.summaries[name]
        bp = p.backpressure or 0.0
        pool: tuple[EvidencePart, ...] = ()
        if p.out_pool is not None:
            pool = (", out pool ", percent("out-pool", p.out_pool, name))
        lines.append(
            line(
                f"{name} is {level_of(bp, rules.levels)} (",
                ratio("backpressure", bp, name),
                pool,
                f") and feeds {suspect.vertex} through a {edges[name].partitioner} exchange",
            )
        )
    if own is not None:
        state: tuple[EvidencePart, ...] = ("not backpressured itself",)
        if own > rules.levels.ok_max:
            worst = max(suspect.pressing, key=lambda p: loc.summaries[p].backpressure or 0.0)
            bp = loc.summaries[worst].backpressure or 0.0
            state = (
                "much less backpressured than its producers (",
                ratio("backpressure", bp, worst),
                ")",
            )
        lines.append(
            line(
                f"{suspect.vertex} is {level_of(own, rules.levels)} (",
                ratio("backpressure", own, suspect.vertex),
                "): ",
                state,
            )
        )
    return tuple(lines)


def _indirect_lines(
    suspect: Suspect, loc: Localization, obs: Observation
) -> tuple[EvidenceLine, ...]:
    """Why a suspect found without a topology, or behind another bottleneck, is blamed."""
    name = suspect.vertex
    busy = percent("busy", shown_busy(obs.vertex(name)) or 0.0, name)
    if not loc.with_topology:
        verb = "is" if len(suspect.pressing) == 1 else "are"
        return (
            line(
                f"no topology: {', '.join(suspect.pressing)} {verb} backpressured and {name} "
                "is the busiest vertex on the data path that is not (busy ",
                busy,
                ")",
            ),
        )
    return tuple(
        line(f"{p}, itself a bottleneck, feeds {name}, which is saturated too (busy ", busy, ")")
        for p in suspect.pressing
    )
