"""What each operator kind does to a chunk of records: records out per record in.

Records are opaque objects (the runtime emits integers): only their number and size matter to the
network. Fractions (``filter``'s ``selectivity``, ``flatmap``'s ``fanout``) are held exactly with
an accumulator rather than drawn at random, so a run's volumes are repeatable.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

from bpmon.scenario import OperatorSpec


class Transform:
    """Turns a chunk of input records into the operator's output records."""

    def __init__(self, spec: OperatorSpec) -> None:
        self.kind = spec.kind
        self._factor = spec.fanout * spec.selectivity
        self._carry = 0.0

    def apply(self, records: Sequence[object]) -> Sequence[object]:
        """The output records for ``records`` (empty for a sink)."""
        kind = self.kind
        if kind == "map" or (kind != "sink" and self._factor == 1.0):
            return records
        if kind == "sink":
            return ()
        self._carry += self._factor * len(records)
        count = int(self._carry)
        self._carry -= count
        if count <= len(records):
            return records[:count]
        repeat = math.ceil(count / len(records))
        return (list(records) * repeat)[:count]
