"""Flink's key groups: which subtask a key goes to, and how a key distribution loads subtasks.

Flink routes a keyed record in two steps (``KeyGroupRangeAssignment``): the key's Java
``hashCode()`` is hashed again with ``MathUtils.murmurHash`` and taken modulo the operator's
maximum parallelism, which gives its *key group*; key group ``g`` belongs to subtask
``g * parallelism // max_parallelism``. ``murmurHash`` is MurmurHash3 (x86, 32 bit, seed 0) of
the four bytes of the int, made non-negative (``Integer.MIN_VALUE`` becomes 0).

The runtime's keys are Java ``int`` values ``0 .. count-1`` (``Integer.hashCode(k) == k``),
key 0 being the hottest: so for ``keys = { count = 1000, zipf = 1.1 }`` on an operator of
parallelism 8 with the default maximum parallelism 128, key 0 lands in key group
``murmur_hash(0) % 128 == 94``, on subtask ``94 * 8 // 128 == 5``. :func:`subtask_shares` gives
every subtask's share of the records, which is what a load model needs.

All arithmetic is on Java's 32-bit two's-complement ints, emulated with masks.
"""

from __future__ import annotations

from collections.abc import Sequence
from functools import lru_cache
from itertools import accumulate

from bpmon.scenario.spec import KeySpec

_MASK = 0xFFFFFFFF
_INT_MIN = 0x80000000


def _rotl(value: int, bits: int) -> int:
    """``Integer.rotateLeft`` on an unsigned 32-bit value."""
    return ((value << bits) | (value >> (32 - bits))) & _MASK


def murmur_hash(code: int) -> int:
    """Flink's ``MathUtils.murmurHash(int)``: a non-negative int from a Java int ``code``."""
    h = (code & _MASK) * 0xCC9E2D51 & _MASK
    h = _rotl(h, 15) * 0x1B873593 & _MASK
    h = (_rotl(h, 13) * 5 + 0xE6546B64) & _MASK
    h ^= 4  # the length in bytes
    h ^= h >> 16
    h = h * 0x85EBCA6B & _MASK
    h ^= h >> 13
    h = h * 0xC2B2AE35 & _MASK
    h ^= h >> 16
    if h < _INT_MIN:
        return h  # non-negative as a Java int
    return 0 if h == _INT_MIN else (1 << 32) - h  # -code of a negative Java int


def key_group(key_hash: int, max_parallelism: int) -> int:
    """``computeKeyGroupForKeyHash``: the key group of a key whose hashCode is ``key_hash``."""
    return murmur_hash(key_hash) % max_parallelism


def operator_index(group: int, max_parallelism: int, parallelism: int) -> int:
    """``computeOperatorIndexForKeyGroup``: the subtask that owns key group ``group``."""
    return group * parallelism // max_parallelism


def subtask_of_key(key: int, max_parallelism: int, parallelism: int) -> int:
    """``assignKeyToParallelOperator`` for the Java int ``key`` (its hashCode is itself)."""
    return operator_index(key_group(key, max_parallelism), max_parallelism, parallelism)


def key_weights(keys: KeySpec) -> tuple[float, ...]:
    """Each key's share of the records, key 0 first; they sum to 1.

    ``zipf = s``: key ``k`` weighs ``1 / (k + 1) ** s`` (rank ``k + 1``). ``hot = [a, b, ...]``:
    key 0 carries ``a``, key 1 ``b`` and so on; the rest is spread evenly over the other keys
    (nothing when there are none: the loader checks the shares leave some for them).
    """
    n = keys.count
    if keys.hot:
        rest = 1.0 - sum(keys.hot)
        others = n - len(keys.hot)
        return tuple(keys.hot) + (rest / others,) * others if others else tuple(keys.hot)
    raw = [1.0 / (k + 1) ** (keys.zipf or 0.0) for k in range(n)]
    total = sum(raw)
    return tuple(w / total for w in raw)


class KeyTable:
    """Keys of one distribution with the subtask each goes to and their cumulative weights.

    Attributes:
        targets: the subtask of each key, by key.
        cumulative: running sums of the key weights (for ``random.choices``' ``cum_weights``).
        weights: each key's share of the records.
        parallelism: the consumer's parallelism.
    """

    __slots__ = ("cumulative", "parallelism", "targets", "weights")

    def __init__(
        self,
        targets: Sequence[int],
        cumulative: Sequence[float],
        weights: Sequence[float],
        parallelism: int,
    ) -> None:
        self.targets = targets
        self.cumulative = cumulative
        self.weights = weights
        self.parallelism = parallelism

    def shares(self) -> tuple[float, ...]:
        """Each subtask's share of the records: the weights of the keys its key groups hold."""
        result = [0.0] * self.parallelism
        for target, weight in zip(self.targets, self.weights, strict=True):
            result[target] += weight
        return tuple(result)


@lru_cache(maxsize=64)
def key_table(keys: KeySpec, max_parallelism: int, parallelism: int) -> KeyTable:
    """The routing table of one key distribution onto one consumer: built once (every key
    hashed) and shared, read-only, by the outputs of every producing subtask."""
    weights = key_weights(keys)
    targets = tuple(subtask_of_key(k, max_parallelism, parallelism) for k in range(keys.count))
    return KeyTable(targets, tuple(accumulate(weights)), weights, parallelism)


def subtask_shares(keys: KeySpec, max_parallelism: int, parallelism: int) -> tuple[float, ...]:
    """Each subtask's share of the records of a keyed edge (for load models)."""
    return key_table(keys, max_parallelism, parallelism).shares()
