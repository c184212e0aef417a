"""An operator chain inside one task: its members run nested, each serving its own cost.

With ``chaining = true`` a task runs several operators (``scenario/chained.py``), as Flink's
``OperatorChain`` does, and as there they run NESTED on the task's thread: the head works on a
chunk of records, then hands its output to the next member through one call
(:meth:`Chain._hand_over`, Flink's ``ChainingOutput.pushToOperator``), which works and hands
over in turn. A stack sample taken while member ``k`` works therefore shows exactly ``k``
hand-over frames: the ``bpmon-runtime`` profile's ``chain_hop``, from which the collectors tell
which member is on the stack (``bpmon/rules/chains.py``), as they would on a Flink thread. A chain
may branch (``"a -> (b, c)"``, as Flink chains an operator to each of several forward
consumers): a member hands its output to each member chained to it, and writes it to its own
outputs that leave the task (as Flink's ``BroadcastingOutputCollector`` gives each record to
every output of an operator).

Each member serves its own ``cost_us`` per record it receives inside its own frames
(:class:`MemberService`), applying its own fanout or selectivity and counting the records it
received and emitted, so a chain of a 500 us map and a 1,500 us map still handles at most 500
records/s per subtask. Nothing the scenario configures is reported as a measurement: which
member takes the chain's time is for the stack samples to show.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Collection, Sequence

from bpmon.runtime.noise import CostNoise, cost_noise
from bpmon.runtime.operators import Transform
from bpmon.scenario import OperatorSpec

MAX_CREDIT_S = 0.02
"""Oversleep a member may count as service already given (``ServiceTime``'s ``max_lag_s``)."""


class MemberService:
    """Makes one chain member spend ``cost_us`` per record, inside the member's own frames.

    Unlike ``pacing.ServiceTime``, which counts any gap since its last charge as service given
    (up to its lag), a member serves each charge at once and credits only its OWN oversleep: the
    time the sleep ran past its end (a late wake-up, a wait for the GIL). The time the other
    members of the chain spent between two of its charges is theirs, not its service, so the
    chain's capacity stays ``1 / sum(cost)`` and each member's time stays inside its frames.
    The credit is at most :data:`MAX_CREDIT_S`. Owned by the task thread; not thread-safe.
    """

    __slots__ = ("_cost", "_credit", "_noise", "_now", "_sleep")

    def __init__(
        self,
        cost_us: float,
        now: Callable[[], float],
        sleep: Callable[[float], None],
        noise: CostNoise | None = None,
    ) -> None:
        """Serve ``cost_us`` microseconds per record (``slow_subtasks`` applied) on ``now``, or
        costs drawn around it by ``noise`` (``cost_cv``); ``sleep`` may raise to abort a long
        service (the job cancelled)."""
        self._cost = cost_us / 1_000_000
        self._now = now
        self._sleep = sleep
        self._noise = noise
        self._credit = 0.0

    def charge(self, records: int) -> None:
        """Serve ``records`` records now, less the oversleep credited so far."""
        noise = self._noise
        cost = records * self._cost if noise is None else noise.seconds(records)
        owed = cost - self._credit
        if owed <= 0:
            self._credit = -owed
            return
        until = self._now() + owed
        self._serve(until)
        self._credit = min(MAX_CREDIT_S, max(0.0, self._now() - until))

    def _serve(self, until: float) -> None:
        """Sleep until ``until``: the member is busy serving records (one named frame)."""
        while (remaining := until - self._now()) > 0:
            self._sleep(remaining)


class ChainMember:
    """One operator of a chain in one subtask: what it costs and what it counted."""

    __slots__ = ("cost_us", "name", "records_in", "records_out", "service", "transform")

    def __init__(
        self,
        spec: OperatorSpec,
        index: int,
        now: Callable[[], float],
        sleep: Callable[[float], None],
        seed: int = 0,
    ) -> None:
        self.name = spec.name
        self.cost_us = spec.cost_of(index)
        noise = cost_noise(self.cost_us, spec.cost_cv, seed, spec.name, index)
        self.service = MemberService(self.cost_us, now, sleep, noise)
        self.transform = Transform(spec)
        self.records_in = 0
        self.records_out = 0


class Chain:
    """The members of one chained subtask, run nested.

    Members are in the chain's order (``spec.members``: each after the member it is chained
    to); a member hands its output to each member chained to it, in order (a branching chain,
    ``"a -> (b, c)"``), and gives it to ``emit`` when it has outputs of its own that leave the
    task. The hand-over from member ``p`` to member ``q`` passes ``q - p`` hop frames, so a
    stack sample taken while member ``k`` works shows exactly ``k`` of them, in a branching
    chain too: siblings are told apart by the samples (one frame per hop, as Flink's stacks
    show, would give siblings one position).

    Args:
        spec: the chain (its ``members``).
        index: the subtask index (``slow_subtasks`` of each member apply).
        emit: writes records a member emitted to its outputs that leave the task, called with
            the member's position and the records.
        writers: the positions of the members that have such outputs.
        now: the task's clock, seconds.
        sleep: the task's sleep (raises when the job is cancelled).
        seed: the scenario's seed (the members' noisy costs).
    """

    def __init__(
        self,
        spec: OperatorSpec,
        index: int,
        emit: Callable[[int, Sequence[object]], None],
        writers: Collection[int],
        *,
        now: Callable[[], float] = time.monotonic,
        sleep: Callable[[float], None] = time.sleep,
        seed: int = 0,
    ) -> None:
        self.members = [ChainMember(m, index, now, sleep, seed) for m in spec.members]
        position = {m.name: i for i, m in enumerate(spec.members)}
        self._children = [
            tuple(k for k, m in enumerate(spec.members) if k and m.inputs[0].source == name)
            for name in position
        ]
        self._writes = [i in writers for i in range(len(self.members))]
        self._emit = emit

    def cost_us(self) -> float:
        """Service time per record entering the chain, ignoring fanout (for chunk sizing)."""
        return sum(m.cost_us for m in self.members)

    def from_source(self, records: Sequence[object]) -> None:
        """Records a source head emitted: served by the head, then handed on."""
        head = self.members[0]
        head.records_out += len(records)
        head.service.charge(len(records))
        if records:
            self._pass_on(0, records)

    def apply(self, records: Sequence[object]) -> None:
        """Input records of the task, through the head and on through the chain."""
        if records:
            self._run(0, records)

    def _run(self, position: int, records: Sequence[object]) -> None:
        """Member ``position`` works on ``records`` and passes its output on."""
        member = self.members[position]
        member.records_in += len(records)
        member.service.charge(len(records))
        out = member.transform.apply(records)
        member.records_out += len(out)
        if out:
            self._pass_on(position, out)

    def _pass_on(self, position: int, records: Sequence[object]) -> None:
        """What member ``position`` emitted: to its outputs, then to each member chained to it."""
        if self._writes[position]:
            self._emit(position, records)
        for child in self._children[position]:
            self._hand_over(position + 1, child, records)

    def _hand_over(self, hop: int, target: int, records: Sequence[object]) -> None:
        """One hop of the chain (Flink's ``ChainingOutput.pushToOperator``): member ``target``
        runs inside this frame once ``hop`` reaches it, so a stack shows one of these per
        position it is past."""
        if hop < target:
            self._hand_over(hop + 1, target, records)
        else:
            self._run(target, records)

    def totals(self) -> tuple[tuple[str, int, int], ...]:
        """Each member's name and records in and out so far (any thread)."""
        return tuple((m.name, m.records_in, m.records_out) for m in self.members)
