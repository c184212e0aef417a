"""Routing records of one subtask to the subpartitions of one outgoing edge (partitioners).

- ``forward``: subtask i writes to subpartition i (equal parallelism, checked by the loader);
- ``rebalance``: round robin per record, as Flink's ``RebalancePartitioner`` (which starts at a
  random channel);
- ``hash``: uniformly random keys spread evenly over the subtasks; with ``skew`` a share of the
  records carries one hot key that hashes to subtask 0; with ``keys`` each record carries a key
  drawn from the distribution and goes where Flink's key groups send it (``keygroups.py``);
- ``broadcast``: every record to every subpartition.

Records are routed a chunk at a time, so that the common cases (forward, rebalance, broadcast) write
whole slices with :meth:`ResultPartition.write_all` instead of one call per record; the bytes and
the order per subpartition are exactly those of routing one record at a time.
"""

from __future__ import annotations

import random
from collections.abc import Sequence

from bpmon.runtime.keygroups import KeyTable
from bpmon.runtime.partition import ResultPartition


class Output:
    """One outgoing edge of one subtask: its result partition and its partitioner.

    Args:
        partition: where the records go.
        partitioner: ``forward``, ``rebalance``, ``hash`` or ``broadcast``.
        record_bytes: serialized size of each record the operator emits.
        index: the producing subtask's index (forward targets it; rebalance starts next to it).
        rng: the subtask's seeded random generator (hash keys).
        skew: ``hash`` only: the hot key's share of the records.
        keys: ``hash`` only: the key distribution and each key's subtask (instead of ``skew``).
    """

    def __init__(
        self,
        partition: ResultPartition,
        partitioner: str,
        record_bytes: int,
        index: int,
        rng: random.Random,
        skew: float | None = None,
        keys: KeyTable | None = None,
    ) -> None:
        self.partition = partition
        self.partitioner = partitioner
        self.record_bytes = record_bytes
        self._n = partition.num_subpartitions
        self._forward = index if partitioner == "forward" else 0
        self._next = (index + 1) % self._n
        self._rng = rng
        self._skew = skew or 0.0
        self._keys = keys
        self._emit = partition.writer(record_bytes)

    @property
    def available(self) -> bool:
        """True when the partition's pool could give a buffer without waiting."""
        return self.partition.pool.is_available

    def write(self, records: Sequence[object]) -> None:
        """Route and write ``records`` (may block in the pool: hard backpressure)."""
        if not records:
            return
        kind = self.partitioner
        if kind == "forward":
            self.partition.write_all(records, self.record_bytes, self._forward)
        elif kind == "rebalance":
            self._rebalance(records)
        elif kind == "broadcast":
            for target in range(self._n):
                self.partition.write_all(records, self.record_bytes, target)
        else:
            self._hash(records)

    def _rebalance(self, records: Sequence[object]) -> None:
        n, start = self._n, self._next
        if n == 1:
            self.partition.write_all(records, self.record_bytes, 0)
            return
        # record k goes to (start + k) % n, so the slice records[j::n] goes to (start + j) % n
        for j in range(min(n, len(records))):
            self.partition.write_all(records[j::n], self.record_bytes, (start + j) % n)
        self._next = (start + len(records)) % n

    def _hash(self, records: Sequence[object]) -> None:
        if self._keys is not None:
            self._keyed(records, self._keys)
            return
        n, skew, rng, emit = self._n, self._skew, self._rng, self._emit
        randrange, rand = rng.randrange, rng.random
        for record in records:
            if skew and rand() < skew:
                emit(record, 0)
            else:
                emit(record, randrange(n))

    def _keyed(self, records: Sequence[object], keys: KeyTable) -> None:
        """Draw a key per record (bisecting the cumulative weights) and write each record to
        the subtask that key's group belongs to."""
        emit = self._emit
        targets = self._rng.choices(keys.targets, cum_weights=keys.cumulative, k=len(records))
        for record, target in zip(records, targets, strict=True):
            emit(record, target)
