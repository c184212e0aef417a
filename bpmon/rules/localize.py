"""Bottleneck localisation on the job graph: which vertices do backpressured producers wait on?

Not "the operator after the last HIGH one" (that rule fails on diamonds, fan-in, fan-out, two
bottlenecks in series and TCP flow control). Each vertex is summarised by a :class:`VertexSummary`
(worst-subtask backpressure, busy, idle, pool usage); then, in the spirit of Dhalion's
symptom -> diagnosis split and Flink's "busiest task downstream of the backpressured ones":

Steps 1 to 4 run on the execution graph (:mod:`bpmon.rules.execution`: every subtask a node,
every channel an edge) and are lifted to vertices; steps 5 and 6 run on vertices.

1. **Busy suspects.** A vertex is one when some direct producer is above OK (it waits on this
   vertex), the vertex itself is OK or at least ``less_backpressured_margin`` less backpressured
   than that producer, and its busiest subtask is at least ``busy_min`` busy.
2. **Victims are dropped.** A suspect that is itself above OK while one of its consumers is above
   OK or is a suspect passes backpressure on: it is a victim, never the cause.
3. **Bottlenecks in series.** A vertex fed by a suspect, itself OK and at least ``saturated_busy``
   busy, is saturated too and reported as a *secondary* suspect (both limit the job).
4. **Siblings.** A suspect below ``saturated_busy`` whose producers are all explained by another,
   saturated or backpressured, consumer (fan-out) is dropped: the producers wait on that one.
5. **Idle consumers.** A producer at least ``producer_backpressure_min`` backpressured that no
   other consumer explains, feeding a consumer that is not running -> ``starved``; that is idle
   with input buffers nearly empty (``in_pool_usage <= in_pool_max``, when known) -> ``network``.
   The input pool decides where the data is stuck, not round numbers: a consumer whose remote
   input buffers are nearly empty while it is busy but not saturated is not a busy bottleneck
   (step 1 skips it) and is judged here however busy it is; and a producer only LOW counts as
   held back by the link when its output buffers are full (``out_pool_usage >= out_pool_min``)
   while the consumer's input buffers are empty. Where the runtime read the channels, a remote
   channel held by the link (:func:`bpmon.rules.channels.held_at_link`: a backlog at the
   producer, credit to send, nothing queued at the consumer) says so directly, whatever the
   producer's whole output pool (shared by all its subpartitions) shows.
   Under ``flow_control = "tcp"`` (``Observation.settings``, Flink before 1.5) a connection
   carries the channels of one exchange between two task managers, and a full receiver stops all
   of them: on the execution graph, a producer subtask above OK whose consumers all idle, on a
   channel of the same exchange and task-manager pair as a busy bottleneck subtask's input, is a
   ``head-of-line`` finding naming the producer (the collateral victim), never a root cause.
6. Backpressure nothing explains becomes an ``unexplained`` finding, never an invented cause:
   every vertex above OK either waits on a suspect, is named by a finding, or waits on a vertex
   above OK that does (a cycle of waits that ends nowhere is a finding too). So a report with
   backpressure and no root cause always says why.

Without any edge (``bpmon monitor`` without ``--topology``) the busiest vertex that is not
backpressured is the only suspect, flagged so that its confidence is lowered.

A vertex none of whose threads was ever seen on the data path (``SubtaskWindow.data_path``: no
queue operation in any sample, e.g. a main thread that sleeps to keep a program alive) is never a
suspect, however busy it looks.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, replace

from bpmon.model.evidence import table_percent
from bpmon.model.values import Finding, Observation
from bpmon.rules.channels import credit_in_transit, held_at_link, nothing_waits, remote_channels
from bpmon.rules.config import RulesConfig
from bpmon.rules.execution import execution_observation, lift, merge_findings, vertex_of
from bpmon.rules.graph import JobGraph, Mechanism, Suspect, VertexSummary, build_graph, summarize
from bpmon.rules.lag import keeps_up
from bpmon.rules.levels import level_of, max_known


@dataclass(frozen=True, slots=True)
class Localization:
    """What the search found, with what it was computed from (for the classification)."""

    suspects: tuple[Suspect, ...]
    findings: tuple[Finding, ...]
    summaries: Mapping[str, VertexSummary]
    graph: JobGraph
    with_topology: bool = True
    blamed: Mapping[str, tuple[int, ...]] | None = None


def localize(
    obs: Observation, rules: RulesConfig, roomy: frozenset[str] = frozenset()
) -> Localization:
    """Find the bottlenecks of one window (see the module docstring for the rules).

    ``roomy`` names vertices known to have headroom (their capacity takes all they are offered):
    busy as they may be, they are not what their producers wait on.
    """
    graph = build_graph(obs)
    summaries = {v.name: summarize(v) for v in obs.vertices}
    ok_max = rules.levels.ok_max
    if not any(p.above(ok_max) for p in summaries.values()):
        return Localization((), (), summaries, graph)
    if not graph.has_edges:
        return _without_topology(summaries, graph, rules)
    execution = execution_observation(obs)
    nodes = {v.name: summarize(v) for v in execution.vertices}
    on_nodes = _Search(execution, build_graph(execution), nodes, rules)
    on_subtasks = on_nodes.busy_suspects()
    lifted = lift(on_subtasks.values())
    busy = {s.vertex: s for s in lifted.suspects if s.vertex not in roomy}
    found = _Search(obs, graph, summaries, rules).run(busy)
    collateral = merge_findings(on_nodes.head_of_line(on_subtasks))
    return replace(found, findings=(*collateral, *found.findings), blamed=lifted.subtasks)


def _without_topology(
    summaries: Mapping[str, VertexSummary], graph: JobGraph, rules: RulesConfig
) -> Localization:
    ok_max, busy_min = rules.levels.ok_max, rules.bottleneck.busy_min
    pressed = tuple(n for n, p in summaries.items() if p.above(ok_max))
    free = [
        p
        for p in summaries.values()
        if p.data_path and not p.above(ok_max) and (p.busy or 0.0) >= busy_min
    ]
    if not free:
        keepers = [
            n
            for n, p in summaries.items()
            if not p.data_path and not p.above(ok_max) and (p.busy or 0.0) >= busy_min
        ]
        note = (
            f"; busy but never seen on the data path, so not blamed: {', '.join(keepers)} "
            "(name the stage threads as the profile's threads regex expects, or pass a topology)"
            if keepers
            else ""
        )
        findings = _unexplained(pressed, summaries, rules, note)
        return Localization((), findings, summaries, graph, False)
    busiest = max(free, key=lambda p: p.busy or 0.0)
    return Localization((Suspect(busiest.name, "busy", pressed),), (), summaries, graph, False)


def _unexplained(
    names: tuple[str, ...],
    summaries: Mapping[str, VertexSummary],
    rules: RulesConfig,
    note: str = "",
) -> tuple[Finding, ...]:
    out = []
    for name in names:
        bp = summaries[name].backpressure or 0.0
        level = level_of(bp, rules.levels)
        out.append(
            Finding(
                "unexplained",
                name,
                f"{name} is {level} ({bp:.2f}) but no consumer is busy, backpressured, idle "
                "on an empty input or missing: the cause may lie outside the observed job, "
                f"be transient, or need pool metrics to tell{note}",
            )
        )
    return tuple(out)


class _Search:
    """The steps of the graph search over one window; holds the inputs they share."""

    def __init__(
        self,
        obs: Observation,
        graph: JobGraph,
        summaries: Mapping[str, VertexSummary],
        rules: RulesConfig,
    ) -> None:
        self.obs = obs
        self.graph = graph
        self.summaries = summaries
        self.rules = rules
        self.ok_max = rules.levels.ok_max

    def busy_suspects(self) -> dict[str, Suspect]:
        """Steps 1 to 4: the busy bottlenecks (run on the execution graph, one per subtask)."""
        busy = self._busy_suspects()
        busy = self._drop_victims(busy)
        busy = self._add_series(busy)
        return self._drop_siblings(busy)

    def run(self, busy: dict[str, Suspect]) -> Localization:
        """Steps 5 and 6 on vertices, given the busy bottlenecks lifted from subtasks."""
        idle, findings, explained = self._idle_consumers(busy)
        suspects = (*busy.values(), *idle)
        findings += self._unaccounted(suspects, busy, explained)
        return Localization(tuple(suspects), findings, self.summaries, self.graph)

    def _unaccounted(
        self, suspects: tuple[Suspect, ...], busy: Mapping[str, Suspect], explained: set[str]
    ) -> tuple[Finding, ...]:
        """``unexplained`` findings for the vertices above OK that no suspect or finding covers.

        A vertex waiting on a consumer above OK is covered when that consumer is; the last
        vertices of a chain nothing explains get the finding. A cycle of waits covers nothing.
        """
        pressed = [n for n in self.graph.order if self.summaries[n].above(self.ok_max)]
        waits = {
            n: [c for c, _ in self.graph.consumers[n] if self.summaries[c].above(self.ok_max)]
            for n in pressed
        }
        covered = {p for s in suspects for p in s.pressing} | explained
        covered |= {n for n in pressed if any(c in busy for c, _ in self.graph.consumers[n])}
        ends = tuple(n for n in pressed if n not in covered and not waits[n])
        covered |= set(ends)
        grew = True
        while grew:
            grew = False
            for n in pressed:
                if n not in covered and any(c in covered for c in waits[n]):
                    covered.add(n)
                    grew = True
        loop = [n for n in pressed if n not in covered]
        return (
            *_unexplained(ends, self.summaries, self.rules),
            *(self._waiting_in_a_loop(n, waits[n]) for n in loop),
        )

    def _waiting_in_a_loop(self, name: str, consumers: list[str]) -> Finding:
        bp = self.summaries[name].backpressure or 0.0
        return Finding(
            "unexplained",
            name,
            f"{name} is {level_of(bp, self.rules.levels)} ({bp:.2f}) and waits on "
            f"{', '.join(consumers)}, backpressured too, in a loop of waits that no busy, idle "
            "or missing vertex ends: no root cause was found for it",
        )

    def _pressing(self, name: str, threshold: float) -> tuple[str, ...]:
        return tuple(
            e.source
            for e in self.graph.producers[name]
            if self.summaries[e.source].above(threshold)
        )

    def _busy_suspects(self) -> dict[str, Suspect]:
        margin = self.rules.bottleneck.less_backpressured_margin
        found: dict[str, Suspect] = {}
        for name in self.graph.order:
            pressing = self._pressing(name, self.ok_max)
            prof = self.summaries[name]
            if not pressing or prof.busy is None or prof.busy < self.rules.bottleneck.busy_min:
                continue
            if not prof.data_path or self._input_starved(name, pressing):
                continue
            worst = max(self.summaries[p].backpressure or 0.0 for p in pressing)
            own = prof.backpressure or 0.0
            if own <= self.ok_max or worst - own >= margin:
                found[name] = Suspect(name, "busy", pressing)
        return found

    def _input_starved(self, name: str, pressing: tuple[str, ...]) -> bool:
        """Busy but not saturated, with its remote input buffers nearly empty: it has headroom.

        A vertex its producers really wait on has its input buffers full (Flink's
        ``inPoolUsage`` near 1); one whose input does not arrive (a capped link) reads near 0
        whatever its busy time, so it is no busy bottleneck (it may be the network's victim).
        """
        prof = self.summaries[name]
        if prof.in_pool is None or prof.in_pool > self.rules.network.in_pool_max:
            return False
        if (prof.busy or 0.0) >= self.rules.bottleneck.saturated_busy:
            return False
        return bool(self._links(pressing, name))

    def _explains(self, consumer: str, busy: Mapping[str, Suspect]) -> bool:
        """Whether ``consumer`` explains its producers' backpressure (it is blocked or busy)."""
        return self.summaries[consumer].above(self.ok_max) or consumer in busy

    def _drop_victims(self, busy: dict[str, Suspect]) -> dict[str, Suspect]:
        return {
            name: s
            for name, s in busy.items()
            if not self.summaries[name].above(self.ok_max)
            or not any(self._explains(c, busy) for c, _ in self.graph.consumers[name])
        }

    def _add_series(self, busy: dict[str, Suspect]) -> dict[str, Suspect]:
        out = dict(busy)
        saturated = self.rules.bottleneck.saturated_busy
        for name in self.graph.order:
            prof = self.summaries[name]
            if name in out or prof.above(self.ok_max) or (prof.busy or 0.0) < saturated:
                continue
            if not prof.data_path:
                continue
            feeding = tuple(e.source for e in self.graph.producers[name] if e.source in out)
            if feeding:
                out[name] = Suspect(name, "busy", feeding, secondary=True)
        return out

    def _drop_siblings(self, busy: dict[str, Suspect]) -> dict[str, Suspect]:
        saturated = self.rules.bottleneck.saturated_busy

        def elsewhere(producer: str, me: str) -> bool:
            return any(
                c != me
                and (
                    self.summaries[c].above(self.ok_max)
                    or (c in busy and (self.summaries[c].busy or 0.0) >= saturated)
                )
                for c, _ in self.graph.consumers[producer]
            )

        return {
            name: s
            for name, s in busy.items()
            if (self.summaries[name].busy or 0.0) >= saturated
            or s.secondary
            or not all(elsewhere(p, name) for p in s.pressing)
        }

    def _idle_consumers(
        self, busy: Mapping[str, Suspect]
    ) -> tuple[list[Suspect], tuple[Finding, ...], set[str]]:
        suspects: list[Suspect] = []
        findings: list[Finding] = []
        explained: set[str] = set()
        for name in self.graph.order:
            if name in busy:
                continue
            pressing = tuple(
                p
                for p in self._pressing(name, self.ok_max)
                if not any(
                    c != name and self._explains(c, busy) for c, _ in self.graph.consumers[p]
                )
            )
            if not pressing:
                continue
            verdict = self._idle_verdict(name, pressing, busy)
            if isinstance(verdict, Finding):
                findings.append(verdict)
                explained.update(pressing)
            elif verdict is not None:
                suspects.append(Suspect(name, verdict, pressing))
        return self._least_busy_links(suspects), tuple(findings), explained

    def _least_busy_links(self, suspects: list[Suspect]) -> list[Suspect]:
        """Of the consumers blamed on the network for the same producers, the least busy.

        A producer stuck on one capped link cannot feed its other consumers either, so their
        inputs run dry too; the one behind the link idles most, a sibling that still works
        (busier by more than ``sibling_busy_gap``) only lost its input to the same stall.
        """
        gap = self.rules.network.sibling_busy_gap
        links = [s for s in suspects if s.mechanism == "network"]

        def busy(s: Suspect) -> float:
            return self.summaries[s.vertex].busy or 0.0

        def outdone(s: Suspect) -> bool:
            return any(
                o is not s and set(o.pressing) & set(s.pressing) and busy(s) - busy(o) > gap
                for o in links
            )

        return [s for s in suspects if s.mechanism != "network" or not outdone(s)]

    def _idle_verdict(
        self, name: str, pressing: tuple[str, ...], busy: Mapping[str, Suspect]
    ) -> Mechanism | Finding | None:
        prof, net = self.summaries[name], self.rules.network
        if not prof.running:
            clear = any(self.summaries[p].above(net.producer_backpressure_min) for p in pressing)
            return "starved" if clear else None
        if prof.above(self.ok_max):
            return None
        held = bool(held_at_link(self.obs.channels, pressing, name, self.rules))
        held = held or bool(credit_in_transit(self.obs, pressing, name, self.rules))
        starved_input = self._input_starved(name, pressing)
        if not starved_input and not self._mostly_idle(prof):
            return None
        links = self._links(pressing, name)
        if links is not None and not links:
            return None  # every channel is local: the network cannot be the limit
        if nothing_waits(remote_channels(self.obs.channels, pressing, name)):
            return None  # read channels: no data waits for the link, none for credit
        if not held and all(keeps_up(self.obs.vertex(p)) for p in pressing):
            return None  # sources that build no lag: nothing holds them back
        if not held and not self._link_bound(pressing, starved_input):
            return None
        if prof.in_pool is not None and prof.in_pool > net.in_pool_max:
            return None
        out_pool = max_known(self.summaries[p].out_pool for p in pressing)
        if not held and out_pool is not None and out_pool < net.out_pool_min:
            return None  # the channels, where read, say where the data waits better
        return "network"

    def _mostly_idle(self, prof: VertexSummary) -> bool:
        """Not busy, and idle at least ``idle_min``: what a consumer behind a link looks like."""
        net = self.rules.network
        if (prof.busy or 0.0) >= self.rules.bottleneck.busy_min:
            return False
        return prof.idle is not None and prof.idle >= net.idle_min

    def _link_bound(self, pressing: tuple[str, ...], starved_input: bool) -> bool:
        """Whether the producers clearly wait on the link.

        Clearly backpressured producers do; so do producers only LOW (a source held back by a
        link need not be HIGH) when their output buffers are full while the consumer's input
        buffers stay empty: the two pool usages say where the data is stuck, as Flink's docs
        tabulate them.
        """
        net = self.rules.network
        if any(self.summaries[p].above(net.producer_backpressure_min) for p in pressing):
            return True
        if not starved_input:
            return False
        out_pool = max_known(self.summaries[p].out_pool for p in pressing)
        return out_pool is not None and out_pool >= net.out_pool_min

    def _links(self, producers: tuple[str, ...], consumer: str) -> set[tuple[int, int]] | None:
        """Remote (sender TM, receiver TM) pairs of the edges producers -> consumer.

        None when a task manager is unknown.
        """
        receivers = self.obs.vertex(consumer).subtasks
        pairs: set[tuple[int, int]] = set()
        for edge in self.graph.producers[consumer]:
            if edge.source not in producers:
                continue
            for s in self.obs.vertex(edge.source).subtasks:
                for r in receivers:
                    if edge.partitioner == "forward" and s.index != r.index:
                        continue
                    if s.task_manager is None or r.task_manager is None:
                        return None
                    if s.task_manager != r.task_manager:
                        pairs.add((s.task_manager, r.task_manager))
        return pairs

    def head_of_line(self, busy: Mapping[str, Suspect]) -> tuple[Finding, ...]:
        """Collateral of a stalled TCP connection, on the execution graph (one node a subtask).

        Under ``flow_control = "tcp"`` (Flink before 1.5) a connection carries the channels of
        one exchange between two task managers, and a receiver without a free buffer stops the
        whole connection. A producer subtask above OK whose consumers all idle, on a channel of
        the same exchange and task-manager pair as a busy bottleneck subtask's input, waits on
        that bottleneck, not on its own consumer: a ``head-of-line`` finding names it.
        """
        if self.obs.settings.flow_control != "tcp":
            return ()
        stalled: dict[tuple[str, int, int], str] = {}
        for b in busy:
            for e in self.graph.producers[b]:
                pair = self._hop(e.source, b)
                if pair is not None:
                    stalled.setdefault((vertex_of(e.source)[0], *pair), b)
        found = []
        for name in self.graph.order:
            consumers = [c for c, _ in self.graph.consumers[name]]
            if name in busy or not self.summaries[name].above(self.ok_max) or not consumers:
                continue
            if any(self._explains(c, busy) for c in consumers):
                continue
            for c in consumers:
                pair = self._hop(name, c)
                blocker = stalled.get((vertex_of(name)[0], *pair)) if pair else None
                if blocker is not None:
                    found.append(self._head_of_line(name, c, blocker))
                    break
        return tuple(found)

    def _hop(self, producer: str, consumer: str) -> tuple[int, int] | None:
        """(sender TM, receiver TM) of a remote channel between two nodes; None if local."""
        a = self.obs.vertex(producer).subtasks
        b = self.obs.vertex(consumer).subtasks
        if not a or not b or a[0].task_manager is None or b[0].task_manager is None:
            return None
        pair = (a[0].task_manager, b[0].task_manager)
        return pair if pair[0] != pair[1] else None

    def _head_of_line(self, name: str, consumer: str, blocker: str) -> Finding:
        bp = self.summaries[name].backpressure or 0.0
        idle = self.summaries[consumer].shown_idle or 0.0
        return Finding(
            "head-of-line",
            vertex_of(name)[0],
            f"{name} is {level_of(bp, self.rules.levels)} ({bp:.2f}) while its consumer "
            f"{consumer} idles {table_percent(idle)}: under TCP flow control its channel shares a "
            f"task-manager connection with the bottleneck {blocker}, whose full receiver stops "
            "the whole connection (collateral, not a root cause)",
        )
