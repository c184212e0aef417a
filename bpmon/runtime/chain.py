"""An operator chain inside one task: its members applied in order, records and time per member.

With ``chaining = true`` a task runs several operators (``scenario/chained.py``), as Flink's
``OperatorChain`` does: the records of one input buffer go through each member in turn, each
charging its own ``cost_us`` per record it receives to the task's service time (so a chain of a
500 us map and a 1,500 us map handles at most 500 records/s per subtask) and applying its own
fanout or selectivity. Each member counts the records it received and emitted and the service
time it charged, which the metrics report per operator: when a chain is the bottleneck, the
diagnosis names the member that takes its time.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from bpmon.runtime.operators import Transform
from bpmon.scenario import OperatorSpec

NS_PER_US = 1000
"""A chained task's service time is charged in nanoseconds (its ServiceTime costs 1 ns)."""


class ChainMember:
    """One operator of a chain in one subtask: what it costs and what it counted."""

    __slots__ = ("busy_us", "cost_us", "name", "records_in", "records_out", "transform")

    def __init__(self, spec: OperatorSpec, index: int) -> None:
        self.name = spec.name
        self.cost_us = spec.cost_of(index)
        self.transform = Transform(spec)
        self.records_in = 0
        self.records_out = 0
        self.busy_us = 0.0


class Chain:
    """The members of one chained subtask.

    Args:
        spec: the chain (its ``members``).
        index: the subtask index (``slow_subtasks`` of each member apply).
        charge_ns: charges service time to the task, in nanoseconds.
    """

    def __init__(self, spec: OperatorSpec, index: int, charge_ns: Callable[[int], None]) -> None:
        self.members = [ChainMember(m, index) for m in spec.members]
        self._source_head = spec.members[0].kind == "source"
        self._charge_ns = charge_ns

    def cost_us(self) -> float:
        """Service time per record entering the chain, ignoring fanout (for chunk sizing)."""
        return sum(m.cost_us for m in self.members)

    def from_source(self, records: Sequence[object]) -> Sequence[object]:
        """Records a source head emitted, through the rest of the chain."""
        head = self.members[0]
        head.records_out += len(records)
        cost = head.cost_us * len(records)
        head.busy_us += cost
        self._charge_ns(int(cost * NS_PER_US))
        return self._through(self.members[1:], records)

    def apply(self, records: Sequence[object]) -> Sequence[object]:
        """Input records of the task, through every member; what the tail emits."""
        members = self.members[1:] if self._source_head else self.members
        return self._through(members, records)

    def _through(
        self, members: Sequence[ChainMember], records: Sequence[object]
    ) -> Sequence[object]:
        for member in members:
            if not records:
                break
            member.records_in += len(records)
            cost = member.cost_us * len(records)
            member.busy_us += cost
            self._charge_ns(int(cost * NS_PER_US))
            records = member.transform.apply(records)
            member.records_out += len(records)
        return records

    def totals(self) -> tuple[tuple[str, int, int, float], ...]:
        """Each member's name, records in and out, and service time in us so far (any thread)."""
        return tuple((m.name, m.records_in, m.records_out, m.busy_us) for m in self.members)
